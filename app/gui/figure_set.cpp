#include "figure_set.h"

#include "figure_plan.h"

#include "figure_index.h"
#include "figure_inputs.h"
#include "figure_selection.h"
#include "model_catalog.h"
#include "paper_tables.h"
#include "sweeps_page.h"
#include "view_builders.h"

#include "compare_view.h"
#include "dataset_outlier_figure.h"
#include "head_grid.h"
#include "head_view.h"
#include "image_grid.h"
#include "image_view.h"
#include "job_manager.h"
#include "outlier_dashboard.h"
#include "sweep_view.h"
#include "systematic_view.h"
#include "teaching_view.h"
#include "token_norm_view.h"
#include "training_charts.h"

#include "analysis/high_norm.h"
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

namespace outlierlens::figure_plan {

void Planner::chooseLayersAndHeads()
{
    const int L = m.layers;
    std::optional<Showcase> showcase;
    if (m.isDecoder()) try {
            showcase = readShowcase(m.dir.toStdString());
        } catch (const Error&) {
        }
    if (isVitSmallSized(m)) {
        la = 8, lb = 9, headLayer = 10, head = 0;
        choiceNote = QStringLiteral("the paper's outliers of layer 10 and head 1 of layer 11 (a model of the "
                                    "paper's ViT-S/16 size: 12 layers, 6 heads, hidden 384)");
        return;
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

Planned Planner::darcet()
{
    const QString id = QStringLiteral("darcet");
    const QString title =
        QStringLiteral("Darcet et al. Figures 2-3: token norms, high-norm tokens and [CLS] attention maps");
    if (!m.takesImages()) return unavailable(id, title, QStringLiteral("needs an image model"));
    const int last = m.layers - 1;
    std::vector<FigureModel*> models{&main};
    for (const auto& c : compare)
        if (c->info().takesImages()) models.push_back(c.get());
    return shownIn(
        planned(id, title,
                QStringLiteral("The L2 norm of every token of the last layer's output (%1) on %2, tokens "
                               "with %3 marked, their histogram, and the class token's attention in the "
                               "last layer per head; one row per model%4.")
                    .arg(layerText(last), inputLabel(0), QString::fromStdString(highNormRuleText()),
                         stats ? QStringLiteral(", with the data set's norm histogram beside the first")
                               : QString()),
                [this, models] {
                    QVector<TokenNormData> rows;
                    for (FigureModel* f : models) {
                        const SnapshotPtr s = f->inspect(in.value(0));
                        rows << buildTokenNorms(*s, s->L() - 1);
                        if (f == &main && stats) addDatasetNorms(rows.back(), *stats, s->L() - 1);
                    }
                    auto view = std::make_unique<TokenNormView>();
                    view->setRows(rows);
                    return std::unique_ptr<QWidget>(std::move(view));
                }),
        QStringLiteral("Token norms"), last, -1, 0);
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
            QStringLiteral(
                "Outlier counts (values over %1) per hidden dimension (green; the dimensions with "
                "outliers, most first) and per token (blue; the tokens with the most) of %2 in %3, "
                "over %4 inputs of %5; the per-layer max inf norm and kurtosis below. Layers: %6.")
                .arg(rule, tensor, layerText(layer))
                .arg(stats->samples)
                .arg(QString::fromStdString(stats->provenance.count("data") ? stats->provenance.at("data")
                                                                            : std::string()),
                     choiceNote),
            [this, layer] {
                auto view = std::make_unique<OutlierDashboard>();
                view->setPaperLayout(true); // dimensions by count, vertical token bars (the paper's Figure 1)
                view->setData(buildDashboard(*stats, statsPath, layer, tensor, m.headDim));
                return std::unique_ptr<QWidget>(std::move(view));
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
        const int second = std::min<int>(4, in.size() - 1); // the paper's (b) and (c): data sequence #5
        p << headGrid(
            QStringLiteral("2"), title2,
            QStringLiteral("Head %1: (a) %2 on %3, (b) %2 on %4, (c) %5 on %4. Chosen: %6.")
                .arg(head + 1)
                .arg(layerText(headLayer), numbered(0), numbered(second), layerText(other), choiceNote),
            {HeadCell{headLayer, head, 0}, HeadCell{headLayer, head, second}, HeadCell{other, head, second}},
            1);
    }
    // Figure 3: an image model's outlier patches and the attention of a head that reads them.
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
    // Figure 8: listed, not drawn (docs/figures.md says why).
    p << unavailable(QStringLiteral("8"), QStringLiteral("Figure 8"),
                     QStringLiteral("not drawn by this version: its content could not be checked against the "
                                    "paper when the figures were written, and a figure under the paper's "
                                    "number must be the paper's"));
    // Figure 9: an image model's outliers over the data set, per layer, hidden dimension and patch.
    {
        const QString title9 =
            QStringLiteral("Figure 9: outliers over the data set per layer, hidden dimension and "
                           "patch position");
        if (!vit)
            p << unavailable(
                QStringLiteral("9"), title9,
                QStringLiteral("needs an image model and images (the paper's Figure 9 is a ViT's)"));
        else if (!stats)
            p << unavailable(QStringLiteral("9"), title9, statsReason);
        else
            p << shownIn(
                planned(QStringLiteral("9"), title9,
                        QStringLiteral(
                            "Over %1 images of %2: (a) the mean of each image's max |x| of each layer's "
                            "output (%3; layers 1-based), (b) the outlier count (values over %4) of each "
                            "hidden dimension (0-based) of %5's output, (c) the outlier count of each "
                            "patch position of %5's output. Layer: %6.")
                            .arg(stats->samples)
                            .arg(QString::fromStdString(stats->provenance.count("data")
                                                            ? stats->provenance.at("data")
                                                            : std::string()),
                                 tensor, rule, layerText(lb), choiceNote),
                        [this] {
                            return viewOf<DatasetOutlierFigure>(
                                buildDatasetOutliers(*stats, statsPath, lb, tensor, m.headDim));
                        }),
                QStringLiteral("Outliers"), lb, -1, -1, true);
    }
    // Figures 10-13: heads chosen by the outlier dimensions they own, as the paper chooses them.
    p << headFigures();
    p << comparison(QStringLiteral("14"), true) << comparison(QStringLiteral("15"), false);
    // Figures 16 and 17: Figure 3 for eight images, outliers of lb and of the layer after it.
    for (const auto& [id, layer] :
         {std::pair<QString, int>{QStringLiteral("16"), lb}, {QStringLiteral("17"), lb + 1}}) {
        const QString title = QStringLiteral("Figure %1: outliers of %2 and head %3 of %4, eight images")
                                  .arg(id, layerText(layer))
                                  .arg(head + 1)
                                  .arg(layerText(layer + 1));
        if (!vit)
            p << unavailable(id, title, QStringLiteral("needs an image model"));
        else if (layer + 1 > m.layers - 1)
            p << unavailable(
                id, title,
                QStringLiteral("%1 is the model's last layer: no layer after it reads its outliers")
                    .arg(layerText(layer)));
        else
            p << imageGrid(id, title, layer);
    }
    // Darcet et al. 2024: token norms and high-norm tokens of the model's output, with --compare's image
    // models as rows (a model with registers beside one without).
    p << darcet();
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
    // Their Figures 7-9: a massive activation's lifecycle on input #1; 10 and 11: the model beside its
    // --compare variants.
    p << lifecycleFigures() << variantFigures();
    // An et al.'s figures this command does not draw, listed with where they are or why not (issue #39).
    p << unavailable(
             QStringLiteral("an2"), QStringLiteral("An et al. Figure 2: their schematic"),
             QStringLiteral("a drawing of the mechanism, not data; the Teaching page draws this model's "
                            "own attention block (Figure 4)"))
      << unavailable(QStringLiteral("an12"),
                     QStringLiteral("An et al. Figure 12: training loss of the variants"),
                     QStringLiteral("needs one training run per variant: the `training` figure draws a run's "
                                    "curves, the Jobs page several runs side by side"))
      << unavailable(
             QStringLiteral("an13"),
             QStringLiteral("An et al. Figures 13-22: Figure 1 on other models and chat models"),
             QStringLiteral("their Figure 1 on other checkpoints: `an1` draws it for whichever model is "
                            "given (run `figures` once per model)"))
      << unavailable(
             QStringLiteral("an23"),
             QStringLiteral("An et al. Figures 23 and 24: sigmoid attention and the scaling factor"),
             QStringLiteral("they are Figures 10 and 11 of models trained with those variants "
                            "(`train --softmax sigmoid`, `--context-scale`): give them with --compare "
                            "and an10 and an11 draw them beside the model"))
      << unavailable(QStringLiteral("an-table3"),
                     QStringLiteral("An et al. Table 3: perplexity at FP16, 8-bit weights and 50% sparsity"),
                     QStringLiteral("`quantize --weights-only` gives the 8-bit column; magnitude pruning is "
                                    "not implemented"))
      << unavailable(
             QStringLiteral("an-table1-dims"),
             QStringLiteral("An et al. Table 1: the consistency of W_down with x_down, W_down with h, "
                            "and x_down with h"),
             QStringLiteral("their paper describes no method for these feature-dimension rows and "
                            "their code has none; the h-with-attention row is in an3 (Table 1's heads)"));
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
        if (id == QLatin1String("3"))
            f = shownIn(f, QStringLiteral("Image"), lb, head, 0);
        else if (id == QLatin1String("6") || id == QLatin1String("7"))
            f = shownIn(f, QStringLiteral("Sweeps"), -1, -1, -1);
        else if (id == QLatin1String("an1"))
            f = shownIn(f, QStringLiteral("Systematic outliers"), lb, -1, 0);
        else if ((id == QLatin1String("an7") || id == QLatin1String("an9")) && !f.outcome.layers.isEmpty())
            f = shownIn(f, QStringLiteral("Systematic outliers"), f.outcome.layers.first(), -1, 0);
        else if (id == QLatin1String("an8") && !f.outcome.layers.isEmpty() && !f.outcome.heads.isEmpty())
            f = shownIn(f, QStringLiteral("Head"), f.outcome.layers.first(), f.outcome.heads.first(), 0);
        else if (id == QLatin1String("an3"))
            f = shownIn(f, QStringLiteral("Systematic outliers"), lb, -1, -1, true);
        else if (id == QLatin1String("training"))
            f = shownIn(f, QStringLiteral("Jobs"), -1, -1, -1);
    }
    return p;
}

} // namespace outlierlens::figure_plan

namespace outlierlens {

using figure_plan::kFigureInputs;
using figure_plan::Planned;
using figure_plan::Planner;

QStringList figureNumbers()
{
    // The papers' order; An et al.'s after Bondarenko et al.'s, the tables last.
    return QStringLiteral("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,an1,an3,darcet,an7,an8,an9,an10,an11,"
                          "an-table1-dims,an2,an12,an13,an23,an-table3,training,table,table1,table2")
        .split(QLatin1Char(','));
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
    // A Fashion-MNIST model without images of its own is drawn on Fashion-MNIST (figure_inputs.h).
    const QString fashionData = o.data.isEmpty() ? fashionMnistData(m, o.outDir) : QString();
    const QVector<FigureInput> inputs =
        figureInputs(m, fashionData.isEmpty() ? o.data : fashionData, kFigureInputs);
    if (inputs.isEmpty()) throw Error("no inputs to draw: the data has no pairs, lines or images");

    if (!QDir().mkpath(o.outDir)) throw Error(o.outDir.toStdString() + ": cannot create the folder");
    // index.html comes last: while it is missing, the folder does not hold a complete set.
    for (const char* name : {"index.html", "index.json"})
        QFile::remove(QDir(o.outDir).filePath(QLatin1String(name)));

    FigureSetResult result;
    std::optional<StatisticsFile> stats;
    std::vector<ComparedStatistics> compared; // the --compare models' (Table 2, An et al.'s Figure 11)
    QString statsReason;
    QString dataText = QStringLiteral("generated examples of the synthetic task");
    // Figures 1, an3 and the table are the statistics; 3 and 9 add them. Others need no pass over the data.
    const bool wantStatistics =
        o.only.isEmpty() || std::any_of(o.only.begin(), o.only.end(), [](const QString& n) {
            return QStringList{QStringLiteral("1"),     QStringLiteral("3"),    QStringLiteral("9"),
                               QStringLiteral("an3"),   QStringLiteral("an11"), QStringLiteral("table"),
                               QStringLiteral("table2")}
                .contains(n);
        });
    if (m.synthetic && ModelCatalog::sampleInput(m.dir, 0).isEmpty()) {
        statsReason = QStringLiteral(
            "the model was trained on generated sequences: there is no data set to count over");
    } else if (!wantStatistics) {
        statsReason = QStringLiteral("not asked for (--only)");
        dataText = o.data.isEmpty() ? QStringLiteral("the first inputs of the model's family") : o.data;
    } else {
        const QString data =
            !o.data.isEmpty() ? o.data
            : !fashionData.isEmpty()
                ? fashionData
                : ModelCatalog::statisticsData(m, QString::fromStdString(sampleDataDir() + "/images"));
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
        // The --compare models' statistics over the same data, once, for Table 2 and An et al.'s Figure 11.
        const bool wantCompared = o.only.isEmpty() || o.only.contains(QStringLiteral("table2")) ||
                                  o.only.contains(QStringLiteral("an11"));
        if (stats && wantCompared && !compare.empty()) {
            QVector<ModelInfo> models;
            for (const auto& c : compare)
                models << c->info();
            compared = comparedStatistics(models, data, o.rule, o.precision, dir, cancel,
                                          [&](qint64 done, qint64 total) {
                                              progress(QStringLiteral("statistics"), int(done), int(total));
                                          });
        }
    }

    Planner planner(o, main, compare, inputs, stats, result.statisticsFile, statsReason);
    planner.setComparedStatistics(compared);
    QVector<Planned> plan = planner.plan();
    Planned table{layerTableOutcome(stats ? &*stats : nullptr), {}}; // drawn by the index writer
    if (!stats) table.outcome.reason = statsReason;
    plan << table;
    // The paper's Tables 1 (a sweep) and 2 (the model and --compare side by side): paper_tables.h.
    QVector<ModelInfo> tableModels{m};
    for (const auto& c : compare)
        tableModels << c->info();
    PaperTables paperTables(o, tableModels, stats ? &*stats : nullptr, statsReason, compared, dataText,
                            planner.figureLayer());
    plan << Planned{paperTables.sweepOutcome(), {}} << Planned{paperTables.variantOutcome(), {}};
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
        } else if (PaperTables::isPaperTable(f.id) && f.reason.isEmpty()) {
            paperTables.draw(index, f, o.formats, o.dpi, cancel, progress);
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
