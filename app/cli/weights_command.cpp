// `outlierlens weights`: An et al. 2025's weight outliers from a checkpoint alone, no forward pass:
// per layer the max and median column extremal ratio of W_down (their Fig 5a) and its top columns,
// with --modules all every linear's ratio, or with --rule so-paper the paper's tau rule.
// Definitions: docs/metrics.md; file columns: docs/file-formats.md.

#include "cli/command_line.h"

#include "analysis/weight_outliers.h"
#include "common/atomic_file.h"
#include "common/csv.h"
#include "common/error.h"
#include "common/sha256.h"
#include "common/text_format.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <sstream>

namespace outlierlens::cli {
namespace {

/// What --out files carry besides the numbers.
struct Provenance
{
    std::string sha256;
    std::size_t top = 3;
};

/// Progress on stderr for a person: a redrawn line on a terminal (at most ~10 a second), nothing
/// in a pipe unless the scan is slow (then a line per quarter). Quick scans print nothing.
class ScanProgress
{
public:
    void operator()(int done, int total)
    {
        const double seconds = std::chrono::duration<double>(Clock::now() - m_start).count();
        if (seconds < 1.0 && done < total) return;
        if (m_tty) {
            if (done < total && seconds - m_last < 0.1) return;
            m_last = seconds;
            std::fprintf(stderr, "\rweights: %d/%d tensors, %.1f s%s", done, total, seconds,
                         done == total ? "\n" : "");
        } else {
            const int quarter = 4 * done / total;
            if (quarter == m_quarter || seconds < 1.0) return;
            m_quarter = quarter;
            std::fprintf(stderr, "weights: %d/%d tensors, %.1f s\n", done, total, seconds);
        }
        std::fflush(stderr);
    }

private:
    using Clock = std::chrono::steady_clock;
    Clock::time_point m_start = Clock::now();
    bool m_tty = isatty(STDERR_FILENO) != 0;
    double m_last = 0;
    int m_quarter = 0;
};

std::string fixed(double v, int decimals)
{
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, v);
    return buffer;
}

std::string topColumnsText(const WeightMatrixStats& s, std::size_t n, const char* separator, int decimals)
{
    std::string text;
    for (std::int64_t j : s.topColumns(n))
        text += (text.empty() ? "" : separator) + std::to_string(j) + ":" +
                (decimals < 0 ? numberText(s.columnRatio[std::size_t(j)])
                              : fixed(s.columnRatio[std::size_t(j)], decimals));
    return text;
}

std::string topPositionsText(const WeightMatrixStats& s, std::size_t n, const char* separator, int decimals)
{
    std::string text;
    for (std::size_t k = 0; k < std::min(n, s.paperPositions.size()); ++k) {
        const WeightPosition& p = s.paperPositions[k];
        text += (text.empty() ? "" : separator) + std::to_string(p.row) + ":" + std::to_string(p.column) +
                ":" + (decimals < 0 ? numberText(p.ratio) : fixed(p.ratio, decimals));
    }
    return text;
}

std::string layerText(int layer)
{
    return layer < 0 ? "-" : std::to_string(layer);
}

void printTables(const WeightScan& scan, std::size_t top)
{
    const bool paper = scan.options.rule == WeightRule::SoPaper;
    std::printf("%s: %s, rule %s", scan.weightsFile.c_str(), scan.results.front().dtype.c_str(),
                toString(scan.options.rule).c_str());
    if (paper)
        std::printf(" (|w_ij| > %s x mean_j |w_ij|)\n", numberText(scan.options.tau).c_str());
    else
        std::printf(" (ratio of column j = max_i |W[i,j]| / (mean_i |W[i,j]| + 1e-8))\n");
    std::printf(
        "W as nn.Linear [out, in]: row i = output unit, column j = input; layers, rows, columns 0-based\n\n");

    std::printf("W_down per layer (An et al. Fig 5a)\n");
    std::printf("%5s  %-18s %13s %13s  %s\n", "layer", "module", "max ratio", "median ratio",
                paper ? "outliers  top (row:column:|w|/mean_j|w|)" : "top columns (column:ratio)");
    if (std::none_of(scan.results.begin(), scan.results.end(),
                     [](const WeightModuleStats& r) { return r.down; }))
        std::printf("  (no down projection in this checkpoint)\n");
    for (const WeightModuleStats& r : scan.results) {
        if (!r.down) continue;
        std::printf("%5s  %-18s %13.2f %13.3f  ", layerText(r.layer).c_str(), r.module.c_str(),
                    r.stats.maxColumnRatio(), r.stats.medianColumnRatio());
        if (paper)
            std::printf("%8lld  %s\n", static_cast<long long>(r.stats.paperCount),
                        r.stats.paperCount > 0 ? topPositionsText(r.stats, top, "  ", 1).c_str() : "-");
        else
            std::printf("%s\n", topColumnsText(r.stats, top, "  ", 2).c_str());
    }
    if (scan.modules != WeightModules::All) return;
    std::printf(
        "\nEvery linear: module ratio = max(max row ratio, max column ratio), their per-module plot\n");
    std::printf("%5s  %-28s %-14s %12s %12s %12s%s\n", "layer", "module", "[out, in]", "max column",
                "max row", "module ratio", paper ? "  outliers" : "");
    for (const WeightModuleStats& r : scan.results) {
        std::printf("%5s  %-28s %-14s %12.2f %12.2f %12.2f", layerText(r.layer).c_str(), r.module.c_str(),
                    shapeText({r.stats.outFeatures, r.stats.inFeatures}).c_str(), r.stats.maxColumnRatio(),
                    r.stats.maxRowRatio(), r.stats.moduleRatio());
        if (paper) std::printf("  %8lld", static_cast<long long>(r.stats.paperCount));
        std::printf("\n");
    }
}

std::string toCsv(const WeightScan& scan, const Provenance& p)
{
    const bool paper = scan.options.rule == WeightRule::SoPaper;
    std::ostringstream out;
    out << "# outlierlens weights; model " << scan.modelDir << "; weights " << scan.weightsFile
        << "; checkpoint_sha256 " << p.sha256 << "; rule " << toString(scan.options.rule);
    if (paper) out << "; tau " << numberText(scan.options.tau);
    out << "; W as nn.Linear [out_features, in_features]; layers, rows and columns 0-based\n";
    out << "layer,module,tensor,dtype,out_features,in_features,max_column_ratio,median_column_ratio,"
           "max_row_ratio,module_ratio,outliers,top_columns,top_positions\n";
    for (const WeightModuleStats& r : scan.results) {
        const WeightMatrixStats& s = r.stats;
        out << (r.layer < 0 ? std::string() : std::to_string(r.layer)) << ',' << csvField(r.module) << ','
            << csvField(r.tensor) << ',' << r.dtype << ',' << s.outFeatures << ',' << s.inFeatures << ','
            << numberText(s.maxColumnRatio()) << ',' << numberText(s.medianColumnRatio()) << ','
            << numberText(s.maxRowRatio()) << ',' << numberText(s.moduleRatio()) << ','
            << (paper ? std::to_string(s.paperCount) : std::string()) << ','
            << topColumnsText(s, p.top, ";", -1) << ',' << (paper ? topPositionsText(s, p.top, ";", -1) : "")
            << '\n';
    }
    return out.str();
}

nlohmann::json toJson(const WeightScan& scan, const Provenance& p)
{
    const bool paper = scan.options.rule == WeightRule::SoPaper;
    nlohmann::json results = nlohmann::json::array();
    for (const WeightModuleStats& r : scan.results) {
        const WeightMatrixStats& s = r.stats;
        nlohmann::json columns = nlohmann::json::array();
        for (std::int64_t j : s.topColumns(p.top))
            columns.push_back({{"column", j}, {"ratio", s.columnRatio[std::size_t(j)]}});
        nlohmann::json o = {{"layer", r.layer < 0 ? nlohmann::json() : nlohmann::json(r.layer)},
                            {"module", r.module},
                            {"tensor", r.tensor},
                            {"dtype", r.dtype},
                            {"conv1d", r.conv1d},
                            {"down", r.down},
                            {"out_features", s.outFeatures},
                            {"in_features", s.inFeatures},
                            {"max_column_ratio", s.maxColumnRatio()},
                            {"median_column_ratio", s.medianColumnRatio()},
                            {"max_row_ratio", s.maxRowRatio()},
                            {"module_ratio", s.moduleRatio()},
                            {"top_columns", columns}};
        if (paper) {
            nlohmann::json positions = nlohmann::json::array();
            for (std::size_t k = 0; k < std::min(p.top, s.paperPositions.size()); ++k) {
                const WeightPosition& w = s.paperPositions[k];
                positions.push_back(
                    {{"row", w.row}, {"column", w.column}, {"value", w.value}, {"ratio", w.ratio}});
            }
            o["outliers"] = s.paperCount;
            o["top_positions"] = positions;
        }
        results.push_back(std::move(o));
    }
    return {{"producer", "outlierlens weights"},
            {"model", scan.modelDir},
            {"weights_file", scan.weightsFile},
            {"checkpoint_sha256", p.sha256},
            {"model_type", scan.modelType},
            {"rule", toString(scan.options.rule)},
            {"tau", paper ? nlohmann::json(scan.options.tau) : nlohmann::json()},
            {"modules", scan.modules == WeightModules::All ? "all" : "down"},
            {"top", p.top},
            {"layout",
             "W as nn.Linear [out_features, in_features] (GPT-2 Conv1D transposed); layers, rows and "
             "columns 0-based"},
            {"results", results},
            {"skipped", scan.skipped}};
}

} // namespace

