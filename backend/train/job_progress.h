#pragma once
// Any thread. The progress protocol of the commands the app runs as jobs (`outlierlens train`, and
// `outlierlens stats --json-progress`): one JSON object per line on stdout, read back from the job's
// log by the app's job list (docs/file-formats.md, "Progress lines").

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace outlierlens {

/// What a progress line says.
struct JobProgress
{
    std::int64_t step = 0;  ///< units done: training steps, or inputs of a statistics run
    std::int64_t total = 0; ///< units in the whole job
    double elapsed = NAN;   ///< seconds since the job's loop started (NaN if the line has none)
    double eta = NAN;       ///< seconds left, the job's own estimate (NaN if the line has none)
};

/// {"elapsed":..,"eta":..,"step":..,"total":..,"type":"progress"} (keys sorted), with "unit" (what a
/// step counts, e.g. "pairs") when given. No line break.
std::string progressJsonLine(const JobProgress& progress, const std::string& unit = {});

/// A line of type "progress" with integer step and total; nullopt for any other line (evaluation
/// and checkpoint lines, human text, a torn line).
std::optional<JobProgress> parseProgressLine(const std::string& line);

/// The last progress line of a log file (its last 8 KiB, or its last MiB when those hold none);
/// nullopt when there is none or the file cannot be read.
std::optional<JobProgress> lastProgressIn(const std::string& logPath);

} // namespace outlierlens
