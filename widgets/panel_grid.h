#pragma once
// GUI thread only.

#include "figure.h"
#include "view_data.h"

#include <QStringList>
#include <QVector>
#include <QWidget>

namespace outlierlens {

/// One sub-figure of a PanelGrid: a heatmap (`matrix`) or, when that is empty, a per-layer chart.
struct GridPanel
{
    QString label;     ///< above the panel, e.g. "(a) backcopy-vanilla: vanilla"
    QString title;     ///< the heatmap's own title, e.g. "|h|: layer 1 output"
    MatrixData matrix; ///< the heatmap
    ColorScale scale = ColorScale::Sequential;
    QVector<int> rows;      ///< highlighted rows of the heatmap
    QVector<int> cols;      ///< highlighted columns
    LayerSeriesData series; ///< the chart (log scale) where there is no matrix
};

/// Labelled sub-figures side by side, wrapped into rows (up to four columns), within an A4 landscape page
/// (1120 x 620 px) under the figure index's caption: An et al.'s Figures 7-11, which put one tensor or one
/// model per panel. Heatmaps may share one colour scale (sharedScale: the largest magnitude of all of them
/// on each scale), so that panels compare at a glance; charts always share one log axis range.
class PanelGrid : public QWidget, public Figure
{
    Q_OBJECT
public:
    static constexpr int kMaxFigureWidth = 1120;
    static constexpr int kMaxFigureHeight = 620;

    explicit PanelGrid(QWidget* parent = nullptr);

    /// `name`: figureName(); `bandLayer` (0-based): the layer marked in the charts (-1: none).
    void setPanels(const QVector<GridPanel>& panels, const Provenance& provenance, const QString& name,
                   bool sharedScale = false, int bandLayer = -1);
    const QVector<GridPanel>& panels() const { return m_panels; }
    /// Columns of the sub-figures (at most 4).
    int columns() const;

    QSize preferredFigureSize() const override { return {kMaxFigureWidth, kMaxFigureHeight}; }
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// Heatmaps: "subfigure,row,col,row_label,col_label,value" per cell (an empty value where a cell is
    /// masked); charts: "subfigure,layer (1-based)," and one column per series.
    QString figureCsv() const override;
    Provenance figureProvenance() const override { return m_provenance; }
    QString figureName() const override { return m_name; }

    QSize sizeHint() const override { return {1000, 560}; }

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    bool isHeatmaps() const;

    QVector<GridPanel> m_panels;
    Provenance m_provenance;
    QString m_name;
    bool m_sharedScale = false;
    int m_band = -1;
};

} // namespace outlierlens
