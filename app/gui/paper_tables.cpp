#include "paper_tables.h"

#include "figure_index.h"
#include "figure_inputs.h"
#include "model_catalog.h"
#include "paths.h"

#include "analysis/statistics_file.h"
#include "common/error.h"
#include "tasks/config/train_config.h"
#include "train/run_folder.h"
#include "train/sweep_summary.h"

#include <QCryptographicHash>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace outlierlens {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const QString kSweepId = QStringLiteral("table1");
const QString kVariantId = QStringLiteral("table2");

QString canonical(const QString& path)
{
    const QString c = QFileInfo(path).canonicalFilePath();
    return c.isEmpty() ? QFileInfo(path).absoluteFilePath() : c;
}

QString layerText(int layer0)
{
    return QStringLiteral("layer %1").arg(layer0 + 1);
}

/// The "outlierlens" object of a model folder's config.json (empty: vanilla or unreadable).
QJsonObject variantObjectOf(const QString& modelDir)
{
    QFile f(QDir(modelDir).filePath(QStringLiteral("config.json")));
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QJsonDocument::fromJson(f.readAll()).object().value(QStringLiteral("outlierlens")).toObject();
}

/// The model folder of a sweep point: its final/, else its newest checkpoint; empty when it has none.
QString pointModelDir(const QString& point)
{
    const QString final = QDir(point).filePath(QStringLiteral("final"));
    if (QFileInfo::exists(final + QStringLiteral("/config.json"))) return final;
    const std::vector<std::string> checkpoints = RunFolder(point.toStdString()).checkpoints();
    return checkpoints.empty() ? QString() : QString::fromStdString(checkpoints.back());
}

QString tensorList(const std::vector<CapturePoint>& points)
{
    QStringList names;
    for (CapturePoint p : points)
        names << QString::fromStdString(pointName(p));
    return names.join(QStringLiteral(" and "));
}

QString tensorList(const std::vector<std::string>& names)
{
    QStringList out;
    for (const std::string& n : names)
        out << QString::fromStdString(n);
    return out.join(QStringLiteral(" and "));
}

} // namespace

QString attentionOf(const ModelInfo& m)
{
    if (m.clipped && m.gated) return m.variant;
    if (m.clipped) return QStringLiteral("clipped softmax");
    if (m.gated) return QStringLiteral("gated attention");
    return m.variant.isEmpty() || m.variant.startsWith(QLatin1String("vanilla")) ? QStringLiteral("vanilla")
                                                                                 : m.variant;
}

