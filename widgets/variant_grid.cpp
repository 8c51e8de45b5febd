#include "variant_grid.h"

#include "chart_support.h"
#include "figure_painting.h"
#include "figure_style.h"
#include "heatmap_renderer.h"
#include "layer_series_chart.h"

#include <QChart>
#include <QPaintEvent>
#include <QPainter>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

namespace outlierlens {
namespace {

constexpr double kGap = 12;
constexpr double kLabelHeight = 18;

/// The largest finite value of every panel's matrices (Figure 10's shared colour scale).
double largestValue(const QVector<VariantPanel>& panels)
{
    double m = 0;
    for (const VariantPanel& p : panels)
        for (float v : p.hidden.values)
            if (std::isfinite(v)) m = std::max(m, double(std::abs(v)));
    return m;
}

/// Decades that hold every positive value of every panel's series (Figure 11's shared axis).
QPair<double, double> sharedDecades(const QVector<VariantPanel>& panels)
{
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (const VariantPanel& p : panels)
        for (const QVector<double>& s : p.perLayer.series)
            for (double v : s)
                if (std::isfinite(v) && v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
    if (!(lo <= hi)) return {0, 0};
    const double low = std::pow(10.0, std::floor(std::log10(lo)));
    return {low, std::max(std::pow(10.0, std::ceil(std::log10(hi))), low * 10)};
}

} // namespace

VariantGrid::VariantGrid(QWidget* parent)
    : QWidget(parent)
{}

void VariantGrid::setPanels(const QVector<VariantPanel>& panels, int layer, const Provenance& provenance)
{
    m_panels = panels;
    m_layer = layer;
    m_provenance = provenance;
    update();
}

int VariantGrid::columns() const
{
    const int n = std::max(1, int(m_panels.size()));
    return n == 4 ? 2 : std::min(n, 3);
}

bool VariantGrid::isHeatmaps() const
{
    return std::any_of(m_panels.begin(), m_panels.end(),
                       [](const VariantPanel& p) { return !p.hidden.isEmpty(); });
}

void VariantGrid::paintFigure(QPainter& painter, const QRect& area) const
{
    painter.fillRect(area, FigureStyle::background());
    const int n = int(m_panels.size());
    if (n == 0) {
        painting::drawNoData(painter, area, QStringLiteral("No models to compare"), 14);
        return;
    }
    const int cols = columns(), rows = (n + cols - 1) / cols;
    const QSizeF cell((area.width() - (cols - 1) * kGap) / cols,
                      (area.height() - rows * kLabelHeight - (rows - 1) * kGap) / rows);
    const bool heatmaps = isHeatmaps();
    const double colorMax = largestValue(m_panels);
    const auto [low, high] = sharedDecades(m_panels);
    for (int i = 0; i < n; ++i) {
        const VariantPanel& p = m_panels[i];
        const double x = area.left() + (i % cols) * (cell.width() + kGap);
        const double y = area.top() + (i / cols) * (cell.height() + kLabelHeight + kGap);
        painter.save();
        painter.setPen(FigureStyle::text());
        painting::drawFitted(painter, QRectF(x + 4, y, cell.width() - 8, kLabelHeight),
                             Qt::AlignLeft | Qt::AlignVCenter, p.label, FigureStyle::captionFont());
        painter.restore();
        const QRect box(int(x), int(y + kLabelHeight), int(cell.width()), int(cell.height()));
        painter.save();
        painter.setClipRect(box);
        if (heatmaps) {
            if (p.hidden.isEmpty()) {
                painting::drawNoData(painter, box, QStringLiteral("no |h| for this model"), 13);
            } else {
                HeatmapRenderer r;
                r.setData(p.hidden, ColorScale::Sequential);
                r.setTitle(QStringLiteral("|h|: layer %1 output").arg(m_layer + 1));
                r.setFixedMaximum(colorMax);
                r.setHighlightedRows(p.heavyTokens);
                r.paintFigure(painter, box);
            }
        } else {
            charts::renderChart(std::unique_ptr<QChart>(makeLayerSeriesChart(
                                    p.perLayer, QStringLiteral("|h| per layer"), m_layer, low, high)),
                                painter, box);
        }
        painter.restore();
    }
}

QString VariantGrid::figureCsv() const
{
    if (isHeatmaps()) {
        QString csv = QStringLiteral("subfigure,row,col,row_label,col_label,value\n");
        for (const VariantPanel& p : m_panels) {
            HeatmapRenderer r;
            r.setData(p.hidden, ColorScale::Sequential);
            csv += charts::prefixedCsvRows(r.csv(), charts::csvField(p.label) + QLatin1Char(','));
        }
        return csv;
    }
    QString csv = QStringLiteral("subfigure,layer (1-based)");
    const QStringList names = m_panels.isEmpty() ? QStringList() : m_panels.first().perLayer.names;
    for (const QString& name : names)
        csv += QLatin1Char(',') + charts::csvField(name);
    csv += QLatin1Char('\n');
    for (const VariantPanel& p : m_panels) {
        int layers = 0;
        for (const QVector<double>& s : p.perLayer.series)
            layers = std::max(layers, int(s.size()));
        for (int l = 0; l < layers; ++l) {
            csv += charts::csvField(p.label) + QLatin1Char(',') + QString::number(l + 1);
            for (int i = 0; i < names.size(); ++i) {
                const QVector<double> s = p.perLayer.series.value(i);
                csv += QLatin1Char(',') +
                       (l < s.size() && std::isfinite(s[l]) ? charts::csvNumber(s[l]) : QString());
            }
            csv += QLatin1Char('\n');
        }
    }
    return csv;
}

QString VariantGrid::figureName() const
{
    return isHeatmaps() ? QStringLiteral("variants-h-L%1").arg(m_layer + 1)
                        : QStringLiteral("variants-per-layer");
}

void VariantGrid::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    painter.setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
    paintFigure(painter, rect());
}

} // namespace outlierlens
