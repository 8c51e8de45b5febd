#pragma once
// GUI thread only.

#include "figure.h"
#include "view_data.h"

#include <QStringList>
#include <QVector>
#include <QWidget>

namespace outlierlens {

/// One trained model of An et al.'s variant comparison (their Figures 10 and 11): the model's |h| of
/// one layer on one input (Figure 10), or its largest and median |h| per layer over a data set (11).
struct VariantPanel
{
    QString label;            ///< "(a) backcopy-vanilla: vanilla"
    MatrixData hidden;        ///< |h| [T x d]; empty in Figure 11
    QVector<int> heavyTokens; ///< rows of `hidden` over An et al.'s rule
    LayerSeriesData perLayer; ///< top 1-3 and median |h|; empty in Figure 10
};

/// An et al. 2025's Figures 10 and 11 as they lay them out: one sub-figure per attention variant, side
/// by side (wrapped into rows beyond three), each under its label; Figure 10's heatmaps share one colour
/// scale (the largest |h| of all of them) so that the variants compare at a glance, Figure 11's charts
/// one log axis range. The figure fits an A4 landscape page (1120 x 620 px) under the index's caption.
class VariantGrid : public QWidget, public Figure
{
    Q_OBJECT
public:
    static constexpr int kMaxFigureWidth = 1120;
    static constexpr int kMaxFigureHeight = 620;

    explicit VariantGrid(QWidget* parent = nullptr);

    /// `layer` (0-based): the layer of Figure 10's |h|, the band of Figure 11's charts (-1: none).
    void setPanels(const QVector<VariantPanel>& panels, int layer, const Provenance& provenance);
    const QVector<VariantPanel>& panels() const { return m_panels; }
    /// Columns of the sub-figures (at most 3).
    int columns() const;

    QSize preferredFigureSize() const override { return {kMaxFigureWidth, kMaxFigureHeight}; }
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// Figure 10: "subfigure,token,channel,token_label,abs_h" per cell; Figure 11: "subfigure,layer
    /// (1-based)," and one column per series.
    QString figureCsv() const override;
    Provenance figureProvenance() const override { return m_provenance; }
    /// "variants-h-L6" (Figure 10, 1-based layer) or "variants-per-layer" (Figure 11).
    QString figureName() const override;

    QSize sizeHint() const override { return {1000, 560}; }

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    bool isHeatmaps() const;

    QVector<VariantPanel> m_panels;
    int m_layer = -1;
    Provenance m_provenance;
};

} // namespace outlierlens
