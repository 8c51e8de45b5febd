#pragma once
// Used by the training process (one thread) and read by the GUI's job list (any thread): every
// file is replaced atomically, so a reader never sees half a file.

#include "common/atomic_file.h" // writeTextFileAtomically

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace outlierlens {

struct TrainConfig;

/// The state of a run as recorded in <run>/status.json.
struct RunStatus
{
    std::string state = "starting"; ///< starting, running, finished, stopped, diverged, failed
    std::int64_t step = 0;
    std::int64_t total = 0;
    std::int64_t pid = 0;
    std::string message;        ///< e.g. why it stopped
    std::string lastCheckpoint; ///< folder, relative to the run
    std::string updated;        ///< ISO 8601 time of the last update
};

/// One line of <run>/metrics.jsonl: a training line ({"step", "loss", "lr"}, every log_every steps) or an
/// evaluation ({"type": "eval", "step", "loss", "lr", "eval": {metric: value}, "max_inf_norm",
/// "kurtosis", ...}). A number the file holds as null (JSON has no NaN) reads as NaN.
struct MetricsLine
{
    bool eval = false; ///< an evaluation line
    std::int64_t step = 0;
    double loss = NAN; ///< training lines: mean loss since the last one; eval lines: the step's loss
    double lr = NAN;
    std::string metricName; ///< eval lines: "perplexity", "accuracy", ...; empty if the line has none
    double metric = NAN;
    /// Eval lines: tracked tensor ("ffn_out", "out", ...) -> one value per layer, 0-based.
    std::map<std::string, std::vector<double>> maxInfNorm, kurtosis;
    /// Eval lines: [layer][head] first-token attention on the probe batch (empty in older runs).
    std::vector<std::vector<double>> firstTokenAttention;
};

/// A training run's folder: run.json (resolved config), status.json, metrics.jsonl,
/// checkpoints/step-NNNNNNN/ (model folder + optimizer.safetensors + trainer_state.json), final/.
class RunFolder
{
public:
    explicit RunFolder(std::string dir);
    const std::string& dir() const { return m_dir; }
    std::string path(const std::string& relative) const;

    void writeStatus(const RunStatus& status) const;
    /// Reads status.json; nullopt if missing or unreadable.
    std::optional<RunStatus> readStatus() const;
    /// The run's resolved config (run.json); nullopt if the folder has none. A malformed run.json is an
    /// Error naming it.
    std::optional<TrainConfig> readConfig() const;

    /// Appends one JSON object (one line) to metrics.jsonl and flushes it.
    void appendMetrics(const std::string& jsonLine) const;
    /// The training and evaluation lines of metrics.jsonl, in file order; other lines and a torn last
    /// line (a killed run) are left out. Empty if the file is missing.
    std::vector<MetricsLine> readMetrics() const;
    /// Drops metrics lines of steps after `step` (a resumed run recomputes them).
    void truncateMetricsAfter(std::int64_t step) const;

    /// checkpoints/step-<step>, zero-padded so names sort by step.
    std::string checkpointDir(std::int64_t step) const;
    /// Complete checkpoints (trainer_state.json present), oldest first.
    std::vector<std::string> checkpoints() const;
    /// Removes all but the newest `keep` checkpoints.
    void pruneCheckpoints(int keep) const;

private:
    std::string m_dir;
};

/// One writer per run folder: the training process holds an exclusive flock on <run>/lock (which
/// also names its pid) for as long as it runs; the kernel releases it when the process ends, however
/// it ends. A second trainer on the same folder is refused instead of interleaving with the first.
class RunFolderLock
{
public:
    /// Takes the lock, creating the folder's lock file. Throws Error naming the folder and the
    /// owner's pid if another process holds it.
    explicit RunFolderLock(const std::string& dir);
    ~RunFolderLock();
    RunFolderLock(const RunFolderLock&) = delete;
    RunFolderLock& operator=(const RunFolderLock&) = delete;

private:
    int m_fd = -1;
};

/// The pid of the process that holds the run folder's lock (a trainer running on it), or 0.
std::int64_t runFolderOwner(const std::string& dir);

} // namespace outlierlens