std::optional<QuantDataChoice> quantDataFor(const QString& modelDir, const QString& option, QString* why)
{
    if (option == QLatin1String("none")) {
        *why = QStringLiteral("not computed (--quantize-data none)");
        return std::nullopt;
    }
    QuantDataChoice q;
    std::optional<TrainConfig> run;
    const QString runDir = runFolderOf(modelDir);
    if (!runDir.isEmpty()) try {
            run = RunFolder(runDir.toStdString()).readConfig();
        } catch (const Error& e) {
            *why = QString::fromStdString(e.what());
        }
    if (run) q.seqLength = run->seqLength, q.nliTrainPairs = run->nliTrainPairs;
    if (!option.isEmpty()) {
        q.spec = option;
        q.source = QStringLiteral("--quantize-data");
        return q;
    }
    if (run) {
        const auto path = [](const std::string& p) { return QString::fromStdString(p); };
        switch (run->task) {
        case TrainTask::Nli:
            q.spec = QStringLiteral("mnli:") + path(run->data);
            break;
        case TrainTask::MaskedLm:
            q.spec = QStringLiteral("text:") + path(run->corpus);
            break;
        case TrainTask::CausalLm:
            q.spec = (run->clmData == ClmData::BigramBackcopy ? QStringLiteral("backcopy:")
                                                              : QStringLiteral("text:")) +
                     path(run->corpus);
            break;
        case TrainTask::Image:
            q.spec = run->data == "fashion-mnist" ? QStringLiteral("fashion-mnist")
                                                  : QStringLiteral("images:") + path(run->data);
            break;
        case TrainTask::Synthetic:
            q.spec = QStringLiteral("synthetic");
            break;
        }
        q.source = QDir(runDir).filePath(QStringLiteral("run.json"));
        return q;
    }
    // The bundled demo models, with the data docs/demo-models.md quantizes them on.
    const QString kind = ModelCatalog::demoKindOf(modelDir);
    const bool bundled =
        !kind.isEmpty() && !ModelCatalog::modelsDir().isEmpty() &&
        QFileInfo(canonical(modelDir)).absolutePath() == canonical(ModelCatalog::modelsDir());
    if (bundled) {
        q.source = QStringLiteral("the bundled demo family's data (docs/demo-models.md)");
        try {
            if (kind == QLatin1String("backcopy")) {
                q.spec = QStringLiteral("backcopy:") +
                         QString::fromStdString(sampleDataFile("text/wiki_en_train.txt"));
                q.seqLength = 64;
            } else if (kind == QLatin1String("bert-mnli")) {
                q.spec = QStringLiteral("mnli:") +
                         QString::fromStdString(sampleDataFile("mnli/mnli_dev_matched.jsonl"));
            } else if (kind == QLatin1String("vit-fmnist")) {
                q.spec = QStringLiteral("fashion-mnist");
            } else if (kind == QLatin1String("synthetic")) {
                q.spec = QStringLiteral("synthetic");
            }
        } catch (const Error& e) {
            *why = QString::fromStdString(e.what());
            return std::nullopt;
        }
        if (!q.spec.isEmpty()) return q;
    }
    if (why->isEmpty())
        *why = QStringLiteral("no task data known for the model: give --quantize-data SPEC (as quantize's "
                              "--data) or --quantized with the JSON of `outlierlens quantize --out`");
    return std::nullopt;
}

W8A8Result readQuantizeResult(const QString& path, QString* modelDir)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) throw Error(path.toStdString() + ": cannot read");
    QJsonParseError error;
    const QJsonObject o = QJsonDocument::fromJson(f.readAll(), &error).object();
    if (error.error != QJsonParseError::NoError || !o.contains(QStringLiteral("quantized_mean")))
        throw Error(path.toStdString() + ": not the JSON of `outlierlens quantize --out`");
    if (o.value(QStringLiteral("bits_w")).toInt() != 8 || o.value(QStringLiteral("bits_a")).toInt() != 8)
        throw Error(path.toStdString() + ": not a W8A8 result (bits_w " +
                    std::to_string(o.value(QStringLiteral("bits_w")).toInt()) + ", bits_a " +
                    std::to_string(o.value(QStringLiteral("bits_a")).toInt()) + ")");
    // The paper's setup: activations with one range per tensor, no token kept in floating point, weights
    // per tensor (`quantize`'s defaults; older results have no granularity key).
    const QString activations = o.value(QStringLiteral("activations")).toString();
    const QString weights = o.value(QStringLiteral("weights")).toString();
    if (activations != QLatin1String("asymmetric per tensor") ||
        weights != QLatin1String("symmetric per tensor") ||
        o.value(QStringLiteral("keep_fp_tokens")).toInt() > 0)
        throw Error(path.toStdString() + ": not the paper's W8A8 setup (activations " +
                    activations.toStdString() + ", weights " + weights.toStdString() + ", keep_fp_tokens " +
                    std::to_string(o.value(QStringLiteral("keep_fp_tokens")).toInt()) + ")");
    W8A8Result w;
    w.metricName = o.value(QStringLiteral("metric")).toString();
    w.fp = o.value(QStringLiteral("fp")).toDouble(kNaN);
    w.mean = o.value(QStringLiteral("quantized_mean")).toDouble(kNaN);
    w.seeds = o.value(QStringLiteral("seeds")).toInt();
    w.std = w.seeds > 1 ? o.value(QStringLiteral("quantized_std")).toDouble(kNaN) : kNaN;
    w.data = o.value(QStringLiteral("data")).toString();
    w.source = path;
    // The model as quantize was given it: relative to where it ran, which may be the file's folder.
    const QString model = o.value(QStringLiteral("model")).toString();
    *modelDir = QFileInfo(model).isRelative() && !QFileInfo::exists(model)
                    ? QFileInfo(path).absoluteDir().filePath(model)
                    : model;
    return w;
}

