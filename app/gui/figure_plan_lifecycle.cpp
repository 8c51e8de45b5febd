#include "figure_plan.h"

// An et al. 2025's Figures 7-9 in the plan: a massive activation's emergence, spread and disappearance
// (lifecycle_view.h chooses the layers and builds the panels).

#include "lifecycle_view.h"
#include "panel_grid.h"

#include "common/error.h"

namespace outlierlens::figure_plan {

QVector<Planned> Planner::lifecycleFigures()
{
    const QString title7 = QStringLiteral("An et al. Figure 7: where a massive activation emerges (the FFN)");
    const QString title8 =
        QStringLiteral("An et al. Figure 8: how it spreads (the attention of a later layer that reads it)");
    const QString title9 = QStringLiteral("An et al. Figure 9: where it disappears (the FFN)");
    if (!m.isDecoder()) {
        const QString why = QStringLiteral("An et al.'s lifecycle figures are of decoder LLMs; this model is "
                                           "not a decoder (an1 and an3 show its systematic outliers)");
        return {unavailable(QStringLiteral("an7"), title7, why),
                unavailable(QStringLiteral("an8"), title8, why),
                unavailable(QStringLiteral("an9"), title9, why)};
    }
    const LifecycleChoice c = chooseLifecycle(*input(0), headLayer, head);
    if (c.emergence < 0) {
        const QString why = QStringLiteral("no layer output to choose from");
        return {unavailable(QStringLiteral("an7"), title7, why),
                unavailable(QStringLiteral("an8"), title8, why),
                unavailable(QStringLiteral("an9"), title9, why)};
    }
    QVector<int> layers{c.emergence};
    if (c.spread >= 0) layers << c.spread;
    if (c.disappearance >= 0) layers << c.disappearance;
    const auto lifecycleLayer = [this, layers](int layer) {
        const SnapshotPtr s = main.inspectLifecycle(in.value(0), layers);
        for (const LifecycleLayer& x : s->lifecycle)
            if (x.layer == layer) return std::make_pair(s, x);
        throw Error("the lifecycle of layer " + std::to_string(layer + 1) + " was not recorded");
    };
    const auto ffnFigure = [this, lifecycleLayer, c](const QString& id, const QString& title, int layer,
                                                     const QString& role, const QString& note) {
        Planned p = planned(
            id, title,
            QStringLiteral(
                "Layer %1's FFN on %2, %3: signed values, token x channel, in the order data flows "
                "(its norm's input and output, the gate, up and activation outputs the FFN has, "
                "x_down, the FFN's output, the layer output h). The token's row, its outlier channels in "
                "the emergence layer's output and x_down's largest channel at it are marked. Chosen: %4.")
                .arg(layer + 1)
                .arg(numbered(0), role, note),
            [lifecycleLayer, layer, c] {
                const auto [s, x] = lifecycleLayer(layer);
                auto grid = std::make_unique<PanelGrid>();
                grid->setPanels(buildFfnLifecycle(*s, x, c),
                                provenanceOf(*s, QStringLiteral("layer %1").arg(layer + 1)),
                                QStringLiteral("lifecycle-ffn-L%1").arg(layer + 1));
                return std::unique_ptr<QWidget>(std::move(grid));
            });
        p.outcome.layers = {layer};
        p.outcome.inputs = {0};
        return p;
    };
    QVector<Planned> p;
    p << ffnFigure(QStringLiteral("an7"), title7, c.emergence,
                   QStringLiteral("where the massive activation emerges"), c.note);
    if (c.spread < 0) {
        p << unavailable(QStringLiteral("an8"), title8, c.noSpread);
    } else {
        Planned f = planned(
            QStringLiteral("an8"), title8,
            QStringLiteral(
                "Layer %1, head %2 on %3: the block's input and its norm's output (token x channel), "
                "the head's q and k before the rotary embedding and its v (token x dimension), the "
                "scores before the mask and the probabilities. The token's row and key column, its "
                "outlier channels and the two key dimensions with the largest |k| at it are marked. "
                "Chosen: %4.")
                .arg(c.spread + 1)
                .arg(c.head + 1)
                .arg(numbered(0), c.note),
            [lifecycleLayer, c] {
                const auto [s, x] = lifecycleLayer(c.spread);
                auto grid = std::make_unique<PanelGrid>();
                grid->setPanels(
                    buildAttentionLifecycle(*s, x, c),
                    provenanceOf(*s, QStringLiteral("layer %1, head %2").arg(c.spread + 1).arg(c.head + 1)),
                    QStringLiteral("lifecycle-attention-L%1-H%2").arg(c.spread + 1).arg(c.head + 1));
                return std::unique_ptr<QWidget>(std::move(grid));
            });
        f.outcome.layers = {c.spread};
        f.outcome.heads = {c.head};
        f.outcome.inputs = {0};
        p << f;
    }
    if (c.disappearance < 0)
        p << unavailable(QStringLiteral("an9"), title9, c.noEnd);
    else
        p << ffnFigure(QStringLiteral("an9"), title9, c.disappearance,
                       QStringLiteral("where the massive activation disappears"), c.note);
    return p;
}

} // namespace outlierlens::figure_plan
