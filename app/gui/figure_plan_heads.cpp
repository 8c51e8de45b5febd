#include "figure_plan.h"

// Figures 2, 10-13, 16 and 17 of the plan: which heads, layers and inputs (figure_selection: head =
// dim // d_head), drawn as labelled sub-figures.

#include "figure_selection.h"

#include "head_grid.h"
#include "head_view.h"
#include "image_grid.h"
#include "image_view.h"

#include <algorithm>
#include <tuple>

namespace outlierlens::figure_plan {

Planned Planner::headGrid(const QString& id, const QString& title, const QString& caption,
                          const QVector<HeadCell>& cells, int columns)
{
    Planned p = planned(id, title, caption, [this, cells, columns] {
        QVector<HeadViewData> heads;
        QStringList labels, inputs;
        for (int i = 0; i < cells.size(); ++i) {
            const HeadCell& c = cells[i];
            heads << buildHeadView(*input(c.input), c.layer, c.head);
            labels << QStringLiteral("(%1) layer %2, head %3 · %4")
                          .arg(QChar(QLatin1Char('a' + i)))
                          .arg(c.layer + 1)
                          .arg(c.head + 1)
                          .arg(numbered(c.input));
            inputs << numbered(c.input);
        }
        auto grid = std::make_unique<HeadGrid>();
        grid->setHeads(heads);
        grid->setSubfigures(labels, inputs, columns);
        return std::unique_ptr<QWidget>(std::move(grid));
    });
    if (cells.isEmpty()) return p;
    p = shownIn(p, QStringLiteral("Head"), cells.first().layer, cells.first().head, cells.first().input);
    for (const HeadCell& c : cells) {
        if (!p.outcome.layers.contains(c.layer)) p.outcome.layers << c.layer;
        if (!p.outcome.heads.contains(c.head)) p.outcome.heads << c.head;
        const int index = std::min<int>(c.input, in.size() - 1);
        if (!p.outcome.inputs.contains(index)) p.outcome.inputs << index;
    }
    return p;
}

Planned Planner::imageGrid(const QString& id, const QString& title, int layer)
{
    const int count = std::min<int>(8, in.size());
    Planned p = planned(
        id, title,
        QStringLiteral("Images #1-#%1 of the data, each as Figure 3: the image with the outlier patches of "
                       "%2's block output (values over %3), and head %4 of %5: cumulative attention per "
                       "patch, attention probabilities and mean |V| of patches with and without outliers. "
                       "Chosen: %6.")
            .arg(count)
            .arg(layerText(layer), QString::fromStdString(o.rule.shortText()))
            .arg(head + 1)
            .arg(layerText(layer + 1), choiceNote),
        [this, layer, count] {
            QVector<ImageViewData> images;
            QStringList labels;
            for (int i = 0; i < count; ++i) {
                images << buildImageView(*input(i), layer, head);
                labels << QStringLiteral("(%1) %2").arg(QChar(QLatin1Char('a' + i))).arg(numbered(i));
            }
            auto grid = std::make_unique<ImageGrid>();
            grid->setImages(images, labels);
            return std::unique_ptr<QWidget>(std::move(grid));
        });
    p = shownIn(p, QStringLiteral("Image"), layer, head, 0);
    p.outcome.layers = {layer, layer + 1};
    p.outcome.heads = {head};
    for (int i = 0; i < count; ++i)
        p.outcome.inputs << i;
    return p;
}

void Planner::chooseHeadFigures()
{
    sequences = inputsByNumber(paperSequenceNumbers(), int(in.size()));
    sequenceNote = sequences.size() == paperSequenceNumbers().size() &&
                           sequences.last() == paperSequenceNumbers().last() - 1
                       ? QStringLiteral("the paper's sequences #16, #21, #61 and #88 of the data")
                       : QStringLiteral("the first inputs (the data has fewer than the paper's #88)");
    gridLayers = {std::max(0, headLayer - 1)};
    if (headLayer != gridLayers.first()) gridLayers << headLayer;
    sweepLayers.clear();
    for (int l = 0; l < std::min(8, m.layers); ++l)
        sweepLayers << l;
    if (isBertBaseSized(m)) {
        outlierHead = 2, secondHead = 11, contrastHeads = {0, 6, 7, 9};
        headNote =
            QStringLiteral("head 3 ↔ hidden dimension 180 (dimensions 128-191), the paper's choice for a "
                           "model of its size");
        secondNote =
            QStringLiteral("head 12 ↔ hidden dimension 720 (dimensions 704-767), the paper's choice");
        contrastNote = QStringLiteral("heads 1, 7, 8 and 10, the paper's heads not tied to outliers");
        return;
    }
    // Outlier counts per hidden dimension of what the head layers read: the data set's, else the first
    // input's.
    QVector<double> perDim;
    QString source = QStringLiteral("over the data set");
    if (stats)
        for (const LayerStatisticsData& l : stats->layers)
            if (const auto t = l.tensors.find(tensor.toStdString()); l.layer == lb && t != l.tensors.end())
                for (std::int64_t c : t->second.outliersPerDim)
                    perDim << double(c);
    if (perDim.isEmpty()) {
        source = QStringLiteral("on %1").arg(numbered(0));
        for (int c : input(0)->outliersOf(tensor, lb).perDimension)
            perDim << double(c);
    }
    const OutlierHeads owners = headsOwningOutliers(perDim, m.headDim, m.heads, 4);
    const auto owns = [&](int h, int dim, double count) {
        return QStringLiteral("head %1 ↔ hidden dimension %2 (dimensions %3-%4 of %5 in %6 feed head %1: "
                              "dimension k, head k / %7 + 1), %8 outliers %9")
            .arg(h + 1)
            .arg(dim)
            .arg(h * m.headDim)
            .arg((h + 1) * m.headDim - 1)
            .arg(tensor, layerText(lb))
            .arg(m.headDim)
            .arg(qint64(count))
            .arg(source);
    };
    if (owners.first >= 0) {
        outlierHead = owners.first;
        headNote = owns(owners.first, owners.firstDim, owners.firstCount) +
                   QStringLiteral(": the dimension with the most outliers");
    } else {
        outlierHead = head;
        headNote =
            QStringLiteral("head %1, the planner's head: no hidden dimension of %2 in %3 has outliers %4")
                .arg(head + 1)
                .arg(tensor, layerText(lb), source);
    }
    secondHead = owners.second;
    if (owners.second >= 0)
        secondNote = owns(owners.second, owners.secondDim, owners.secondCount) +
                     QStringLiteral(": the most outlying dimension of another head");
    else
        secondNote =
            QStringLiteral("no head other than head %1 owns a hidden dimension of %2 in %3 with outliers %4")
                .arg(outlierHead + 1)
                .arg(tensor, layerText(lb), source);
    contrastHeads = owners.contrast;
    QStringList names;
    for (int h : contrastHeads)
        names << QString::number(h + 1);
    contrastNote = QStringLiteral("heads %1, which own %2 of the outliers of %3 in %4 %5")
                       .arg(names.join(QStringLiteral(", ")),
                            owners.contrastOwnsNone ? QStringLiteral("none") : QStringLiteral("the fewest"),
                            tensor, layerText(lb), source);
}

QVector<Planned> Planner::headFigures()
{
    QVector<Planned> p;
    const QStringList ids{QStringLiteral("10"), QStringLiteral("11"), QStringLiteral("12"),
                          QStringLiteral("13")};
    if (m.takesImages()) {
        for (const QString& id : ids)
            p << unavailable(id, QStringLiteral("Figure %1: attention heads of a text model").arg(id),
                             QStringLiteral("drawn for text models; an image model's are Figures 16 and 17"));
        return p;
    }
    chooseHeadFigures();
    QStringList layerNames;
    for (int l : gridLayers)
        layerNames << QString::number(l + 1);
    const QString layers = QStringLiteral("layer%1 %2")
                               .arg(gridLayers.size() > 1 ? QStringLiteral("s") : QString(),
                                    layerNames.join(QStringLiteral(" and ")));
    const QString panels =
        QStringLiteral("attention probabilities, values V and their product P·V (and the gate "
                       "where the model has one)");
    // Figures 10 and 11: a head that owns outlier dimensions, in both layers on four sequences.
    for (const auto& [id, h, note] : {std::tuple<QString, int, QString>{ids[0], outlierHead, headNote},
                                      {ids[1], secondHead, secondNote}}) {
        const QString title =
            QStringLiteral("Figure %1: head %2 and its outlier dimension, %3 on four inputs")
                .arg(id)
                .arg(h + 1)
                .arg(layers);
        if (h < 0) {
            p << unavailable(
                id, QStringLiteral("Figure %1: a second head that owns outlier dimensions").arg(id), note);
            continue;
        }
        QVector<HeadCell> cells;
        for (int s : sequences)
            for (int l : gridLayers)
                cells << HeadCell{l, h, s};
        p << headGrid(id, title,
                      QStringLiteral("%1 of %2 on %3 (%4). Chosen: %5. Layers: %6.")
                          .arg(panels, layers, inputsText(sequences), sequenceNote, note, choiceNote),
                      cells, int(gridLayers.size()));
    }
    // Figure 12: heads that own none of the outliers, on the first sequence.
    {
        const int s = sequences.value(0, 0);
        QVector<HeadCell> cells;
        for (int h : contrastHeads)
            for (int l : gridLayers)
                cells << HeadCell{l, h, s};
        const QString title = QStringLiteral("Figure 12: heads not tied to the outliers, %1").arg(layers);
        p << (cells.isEmpty() ? unavailable(ids[2], title,
                                            QStringLiteral("every one of the model's %1 heads owns outlier "
                                                           "dimensions (Figures 10 and 11)")
                                                .arg(m.heads))
                              : headGrid(ids[2], title,
                                         QStringLiteral("%1 of %2 on %3. Chosen: %4.")
                                             .arg(panels, layers, numbered(s), contrastNote),
                                         cells, int(gridLayers.size())));
    }
    // Figure 13: Figure 10's head through the first layers (the paper: layers 1-8).
    {
        const int s = sequences.value(0, 0);
        QVector<HeadCell> cells;
        for (int l : sweepLayers)
            cells << HeadCell{l, outlierHead, s};
        p << headGrid(
            ids[3],
            QStringLiteral("Figure 13: head %1 in layers 1-%2").arg(outlierHead + 1).arg(sweepLayers.size()),
            QStringLiteral("%1 of head %2 in layers 1-%3 on %4: where in depth the head starts to do "
                           "nothing. Chosen: %5.")
                .arg(panels)
                .arg(outlierHead + 1)
                .arg(sweepLayers.size())
                .arg(numbered(s), headNote),
            cells, 0);
    }
    return p;
}

} // namespace outlierlens::figure_plan
