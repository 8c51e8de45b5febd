#include "train/run_folder.h"

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/json_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace outlierlens {
namespace fs = std::filesystem;

void writeTextFileAtomically(const std::string& path, const std::string& text)
{
    AtomicFile file(path);
    {
        std::ofstream out(file.tempPath(), std::ios::binary);
        out << text;
        out.flush();
        if (!out) throw Error(path + ": cannot write");
    }
    file.commit();
}

RunFolder::RunFolder(std::string dir)
    : m_dir(std::move(dir))
{}

std::string RunFolder::path(const std::string& relative) const
{
    return (fs::path(m_dir) / relative).string();
}

void RunFolder::writeStatus(const RunStatus& s) const
{
    const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    const nlohmann::json j = {{"state", s.state},     {"step", s.step},
                              {"total", s.total},     {"pid", s.pid},
                              {"message", s.message}, {"last_checkpoint", s.lastCheckpoint},
                              {"updated", stamp}};
    writeTextFileAtomically(path("status.json"), j.dump(2) + "\n");
}

std::optional<RunStatus> RunFolder::readStatus() const
{
    try {
        const nlohmann::json j = jsonutil::parseFile(path("status.json"));
        RunStatus s;
        const std::string where = path("status.json");
        s.state = jsonutil::getString(j, "state", where);
        s.step = jsonutil::getInt(j, "step", where, 0);
        s.total = jsonutil::getInt(j, "total", where, 0);
        s.pid = jsonutil::getInt(j, "pid", where, 0);
        s.message = jsonutil::getString(j, "message", where, std::string());
        s.lastCheckpoint = jsonutil::getString(j, "last_checkpoint", where, std::string());
        s.updated = jsonutil::getString(j, "updated", where, std::string());
        return s;
    } catch (const Error&) {
        return std::nullopt;
    }
}

void RunFolder::appendMetrics(const std::string& jsonLine) const
{
    std::ofstream out(path("metrics.jsonl"), std::ios::app | std::ios::binary);
    out << jsonLine << '\n';
    out.flush();
    if (!out) throw Error(path("metrics.jsonl") + ": cannot append");
}

void RunFolder::truncateMetricsAfter(std::int64_t step) const
{
    std::ifstream in(path("metrics.jsonl"), std::ios::binary);
    if (!in) return;
    std::ostringstream kept;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        try {
            const nlohmann::json j = nlohmann::json::parse(line);
            if (j.value("step", std::int64_t(0)) > step) continue;
        } catch (const nlohmann::json::exception&) {
            continue; // a torn last line of a killed run
        }
        kept << line << '\n';
    }
    in.close();
    writeTextFileAtomically(path("metrics.jsonl"), kept.str());
}

std::string RunFolder::checkpointDir(std::int64_t step) const
{
    char name[32];
    std::snprintf(name, sizeof name, "step-%09lld", static_cast<long long>(step));
    return (fs::path(m_dir) / "checkpoints" / name).string();
}

std::vector<std::string> RunFolder::checkpoints() const
{
    std::vector<std::string> out;
    const fs::path dir = fs::path(m_dir) / "checkpoints";
    if (!fs::is_directory(dir)) return out;
    for (const auto& entry : fs::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        if (entry.is_directory() && name.rfind("step-", 0) == 0 && name.find(".tmp") == std::string::npos &&
            fs::exists(entry.path() / "trainer_state.json"))
            out.push_back(entry.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

void RunFolder::pruneCheckpoints(int keep) const
{
    std::vector<std::string> all = checkpoints();
    for (std::size_t i = 0; keep >= 0 && i + std::size_t(keep) < all.size(); ++i)
        fs::remove_all(all[i]);
}

} // namespace outlierlens
