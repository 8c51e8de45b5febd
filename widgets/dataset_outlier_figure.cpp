#include "dataset_outlier_figure.h"

#include "figure_painting.h"
#include "figure_style.h"
#include "nice_numbers.h"

#include <QPaintEvent>
#include <QPainter>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace outlierlens {

using namespace painting;

namespace {

const QColor kLayerColor(31, 119, 180);    ///< (a), blue
const QColor kDimensionColor(44, 160, 44); ///< (b), green as the dimensions of Figure 1
constexpr int kLabelledDimensions = 3;     ///< (b) numbers the largest few bars

QString layerCell(double value)
{
    return std::isfinite(value) ? csvNumber(value) : QString();
}

/// (b): one bar per dimension, every niceStep-th dimension numbered, the largest few written above.
void drawHistogram(QPainter& p, const QRectF& plot, const QVector<double>& counts, double base)
{
    const int d = int(counts.size());
    if (d == 0) {
        drawNoData(p, plot, QStringLiteral("no counts for this layer"), base);
        return;
    }
    const double maxValue = *std::max_element(counts.begin(), counts.end());
    const double step = maxValue > 0 ? niceStep(maxValue / 4) : 0.25;
    const double top = maxValue > 0 ? std::ceil(maxValue * 1.08 / step - 1e-9) * step : 1.0;
    drawValueAxis(p, plot, top, step, QStringLiteral("outlier count"), base);
    const double slot = plot.width() / d;
    for (int k = 0; k < d; ++k) {
        if (counts[k] <= 0) continue;
        const double h = plot.height() * std::clamp(counts[k] / top, 0.0, 1.0);
        // At least a hairline: hundreds of dimensions share a few hundred pixels.
        p.fillRect(QRectF(plot.left() + slot * k, plot.bottom() - h, std::max(slot * 0.9, 0.8), h),
                   kDimensionColor);
    }
    p.setFont(pixelFont(0.72 * base));
    p.setPen(textColor());
    const int every = int(niceStep(std::max(1.0, d / 6.0)));
    for (int k = 0; k < d; k += every) {
        const double x = plot.left() + slot * (k + 0.5);
        p.setPen(QPen(frameColor(), 1));
        p.drawLine(QPointF(x, plot.bottom()), QPointF(x, plot.bottom() + 0.25 * base));
        p.setPen(textColor());
        p.drawText(QRectF(x - 2 * base, plot.bottom() + 0.3 * base, 4 * base, 1.1 * base),
                   Qt::AlignHCenter | Qt::AlignTop, QString::number(k));
    }
    QVector<int> order(d);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return counts[a] > counts[b]; });
    p.setFont(pixelFont(0.75 * base, true));
    for (int i = 0; i < std::min(d, kLabelledDimensions); ++i) {
        const int k = order[i];
        if (counts[k] <= 0 || counts[k] < 0.2 * maxValue) break;
        const double x = plot.left() + slot * (k + 0.5);
        const double y = plot.bottom() - plot.height() * counts[k] / top;
        p.drawText(QRectF(x - 3 * base, y - 1.25 * base, 6 * base, 1.2 * base),
                   Qt::AlignHCenter | Qt::AlignBottom, QString::number(k));
    }
    p.setPen(QPen(frameColor(), 1));
    p.drawLine(plot.bottomLeft(), plot.bottomRight());
    p.drawLine(plot.bottomLeft(), plot.topLeft());
}

