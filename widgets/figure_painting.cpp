#include "figure_painting.h"

#include "colormap.h"
#include "nice_numbers.h"

#include <QLineF>
#include <QLinearGradient>

#include <algorithm>
#include <cmath>

namespace outlierlens::painting {

QColor textColor()
{
    return QColor(30, 30, 30);
}

QColor mutedColor()
{
    return QColor(100, 100, 100);
}

QColor frameColor()
{
    return QColor(120, 120, 120);
}

QString displayNumber(double value)
{
    const QString text = std::abs(value) >= 1000 && std::abs(value) < 1e9
                             ? QString::number(std::llround(value))
                             : QString::asprintf("%.3g", value);
    return QString(text).replace(QLatin1Char('-'), QChar(0x2212));
}

QFont pixelFont(double px, bool bold, bool italic)
{
    QFont font;
    font.setPixelSize(std::max(1, int(std::lround(px))));
    font.setBold(bold);
    font.setItalic(italic);
    return font;
}

QRectF fitAspect(const QRectF& box, double aspect)
{
    if (box.width() <= 1 || box.height() <= 1 || !(aspect > 0)) return {};
    double w = box.width();
    double h = w / aspect;
    if (h > box.height()) {
        h = box.height();
        w = h * aspect;
    }
    return QRectF(box.left() + (box.width() - w) / 2, box.top(), w, h);
}

QRectF cellRect(const QRectF& rect, int rows, int cols, int row, int col)
{
    const double x0 = rect.left() + rect.width() * col / cols;
    const double x1 = rect.left() + rect.width() * (col + 1) / cols;
    const double y0 = rect.top() + rect.height() * row / rows;
    const double y1 = rect.top() + rect.height() * (row + 1) / rows;
    return QRectF(x0, y0, x1 - x0, y1 - y0);
}

void drawElided(QPainter& p, const QRectF& line, int flags, const QString& text)
{
    if (line.width() <= 0) return;
    p.drawText(line, flags, p.fontMetrics().elidedText(text, Qt::ElideRight, int(line.width())));
}

int drawTwoLines(QPainter& p, const QRectF& line, int flags, const QString& text)
{
    if (line.width() <= 0 || text.isEmpty()) return 0;
    const QFontMetrics metrics = p.fontMetrics();
    if (metrics.horizontalAdvance(text) <= line.width()) {
        p.drawText(line, flags, text);
        return 1;
    }
    // Word wrapping loses up to a word per line: leave room for it before eliding.
    const QString shown =
        metrics.elidedText(text, Qt::ElideRight, int(2 * line.width() - metrics.averageCharWidth() * 4));
    p.drawText(QRectF(line.left(), line.top(), line.width(), 2 * line.height()), flags | Qt::TextWordWrap,
               shown);
    return 2;
}

QFont fitFont(QPainter& p, QFont font, const QString& text, double width)
{
    const int original = font.pixelSize();
    const int smallest = std::max(1, int(original * 0.55));
    for (int px = original; px >= smallest; --px) {
        font.setPixelSize(px);
        p.setFont(font);
        // Two pixels of slack: elidedText() cuts a text whose advance equals the width.
        if (p.fontMetrics().horizontalAdvance(text) <= int(width) - 2) break;
    }
    return font;
}

void drawFitted(QPainter& p, const QRectF& line, int flags, const QString& text, const QFont& font)
{
    p.setFont(fitFont(p, font, text, line.width()));
    drawElided(p, line, flags, text);
}

void drawHeatGrid(QPainter& p, const QRectF& rect, const QVector<float>& values, int rows, int cols,
                  double maxValue)
{
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c)
            p.fillRect(cellRect(rect, rows, cols, r, c),
                       ColorMap::color(ColorScale::Sequential, values[r * cols + c], maxValue));
    p.setPen(QPen(frameColor(), 1));
    p.setBrush(Qt::NoBrush);
    p.drawRect(rect);
}

void drawNoData(QPainter& p, const QRectF& rect, const QString& text, double base)
{
    p.fillRect(rect, QColor(240, 240, 240));
    p.setPen(mutedColor());
    p.setFont(pixelFont(0.8 * base));
    p.drawText(rect, Qt::AlignCenter | Qt::TextWordWrap, text);
}

