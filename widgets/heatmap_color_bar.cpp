#include "heatmap_renderer.h"

// The heatmap's colour bar: its ticks, value title and legend ("exactly 0", "masked (causal)").

#include "colormap.h"
#include "figure_style.h"
#include "heatmap_parts.h"

#include <QFontMetricsF>
#include <QLinearGradient>
#include <QPainter>

#include <algorithm>
#include <cmath>

namespace outlierlens {
namespace {

using namespace heatmap_parts;

/// About `target` round tick values from lo to hi.
QVector<double> ticks(double lo, double hi, int target)
{
    QVector<double> result;
    if (!(hi > lo) || target < 1) return result;
    const double raw = (hi - lo) / target;
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    const double norm = raw / magnitude;
    const double step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10) * magnitude;
    for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
        result.append(std::abs(v) < step * 1e-9 ? 0.0 : v);
    return result;
}

QString tickText(double v)
{
    return QString::number(v, 'g', 4);
}

} // namespace

void HeatmapRenderer::measureColorBar(const Fonts& fonts, Metrics* m) const
{
    const QFontMetricsF label(fonts.label);
    const QFontMetricsF small(fonts.small);
    const double lo = m_scale == ColorScale::Sequential ? 0.0 : -m_colorMax;
    for (double v : ticks(lo, m_colorMax, 4))
        m->tickWidth = std::max(m->tickWidth, std::ceil(label.horizontalAdvance(tickText(v))));
    m->colorBarWidth = 2 * kGap + kBarWidth + kTickLength + kGap + m->tickWidth + kGap;
    if (!m_data.valueTitle.isEmpty()) m->colorBarWidth += m->lineHeight + kGap;
    for (const QString& entry : legendEntries()) {
        m->legendHeight += m->lineHeight + kGap;
        const double legend = kSwatch + kGap + small.horizontalAdvance(entry);
        m->colorBarWidth = std::max(m->colorBarWidth, std::ceil(2 * kGap + legend + kGap));
    }
}

void HeatmapRenderer::paintColorBar(QPainter& painter, const Frame& f) const
{
    const Metrics& m = f.metrics;
    const double contentRight = std::min(f.cells.right(), f.origin.x() + m_data.cols * f.cellWidth);
    const double contentBottom = std::min(f.cells.bottom(), f.origin.y() + m_data.rows * f.cellHeight);
    const double available = f.bottom - f.cells.top() - m.legendHeight;
    double height = std::max(contentBottom - f.cells.top(), std::min(kMinBarHeight, available));
    height = std::min(height, available);
    if (height < 8) return;
    const QRectF bar(contentRight + 2 * kGap, f.cells.top(), kBarWidth, height);
    const double lo = m_scale == ColorScale::Sequential ? 0.0 : -m_colorMax;
    const double hi = m_colorMax;

    QLinearGradient gradient(bar.bottomLeft(), bar.topLeft());
    constexpr int kStops = 32;
    for (int i = 0; i <= kStops; ++i) {
        const double t = double(i) / kStops;
        gradient.setColorAt(t, ColorMap::color(m_scale, lo + t * (hi - lo), m_colorMax));
    }
    painter.save();
    painter.fillRect(bar, gradient);
    painter.setPen(QPen(FigureStyle::gridLine(), 1));
    painter.setBrush(Qt::NoBrush);
    painter.drawRect(bar);

    painter.setFont(f.fonts.label);
    const int target = std::clamp(int(height / (2 * m.lineHeight)), 1, 4);
    for (double v : ticks(lo, hi, target)) {
        const double y = bar.bottom() - (v - lo) / (hi - lo) * height;
        painter.setPen(f.fonts.text);
        painter.drawLine(QPointF(bar.right(), y), QPointF(bar.right() + kTickLength, y));
        painter.drawText(
            QRectF(bar.right() + kTickLength + kGap, y - m.lineHeight / 2, m.tickWidth + kGap, m.lineHeight),
            Qt::AlignLeft | Qt::AlignVCenter, tickText(v));
    }
    if (!m_data.valueTitle.isEmpty()) {
        const QFontMetricsF fm(f.fonts.label);
        painter.save();
        painter.translate(bar.right() + kTickLength + kGap + m.tickWidth + kGap, bar.center().y());
        painter.rotate(-90);
        painter.setPen(f.fonts.secondary);
        painter.drawText(QRectF(-height / 2, 0, height, m.lineHeight), Qt::AlignCenter,
                         fm.elidedText(m_data.valueTitle, Qt::ElideRight, height));
        painter.restore();
    }
    double legendTop = bar.bottom() + kGap;
    if (m_markZeros && m_hasZeros) {
        // The zero marker as it appears in the cells.
        const QRectF swatch(bar.left(), legendTop + (m.lineHeight - kSwatch) / 2, kSwatch, kSwatch);
        const QColor zero = ColorMap::color(m_scale, 0.0, m_colorMax);
        if (std::min(f.cellWidth, f.cellHeight) < kCrossMinCell) {
            painter.fillRect(swatch, QColor(kZeroFill)); // as the tiny cells show it
        } else {
            painter.fillRect(swatch, zero);
            painter.setRenderHint(QPainter::Antialiasing);
            painter.setPen(QPen(ColorMap::textOn(zero), 1.2));
            const double in = 2;
            painter.drawLine(swatch.topLeft() + QPointF(in, in), swatch.bottomRight() - QPointF(in, in));
            painter.drawLine(swatch.topRight() + QPointF(-in, in), swatch.bottomLeft() + QPointF(in, -in));
        }
        painter.setFont(f.fonts.small);
        painter.setPen(f.fonts.text);
        painter.drawText(QRectF(swatch.right() + kGap, legendTop, f.metrics.colorBarWidth, m.lineHeight),
                         Qt::AlignLeft | Qt::AlignVCenter, tr("exactly 0"));
        legendTop += m.lineHeight + kGap;
    }
    if (hasMaskedCells()) {
        const QRectF swatch(bar.left(), legendTop + (m.lineHeight - kSwatch) / 2, kSwatch, kSwatch);
        painter.fillRect(swatch, QColor(kMaskedFill));
        painter.setPen(QPen(FigureStyle::gridLine(), 1));
        painter.setBrush(Qt::NoBrush);
        painter.drawRect(swatch);
        painter.setFont(f.fonts.small);
        painter.setPen(f.fonts.text);
        painter.drawText(QRectF(swatch.right() + kGap, legendTop, f.metrics.colorBarWidth, m.lineHeight),
                         Qt::AlignLeft | Qt::AlignVCenter, m_data.maskedName());
    }
    painter.restore();
}

} // namespace outlierlens
