#include "figure_set.h"

#include "figure_index.h"
#include "figure_inputs.h"
#include "model_catalog.h"
#include "sweeps_page.h"
#include "view_builders.h"

#include "compare_view.h"
#include "head_grid.h"
#include "head_view.h"
#include "image_view.h"
#include "job_manager.h"
#include "outlier_dashboard.h"
#include "sweep_view.h"
#include "systematic_view.h"
#include "teaching_view.h"
#include "training_charts.h"

#include "analysis/showcase.h"
#include "analysis/statistics_file.h"
#include "common/error.h"
#include "paths.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>

#include <algorithm>
#include <optional>

namespace outlierlens {
namespace {

/// A figure of the plan: what it is and how to make its widget (empty when it cannot be drawn).
struct Planned
{
    FigureOutcome outcome;
    std::function<std::unique_ptr<QWidget>()> make;
};

template<typename View, typename Data>
std::unique_ptr<QWidget> viewOf(const Data& data)
{
    auto view = std::make_unique<View>();
    view->setData(data);
    return view;
}

QString layerText(int layer)
{
    return QStringLiteral("layer %1").arg(layer + 1);
}

/// The run folder of `outlierlens train` that holds model folder `dir` (its final/ or a checkpoint), or
/// empty.
QString runFolderOf(const QString& dir)
{
    QDir d(dir);
    for (int up = 0; up < 3; ++up) {
        if (QFileInfo::exists(d.filePath(QStringLiteral("metrics.jsonl")))) return d.absolutePath();
        if (!d.cdUp()) break;
    }
    return {};
}

/// The model at the paper's scale: Bondarenko et al.'s figures name its layers and heads.
bool isBertBaseSized(const ModelInfo& m)
{
    return m.takesPairs() && m.layers == 12 && m.heads == 12 && m.hidden == 768;
}

/// Everything the figures are chosen from.
class Planner
{
public:
    Planner(const FigureSetOptions& options, FigureModel& model,
            std::vector<std::unique_ptr<FigureModel>>& others, const QVector<FigureInput>& inputs,
            const std::optional<StatisticsFile>& stats, const QString& statsPath, const QString& statsReason)
        : o(options)
        , main(model)
        , compare(others)
        , in(inputs)
        , stats(stats)
        , statsPath(statsPath)
        , statsReason(statsReason)
        , m(model.info())
        , tensor(outlierTensorRead(m))
    {
        chooseLayersAndHeads();
    }

    QVector<Planned> plan();

private:
    SnapshotPtr input(int index) { return main.inspect(in.value(std::min<int>(index, in.size() - 1))); }
    QString inputLabel(int index) const { return in.value(std::min<int>(index, in.size() - 1)).label; }
    double maxInfNorm(int layer)
    {
        if (stats)
            for (const LayerStatisticsData& l : stats->layers)
                if (l.layer == layer)
                    if (const auto t = l.tensors.find(tensor.toStdString()); t != l.tensors.end())
                        return t->second.meanMaxInfNorm;
        return input(0)->outliersOf(tensor, layer).maxInfNorm;
    }
    void chooseLayersAndHeads();
    Planned unavailable(const QString& id, const QString& title, const QString& reason) const
    {
        Planned p;
        p.outcome.id = id;
        p.outcome.number = // "9b" is Figure 9; "an1", "table" and "training" are their own
            id.front().isDigit() && id.back().isLetter() ? id.left(id.size() - 1) : id;
        p.outcome.title = title;
        p.outcome.reason = reason;
        return p;
    }
    Planned planned(const QString& id, const QString& title, const QString& caption,
                    std::function<std::unique_ptr<QWidget>()> make) const
    {
        Planned p = unavailable(id, title, QString());
        p.outcome.caption = caption;
        p.make = std::move(make);
        return p;
    }
    /// The models Figure 14 (`clipped`) or 15 compares, of the main model and --compare: those without
    /// gates (vanilla and clipped softmax), or those without clipped softmax (vanilla and gated).
    std::vector<FigureModel*> modelsFor(bool clipped) const
    {
        std::vector<FigureModel*> models{&main};
        for (const auto& c : compare)
            models.push_back(c.get());
        std::vector<FigureModel*> kept;
        for (FigureModel* f : models)
            if (clipped ? !f->info().gated : !f->info().clipped) kept.push_back(f);
        return kept;
    }
    /// Records where the app shows the figure (FigureOutcome::page ...).
    static Planned shownIn(Planned p, const QString& page, int layer, int head, int input,
                           bool statistics = false)
    {
        p.outcome.page = page;
        p.outcome.layer = layer, p.outcome.head = head, p.outcome.input = input;
        p.outcome.statistics = statistics;
        return p;
    }
    Planned comparison(const QString& id, bool clipped);
    Planned teaching(const QString& id, FigureModel& model, const QString& title);
    Planned headGrid(const QString& id, const QString& title, int layer, int inputIndex);