/// (c): the patch grid, first and last rows and columns numbered, the colour bar underneath.
void drawPatchGrid(QPainter& p, const QRectF& box, const DatasetOutlierData& d, double base)
{
    if (d.gridRows <= 0 || d.gridCols <= 0 || d.perPatch.size() != d.gridRows * d.gridCols) {
        drawNoData(p, box, QStringLiteral("no patch counts for this layer"), base);
        return;
    }
    const QRectF grid =
        fitAspect(box.adjusted(1.6 * base, 0, -1.6 * base, -4.2 * base), double(d.gridCols) / d.gridRows);
    if (grid.isEmpty()) return;
    QVector<float> values;
    for (double v : d.perPatch)
        values << float(v);
    const double maxValue = std::max(1.0, *std::max_element(d.perPatch.begin(), d.perPatch.end()));
    drawHeatGrid(p, grid, values, d.gridRows, d.gridCols, maxValue);
    p.setFont(pixelFont(0.7 * base));
    p.setPen(textColor());
    for (int r : {0, d.gridRows - 1}) {
        const QRectF cell = cellRect(grid, d.gridRows, d.gridCols, r, 0);
        p.drawText(QRectF(grid.left() - 1.5 * base, cell.top(), 1.3 * base, cell.height()),
                   Qt::AlignRight | Qt::AlignVCenter, QString::number(r));
    }
    for (int c : {0, d.gridCols - 1}) {
        const QRectF cell = cellRect(grid, d.gridRows, d.gridCols, 0, c);
        p.drawText(QRectF(cell.center().x() - base, grid.bottom() + 0.1 * base, 2 * base, 1.1 * base),
                   Qt::AlignHCenter | Qt::AlignTop, QString::number(c));
    }
    drawColorBar(p, QRectF(grid.left(), grid.bottom() + 1.4 * base, grid.width(), 0.8 * base), maxValue,
                 QStringLiteral("outlier count"), base);
    p.setFont(pixelFont(0.72 * base));
    p.setPen(mutedColor());
    drawElided(p, QRectF(box.left(), grid.bottom() + 3.3 * base, box.width(), 1.1 * base),
               Qt::AlignHCenter | Qt::AlignTop,
               QStringLiteral("patch row and column (0-based); CLS token (not drawn): %1")
                   .arg(displayNumber(d.clsCount)));
}

} // namespace

DatasetOutlierFigure::DatasetOutlierFigure(QWidget* parent)
    : QWidget(parent)
{}

void DatasetOutlierFigure::setData(const DatasetOutlierData& data)
{
    m_data = data;
    update();
}

void DatasetOutlierFigure::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    painter.setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
    paintFigure(painter, rect());
}

