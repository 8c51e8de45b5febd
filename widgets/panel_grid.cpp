#include "panel_grid.h"

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
constexpr double kMaxRowHeight = 28;
/// Cells from this size (px) get an outline when highlighted.
constexpr double kOutlinedCell = 6;

/// The largest finite magnitude of the panels' matrices on `scale` (a shared colour scale).
double largestValue(const QVector<GridPanel>& panels, ColorScale scale)
{
    double m = 0;
    for (const GridPanel& p : panels)
        if (p.scale == scale)
            for (float v : p.matrix.values)
                if (std::isfinite(v)) m = std::max(m, double(std::abs(v)));
    return m;
}

/// Decades that hold every positive value of every panel's series (one log axis for all charts).
QPair<double, double> sharedDecades(const QVector<GridPanel>& panels)
{
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (const GridPanel& p : panels)
        for (const QVector<double>& s : p.series.series)
            for (double v : s)
                if (std::isfinite(v) && v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
    if (!(lo <= hi)) return {0, 0};
    const double low = std::pow(10.0, std::floor(std::log10(lo)));
    return {low, std::max(std::pow(10.0, std::ceil(std::log10(hi))), low * 10)};
}

} // namespace

PanelGrid::PanelGrid(QWidget* parent)
    : QWidget(parent)
{}

void PanelGrid::setPanels(const QVector<GridPanel>& panels, const Provenance& provenance, const QString& name,
                          bool sharedScale, int bandLayer)
{
    m_panels = panels;
    m_provenance = provenance;
    m_name = name;
    m_sharedScale = sharedScale;
    m_band = bandLayer;
    update();
}

int PanelGrid::columns() const
{
    const int n = std::max(1, int(m_panels.size()));
    return n <= 3 ? n : n == 4 ? 2 : n <= 6 ? 3 : 4;
}

bool PanelGrid::isHeatmaps() const
{
    return std::any_of(m_panels.begin(), m_panels.end(),
                       [](const GridPanel& p) { return !p.matrix.isEmpty(); });
}

void PanelGrid::paintFigure(QPainter& painter, const QRect& area) const
{
    painter.fillRect(area, FigureStyle::background());
    const int n = int(m_panels.size());
    if (n == 0) {
        painting::drawNoData(painter, area, QStringLiteral("Nothing to show"), 14);
        return;
    }
    const int cols = columns(), rows = (n + cols - 1) / cols;
    const QSizeF cell((area.width() - (cols - 1) * kGap) / cols,
                      (area.height() - rows * kLabelHeight - (rows - 1) * kGap) / rows);
    const bool heatmaps = isHeatmaps();
    const double sequentialMax = largestValue(m_panels, ColorScale::Sequential);
    const double divergingMax = largestValue(m_panels, ColorScale::Diverging);
    const auto [low, high] = sharedDecades(m_panels);
    for (int i = 0; i < n; ++i) {
        const GridPanel& p = m_panels[i];
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
            if (p.matrix.isEmpty()) {
                painting::drawNoData(painter, box, QStringLiteral("not in this model"), 13);
            } else {
                HeatmapRenderer r;
                r.setData(p.matrix, p.scale);
                r.setTitle(p.title);
                if (m_sharedScale)
                    r.setFixedMaximum(p.scale == ColorScale::Sequential ? sequentialMax : divergingMax);
                r.setHighlightedRows(p.rows);
                r.setHighlightedColumns(p.cols);
                // The cells fill the panel (narrow columns for a token x channel matrix); where they are too
                // small for an outline not to hide them, the highlighted labels alone mark them.
                const QMargins margins = r.figureMargins();
                const QSizeF size =
                    HeatmapRenderer::fittedCell(box.width() - margins.left() - margins.right(),
                                                box.height() - margins.top() - margins.bottom(),
                                                p.matrix.rows, p.matrix.cols, kMaxRowHeight);
                r.setHighlightOutlines(std::min(size.width(), size.height()) >= kOutlinedCell);
                const double width = margins.left() + p.matrix.cols * size.width() + margins.right();
                const QPointF topLeft(box.left() + std::max(0.0, (box.width() - width) / 2), box.top());
                r.paint(painter, r.figureFrame(topLeft, size, margins.top()));
            }
        } else {
            charts::renderChart(std::unique_ptr<QChart>(makeLayerSeriesChart(
                                    p.series, QStringLiteral("per layer"), m_band, low, high)),
                                painter, box);
        }
        painter.restore();
    }
}

QString PanelGrid::figureCsv() const
{
    if (isHeatmaps()) {
        QString csv = QStringLiteral("subfigure,row,col,row_label,col_label,value\n");
        for (const GridPanel& p : m_panels) {
            HeatmapRenderer r;
            r.setData(p.matrix, p.scale);
            csv += charts::prefixedCsvRows(r.csv(), charts::csvField(p.label) + QLatin1Char(','));
        }
        return csv;
    }
    QString csv = QStringLiteral("subfigure,layer (1-based)");
    const QStringList names = m_panels.isEmpty() ? QStringList() : m_panels.first().series.names;
    for (const QString& name : names)
        csv += QLatin1Char(',') + charts::csvField(name);
    csv += QLatin1Char('\n');
    for (const GridPanel& p : m_panels) {
        int layers = 0;
        for (const QVector<double>& s : p.series.series)
            layers = std::max(layers, int(s.size()));
        for (int l = 0; l < layers; ++l) {
            csv += charts::csvField(p.label) + QLatin1Char(',') + QString::number(l + 1);
            for (int i = 0; i < names.size(); ++i) {
                const QVector<double> s = p.series.series.value(i);
                csv += QLatin1Char(',') +
                       (l < s.size() && std::isfinite(s[l]) ? charts::csvNumber(s[l]) : QString());
            }
            csv += QLatin1Char('\n');
        }
    }
    return csv;
}

void PanelGrid::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    painter.setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
    paintFigure(painter, rect());
}

} // namespace outlierlens