int runWeights(const QStringList& args)
{
    Command cmd(
        "weights",
        "Weight outliers (An et al. 2025) from the checkpoint alone, without a forward pass: per layer "
        "the max and median column extremal ratio max_i|W[i,j]| / (mean_i|W[i,j]| + 1e-8) of the "
        "down projection (their Fig 5a) and its top columns; with --modules all every linear weight. "
        "The weights are memory-mapped and read one tensor at a time.");
    cmd.parser().addOptions({
        {"model", "Model folder (config.json and model.safetensors or pytorch_model.bin).", "dir"},
        {"rule",
         "so-code (default: An et al.'s code, the column extremal ratio) or so-paper (the paper's text: "
         "|w_ij| > tau x mean_j |w_ij|, the mean over row i).",
         "rule"},
        {"tau", "Threshold of --rule so-paper (default 1000).", "x"},
        {"modules", "down (default: each layer's down projection) or all (every 2-D linear weight).",
         "which"},
        {"top", "Top columns (so-code) or positions (so-paper) listed per weight (default 3).", "n"},
        {"out",
         "Also write the results to FILE.csv or FILE.json (with the model, checkpoint SHA-256 and rule).",
         "file"},
    });
    if (auto code = cmd.parse(args)) return *code;
    return cmd.guarded([&]() -> int {
        const std::string model = cmd.required("model");
        WeightOutlierOptions options;
        try {
            options.rule = weightRuleFromString(cmd.isSet("rule") ? cmd.value("rule") : "so-code");
        } catch (const Error&) {
            throw UsageException{"--rule must be so-code or so-paper, not '" + cmd.value("rule") + "'"};
        }
        if (cmd.isSet("tau") && options.rule != WeightRule::SoPaper)
            throw UsageException{"--tau applies to --rule so-paper only"};
        options.tau = cmd.doubleValue("tau", 1000.0);
        if (!(options.tau > 0))
            throw UsageException{"--tau must be positive, found '" + cmd.value("tau") + "'"};
        const std::string which = cmd.isSet("modules") ? cmd.value("modules") : "down";
        if (which != "down" && which != "all")
            throw UsageException{"--modules must be down or all, not '" + which + "'"};
        Provenance p;
        p.top = std::size_t(cmd.intValue("top", 3, 1, 100000));
        std::string out;
        if (cmd.isSet("out")) {
            out = cmd.required("out");
            const std::string ext = std::filesystem::path(out).extension().string();
            if (ext != ".csv" && ext != ".json")
                throw UsageException{"--out must name a .csv or .json file, found '" + out + "'"};
            checkCanWrite(out); // before the scan, not after it
        }

        ScanProgress progress;
        const WeightScan scan =
            scanWeightOutliers(model, options, which == "all" ? WeightModules::All : WeightModules::Down,
                               std::ref(progress), &interruptFlag());
        printTables(scan, p.top);
        if (!out.empty()) {
            p.sha256 = sha256File(scan.weightsFile);
            const bool json = std::filesystem::path(out).extension() == ".json";
            writeTextFileAtomically(out, json ? toJson(scan, p).dump(2) + "\n" : toCsv(scan, p));
            std::fprintf(stderr, "weights: wrote %s (%zu weights)\n", out.c_str(), scan.results.size());
        }
        return Ok;
    });
}

} // namespace outlierlens::cli