void DatasetOutlierFigure::paintFigure(QPainter& p, const QRect& areaRect) const
{
    p.save();
    p.fillRect(areaRect, FigureStyle::background());
    const QRectF area(areaRect);
    const double base = std::clamp(std::min(area.width() / 90.0, area.height() / 36.0), 8.0, 20.0);
    const QRectF inner = area.adjusted(base, 0.6 * base, -base, -0.6 * base);
    p.setPen(textColor());
    drawFitted(p, QRectF(inner.left(), inner.top(), inner.width(), 1.6 * base),
               Qt::AlignLeft | Qt::AlignVCenter, m_data.title, pixelFont(1.15 * base, true));
    p.setPen(mutedColor());
    p.setFont(pixelFont(0.8 * base));
    drawElided(p, QRectF(inner.left(), inner.top() + 1.6 * base, inner.width(), 1.2 * base),
               Qt::AlignLeft | Qt::AlignVCenter,
               QStringLiteral("outlier: %1 · %2 · %3")
                   .arg(m_data.criterion, m_data.tensor.isEmpty() ? QStringLiteral("?") : m_data.tensor,
                        Provenance::indexingNote()));
    const QRectF body(inner.left(), inner.top() + 3.4 * base, inner.width(),
                      inner.bottom() - inner.top() - 3.4 * base);
    const double gap = 1.5 * base;
    const double wa = 0.3 * (body.width() - 2 * gap), wb = 0.42 * (body.width() - 2 * gap);
    const QRectF a(body.left(), body.top(), wa, body.height());
    const QRectF b(a.right() + gap, body.top(), wb, body.height());
    const QRectF c(b.right() + gap, body.top(), body.right() - b.right() - gap, body.height());
    const QString layer = QString::number(m_data.layer + 1);
    const auto caption = [&](const QRectF& panel, const QString& text) {
        p.setPen(textColor());
        drawTwoLines(p, QRectF(panel.left(), panel.top(), panel.width(), 1.2 * base),
                     Qt::AlignLeft | Qt::AlignTop, text);
    };
    p.setFont(pixelFont(0.85 * base, true));
    caption(a, QStringLiteral("(a) mean max |x| of each layer's %1 over the data").arg(m_data.tensor));
    p.setFont(pixelFont(0.85 * base, true));
    caption(b, QStringLiteral("(b) outliers per hidden dimension, layer %1").arg(layer));
    p.setFont(pixelFont(0.85 * base, true));
    caption(c, QStringLiteral("(c) outliers per patch position, layer %1").arg(layer));

    // (a) per layer, 1-based; a layer that was not analysed shows "none".
    QVector<Bar> bars;
    for (int l = 0; l < m_data.infNormPerLayer.size(); ++l)
        bars << Bar{QString::number(l + 1), m_data.infNormPerLayer[l],
                    l == m_data.layer ? QColor(214, 39, 40) : kLayerColor};
    const QRectF plotA = a.adjusted(4.2 * base, 4.2 * base, -0.3 * base, -2.8 * base);
    if (bars.isEmpty())
        drawNoData(p, plotA, QStringLiteral("no per-layer numbers"), base);
    else
        drawBarPlot(p, plotA, bars, QStringLiteral("mean max |x|"), base);
    p.setFont(pixelFont(0.8 * base));
    p.setPen(textColor());
    p.drawText(QRectF(plotA.left(), plotA.bottom() + 1.4 * base, plotA.width(), 1.2 * base), Qt::AlignHCenter,
               QStringLiteral("layer (1-based; layer %1 in red: (b) and (c))").arg(layer));

    // (b) per dimension, 0-based.
    const QRectF plotB = b.adjusted(4.2 * base, 3.0 * base, -0.3 * base, -2.8 * base);
    drawHistogram(p, plotB, m_data.perDimension, base);
    p.setFont(pixelFont(0.8 * base));
    p.setPen(textColor());
    p.drawText(QRectF(plotB.left(), plotB.bottom() + 1.4 * base, plotB.width(), 1.2 * base), Qt::AlignHCenter,
               m_data.headDim > 0
                   ? QStringLiteral("hidden dimension (0-based; dimension k feeds head k / %1 + 1)")
                         .arg(m_data.headDim)
                   : QStringLiteral("hidden dimension (0-based)"));

    // (c) per patch position.
    drawPatchGrid(p, c.adjusted(0, 1.8 * base, 0, 0), m_data, base);
    p.restore();
}

QString DatasetOutlierFigure::figureCsv() const
{
    QString csv = QStringLiteral("layer (1-based),mean max inf norm\n");
    for (int l = 0; l < m_data.infNormPerLayer.size(); ++l)
        csv += QStringLiteral("%1,%2\n").arg(l + 1).arg(layerCell(m_data.infNormPerLayer[l]));
    csv += QStringLiteral("\ndimension (0-based),outlier count\n");
    for (int k = 0; k < m_data.perDimension.size(); ++k)
        csv += QStringLiteral("%1,%2\n").arg(k).arg(csvNumber(m_data.perDimension[k]));
    csv += QStringLiteral("\npatch row (0-based),patch col (0-based),outlier count\n");
    for (int i = 0; m_data.gridCols > 0 && i < m_data.perPatch.size(); ++i)
        csv += QStringLiteral("%1,%2,%3\n")
                   .arg(i / m_data.gridCols)
                   .arg(i % m_data.gridCols)
                   .arg(csvNumber(m_data.perPatch[i]));
    csv += QStringLiteral("cls,,%1\n").arg(csvNumber(m_data.clsCount));
    return csv;
}

QString DatasetOutlierFigure::figureName() const
{
    return m_data.layer >= 0 ? QStringLiteral("dataset-outliers-L%1").arg(m_data.layer + 1)
                             : QStringLiteral("dataset-outliers");
}

} // namespace outlierlens
