#include "figure_plan.h"

// An et al. 2025's Figures 10 and 11 in the plan: the model and its --compare variants, trained the same
// way with different attention, side by side (their GPT-2s with five attention variants).

#include "panel_grid.h"
#include "paper_tables.h"

namespace outlierlens::figure_plan {
namespace {

/// Their GPT-2 (12 layers, 12 heads, hidden 768): Figure 10 shows block index 5, layer 6 1-based.
bool isGpt2SmallSized(const ModelInfo& m)
{
    return m.isDecoder() && m.layers == 12 && m.heads == 12 && m.hidden == 768;
}

} // namespace

QVector<Planned> Planner::variantFigures()
{
    const QString title10 = QStringLiteral("An et al. Figure 10: |h| of one layer in each attention variant");
    const QString title11 =
        QStringLiteral("An et al. Figure 11: the largest and median |h| per layer in each attention variant");
    std::vector<FigureModel*> models{&main};
    for (const auto& c : compare)
        models.push_back(c.get());
    QString reason;
    if (!m.isDecoder())
        reason = QStringLiteral("An et al. compare decoders trained with different attention; this model is "
                                "not a decoder");
    else if (compare.empty())
        reason =
            QStringLiteral("needs the other variants, trained as this model was: give their folders with "
                           "--compare (for runs of `outlierlens train`, each run's final/)");
    for (const auto& c : compare) {
        const ModelInfo& ci = c->info();
        if (reason.isEmpty() && (!ci.isDecoder() || ci.layers != m.layers || ci.hidden != m.hidden))
            reason =
                QStringLiteral("--compare %1 is not a decoder of this model's shape (%2 layers, hidden %3)")
                    .arg(ci.name)
                    .arg(m.layers)
                    .arg(m.hidden);
    }
    if (!reason.isEmpty())
        return {unavailable(QStringLiteral("an10"), title10, reason),
                unavailable(QStringLiteral("an11"), title11, reason)};

    const int layer = isGpt2SmallSized(m) ? 5 : lb;
    const QString layerNote = isGpt2SmallSized(m)
                                  ? QStringLiteral("their layer for a GPT-2 of this size")
                                  : QStringLiteral("the one the other figures show (%1)").arg(choiceNote);
    QStringList labels, names;
    for (std::size_t i = 0; i < models.size(); ++i) {
        const ModelInfo& mi = models[i]->info();
        labels << QStringLiteral("(%1) %2: %3")
                      .arg(QChar(QLatin1Char('a' + int(i))))
                      .arg(mi.name, attentionOf(mi));
        names << mi.name;
    }
    const Provenance provenance = provenanceOf(*input(0), QStringLiteral("models %1").arg(names.join(", ")));

    QVector<Planned> p;
    Planned f10 = planned(
        QStringLiteral("an10"), title10,
        QStringLiteral(
            "|h| (token x channel) of %1's output on %2, one panel per model: %3. One colour scale "
            "for all; heavy tokens (An et al.'s rule) marked. The layer is %4.")
            .arg(layerText(layer), numbered(0), labels.join(QStringLiteral("; ")), layerNote),
        [this, models, labels, layer, provenance] {
            QVector<GridPanel> panels;
            for (std::size_t i = 0; i < models.size(); ++i) {
                const SystematicViewData d = buildSystematic(*models[i]->inspect(in.value(0)), layer);
                GridPanel panel;
                panel.label = labels[int(i)];
                panel.title = QStringLiteral("|h|: layer %1 output").arg(layer + 1);
                panel.matrix = d.hidden;
                panel.rows = d.heavyTokens;
                panels << panel;
            }
            auto grid = std::make_unique<PanelGrid>();
            grid->setPanels(panels, provenance, QStringLiteral("variants-h-L%1").arg(layer + 1), true);
            return std::unique_ptr<QWidget>(std::move(grid));
        });
    f10.outcome.layers = {layer};
    f10.outcome.inputs = {0};
    p << f10;

    QString missing = !stats ? statsReason : QString();
    for (std::size_t i = 0; missing.isEmpty() && i < compare.size(); ++i) {
        const ComparedStatistics* c = compared && i < compared->size() ? &(*compared)[i] : nullptr;
        if (!c || !c->stats || !c->stats->systematic)
            missing = QStringLiteral("no statistics of --compare %1 over the data%2")
                          .arg(compare[i]->info().name,
                               c && !c->note.isEmpty() ? QStringLiteral(": ") + c->note : QString());
    }
    if (missing.isEmpty() && !stats->systematic)
        missing = QStringLiteral("the statistics file has no group `systematic`");
    if (!missing.isEmpty()) {
        p << unavailable(QStringLiteral("an11"), title11, missing);
        return p;
    }
    Planned f11 = planned(
        QStringLiteral("an11"), title11,
        QStringLiteral("Per layer (1-based), the three largest |h| of the layer outputs and their median, "
                       "means over the %1 inputs of the data, one panel per model on one log scale: %2. The "
                       "band marks %3.")
            .arg(stats->samples)
            .arg(labels.join(QStringLiteral("; ")), layerText(layer)),
        [this, labels, layer, provenance] {
            QVector<GridPanel> panels;
            for (int i = 0; i < labels.size(); ++i) {
                const StatisticsFile& s = i == 0 ? *stats : *(*compared)[std::size_t(i - 1)].stats;
                const QString path = i == 0 ? statsPath : (*compared)[std::size_t(i - 1)].path;
                GridPanel panel;
                panel.label = labels[i];
                panel.series = buildSystematic(s, path, layer, nullptr).hiddenPerLayer;
                panels << panel;
            }
            auto grid = std::make_unique<PanelGrid>();
            Provenance dataProvenance = provenance;
            dataProvenance.input = QStringLiteral("%1 inputs of the data").arg(stats->samples);
            grid->setPanels(panels, dataProvenance, QStringLiteral("variants-per-layer"), false, layer);
            return std::unique_ptr<QWidget>(std::move(grid));
        });
    f11.outcome.layers = {layer};
    p << f11;
    return p;
}

} // namespace outlierlens::figure_plan