namespace {

/// A table row whose W8A8 may have to be computed.
struct W8A8Cell
{
    QString modelDir;
    std::optional<W8A8Result>* result;
    QString* note;   ///< why there is none
    double* seconds; ///< how long computing it took
};

/// Computes W8A8 (computeW8A8) for every cell without a result whose model has task data
/// (quantDataFor(model, `option`); `note` says why not otherwise), reporting `progress("quantize", done,
/// total)`. Returns the data it used, for the notes. Throws Cancelled.
QStringList computeMissingW8A8(const std::vector<W8A8Cell>& cells, const QString& option,
                               const std::atomic<bool>& cancel,
                               const std::function<void(const QString&, int, int)>& progress)
{
    std::vector<std::optional<QuantDataChoice>> choices;
    int toCompute = 0;
    for (const W8A8Cell& c : cells) {
        choices.push_back(std::nullopt);
        if (*c.result || c.modelDir.isEmpty()) continue;
        choices.back() = quantDataFor(c.modelDir, option, c.note);
        toCompute += choices.back() ? 1 : 0;
    }
    int done = 0;
    const int total = toCompute * kW8A8Steps;
    QStringList used;
    for (std::size_t i = 0; i < cells.size(); ++i) {
        if (!choices[i]) continue;
        const W8A8Cell& c = cells[i];
        progress(QStringLiteral("quantize"), done, total);
        QElapsedTimer timer;
        timer.start();
        try {
            *c.result = computeW8A8(c.modelDir, *choices[i], cancel, [&](const QString&) {
                progress(QStringLiteral("quantize"), done = std::min(done + 1, total), total);
            });
            *c.seconds = double(timer.elapsed()) / 1000.0;
            const QString data = QStringLiteral("%1 (--seq-length %2; from %3)")
                                     .arg(choices[i]->spec)
                                     .arg(choices[i]->seqLength)
                                     .arg(choices[i]->source);
            if (!used.contains(data)) used << data;
        } catch (const Cancelled&) {
            throw;
        } catch (const Error& e) {
            *c.note = QString::fromStdString(e.what());
        }
    }
    return used;
}

/// The "W8A8 from" cell: the result file's name, or how long computing it took.
QString w8a8Source(const std::optional<W8A8Result>& w8a8, double seconds)
{
    if (!w8a8) return QStringLiteral("n/a");
    return w8a8->source == QLatin1String("computed")
               ? QStringLiteral("computed (%1 s)").arg(seconds, 0, 'f', 1)
               : QFileInfo(w8a8->source).fileName();
}

} // namespace

PaperTables::PaperTables(const FigureSetOptions& options, QVector<ModelInfo> models,
                         const StatisticsFile* stats, QString statsReason,
                         const std::vector<ComparedStatistics>& compared, QString dataSpec, int figureLayer)
    : o(options)
    , m_models(std::move(models))
    , m_stats(stats)
    , m_compared(compared)
    , m_statsReason(std::move(statsReason))
    , m_data(std::move(dataSpec))
    , m_layer(figureLayer)
{}

bool PaperTables::isPaperTable(const QString& id)
{
    return id == kSweepId || id == kVariantId;
}

FigureOutcome PaperTables::sweepOutcome() const
{
    FigureOutcome f;
    f.id = f.number = kSweepId;
    f.title =
        QStringLiteral("Table 1: a sweep's settings with the FP metric, max inf norm, avg kurtosis and W8A8");
    f.page = QStringLiteral("Sweeps");
    if (o.sweep.isEmpty()) {
        f.reason = QStringLiteral("needs a sweep folder: --sweep DIR (outlierlens sweep)");
    } else {
        try {
            if (readSweepSummary(QFile::encodeName(o.sweep).toStdString()).empty())
                f.reason = o.sweep + QStringLiteral(": the sweep's summary.json has no points");
        } catch (const Error& e) {
            f.reason = QString::fromStdString(e.what());
        }
    }
    return f;
}