void drawColorBar(QPainter& p, const QRectF& bar, double maxValue, const QString& label, double base)
{
    if (bar.width() <= 0) return;
    QLinearGradient gradient(bar.topLeft(), bar.topRight());
    for (int i = 0; i <= 8; ++i)
        gradient.setColorAt(i / 8.0, ColorMap::sequential(i / 8.0));
    p.fillRect(bar, gradient);
    p.setPen(QPen(frameColor(), 1));
    p.setBrush(Qt::NoBrush);
    p.drawRect(bar);
    p.setFont(pixelFont(0.72 * base));
    p.setPen(textColor());
    const QRectF row(bar.left(), bar.bottom() + 0.15 * base, bar.width(), 1.1 * base);
    const QString maxText = displayNumber(maxValue);
    p.drawText(row, Qt::AlignLeft | Qt::AlignTop, QStringLiteral("0"));
    p.drawText(row, Qt::AlignRight | Qt::AlignTop, maxText);
    const double side = p.fontMetrics().horizontalAdvance(maxText) + 0.6 * base;
    drawElided(p, row.adjusted(side, 0, -side, 0), Qt::AlignHCenter | Qt::AlignTop, label);
}

void drawValueAxis(QPainter& p, const QRectF& plot, double top, double step, const QString& title,
                   double base)
{
    p.setFont(pixelFont(0.72 * base));
    for (int i = 0; i * step <= top + step / 2; ++i) {
        const double y = plot.bottom() - plot.height() * (i * step) / top;
        p.setPen(QPen(QColor(225, 225, 225), 1));
        p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
        p.setPen(textColor());
        p.drawText(QRectF(plot.left() - 3.2 * base, y - 0.6 * base, 2.9 * base, 1.2 * base),
                   Qt::AlignRight | Qt::AlignVCenter, displayNumber(i * step));
    }
    p.save();
    p.translate(plot.left() - 3.6 * base, plot.center().y());
    p.rotate(-90);
    p.setFont(pixelFont(0.8 * base));
    p.drawText(QRectF(-plot.height() / 2, -0.7 * base, plot.height(), 1.4 * base), Qt::AlignCenter, title);
    p.restore();
}

void drawBarPlot(QPainter& p, const QRectF& plot, const QVector<Bar>& bars, const QString& axisTitle,
                 double base)
{
    if (plot.width() <= 0 || plot.height() <= 0 || bars.isEmpty()) return;
    double maxValue = 0;
    for (const Bar& bar : bars)
        if (std::isfinite(bar.value)) maxValue = std::max(maxValue, bar.value);
    const double step = maxValue > 0 ? niceStep(maxValue / 4) : 0.25;
    const double top = maxValue > 0 ? std::ceil(maxValue / step - 1e-9) * step : 1.0;
    const auto yOf = [&](double v) { return plot.bottom() - plot.height() * std::clamp(v / top, 0.0, 1.0); };

    drawValueAxis(p, plot, top, step, axisTitle, base);

    const double slot = plot.width() / bars.size();
    for (int i = 0; i < bars.size(); ++i) {
        const double x = plot.left() + slot * i + slot * 0.2;
        const double y = yOf(std::isfinite(bars[i].value) ? bars[i].value : 0);
        p.fillRect(QRectF(x, y, slot * 0.6, plot.bottom() - y), bars[i].color);
        p.setPen(textColor());
        p.setFont(pixelFont(0.8 * base, true));
        p.drawText(QRectF(x - slot * 0.2, y - 1.3 * base, slot, 1.2 * base),
                   Qt::AlignHCenter | Qt::AlignBottom,
                   std::isfinite(bars[i].value) ? displayNumber(bars[i].value) : QStringLiteral("none"));
        p.setFont(pixelFont(0.75 * base));
        drawElided(p, QRectF(plot.left() + slot * i, plot.bottom() + 0.2 * base, slot, 1.2 * base),
                   Qt::AlignHCenter | Qt::AlignTop, bars[i].label);
    }
    p.setPen(QPen(frameColor(), 1));
    p.drawLine(plot.bottomLeft(), plot.bottomRight());
    p.drawLine(plot.bottomLeft(), plot.topLeft());
}

void drawArrow(QPainter& p, QPolygonF path, const QColor& color, double base)
{
    if (path.size() < 2) return;
    const QPointF tip = path.last();
    const QLineF last(tip, path[path.size() - 2]);
    if (last.length() <= 0) return;
    const QPointF u = (last.p2() - tip) / last.length();
    const QPointF n(-u.y(), u.x());
    const double head = 0.55 * base;
    path.last() = tip + u * head * 0.8; // the line stops inside the head
    p.setPen(QPen(color, std::max(1.0, 0.1 * base), Qt::SolidLine, Qt::FlatCap, Qt::MiterJoin));
    p.setBrush(Qt::NoBrush);
    p.drawPolyline(path);
    p.setPen(Qt::NoPen);
    p.setBrush(color);
    p.drawPolygon(QPolygonF({tip, tip + u * head + n * head * 0.45, tip + u * head - n * head * 0.45}));
}

} // namespace outlierlens::painting