    const FigureSetOptions& o;
    FigureModel& main;
    std::vector<std::unique_ptr<FigureModel>>& compare;
    const QVector<FigureInput>& in;
    const std::optional<StatisticsFile>& stats;
    QString statsPath, statsReason;
    ModelInfo m;
    QString tensor;
    int la = 0, lb = 0;          ///< the two layers of `tensor` with the largest outliers (la <= lb)
    int headLayer = 0, head = 0; ///< the head shown (the no-op head that reads them)
    QString choiceNote;          ///< how they were chosen, for the captions
};

void Planner::chooseLayersAndHeads()
{
    const int L = m.layers;
    std::optional<Showcase> showcase;
    if (m.isDecoder()) try {
            showcase = readShowcase(m.dir.toStdString());
        } catch (const Error&) {
        }
    if (isBertBaseSized(m)) {
        la = 9, lb = 10, headLayer = 10, head = 2;
        choiceNote =
            QStringLiteral("the paper's layers 10 and 11 and head 3 (a model of the paper's size: 12 layers, "
                           "12 heads, hidden 768)");
        return;
    }
    if (showcase) {
        headLayer = showcase->layer, head = showcase->head;
        lb = std::max(0, headLayer - 1), la = std::max(0, lb - 1);
        choiceNote =
            QStringLiteral("the head stored in the model's showcase.json (largest first-token attention) "
                           "and the layers before it");
        return;
    }
    // The two layers with the largest max inf norm of the figure tensor; the last one only when there
    // is nothing else (it grows in every variant, which is not the no-op mechanism).
    std::vector<int> order;
    for (int l = 0; l < L; ++l)
        if (l < L - 1 || L <= 2) order.push_back(l);
    std::vector<double> norm(std::size_t(L), 0.0);
    for (int l : order)
        norm[std::size_t(l)] = maxInfNorm(l);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return norm[std::size_t(a)] > norm[std::size_t(b)]; });
    lb = order.empty() ? 0 : order[0];
    la = order.size() > 1 ? order[1] : lb;
    if (la > lb) std::swap(la, lb);
    // The head that reads the larger one and does the most "nothing" on the first input.
    const int largest = order.empty() ? 0 : order[0];
    headLayer = std::min(largest + 1, L - 1);
    const OverviewData overview = buildOverview(*input(0));
    float best = -1;
    for (int h = 0; h < m.heads; ++h)
        if (const float score = overview.noopScore.value(headLayer * m.heads + h); score > best)
            best = score, head = h;
    choiceNote =
        QStringLiteral("the layers with the largest max |x| of %1 (%2) and the head of the next layer with "
                       "the highest no-op score (%3) on the first input")
            .arg(tensor, stats ? QStringLiteral("over the data set") : QStringLiteral("on the first input"),
                 overview.scoreDescription);
}

Planned Planner::headGrid(const QString& id, const QString& title, int layer, int inputIndex)
{
    return shownIn(
        planned(id, title,
                QStringLiteral("Every head of %1: attention probabilities, values V and their product P·V "
                               "(and the gate where the model has one) on %2.")
                    .arg(layerText(layer), inputLabel(inputIndex)),
                [this, layer, inputIndex] {
                    const SnapshotPtr s = input(inputIndex);
                    QVector<HeadViewData> heads;
                    for (int h = 0; h < s->H(); ++h)
                        heads << buildHeadView(*s, layer, h);
                    auto grid = std::make_unique<HeadGrid>();
                    grid->setHeads(heads);
                    return std::unique_ptr<QWidget>(std::move(grid));
                }),
        QStringLiteral("Layer"), layer, -1, inputIndex);
}