FigureOutcome PaperTables::variantOutcome() const
{
    FigureOutcome f;
    f.id = f.number = kVariantId;
    f.title = QStringLiteral("Table 2: the model and its variants side by side: FP metric, max inf norm, avg "
                             "kurtosis and W8A8");
    f.page = QStringLiteral("Compare");
    f.statistics = true;
    f.layer = m_layer;
    if (!m_stats) f.reason = m_statsReason;
    return f;
}

PaperTableData PaperTables::sweepTable(const std::atomic<bool>& cancel,
                                       const std::function<void(const QString&, int, int)>& progress) const
{
    const std::vector<SweepSummaryRow> rows = readSweepSummary(QFile::encodeName(o.sweep).toStdString());
    QStringList keys; // the grid keys, in order of first appearance
    for (const SweepSummaryRow& r : rows)
        for (const auto& [key, value] : r.settings)
            if (!keys.contains(QString::fromStdString(key))) keys << QString::fromStdString(key);
    // Given results by model folder (--quantized), for points without their own quantize.json.
    std::map<QString, QString> givenFiles;
    for (const QString& file : o.quantized) {
        QString dir;
        try {
            readQuantizeResult(file, &dir);
            givenFiles[canonical(dir)] = file;
        } catch (const Error&) {
        }
    }

    struct Point
    {
        QJsonObject variant;
        std::optional<TrainConfig> config;
        std::optional<W8A8Result> w8a8;
        QString w8a8Note;
        QString model; ///< the point's model folder ("" when it has none yet)
        double seconds = 0;
    };
    std::vector<Point> points;
    bool clipped = false, gated = false;
    for (const SweepSummaryRow& r : rows) {
        Point p;
        const QString folder = QDir(o.sweep).filePath(QString::fromStdString(r.name));
        const QString model = pointModelDir(folder);
        p.model = model;
        if (model.isEmpty())
            p.w8a8Note = QStringLiteral("no model yet");
        else
            p.variant = variantObjectOf(model);
        try {
            p.config = RunFolder(folder.toStdString()).readConfig();
        } catch (const Error&) {
        }
        clipped |= p.variant.value(QStringLiteral("softmax")).toString() == QLatin1String("clipped");
        gated |= p.variant.contains(QStringLiteral("gate")) &&
                 p.variant.value(QStringLiteral("gate")).toString() != QLatin1String("none");
        QString file = QDir(folder).filePath(QStringLiteral("quantize.json"));
        if (!QFileInfo::exists(file)) {
            file.clear();
            for (const QString& dir : {folder, model})
                if (const auto it = givenFiles.find(canonical(dir)); !dir.isEmpty() && it != givenFiles.end())
                    file = it->second;
        }
        if (!file.isEmpty()) try {
                QString dir;
                p.w8a8 = readQuantizeResult(file, &dir);
            } catch (const Error& e) {
                p.w8a8Note = QString::fromStdString(e.what());
            }
        points.push_back(p);
    }
    // Points without a result: computed with quantize's code path, on each point's own task data (its
    // run.json), as Table 2 does.
    std::vector<W8A8Cell> w8a8Cells;
    for (Point& p : points)
        w8a8Cells.push_back({p.model, &p.w8a8, &p.w8a8Note, &p.seconds});
    const QStringList computedData = computeMissingW8A8(w8a8Cells, o.quantizeData, cancel, progress);

    PaperTableData t;
    t.name = kSweepId;
    t.title = QStringLiteral("Table 1: %1").arg(QDir(o.sweep).dirName());
    t.provenance.model = o.sweep;
    t.provenance.input = QDir(o.sweep).filePath(QStringLiteral("summary.json"));
    t.provenance.selection = QStringLiteral("every point of the sweep");
    t.columns << PaperTableColumn{QStringLiteral("point"), QStringLiteral("point"), 0}
              << PaperTableColumn{QStringLiteral("state"), QStringLiteral("state"), 0};
    for (const QString& k : keys)
        t.columns << PaperTableColumn{QStringLiteral("setting_") + k, k, 4};
    if (clipped)
        t.columns << PaperTableColumn{QStringLiteral("gamma"), QStringLiteral("γ"), 4}
                  << PaperTableColumn{QStringLiteral("zeta"), QStringLiteral("ζ"), 3};
    if (gated)
        t.columns << PaperTableColumn{QStringLiteral("gate"), QStringLiteral("gate"), 0}
                  << PaperTableColumn{QStringLiteral("pi_init"), QStringLiteral("π init"), 3};
    const QString metric = rows.empty() ? QString() : QString::fromStdString(rows.front().metricName);
    t.columns << PaperTableColumn{QStringLiteral("metric"), QStringLiteral("metric"), 0}
              << PaperTableColumn{QStringLiteral("fp"), QStringLiteral("FP"), 4}
              << PaperTableColumn{QStringLiteral("max_inf_norm"), QStringLiteral("max inf norm"), 2}
              << PaperTableColumn{QStringLiteral("avg_kurtosis"), QStringLiteral("avg kurtosis"), 2}
              << PaperTableColumn{QStringLiteral("w8a8"), QStringLiteral("W8A8"), 4}
              << PaperTableColumn{QStringLiteral("w8a8_std"), QStringLiteral("± (seeds)"), 4}
              << PaperTableColumn{QStringLiteral("w8a8_fp"), QStringLiteral("FP (quantize)"), 4}
              << PaperTableColumn{QStringLiteral("w8a8_source"), QStringLiteral("W8A8 from"), 0};
    int withW8A8 = 0;
    QStringList without;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const SweepSummaryRow& r = rows[i];
        const Point& p = points[i];
        QVector<QVariant> cells{QString::fromStdString(r.name), QString::fromStdString(r.state)};
        for (const QString& k : keys) {
            QString value;
            for (const auto& [key, v] : r.settings)
                if (QString::fromStdString(key) == k) value = QString::fromStdString(v);
            cells << QVariant(value.isEmpty() ? QStringLiteral("–") : value); // as the sweep wrote it
        }
        const bool pointClipped =
            p.variant.value(QStringLiteral("softmax")).toString() == QLatin1String("clipped");
        if (clipped) {
            // A vanilla point is gamma 0, zeta 1: clip((1 - 0) softmax + 0, 0, 1) is the softmax.
            cells << (pointClipped ? p.variant.value(QStringLiteral("gamma")).toDouble(kNaN)
                                   : (p.variant.isEmpty() && !p.config ? kNaN : 0.0))
                  << (pointClipped ? p.variant.value(QStringLiteral("zeta")).toDouble(1.0)
                                   : (p.variant.isEmpty() && !p.config ? kNaN : 1.0));
        }
        if (gated) {
            const QString gate = p.variant.value(QStringLiteral("gate")).toString();
            cells << QVariant(gate.isEmpty() ? QStringLiteral("none") : gate)
                  << (gate.isEmpty() || gate == QLatin1String("none")
                          ? kNaN
                          : p.variant.value(QStringLiteral("pi_init")).toDouble(kNaN));
        }
        cells << QString::fromStdString(r.metricName) << r.metric << r.maxInfNorm << r.avgKurtosis;
        if (p.w8a8) {
            ++withW8A8;
            cells << p.w8a8->mean << p.w8a8->std << p.w8a8->fp;
        } else {
            without << QString::fromStdString(r.name) +
                           (p.w8a8Note.isEmpty() ? QString()
                                                 : QStringLiteral(" (") + p.w8a8Note + QLatin1Char(')'));
            cells << kNaN << kNaN << kNaN;
        }
        cells << w8a8Source(p.w8a8, p.seconds);
        t.rows << cells;
    }

    // Where the numbers come from, in the paper's terms.
    QString tensor = QStringLiteral("the task's figure tensor"), kurtosisTensors = tensor;
    for (const Point& p : points)
        if (p.config) {
            tensor = QString::fromStdString(pointName(figureTensorOf(p.config->task)));
            kurtosisTensors = tensorList(kurtosisTensorsOf(p.config->task));
            break;
        }
    if (clipped)
        t.notes << QStringLiteral(
            "γ and ζ: each point's clipped softmax, clip((ζ − γ)·softmax(x) + γ, 0, 1), "
            "from its model's config.json (γ = −α/T where the sweep sets α); a vanilla "
            "point is γ = 0, ζ = 1.");
    if (gated)
        t.notes << QStringLiteral(
            "gate and π init: each point's gated attention, from its model's config.json.");
    t.notes << QStringLiteral(
                   "FP (%1), max inf norm and avg kurtosis: the sweep's summary.json, from each run's "
                   "last evaluation: the metric on its held-out batches; max inf norm = the largest "
                   "over layers of the mean per-sample max |x| of %2 on the trainer's probe batch; "
                   "avg kurtosis = the mean over layers of the Pearson kurtosis of %3.")
                   .arg(metric.isEmpty() ? QStringLiteral("task metric") : metric, tensor, kurtosisTensors);
    if (withW8A8 > 0)
        t.notes
            << QStringLiteral(
                   "W8A8: `outlierlens quantize` (W8A8, the paper's placement; docs/quantization.md) for "
                   "%1 of %2 points: from the point folder's quantize.json or --quantized (mean ± sample "
                   "std over its seeds), else computed here with %3 seed (quantize's first; no spread)%4. "
                   "FP (quantize) is the same experiment's floating-point metric on its held-out data.")
                   .arg(withW8A8)
                   .arg(rows.size())
                   .arg(kPaperTableSeeds)
                   .arg(computedData.isEmpty()
                            ? QString()
                            : QStringLiteral(" on ") + computedData.join(QStringLiteral("; ")));
    if (!without.isEmpty())
        t.notes << QStringLiteral(
                       "W8A8 not available for %1. `outlierlens quantize --model %2/POINT/final --data "
                       "SPEC --out %2/POINT/quantize` writes it where the table reads it.")
                       .arg(without.join(QStringLiteral(", ")), QDir::toNativeSeparators(o.sweep));
    return t;
}

