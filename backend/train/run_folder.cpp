#include "train/run_folder.h"

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/json_util.h"
#include "tasks/config/train_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace outlierlens {
namespace fs = std::filesystem;

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

std::optional<TrainConfig> RunFolder::readConfig() const
{
    const std::string file = path("run.json");
    if (!std::filesystem::exists(file)) return std::nullopt;
    return parseTrainConfig(readWholeFile(file, "run configuration", std::uint64_t(16) << 20), file);
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

namespace {

/// A number of a metrics line; NaN for null (how NaN is written), a missing key or another type.
double numberIn(const nlohmann::json& j, const char* key)
{
    const auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : NAN;
}

/// {"tensor": [per layer], ...} of an eval line; null entries read as NaN.
std::map<std::string, std::vector<double>> perLayerIn(const nlohmann::json& j, const char* key)
{
    std::map<std::string, std::vector<double>> out;
    const auto it = j.find(key);
    if (it == j.end() || !it->is_object()) return out;
    for (auto tensor = it->begin(); tensor != it->end(); ++tensor) {
        if (!tensor->is_array()) continue;
        std::vector<double>& values = out[tensor.key()];
        for (const auto& v : *tensor)
            values.push_back(v.is_number() ? v.get<double>() : NAN);
    }
    return out;
}

} // namespace

std::vector<MetricsLine> RunFolder::readMetrics() const
{
    std::vector<MetricsLine> out;
    const std::string where = path("metrics.jsonl");
    std::ifstream in(where, std::ios::binary);
    std::string text;
    while (std::getline(in, text)) {
        if (text.empty()) continue;
        nlohmann::json j;
        try {
            j = jsonutil::parseWithDepthLimit(text, where);
        } catch (const Error&) {
            continue;
        } catch (const nlohmann::json::exception&) {
            continue; // a torn last line of a killed run
        }
        if (!j.is_object()) continue;
        MetricsLine line;
        const auto type = j.find("type");
        line.eval = type != j.end() && type->is_string() && type->get<std::string>() == "eval";
        if (!line.eval && !j.contains("loss")) continue; // neither a training nor an evaluation line
        const double step = numberIn(j, "step");
        line.step = std::isfinite(step) && std::fabs(step) < 9e18 ? std::int64_t(step) : 0;
        line.loss = numberIn(j, "loss");
        line.lr = numberIn(j, "lr");
        if (line.eval) {
            const auto eval = j.find("eval");
            if (eval != j.end() && eval->is_object() && !eval->empty()) {
                line.metricName = eval->begin().key();
                line.metric = eval->begin()->is_number() ? eval->begin()->get<double>() : NAN;
            }
            line.maxInfNorm = perLayerIn(j, "max_inf_norm");
            line.kurtosis = perLayerIn(j, "kurtosis");
            const auto first = j.find("first_token_attention");
            if (first != j.end() && first->is_array())
                for (const auto& layer : *first) {
                    std::vector<double> heads;
                    if (layer.is_array())
                        for (const auto& v : layer)
                            heads.push_back(v.is_number() ? v.get<double>() : NAN);
                    line.firstTokenAttention.push_back(std::move(heads));
                }
        }
        out.push_back(std::move(line));
    }
    return out;
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
            const nlohmann::json j = jsonutil::parseWithDepthLimit(line, path("metrics.jsonl"));
            if (j.value("step", std::int64_t(0)) > step) continue;
        } catch (const Error&) {
            continue; // a torn last line of a killed run (malformed JSON)
        } catch (const nlohmann::json::exception&) {
            continue; // a line whose "step" is not a number
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

namespace {

std::string lockPath(const std::string& dir)
{
    return (fs::path(dir) / "lock").string();
}

/// The pid written in an open lock file, 0 if none can be read.
std::int64_t pidIn(int fd)
{
    char buffer[32] = {};
    const ssize_t n = ::pread(fd, buffer, sizeof buffer - 1, 0);
    return n > 0 ? std::strtoll(buffer, nullptr, 10) : 0;
}

} // namespace

RunFolderLock::RunFolderLock(const std::string& dir)
{
    const std::string path = lockPath(dir);
    m_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (m_fd < 0) throw Error(path + ": cannot open the run's lock file: " + std::strerror(errno));
    if (::flock(m_fd, LOCK_EX | LOCK_NB) != 0) {
        const int error = errno;
        const std::int64_t owner = pidIn(m_fd);
        ::close(m_fd);
        m_fd = -1;
        if (error == EWOULDBLOCK)
            throw Error(dir + ": another training process" +
                        (owner > 0 ? " (pid " + std::to_string(owner) + ")" : std::string()) +
                        " is writing this run folder; wait for it to end or stop it first");
        throw Error(path + ": cannot lock the run folder: " + std::strerror(error));
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(m_fd, 0) != 0 || ::pwrite(m_fd, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
        const int error = errno;
        ::close(m_fd);
        m_fd = -1;
        throw Error(path + ": cannot write the run's lock file: " + std::strerror(error));
    }
}

RunFolderLock::~RunFolderLock()
{
    if (m_fd >= 0) ::close(m_fd); // releases the flock; the file stays (removing it would race)
}

std::int64_t runFolderOwner(const std::string& dir)
{
    const int fd = ::open(lockPath(dir).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    std::int64_t owner = 0;
    if (::flock(fd, LOCK_SH | LOCK_NB) != 0)
        owner = std::max<std::int64_t>(pidIn(fd), 1);
    else
        ::flock(fd, LOCK_UN);
    ::close(fd);
    return owner;
}

} // namespace outlierlens