Planned Planner::comparison(const QString& id, bool clipped)
{
    const std::vector<FigureModel*> models = modelsFor(clipped);
    const QString kind = clipped ? QStringLiteral("clipped softmax") : QStringLiteral("gated attention");
    const QString title = QStringLiteral("Figure %1: vanilla and %2, the same head and input").arg(id, kind);
    const bool has = std::any_of(models.begin(), models.end(), [clipped](FigureModel* f) {
        return clipped ? f->info().clipped : f->info().gated;
    });
    if (!has)
        return unavailable(id, title,
                           QStringLiteral("needs a model with %1: give one with --compare").arg(kind));
    if (models.size() < 2)
        return unavailable(id, title, QStringLiteral("needs a second model to compare with (--compare)"));
    for (FigureModel* f : models)
        if (f->info().layers != m.layers || f->info().heads != m.heads || f->info().family != m.family)
            return unavailable(
                id, title, f->info().name + QStringLiteral(" has another shape or family than ") + m.name);
    return shownIn(
        planned(
            id, title,
            QStringLiteral("%1, head %2 on %3, in each model: attention probabilities, V and P·V%4; under "
                           "each, the outliers of the tensor the layer reads and where the head looks.")
                .arg(layerText(headLayer))
                .arg(head + 1)
                .arg(inputLabel(0),
                     clipped ? QStringLiteral(", and each query's probabilities binned by size (exactly 0, "
                                              "below 1e-8, then by decade up to 0.1, then 0.1-0.5 and "
                                              "0.5-1)")
                             : QStringLiteral(", the gate and P·V after it")),
            [this, models, clipped] {
                QVector<CompareEntry> entries;
                for (FigureModel* f : models) {
                    const SnapshotPtr s = f->inspect(in.value(0));
                    entries << CompareEntry{f->info().name, compareCaptionLines(*s, headLayer, head),
                                            buildHeadView(*s, headLayer, head)};
                }
                auto view = std::make_unique<CompareView>();
                view->setEntries(entries);
                view->setValuePanelsVisible(true);
                // Figure 14: how each query's probabilities spread, where clipping makes exact zeros.
                view->setDistributionPanelsVisible(clipped);
                return std::unique_ptr<QWidget>(std::move(view));
            }),
        QStringLiteral("Compare"), headLayer, head, 0);
}

Planned Planner::teaching(const QString& id, FigureModel& model, const QString& title)
{
    return shownIn(
        planned(
            id, title,
            QStringLiteral("The attention block of %1 with its own numbers: %2, head %3, on %4; the query "
                           "is the %5 token.")
                .arg(model.info().name, layerText(headLayer))
                .arg(head + 1)
                .arg(inputLabel(0), m.isDecoder() ? QStringLiteral("last") : QStringLiteral("second")),
            [this, &model] {
                const SnapshotPtr s = model.inspect(in.value(0));
                // As the Teaching page: a content token, the last one in a causal model.
                const int token = s->model.isDecoder() ? s->T - 1 : std::min(1, s->T - 1);
                return viewOf<TeachingView>(buildTeaching(*s, token, headLayer, head));
            }),
        QStringLiteral("Teaching"), headLayer, head, 0);
}

