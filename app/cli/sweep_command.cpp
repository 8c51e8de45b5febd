// `outlierlens sweep`: a grid of training runs, one child process after another, and a summary
// table of the final metric, max inf norm and kurtosis per point (the data of the paper's
// Figures 6 and 7).

#include "cli/command_line.h"

#include "common/error.h"
#include "common/json_util.h"
#include "tasks/config/train_config.h"
#include "train/run_folder.h"

#include <QCoreApplication>
#include <QProcess>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

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

/// Final metrics of a run from its metrics.jsonl: the last evaluation line.
nlohmann::json lastEvaluation(const std::string& runDir)
{
    std::ifstream in(runDir + "/metrics.jsonl");
    std::string line;
    nlohmann::json last;
    while (std::getline(in, line)) {
        try {
            const nlohmann::json j = jsonutil::parseWithDepthLimit(line, runDir + "/metrics.jsonl");
            if (j.value("type", "") == "eval") last = j;
        } catch (const nlohmann::json::exception&) {
        }
    }
    return last;
}

struct PointSummary
{
    std::string metricName;
    double metric = NAN, maxInfNorm = NAN, avgKurtosis = NAN;
    std::int64_t step = 0;
};

/// DESIGN.md's model-level metrics: max inf norm = the largest per-layer mean (FFN output for
/// BERT, block output for ViT); avg kurtosis = mean over layers (FFN and block outputs for BERT).
PointSummary summarize(const nlohmann::json& eval, bool image)
{
    PointSummary s;
    if (eval.is_null()) return s;
    s.step = eval.value("step", std::int64_t(0));
    for (auto it = eval["eval"].begin(); it != eval["eval"].end(); ++it)
        s.metricName = it.key(), s.metric = it->get<double>();
    const std::vector<double> norms =
        eval["max_inf_norm"][image ? "out" : "ffn_out"].get<std::vector<double>>();
    s.maxInfNorm = *std::max_element(norms.begin(), norms.end());
    double sum = 0;
    int count = 0;
    for (const char* key : {"ffn_out", "out"}) {
        if (image && std::string(key) == "ffn_out") continue;
        for (double k : eval["kurtosis"][key].get<std::vector<double>>())
            sum += k, ++count;
    }
    s.avgKurtosis = count ? sum / count : NAN;
    return s;
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

        nlohmann::json rows = nlohmann::json::array();
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
            nlohmann::json row = {{"name", p.name},
                                  {"state", run.readStatus() ? run.readStatus()->state : "missing"}};
            for (const auto& [key, value] : p.settings)
                row[key] = value;
            const PointSummary s = summarize(lastEvaluation(c.output), c.task == TrainTask::Image);
            row["step"] = s.step;
            row["metric_name"] = s.metricName;
            row["metric"] = s.metric;
            row["max_inf_norm"] = s.maxInfNorm;
            row["avg_kurtosis"] = s.avgKurtosis;
            rows.push_back(row);
        }
        if (interruptFlag()) {
            std::fprintf(stderr, "outlierlens sweep: interrupted; run it again to continue\n");
            return interruptedExitCode();
        }
        // Relative metric: log-perplexity ratio (perplexity) or accuracy ratio, against the first row.
        const double reference = rows.empty() ? NAN : rows[0]["metric"].get<double>();
        for (auto& row : rows) {
            const double m = row["metric"].get<double>();
            row["relative_metric"] =
                row["metric_name"] == "perplexity" ? std::log(m) / std::log(reference) : m / reference;
        }
        writeTextFileAtomically((fs::path(output) / "summary.json").string(), rows.dump(2) + "\n");
        std::string csv = "name,state,step,metric_name,metric,relative_metric,max_inf_norm,avg_kurtosis\n";
        for (const auto& row : rows) {
            char numbers[256];
            std::snprintf(numbers, sizeof numbers, "%.6g,%.6g,%.6g,%.6g\n", row["metric"].get<double>(),
                          row["relative_metric"].get<double>(), row["max_inf_norm"].get<double>(),
                          row["avg_kurtosis"].get<double>());
            // Names such as "alpha=2,seq_length=32" hold commas: quoted, or the columns shift.
            csv += csvField(row["name"].get<std::string>()) + ',' +
                   csvField(row["state"].get<std::string>()) + ',' +
                   std::to_string(row["step"].get<std::int64_t>()) + ',' +
                   csvField(row["metric_name"].get<std::string>()) + ',' + numbers;
        }
        writeTextFileAtomically((fs::path(output) / "summary.csv").string(), csv);
        std::printf("%s", csv.c_str());
        return Ok;
    });
}

} // namespace outlierlens::cli
