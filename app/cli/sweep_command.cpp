// `outlierlens sweep`: a grid of training runs, one child process after another, and a summary
// table of the final metric, max inf norm and kurtosis per point (the data of the paper's
// Figures 6 and 7).

#include "cli/command_line.h"

#include "common/error.h"
#include "common/json_util.h"
#include "tasks/config/train_config.h"
#include "train/run_folder.h"
#include "train/sweep_summary.h"

#include <QCoreApplication>
#include <QProcess>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

namespace outlierlens::cli {
namespace fs = std::filesystem;

namespace {

struct SweepPoint
{
    std::string name; ///< folder name, e.g. "alpha=4,max_seq_length=64"
    std::vector<std::pair<std::string, std::string>> settings; ///< key -> value as flag text
};

std::string flagText(const nlohmann::json& v)
{
    return v.is_string() ? v.get<std::string>() : v.dump();
}

std::vector<SweepPoint> expandGrid(const nlohmann::json& grid, const std::string& where)
{
    std::vector<SweepPoint> points{SweepPoint{}};
    if (!grid.is_object() || grid.empty())
        throw Error(where + ": \"grid\" must be an object of key -> list of values");
    // Each point is a training run: a grid of 10^8 points (a 690 kB file) used to exhaust memory first.
    constexpr std::uint64_t kMaxPoints = 10000;
    std::uint64_t count = 1;
    for (auto it = grid.begin(); it != grid.end(); ++it)
        if (it->is_array() && !it->empty() && (count *= std::uint64_t(it->size()), count > kMaxPoints))
            throw Error(where + ": the grid has more than " + std::to_string(kMaxPoints) +
                        " points (one training run each); split the sweep");
    for (auto it = grid.begin(); it != grid.end(); ++it) {
        if (!it->is_array() || it->empty())
            throw Error(where + ": grid entry '" + it.key() + "' must be a non-empty list");
        std::vector<SweepPoint> next;
        for (const SweepPoint& p : points)
            for (const auto& value : *it) {
                SweepPoint q = p;
                q.settings.emplace_back(it.key(), flagText(value));
                q.name += (q.name.empty() ? "" : ",") + it.key() + "=" + flagText(value);
                next.push_back(q);
            }
        points = next;
    }
    return points;
}

/// Final metrics of a run: the last evaluation line of its metrics.jsonl.
std::optional<MetricsLine> lastEvaluation(const RunFolder& run)
{
    std::optional<MetricsLine> last;
    for (MetricsLine& line : run.readMetrics())
        if (line.eval) last = std::move(line);
    return last;
}

/// Per-layer values of one tracked tensor (empty if the evaluation has none).
std::vector<double> valuesOf(const std::map<std::string, std::vector<double>>& tensors,
                             const std::string& key)
{
    const auto it = tensors.find(key);
    return it == tensors.end() ? std::vector<double>() : it->second;
}

/// DESIGN.md's model-level metrics: max inf norm = the largest per-layer mean of the task's figure
/// tensor; avg kurtosis = mean over layers of its kurtosis tensors (figureTensorOf, kurtosisTensorsOf).
void summarize(const std::optional<MetricsLine>& eval, TrainTask task, SweepSummaryRow& row)
{
    if (!eval) return;
    row.step = eval->step;
    row.metricName = eval->metricName;
    row.metric = eval->metric;
    const std::vector<double> norms = valuesOf(eval->maxInfNorm, pointName(figureTensorOf(task)));
    row.maxInfNorm = norms.empty() ? NAN : *std::max_element(norms.begin(), norms.end());
    double sum = 0;
    int count = 0;
    for (CapturePoint point : kurtosisTensorsOf(task)) {
        for (double k : valuesOf(eval->kurtosis, pointName(point)))
            sum += k, ++count;
    }
    row.avgKurtosis = count ? sum / count : NAN;
}

int runChild(const QStringList& args, const std::string& prefix)
{
    QProcess child;
    child.setProcessChannelMode(QProcess::ForwardedErrorChannel);
    child.start(QCoreApplication::applicationFilePath(), args);
    if (!child.waitForStarted())
        throw Error("cannot start " + QCoreApplication::applicationFilePath().toStdString());
    while (child.state() != QProcess::NotRunning) {
        if (interruptFlag()) {
            child.terminate(); // the run checkpoints and stops
            child.waitForFinished(-1);
            break;
        }
        child.waitForReadyRead(200);
        while (child.canReadLine())
            std::printf("%s %s", prefix.c_str(), child.readLine().constData());
        std::fflush(stdout);
    }
    while (child.canReadLine())
        std::printf("%s %s", prefix.c_str(), child.readLine().constData());
    return child.exitStatus() == QProcess::NormalExit ? child.exitCode() : 1;
}

} // namespace

int runSweep(const QStringList& args)
{
    Command cmd("sweep",
                "Run a grid of training runs one after another (each a child `outlierlens train`) and write "
                "summary.csv and summary.json: final metric, its ratio to the baseline, max inf norm and "
                "average kurtosis per point. Points already finished are skipped, stopped ones resumed.");
    cmd.parser().addOptions({
        {"config",
         "Sweep description: {\"output\": DIR, \"base\": {run.json keys}, \"grid\": {key: [values]}, "
         "\"baseline\": {overrides}} (baseline optional: one extra reference run).",
         "sweep.json"},
        {"output", "Override the sweep's output folder.", "dir"},
    });
    if (auto code = cmd.parse(args)) return *code;
    return cmd.guarded([&]() -> int {
        const std::string where = cmd.required("config");
        const nlohmann::json sweep = jsonutil::parseFile(where);
        const std::string output =
            cmd.isSet("output") ? cmd.value("output") : jsonutil::getString(sweep, "output", where);
        if (!sweep.contains("base") || !sweep["base"].is_object())
            throw Error(where + ": \"base\" must be an object of run.json keys");
        const TrainConfig base = parseTrainConfig(sweep["base"].dump(), where + " (base)");
        std::vector<SweepPoint> points = expandGrid(sweep.value("grid", nlohmann::json()), where);
        if (sweep.contains("baseline")) {
            SweepPoint baseline{"baseline", {}};
            for (auto it = sweep["baseline"].begin(); it != sweep["baseline"].end(); ++it)
                baseline.settings.emplace_back(it.key(), flagText(*it));
            points.insert(points.begin(), baseline);
        }
        // Validate every point before the first one runs.
        for (const SweepPoint& p : points) {
            TrainConfig c = base;
            for (const auto& [key, value] : p.settings)
                applyTrainFlag(c, key, value);
            c.output = (fs::path(output) / p.name).string();
            validateTrainConfig(c);
        }
        fs::create_directories(output);

        std::vector<SweepSummaryRow> rows;
        for (std::size_t i = 0; i < points.size() && !interruptFlag(); ++i) {
            const SweepPoint& p = points[i];
            TrainConfig c = base;
            for (const auto& [key, value] : p.settings)
                applyTrainFlag(c, key, value);
            c.output = (fs::path(output) / p.name).string();
            const RunFolder run(c.output);
            const auto status = run.readStatus();
            const std::string prefix =
                "[" + std::to_string(i + 1) + "/" + std::to_string(points.size()) + " " + p.name + "]";
            if (!status || status->state != "finished") {
                const bool resume = status.has_value();
                const std::string pointConfig = (fs::path(output) / (p.name + ".json")).string();
                {
                    std::ofstream out(pointConfig);
                    out << trainConfigToJson(c);
                }
                QStringList childArgs{"train", "--config", QString::fromStdString(pointConfig)};
                if (resume) childArgs << "--resume";
                const int code = runChild(childArgs, prefix);
                if (code != 0 && !interruptFlag())
                    std::fprintf(stderr, "outlierlens sweep: %s ended with exit code %d; continuing\n",
                                 p.name.c_str(), code);
            }
            SweepSummaryRow row;
            row.name = p.name;
            const auto ended = run.readStatus();
            row.state = ended ? ended->state : "missing";
            row.settings = p.settings;
            summarize(lastEvaluation(run), c.task, row);
            rows.push_back(row);
        }
        if (interruptFlag()) {
            std::fprintf(stderr, "outlierlens sweep: interrupted; run it again to continue\n");
            return interruptedExitCode();
        }
        // Relative metric: log-perplexity ratio (perplexity) or accuracy ratio, against the first row.
        setRelativeMetrics(rows);
        writeSweepSummary(output, rows);
        std::printf("%s", sweepSummaryCsv(rows).c_str());
        return Ok;
    });
}

} // namespace outlierlens::cli