QVector<Planned> Planner::plan()
{
    QVector<Planned> p;
    const QString rule = QString::fromStdString(o.rule.shortText());
    const bool vit = m.takesImages();
    // Figure 1: outlier counts per token and hidden dimension, over the data set.
    const QVector<std::pair<QString, int>> figure1 =
        la == lb ? QVector<std::pair<QString, int>>{{QStringLiteral("1"), lb}}
                 : QVector<std::pair<QString, int>>{{QStringLiteral("1a"), la}, {QStringLiteral("1b"), lb}};
    for (const auto& [id, layer] : figure1) {
        const QString title = QStringLiteral("Figure %1: outliers of %2, %3, by token and hidden dimension")
                                  .arg(id, tensor, layerText(layer));
        if (!stats) {
            p << unavailable(id, title, statsReason);
            continue;
        }
        p << planned(
            id, title,
            QStringLiteral("Outlier counts (values over %1) per token (blue) and hidden dimension (green) of "
                           "%2 in %3, over %4 inputs of %5; the per-layer max inf norm and kurtosis below. "
                           "Layers: %6.")
                .arg(rule, tensor, layerText(layer))
                .arg(stats->samples)
                .arg(QString::fromStdString(stats->provenance.count("data") ? stats->provenance.at("data")
                                                                            : std::string()),
                     choiceNote),
            [this, layer] {
                return viewOf<OutlierDashboard>(buildDashboard(*stats, statsPath, layer, tensor, m.headDim));
            });
        p.back() = shownIn(p.back(), QStringLiteral("Outliers"), layer, -1, -1, true);
    }
    // Figure 2: one head on two inputs and in two layers.
    const QString title2 =
        QStringLiteral("Figure 2: attention probabilities, values and their product of one head");
    if (vit) {
        p << unavailable(
            QStringLiteral("2"), title2,
            QStringLiteral("drawn for text models; an image model's heads are Figures 16 and 17"));
    } else {
        const int other = std::max(0, headLayer - 1);
        p << planned(
            QStringLiteral("2"), title2,
            QStringLiteral("Head %1: (a) %2 on %3, (b) %2 on %4, (c) %5 on %4. Chosen: %6.")
                .arg(head + 1)
                .arg(layerText(headLayer), inputLabel(0), inputLabel(4), layerText(other), choiceNote),
            [this, other] {
                auto grid = std::make_unique<HeadGrid>();
                grid->setHeads({buildHeadView(*input(0), headLayer, head),
                                buildHeadView(*input(4), headLayer, head),
                                buildHeadView(*input(4), other, head)});
                return std::unique_ptr<QWidget>(std::move(grid));
            });
    }
    // Figures 3 and 9: an image model's outlier patches and the attention of a head that reads them.
    const auto image = [&](const QString& id, int index) {
        const QString title =
            QStringLiteral("Figure %1: outlier patches and the attention of a head that reads them").arg(id);
        if (!vit) return unavailable(id, title, QStringLiteral("needs an image model and images"));
        if (index >= in.size())
            return unavailable(id, title, QStringLiteral("the data has fewer than %1 images").arg(index + 1));
        return planned(
            id, title,
            QStringLiteral("%1: outlier patches of %2's block output (values over %3), and head %4 of "
                           "the next layer: cumulative attention per patch, attention probabilities and "
                           "mean |V| of patches with and without outliers.%5")
                .arg(inputLabel(index), layerText(lb), rule)
                .arg(head + 1)
                .arg(stats ? QStringLiteral(" The data set's outlier counts per patch beside them.")
                           : QString()),
            [this, index] {
                ImageViewData data = buildImageView(*input(index), lb, head);
                if (stats) addDatasetPatches(data, *stats, lb);
                return viewOf<ImageView>(data);
            });
    };
    p << image(QStringLiteral("3"), 0);
    // Figures 4 and 5: the attention block with the model's own numbers, vanilla and gated / clipped.
    p << teaching(QStringLiteral("4"), main,
                  QStringLiteral("Figure 4: the attention block, with this model's numbers"));
    {
        const QString title5 = QStringLiteral("Figure 5: the attention block of a clipped or gated model");
        FigureModel* variant = nullptr;
        for (FigureModel* f : modelsFor(false))
            if (f->info().gated) variant = f;
        if (!variant)
            for (FigureModel* f : modelsFor(true))
                if (f->info().clipped) variant = f;
        p << (variant
                  ? teaching(QStringLiteral("5"), *variant, title5)
                  : unavailable(QStringLiteral("5"), title5,
                                QStringLiteral("needs a gated or clipped model: give one with --compare")));
    }
    // Figures 6 and 7: a sweep of the variant's settings.
    const QVector<SweepPointData> sweep = [&] {
        QString error;
        return o.sweep.isEmpty()
                   ? QVector<SweepPointData>{}
                   : readSweepPoints(QDir(o.sweep).filePath(QStringLiteral("summary.json")), &error);
    }();
    for (const QString& id : {QStringLiteral("6"), QStringLiteral("7")}) {
        const QString title = id == QLatin1String("6") ? QStringLiteral("Figure 6: a clipped softmax sweep")
                                                       : QStringLiteral("Figure 7: a gated attention sweep");
        if (o.sweep.isEmpty()) {
            p << unavailable(id, title,
                             QStringLiteral("needs a sweep folder: --sweep DIR (outlierlens sweep)"));
            continue;
        }
        if (sweep.isEmpty()) {
            p << unavailable(id, title, o.sweep + QStringLiteral(": no readable summary.json"));
            continue;
        }
        bool gates = false;
        for (const SweepPointData& point : sweep)
            for (const auto& [key, value] : point.settings)
                gates |= key.contains(QLatin1String("gate")) || key.contains(QLatin1String("pi_init"));
        if (gates != (id == QLatin1String("7"))) {
            p << unavailable(
                id, title,
                QStringLiteral("the sweep in %1 varies %2")
                    .arg(o.sweep, gates ? QStringLiteral("gating") : QStringLiteral("other settings")));
            continue;
        }
        p << planned(
            id, title,
            QStringLiteral("Task metric, max inf norm and kurtosis of every run of %1.").arg(o.sweep),
            [this, sweep] {
                auto view = std::make_unique<SweepView>();
                view->setLogInfNorm(true); // as the paper draws Figures 6 and 7: max inf norm on a log axis
                view->setPoints(sweep, QDir(o.sweep).filePath(QStringLiteral("summary.json")));
                return std::unique_ptr<QWidget>(std::move(view));
            });
    }
    p << image(QStringLiteral("9a"), 1) << image(QStringLiteral("9b"), 2) << image(QStringLiteral("9c"), 3);
    // Figures 10-13: every head of two layers on two inputs.
    const int first = std::max(0, headLayer - 1);
    const QVector<std::pair<int, int>> grids{{first, 0}, {headLayer, 0}, {first, 4}, {headLayer, 4}};
    for (int i = 0; i < 4; ++i) {
        const QString id = QString::number(10 + i);
        const QString title =
            QStringLiteral("Figure %1: every head of %2").arg(id, layerText(grids[i].first));
        p << (vit ? unavailable(
                        id, title,
                        QStringLiteral("drawn for text models; an image model's are Figures 16 and 17"))
                  : headGrid(id, title, grids[i].first, grids[i].second));
    }
    p << comparison(QStringLiteral("14"), true) << comparison(QStringLiteral("15"), false);
    for (const auto& [id, layer] :
         {std::pair<QString, int>{QStringLiteral("16"), headLayer}, {QStringLiteral("17"), first}}) {
        const QString title =
            QStringLiteral("Figure %1: every head of an image model's %2").arg(id, layerText(layer));
        p << (vit ? headGrid(id, title, layer, 0)
                  : unavailable(id, title, QStringLiteral("needs an image model")));
    }
    // An et al. 2025: their Figure 1 on the first input, and their per-layer figures over the data set.
    p << planned(
        QStringLiteral("an1"), QStringLiteral("An et al. Figure 1: systematic outliers of one input"),
        QStringLiteral("|h| of %1's output, the 16 x_down channels with the largest |x| and their W_down "
                       "columns, and the head-mean attention, on %2; heavy tokens by their code's rule.")
            .arg(layerText(lb), inputLabel(0)),
        [this] { return viewOf<SystematicView>(buildSystematic(*input(0), lb)); });
    const QString titleAn =
        QStringLiteral("An et al. Figures 3-6 and Table 1: systematic outliers over the data set");
    if (!stats || !stats->systematic)
        p << unavailable(QStringLiteral("an3"), titleAn,
                         stats ? QStringLiteral("the statistics file has no group `systematic`")
                               : statsReason);
    else
        p << planned(
            QStringLiteral("an3"), titleAn,
            QStringLiteral(
                "Per layer over %1 inputs: top and median |h| and |x_down|, the W_down column ratios, "
                "received attention; heavy tokens and outlier keys by category; heads (Table 1).")
                .arg(stats->samples),
            [this] {
                const SnapshotPtr s = input(0);
                return viewOf<SystematicView>(buildSystematic(*stats, statsPath, lb, &s->systematic));
            });
    // The model's own training, when it sits in a run folder of `outlierlens train` (final/ or a checkpoint).
    const QString run = runFolderOf(m.dir);
    const QString titleTraining = QStringLiteral(
        "Training curves: loss, and per layer max inf norm, kurtosis and first-token attention");
    if (run.isEmpty())
        p << unavailable(
            QStringLiteral("training"), titleTraining,
            QStringLiteral("needs a model in the run folder of `outlierlens train` (its metrics.jsonl)"));
    else
        p << planned(
            QStringLiteral("training"), titleTraining,
            QStringLiteral("The run %1 as the Jobs page draws it: training loss and the evaluation metric, "
                           "and per layer on the trainer's probe batch the max inf norm and kurtosis of "
                           "%2 and the first-token attention of the layer's most sinking head.")
                .arg(QDir::toNativeSeparators(run), tensor),
            [run] {
                auto view = std::make_unique<TrainingCharts>();
                view->setCurves(readTrainingCurves(run));
                return std::unique_ptr<QWidget>(std::move(view));
            });
    // Where the app shows the rest (those above say it where they are made).
    for (Planned& f : p) {
        const QString& id = f.outcome.id;
        if (id == QLatin1String("2"))
            f = shownIn(f, QStringLiteral("Head"), headLayer, head, 0);
        else if (id == QLatin1String("3") || id.startsWith(QLatin1Char('9')))
            f = shownIn(f, QStringLiteral("Image"), lb, head,
                        id == QLatin1String("3") ? 0 : id.back().unicode() - 'a' + 1);
        else if (id == QLatin1String("6") || id == QLatin1String("7"))
            f = shownIn(f, QStringLiteral("Sweeps"), -1, -1, -1);
        else if (id == QLatin1String("an1"))
            f = shownIn(f, QStringLiteral("Systematic outliers"), lb, -1, 0);
        else if (id == QLatin1String("an3"))
            f = shownIn(f, QStringLiteral("Systematic outliers"), lb, -1, -1, true);
        else if (id == QLatin1String("training"))
            f = shownIn(f, QStringLiteral("Jobs"), -1, -1, -1);
    }
    return p;
}

} // namespace

