#pragma once
// GUI thread. The plan of `outlierlens figures` (figure_set.cpp): which figure of the papers gets drawn,
// with which layers, heads and inputs. Private to figure_set.cpp and figure_plan_heads.cpp (Figures 2,
// 10-13, 16 and 17: the head and image grids).

#include "figure_inputs.h"
#include "figure_set.h"
#include "view_builders.h"

#include "analysis/statistics_file.h"

#include <QString>
#include <QVector>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

class QWidget;

namespace outlierlens::figure_plan {

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

inline QString layerText(int layer)
{
    return QStringLiteral("layer %1").arg(layer + 1);
}

/// The model at the paper's scale: Bondarenko et al.'s figures name its layers and heads.
inline bool isBertBaseSized(const ModelInfo& m)
{
    return m.takesPairs() && m.layers == 12 && m.heads == 12 && m.hidden == 768;
}

/// The paper's ViT-S/16 (12 layers, 6 heads, hidden 384): its Figures 9, 16 and 17 name layers 10-12.
inline bool isVitSmallSized(const ModelInfo& m)
{
    return m.takesImages() && m.layers == 12 && m.heads == 6 && m.hidden == 384;
}

/// Inputs the per-input figures may use: the paper's sequence #88 (Figures 10 and 11) is the last.
constexpr int kFigureInputs = 88;

/// One sub-figure of a head grid: a head of a layer on an input (0-based).
struct HeadCell
{
    int layer = 0, head = 0, input = 0;
};

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

    /// The --compare models' statistics over the model's data, in --compare order (An et al.'s Figure 11);
    /// empty when not computed. Kept by the caller. Before plan().
    void setComparedStatistics(const std::vector<ComparedStatistics>& statistics) { compared = &statistics; }
    QVector<Planned> plan();
    /// The larger of the two outlier layers the figures show (0-based): Table 2's second inf-norm column.
    int figureLayer() const { return lb; }

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
        p.outcome.number = // "1b" is Figure 1; "an1", "table" and "training" are their own
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
    Planned darcet();
    /// The paper's layout of Figures 2 and 10-13: the cells as labelled sub-figures, `columns` wide.
    Planned headGrid(const QString& id, const QString& title, const QString& caption,
                     const QVector<HeadCell>& cells, int columns);
    /// Figures 16 and 17: Figure 3's panels for the first eight images, outliers of `layer`.
    Planned imageGrid(const QString& id, const QString& title, int layer);
    /// "pair #16 of ...", or "#3 image x.png" where the label has no number.
    QString numbered(int index) const
    {
        const QString label = inputLabel(index);
        return label.contains(QLatin1Char('#'))
                   ? label
                   : QStringLiteral("#%1 %2").arg(std::min<int>(index, in.size() - 1) + 1).arg(label);
    }
    QString inputsText(const QVector<int>& indices) const
    {
        QStringList labels;
        for (int i : indices)
            labels << numbered(i);
        return labels.join(QStringLiteral(", "));
    }
    /// An et al.'s Figures 10 and 11: the model and its --compare variants side by side
    /// (figure_plan_variants.cpp).
    QVector<Planned> variantFigures();
    /// An et al.'s Figures 7-9: a massive activation's lifecycle on input #1 (figure_plan_lifecycle.cpp).
    QVector<Planned> lifecycleFigures();
    /// Figures 10-13's heads, layers and inputs (text models).
    void chooseHeadFigures();
    QVector<Planned> headFigures();

    const FigureSetOptions& o;
    FigureModel& main;
    std::vector<std::unique_ptr<FigureModel>>& compare;
    const QVector<FigureInput>& in;
    const std::optional<StatisticsFile>& stats;
    QString statsPath, statsReason;
    const std::vector<ComparedStatistics>* compared = nullptr;
    ModelInfo m;
    QString tensor;
    int la = 0, lb = 0;          ///< the two layers of `tensor` with the largest outliers (la <= lb)
    int headLayer = 0, head = 0; ///< the head shown (the no-op head that reads them)
    QString choiceNote;          ///< how they were chosen, for the captions
    // Figures 10-13 (chooseHeadFigures()).
    int outlierHead = 0, secondHead = -1; ///< heads of Figures 10 and 11 (-1: none owns outliers)
    QVector<int> contrastHeads;           ///< Figure 12
    QVector<int> gridLayers, sweepLayers; ///< Figures 10-12; Figure 13
    QVector<int> sequences;               ///< Figures 10 and 11; Figures 12 and 13 use the first
    QString headNote, secondNote, contrastNote, sequenceNote;
};

} // namespace outlierlens::figure_plan