PaperTableData PaperTables::variantTable(const std::atomic<bool>& cancel,
                                         const std::function<void(const QString&, int, int)>& progress) const
{
    struct Row
    {
        ModelInfo model;
        std::optional<StatisticsFile> stats;
        QString statsNote;
        std::optional<W8A8Result> w8a8;
        QString w8a8Note;
        double seconds = 0;
    };
    std::vector<Row> rows;
    for (int i = 0; i < m_models.size(); ++i) {
        Row r{m_models[i], std::nullopt, {}, std::nullopt, {}, 0};
        if (i == 0) {
            r.stats = *m_stats;
        } else if (std::size_t(i - 1) < m_compared.size()) {
            // The same statistics over the same data as the model's (figure_set.cpp computes them once).
            r.stats = m_compared[std::size_t(i - 1)].stats;
            r.statsNote = m_compared[std::size_t(i - 1)].note;
        } else {
            r.statsNote = QStringLiteral("not computed");
        }
        rows.push_back(std::move(r));
    }

    // W8A8: the given results of `quantize`, else computed with quantize's code path.
    QStringList notes;
    for (const QString& file : o.quantized) {
        try {
            QString dir;
            const W8A8Result w = readQuantizeResult(file, &dir);
            bool matched = false;
            for (Row& r : rows)
                if (canonical(r.model.dir) == canonical(dir)) r.w8a8 = w, matched = true;
            if (!matched)
                notes << QStringLiteral("%1: its model %2 is none of the table's models (not used).")
                             .arg(file, dir);
        } catch (const Error& e) {
            notes << QString::fromStdString(e.what()) + QStringLiteral(" (not used).");
        }
    }
    std::vector<W8A8Cell> w8a8Cells;
    for (Row& r : rows)
        w8a8Cells.push_back({r.model.dir, &r.w8a8, &r.w8a8Note, &r.seconds});
    const QStringList computedData = computeMissingW8A8(w8a8Cells, o.quantizeData, cancel, progress);

    // The columns; a second max inf norm column where the last layer dominates.
    const int lastLayer = m_stats->numLayers - 1;
    QStringList lastDominated;
    for (const Row& r : rows)
        if (r.stats && r.stats->summary.maxInfNormLayer == r.stats->numLayers - 1)
            lastDominated << r.model.name;
    const bool atLayer = !lastDominated.isEmpty() && m_layer >= 0 && m_layer != lastLayer;
    const QString infTensor = QString::fromStdString(m_stats->summary.infNormTensor);

    PaperTableData t;
    t.name = kVariantId;
    t.title = QStringLiteral("Table 2: %1 and its variants").arg(m_models.front().name);
    t.provenance.model = m_models.front().dir;
    t.provenance.checkpointSha256 = m_models.front().sha256;
    t.provenance.input = m_data;
    t.provenance.selection =
        atLayer ? QStringLiteral("max inf norm also at %1 (the figures' layer)").arg(layerText(m_layer))
                : QString();
    // The paper's order: FP, max inf norm, avg kurtosis, W8A8.
    t.columns << PaperTableColumn{QStringLiteral("model"), QStringLiteral("model"), 0}
              << PaperTableColumn{QStringLiteral("attention"), QStringLiteral("attention"), 0}
              << PaperTableColumn{QStringLiteral("metric"), QStringLiteral("metric"), 0}
              << PaperTableColumn{QStringLiteral("fp"), QStringLiteral("FP"), 4}
              << PaperTableColumn{QStringLiteral("max_inf_norm"),
                                  QStringLiteral("max inf norm\n(%1)").arg(infTensor), 2}
              << PaperTableColumn{QStringLiteral("max_inf_norm_layer"), QStringLiteral("at\nlayer"), 0};
    if (atLayer)
        t.columns << PaperTableColumn{
            QStringLiteral("max_inf_norm_layer_%1").arg(m_layer + 1),
            QStringLiteral("max inf norm at layer %1\n(the figures' layer)").arg(m_layer + 1), 2};
    t.columns << PaperTableColumn{QStringLiteral("avg_kurtosis"), QStringLiteral("avg\nkurtosis"), 2}
              << PaperTableColumn{QStringLiteral("w8a8"), QStringLiteral("W8A8"), 4}
              << PaperTableColumn{QStringLiteral("w8a8_std"), QStringLiteral("± (seeds)"), 4}
              << PaperTableColumn{QStringLiteral("w8a8_source"), QStringLiteral("W8A8 from"), 0};
    for (const Row& r : rows) {
        QVector<QVariant> cells{r.model.name, attentionOf(r.model),
                                r.w8a8 ? r.w8a8->metricName : QStringLiteral("–"),
                                r.w8a8 ? r.w8a8->fp : kNaN};
        if (r.stats) {
            const StatisticsSummaryData& s = r.stats->summary;
            double atLb = kNaN;
            for (std::size_t l = 0; l < s.layers.size(); ++l)
                if (s.layers[l] == m_layer && l < s.meanMaxInfNorm.size()) atLb = s.meanMaxInfNorm[l];
            cells << s.maxInfNorm << double(s.maxInfNormLayer + 1);
            if (atLayer) cells << atLb;
            cells << s.avgKurtosis;
        } else {
            cells << kNaN << kNaN;
            if (atLayer) cells << kNaN;
            cells << kNaN;
        }
        cells << (r.w8a8 ? r.w8a8->mean : kNaN) << (r.w8a8 ? r.w8a8->std : kNaN)
              << w8a8Source(r.w8a8, r.seconds);
        t.rows << cells;
    }

    const QString kurtosisOf = tensorList(m_stats->summary.kurtosisTensors);
    t.notes << QStringLiteral("max inf norm: the largest over layers of the mean over the %1 inputs of %2 of "
                              "the per-input max |x| of %3 (\"at layer\": where, 1-based); avg kurtosis: the "
                              "mean over layers of the mean Pearson kurtosis of %4. The same numbers as "
                              "`outlierlens stats` over that data (docs/metrics.md).")
                   .arg(m_stats->samples)
                   .arg(m_data, infTensor, kurtosisOf);
    t.notes << QStringLiteral(
                   "FP and W8A8: `outlierlens quantize` (W8A8: symmetric per-tensor weights, asymmetric "
                   "per-tensor activations at the paper's placement, running min-max over 16 "
                   "calibration batches of 32; docs/quantization.md), given with --quantized (± the "
                   "sample std over its seeds) or computed here with %1 seed (quantize's first; `quantize "
                   "--seeds 3` gives the spread)%2.")
                   .arg(kPaperTableSeeds)
                   .arg(computedData.isEmpty()
                            ? QString()
                            : QStringLiteral(" on ") + computedData.join(QStringLiteral("; ")));
    if (atLayer)
        t.notes << QStringLiteral(
                       "The max inf norm is reached in the last layer (layer %1) in %2: the last layer's "
                       "residual grows in every variant, which is not the no-op mechanism the variants "
                       "remove, so the comparison of the max inf norm can read reversed. The column "
                       "\"max inf norm at layer %3\" compares them at the layer the figures chose (%4).")
                       .arg(lastLayer + 1)
                       .arg(lastDominated.join(QStringLiteral(", ")))
                       .arg(m_layer + 1)
                       .arg(m_models.size() > 1
                                ? QStringLiteral("the layer with the outliers the no-op heads read")
                                : QStringLiteral("where the outliers are"));
    for (const Row& r : rows) {
        if (!r.statsNote.isEmpty())
            t.notes << QStringLiteral("%1: no statistics: %2").arg(r.model.name, r.statsNote);
        if (!r.w8a8)
            t.notes << QStringLiteral("%1: FP and W8A8 not available: %2").arg(r.model.name, r.w8a8Note);
        if (r.stats && r.stats->numLayers != m_stats->numLayers)
            t.notes << QStringLiteral("%1 has %2 layers, the model %3.")
                           .arg(r.model.name)
                           .arg(r.stats->numLayers)
                           .arg(m_stats->numLayers);
    }
    if (m_models.size() < 2)
        t.notes << QStringLiteral(
            "Only the model itself: give its clipped-softmax and gated variants with --compare "
            "for the paper's rows.");
    t.notes << notes;
    return t;
}