QStringList figureNumbers()
{
    return {
        QStringLiteral("1"),   QStringLiteral("2"),   QStringLiteral("3"),        QStringLiteral("4"),
        QStringLiteral("5"),   QStringLiteral("6"),   QStringLiteral("7"),        QStringLiteral("9"),
        QStringLiteral("10"),  QStringLiteral("11"),  QStringLiteral("12"),       QStringLiteral("13"),
        QStringLiteral("14"),  QStringLiteral("15"),  QStringLiteral("16"),       QStringLiteral("17"),
        QStringLiteral("an1"), QStringLiteral("an3"), QStringLiteral("training"), QStringLiteral("table")};
}

FigureSetResult renderFigureSet(const FigureSetOptions& o, const std::atomic<bool>& cancel,
                                const std::function<void(const QString&, int, int)>& progress)
{
    QElapsedTimer timer;
    timer.start();
    for (const QString& n : o.only)
        if (!figureNumbers().contains(n))
            throw Error("--only: no figure '" + n.toStdString() +
                        "' (figures: " + figureNumbers().join(QLatin1Char(',')).toStdString() + ")");
    // The models and inputs first: a missing --compare model or bad --data leaves no empty --out behind.
    progress(QStringLiteral("loading"), 0, 1);
    FigureModel main(o.modelDir, o.rule, o.precision);
    std::vector<std::unique_ptr<FigureModel>> compare;
    for (const QString& dir : o.compare)
        compare.push_back(std::make_unique<FigureModel>(dir, o.rule, o.precision));
    const ModelInfo& m = main.info();
    const QVector<FigureInput> inputs = figureInputs(m, o.data, 5);
    if (inputs.isEmpty()) throw Error("no inputs to draw: the data has no pairs, lines or images");

    if (!QDir().mkpath(o.outDir)) throw Error(o.outDir.toStdString() + ": cannot create the folder");
    // index.html comes last: while it is missing, the folder does not hold a complete set.
    for (const char* name : {"index.html", "index.json"})
        QFile::remove(QDir(o.outDir).filePath(QLatin1String(name)));

    FigureSetResult result;
    std::optional<StatisticsFile> stats;
    QString statsReason;
    QString dataText = QStringLiteral("generated examples of the synthetic task");
    // Figures 1, an3 and the table are the statistics; 3 and 9 add them. Others need no pass over the data.
    const bool wantStatistics =
        o.only.isEmpty() || std::any_of(o.only.begin(), o.only.end(), [](const QString& n) {
            return QStringList{QStringLiteral("1"), QStringLiteral("3"), QStringLiteral("9"),
                               QStringLiteral("an3"), QStringLiteral("table")}
                .contains(n);
        });
    if (m.synthetic) {
        statsReason = QStringLiteral(
            "the model was trained on generated sequences: there is no data set to count over");
    } else if (!wantStatistics) {
        statsReason = QStringLiteral("not asked for (--only)");
        dataText = o.data.isEmpty() ? QStringLiteral("the first inputs of the model's family") : o.data;
    } else {
        const QString data =
            o.data.isEmpty()
                ? ModelCatalog::statisticsData(m, QString::fromStdString(sampleDataDir() + "/images"))
                : o.data;
        dataText = data;
        const QString dir = QDir(o.outDir).filePath(QStringLiteral("statistics"));
        // The stage starts now; its total comes with the first batch.
        progress(QStringLiteral("statistics"), 0, 0);
        for (int attempt = 0; attempt < 2 && !stats; ++attempt) {
            const FigureStatistics f =
                figureStatistics(m, data, o.rule, o.precision, dir, cancel, [&](qint64 done, qint64 total) {
                    progress(QStringLiteral("statistics"), int(done), int(total));
                });
            try {
                stats = readStatisticsFile(f.path.toStdString());
                result.statisticsFile = f.path;
                result.statisticsReused = f.reused;
            } catch (const Error&) {
                if (!f.reused) throw;
                QFile::remove(f.path); // an unreadable earlier file: compute it again
            }
        }
    }

    Planner planner(o, main, compare, inputs, stats, result.statisticsFile, statsReason);
    QVector<Planned> plan = planner.plan();
    Planned table{layerTableOutcome(stats ? &*stats : nullptr), {}}; // drawn by the index writer
    if (!stats) table.outcome.reason = statsReason;
    plan << table;
    if (!o.only.isEmpty())
        plan.erase(std::remove_if(plan.begin(), plan.end(),
                                  [&](const Planned& f) { return !o.only.contains(f.outcome.number); }),
                   plan.end());

    FigureIndexWriter index(o.outDir, m, QString::fromStdString(o.rule.shortText()), dataText,
                            QString::fromStdString(toString(o.precision)));
    for (int i = 0; i < plan.size(); ++i) {
        if (cancel) throw Cancelled();
        FigureOutcome& f = plan[i].outcome;
        progress(QStringLiteral("figures"), i, plan.size());
        if (f.id == QLatin1String("table") && f.reason.isEmpty()) {
            index.drawTable(*stats, f);
        } else if (plan[i].make) {
            std::unique_ptr<QWidget> widget;
            try {
                widget = plan[i].make();
            } catch (const Error& e) {
                f.reason = QString::fromStdString(e.what());
            }
            if (widget) index.draw(*dynamic_cast<const Figure*>(widget.get()), f, o.formats, o.dpi);
        }
        index.add(f);
        result.figures << f;
    }
    result.inputs = inputs;
    index.finish(result.statisticsFile, result.statisticsReused, inputs);
    progress(QStringLiteral("figures"), plan.size(), plan.size());
    result.seconds = double(timer.elapsed()) / 1000.0;
    return result;
}

} // namespace outlierlens
