#include "train/job_progress.h"

#include "common/error.h"
#include "common/json_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <vector>

namespace outlierlens {

std::string progressJsonLine(const JobProgress& p, const std::string& unit)
{
    nlohmann::json j = {{"type", "progress"}, {"step", p.step}, {"total", p.total}};
    // NaN would be written as null: leave the key out instead.
    if (std::isfinite(p.elapsed)) j["elapsed"] = p.elapsed;
    if (std::isfinite(p.eta)) j["eta"] = p.eta;
    if (!unit.empty()) j["unit"] = unit;
    return j.dump();
}

std::optional<JobProgress> parseProgressLine(const std::string& line)
{
    // Cheap test first: a log holds many lines that are not progress lines.
    if (line.empty() || line.front() != '{' || line.find("\"progress\"") == std::string::npos)
        return std::nullopt;
    nlohmann::json j;
    try {
        j = jsonutil::parseWithDepthLimit(line, "progress line");
    } catch (const Error&) {
        return std::nullopt;
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
    if (!j.is_object() || j.value("type", nlohmann::json()) != "progress") return std::nullopt;
    const auto step = j.find("step"), total = j.find("total");
    if (step == j.end() || total == j.end() || !step->is_number_integer() || !total->is_number_integer())
        return std::nullopt;
    JobProgress p;
    p.step = step->get<std::int64_t>();
    p.total = total->get<std::int64_t>();
    for (auto [key, value] : {std::pair{"elapsed", &p.elapsed}, std::pair{"eta", &p.eta}}) {
        const auto it = j.find(key);
        if (it != j.end() && it->is_number()) *value = it->get<double>();
    }
    return p;
}

std::optional<JobProgress> lastProgressIn(const std::string& logPath)
{
    std::ifstream in(logPath, std::ios::binary | std::ios::ate);
    if (!in) return std::nullopt;
    const std::streamoff size = in.tellg();
    for (const std::streamoff tail : {std::streamoff(8192), std::streamoff(1) << 20}) {
        const std::streamoff start = std::max<std::streamoff>(0, size - tail);
        std::string text(std::size_t(size - start), '\0');
        in.clear();
        in.seekg(start);
        if (!in.read(text.data(), std::streamsize(text.size()))) return std::nullopt;
        std::size_t end = text.size();
        while (end > 0) {
            const std::size_t begin = text.rfind('\n', end - 1);
            const std::size_t from = begin == std::string::npos ? 0 : begin + 1;
            std::string line = text.substr(from, end - from);
            while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
                line.pop_back();
            if (const auto p = parseProgressLine(line)) return p;
            if (begin == std::string::npos) break;
            end = begin;
        }
        if (start == 0) break; // the whole file was read
    }
    return std::nullopt;
}

} // namespace outlierlens