void PaperTables::draw(FigureIndexWriter& index, FigureOutcome& f, const QVector<ExportFormat>& formats,
                       int dpi, const std::atomic<bool>& cancel,
                       const std::function<void(const QString&, int, int)>& progress)
{
    const PaperTableData data =
        f.id == kSweepId ? sweepTable(cancel, progress) : variantTable(cancel, progress);
    if (f.id == kSweepId)
        f.caption =
            QStringLiteral("Every point of the sweep %1 (%2 runs): its settings, its task metric, max inf "
                           "norm and avg kurtosis from summary.json, and W8A8 from `quantize` where the "
                           "point has a result.")
                .arg(QDir::toNativeSeparators(o.sweep))
                .arg(data.rows.size());
    else
        f.caption =
            QStringLiteral("%1 model(s) side by side (the model, then --compare): FP and W8A8 task metric "
                           "from `quantize`'s code path, max inf norm and avg kurtosis over the data set%2.")
                .arg(data.rows.size())
                .arg(std::any_of(data.columns.begin(), data.columns.end(),
                                 [](const PaperTableColumn& c) {
                                     return c.key.startsWith(QLatin1String("max_inf_norm_layer_"));
                                 })
                         ? QStringLiteral(", and the max inf norm at %1, the figures' layer, because the "
                                          "last layer dominates the max")
                               .arg(layerText(m_layer))
                         : QString());
    const PaperTableFigure figure(data);
    index.draw(figure, f, formats, dpi);
    index.addTableNumbers(f.id, data.toJson());
}

} // namespace outlierlens
