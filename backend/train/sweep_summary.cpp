#include "train/sweep_summary.h"

#include "common/atomic_file.h"
#include "common/csv.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/json_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace outlierlens {
namespace fs = std::filesystem;
namespace {

const char* const kFixedKeys[] = {"name",   "state",           "step",         "metric_name",
                                  "metric", "relative_metric", "max_inf_norm", "avg_kurtosis"};

double numberIn(const nlohmann::json& j, const char* key)
{
    const auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : NAN;
}

std::string stringIn(const nlohmann::json& j, const char* key)
{
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

} // namespace

void setRelativeMetrics(std::vector<SweepSummaryRow>& rows)
{
    const double reference = rows.empty() ? NAN : rows.front().metric;
    for (SweepSummaryRow& row : rows)
        row.relativeMetric = row.metricName == "perplexity" ? std::log(row.metric) / std::log(reference)
                                                            : row.metric / reference;
}

std::string sweepSummaryJson(const std::vector<SweepSummaryRow>& rows)
{
    nlohmann::json array = nlohmann::json::array();
    for (const SweepSummaryRow& r : rows) {
        nlohmann::json row = {{"name", r.name}, {"state", r.state}};
        for (const auto& [key, value] : r.settings)
            row[key] = value;
        // nlohmann writes NaN as null, which the reader reads back as NaN.
        row["step"] = r.step;
        row["metric_name"] = r.metricName;
        row["metric"] = r.metric;
        row["relative_metric"] = r.relativeMetric;
        row["max_inf_norm"] = r.maxInfNorm;
        row["avg_kurtosis"] = r.avgKurtosis;
        array.push_back(row);
    }
    return array.dump(2) + "\n";
}

std::string sweepSummaryCsv(const std::vector<SweepSummaryRow>& rows)
{
    std::string csv = "name,state,step,metric_name,metric,relative_metric,max_inf_norm,avg_kurtosis\n";
    for (const SweepSummaryRow& r : rows) {
        char numbers[256];
        std::snprintf(numbers, sizeof numbers, "%.6g,%.6g,%.6g,%.6g\n", r.metric, r.relativeMetric,
                      r.maxInfNorm, r.avgKurtosis);
        // Names such as "alpha=2,seq_length=32" hold commas: quoted, or the columns shift.
        csv += csvField(r.name) + ',' + csvField(r.state) + ',' + std::to_string(r.step) + ',' +
               csvField(r.metricName) + ',' + numbers;
    }
    return csv;
}

void writeSweepSummary(const std::string& folder, const std::vector<SweepSummaryRow>& rows)
{
    writeTextFileAtomically((fs::path(folder) / "summary.json").string(), sweepSummaryJson(rows));
    writeTextFileAtomically((fs::path(folder) / "summary.csv").string(), sweepSummaryCsv(rows));
}

std::vector<SweepSummaryRow> readSweepSummary(const std::string& given)
{
    const std::string path = fs::is_directory(given) ? (fs::path(given) / "summary.json").string() : given;
    if (!fs::exists(path)) throw Error(path + ": cannot open (run `outlierlens sweep` to make one)");
    nlohmann::json doc;
    try {
        doc = jsonutil::parseWithDepthLimit(readWholeFile(path, "sweep summary"), path);
    } catch (const nlohmann::json::parse_error& e) {
        throw Error(path + ": not a sweep summary (malformed JSON at byte " + std::to_string(e.byte) + ")");
    }
    if (!doc.is_array()) throw Error(path + ": not a sweep summary (a JSON array of points expected)");
    std::vector<SweepSummaryRow> rows;
    for (const nlohmann::json& o : doc) {
        if (!o.is_object())
            throw Error(path + ": not a sweep summary (point " + std::to_string(rows.size() + 1) +
                        " is not a JSON object)");
        SweepSummaryRow r;
        r.name = stringIn(o, "name");
        r.state = stringIn(o, "state");
        const auto step = o.find("step");
        r.step = step != o.end() && step->is_number_integer() ? step->get<std::int64_t>() : 0;
        r.metricName = stringIn(o, "metric_name");
        r.metric = numberIn(o, "metric");
        r.relativeMetric = numberIn(o, "relative_metric");
        r.maxInfNorm = numberIn(o, "max_inf_norm");
        r.avgKurtosis = numberIn(o, "avg_kurtosis");
        for (auto it = o.begin(); it != o.end(); ++it)
            if (std::find_if(std::begin(kFixedKeys), std::end(kFixedKeys),
                             [&](const char* k) { return it.key() == k; }) == std::end(kFixedKeys))
                r.settings.emplace_back(it.key(), it->is_string() ? it->get<std::string>() : it->dump());
        rows.push_back(std::move(r));
    }
    return rows;
}

} // namespace outlierlens
