#pragma once
// Any thread. The summary of a sweep (`outlierlens sweep`): <sweep>/summary.json, which the app's
// Sweeps page reads, and summary.csv, the same table for spreadsheets (docs/file-formats.md).

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace outlierlens {

/// One point of a sweep: a row of summary.json and summary.csv.
struct SweepSummaryRow
{
    std::string
        name; ///< the point's run folder in the sweep, e.g. "alpha=4,max_seq_length=64", or "baseline"
    std::vector<std::pair<std::string, std::string>> settings; ///< grid key -> value as flag text
    std::string state;           ///< the run's status.json state ("finished", "stopped", ...) or "missing"
    std::int64_t step = 0;       ///< step of the run's last evaluation
    std::string metricName;      ///< "perplexity", "accuracy", ...; empty without an evaluation
    double metric = NAN;         ///< the last evaluation's metric
    double relativeMetric = NAN; ///< against the first row: see setRelativeMetrics
    double maxInfNorm = NAN;     ///< the largest per-layer max inf norm of the tracked tensor
    double avgKurtosis = NAN;    ///< kurtosis averaged over layers (and tracked tensors)
};

/// Sets every row's relativeMetric against the first row's metric: log(metric) / log(first) for
/// perplexity (the log-perplexity ratio), metric / first otherwise.
void setRelativeMetrics(std::vector<SweepSummaryRow>& rows);

/// summary.json: a JSON array of one object per row, in order, with the keys name, state, step,
/// metric_name, metric, relative_metric, max_inf_norm, avg_kurtosis (null for NaN) and one string
/// per setting, keyed by its grid key.
std::string sweepSummaryJson(const std::vector<SweepSummaryRow>& rows);
/// summary.csv: a header line, then name,state,step,metric_name,metric,relative_metric,max_inf_norm,
/// avg_kurtosis per row (numbers with 6 significant digits; text fields quoted as RFC 4180 says).
std::string sweepSummaryCsv(const std::vector<SweepSummaryRow>& rows);
/// Writes <folder>/summary.json and <folder>/summary.csv, each atomically. Throws Error.
void writeSweepSummary(const std::string& folder, const std::vector<SweepSummaryRow>& rows);

/// Reads a summary.json, given as the file or as the sweep folder holding it. A key other than the
/// fixed ones is a setting (a number is kept as its JSON text); a missing number reads as NaN.
/// Throws Error naming the file when it is missing or not a JSON array of objects.
std::vector<SweepSummaryRow> readSweepSummary(const std::string& path);

} // namespace outlierlens
