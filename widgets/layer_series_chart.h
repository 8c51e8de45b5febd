#pragma once
// GUI thread only.

#include "figure.h"
#include "view_data.h"

#include <QWidget>

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
QT_END_NAMESPACE

namespace outlierlens {

/// A per-layer chart (An et al.'s Figs 3a, 4a, 5a, 6a, 10, 11): a line with points per series on a log
/// axis (NaN and non-positive values left out), layers 1-based on the x axis, `layer` (0-based; -1 for
/// none) in a band behind the lines. `fallbackTitle` when the data has none. The value axis spans the
/// decades of the data, or `low`..`high` when given (several charts on one scale). The caller owns the chart.
QChart* makeLayerSeriesChart(const LayerSeriesData& data, const QString& fallbackTitle, int layer = -1,
                             double low = 0, double high = 0);

/// One LayerSeriesData as a chart in a window, exportable (the variant comparison of the Jobs page).
class LayerSeriesChart : public QWidget, public Figure
{
    Q_OBJECT
public:
    explicit LayerSeriesChart(QWidget* parent = nullptr);

    void setData(const LayerSeriesData& data, int layer = -1);
    const LayerSeriesData& data() const { return m_data; }
    void setProvenance(const Provenance& provenance) { m_provenance = provenance; }
    QChartView* chartView() const { return m_view; }

    QSize preferredFigureSize() const override { return {1000, 620}; }
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// "layer (1-based)" then one column per series; empty cells for missing values.
    QString figureCsv() const override;
    Provenance figureProvenance() const override { return m_provenance; }
    QString figureName() const override { return QStringLiteral("layer-series"); }

private:
    LayerSeriesData m_data;
    int m_layer = -1;
    Provenance m_provenance;
    QChartView* m_view = nullptr;
};

} // namespace outlierlens
