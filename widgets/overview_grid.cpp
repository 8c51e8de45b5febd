#include "overview_grid.h"

#include "colormap.h"
#include "figure_style.h"

#include <QFontMetricsF>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QLinearGradient>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <array>
#include <cmath>

namespace outlierlens {
namespace {

constexpr int kMaxThumbnail = 96; // cells a side kept per thumbnail (mean-pooled above that)
constexpr double kGap = 6.0;
constexpr double kMargin = 4.0;
constexpr double kKeyBarWidth = 60.0;
const QColor kHighScore(0xd6, 0x27, 0x28);
const QRgb kMaskedThumbnail = qRgb(228, 228, 228); // as HeatmapRenderer draws masked cells

/// A matrix mean-pooled to at most kMaxThumbnail x kMaxThumbnail and coloured (viridis, 0..max).
QImage thumbnail(const MatrixData& m, double maximum)
{
    if (m.isEmpty() || m.values.size() != m.rows * m.cols) return QImage();
    const int rows = std::min(m.rows, kMaxThumbnail);
    const int cols = std::min(m.cols, kMaxThumbnail);
    QVector<double> sum(rows * cols, 0.0);
    QVector<int> count(rows * cols, 0);
    for (int r = 0; r < m.rows; ++r) {
        const int tr = int(qint64(r) * rows / m.rows);
        for (int c = 0; c < m.cols; ++c) {
            const float v = m.values[r * m.cols + c];
            if (!std::isfinite(v) || m.isMasked(r, c)) continue;
            const int i = tr * cols + int(qint64(c) * cols / m.cols);
            sum[i] += v;
            ++count[i];
        }
    }
    std::array<QRgb, 256> lut;
    for (int i = 0; i < 256; ++i)
        lut[i] = ColorMap::sequential(i / 255.0).rgb();
    QImage image(cols, rows, QImage::Format_RGB32);
    for (int r = 0; r < rows; ++r) {
        auto* line = reinterpret_cast<QRgb*>(image.scanLine(r));
        for (int c = 0; c < cols; ++c) {
            const int i = r * cols + c;
            if (count[i] == 0 && m.causal) {
                line[c] = kMaskedThumbnail; // only masked (future) keys fell into this pixel
                continue;
            }
            const double mean = count[i] ? sum[i] / count[i] : 0.0;
            line[c] = lut[std::clamp(int(std::lround(mean / maximum * 255.0)), 0, 255)];
        }
    }
    return image;
}

} // namespace

struct OverviewGrid::Style
{
    QFont title, label, small;
    QColor text, secondary, background, focus;
    bool showTitle = false;
};

struct OverviewGrid::Layout
{
    QRectF title;
    QRectF legend;            // word-wrapped score legend
    QRectF key;               // colour key line
    double left = 0, top = 0; // top-left corner of the first thumbnail
    double tile = 0;          // thumbnail side
    double scoreHeight = 0;
    double headerHeight = 0;
    double rowHeaderWidth = 0;
    double pitchX = 0, pitchY = 0;
    double areaLeft = 0;
    QRectF tileRect(int layer, int head) const
    {
        return QRectF(left + head * pitchX, top + layer * pitchY, tile, tile);
    }
};

OverviewGrid::OverviewGrid(QWidget* parent)
    : QWidget(parent)
{
    setFocusPolicy(Qt::StrongFocus);
    setMouseTracking(false);
}

void OverviewGrid::setData(const OverviewData& data)
{
    m_data = data;
    double maximum = 0;
    for (const MatrixData& m : m_data.probabilities)
        for (float v : m.values)
            if (std::isfinite(v)) maximum = std::max(maximum, double(v));
    m_colorMax = maximum > 0 ? maximum : 1.0;
    m_thumbnails.clear();
    for (int i = 0; i < m_data.layers * m_data.heads; ++i)
        m_thumbnails.append(i < m_data.probabilities.size() ? thumbnail(m_data.probabilities[i], m_colorMax)
                                                            : QImage());
    m_scaled = QVector<QImage>(m_thumbnails.size());
    m_scaledSize = -1;
    m_currentLayer = std::clamp(m_currentLayer, 0, std::max(0, m_data.layers - 1));
    m_currentHead = std::clamp(m_currentHead, 0, std::max(0, m_data.heads - 1));
    updateGeometry();
    update();
}

void OverviewGrid::setHighScoreThreshold(double threshold)
{
    m_threshold = threshold;
    update();
}

void OverviewGrid::setCurrent(int layer, int head)
{
    if (m_data.layers <= 0 || m_data.heads <= 0) return;
    layer = std::clamp(layer, 0, m_data.layers - 1);
    head = std::clamp(head, 0, m_data.heads - 1);
    if (layer == m_currentLayer && head == m_currentHead) return;
    m_currentLayer = layer;
    m_currentHead = head;
    update();
    Q_EMIT currentChanged(layer, head);
}

QString OverviewGrid::legendText() const
{
    const QString meaning = m_data.scoreDescription.isEmpty()
                                ? tr("how much the head \u201cdoes nothing\u201d (0 to 1)")
                                : m_data.scoreDescription;
    return tr("Number under each head: no-op score, %1. Rows are layers, columns heads (numbered from 1); "
              "each thumbnail is the head's attention probabilities, queries down, keys across.")
        .arg(meaning);
}

OverviewGrid::Style OverviewGrid::widgetStyle() const
{
    Style s;
    s.label = font();
    s.small = font();
    if (s.small.pointSizeF() > 0) s.small.setPointSizeF(s.small.pointSizeF() * 0.9);
    s.title = font();
    s.text = palette().color(QPalette::Text);
    s.secondary = palette().color(QPalette::PlaceholderText);
    s.background = palette().color(QPalette::Base);
    s.focus = palette().color(QPalette::Highlight);
    return s;
}

OverviewGrid::Style OverviewGrid::figureStyle()
{
    Style s;
    s.title = FigureStyle::titleFont();
    s.label = FigureStyle::labelFont();
    s.small = FigureStyle::smallFont();
    s.text = FigureStyle::text();
    s.secondary = FigureStyle::secondaryText();
    s.background = FigureStyle::background();
    s.focus = FigureStyle::highlight();
    s.showTitle = true;
    return s;
}

OverviewGrid::Layout OverviewGrid::layoutFor(const QRectF& area, const Style& style) const
{
    Layout l;
    const QFontMetricsF label(style.label);
    const QFontMetricsF small(style.small);
    const double line = std::ceil(label.height());
    double y = area.top() + kMargin;
    if (style.showTitle) {
        const double h = std::ceil(QFontMetricsF(style.title).height()) + kMargin;
        l.title = QRectF(area.left() + kMargin, y, area.width() - 2 * kMargin, h);
        y += h;
    }
    const QRectF wrap(area.left() + kMargin, y, std::max(40.0, area.width() - 2 * kMargin), 1e6);
    const double legendHeight = small.boundingRect(wrap, Qt::TextWordWrap, legendText()).height();
    l.legend = QRectF(wrap.left(), y, wrap.width(), legendHeight);
    y += legendHeight + kMargin;
    l.key = QRectF(wrap.left(), y, wrap.width(), line);
    y += line + kGap;
    l.headerHeight = line + 6; // room for the focus frame under the head numbers
    l.scoreHeight = line + 2;
    l.rowHeaderWidth =
        label.horizontalAdvance(QStringLiteral("L%1").arg(std::max(m_data.layers, 1))) + 2 * kGap;
    l.areaLeft = area.left();
    l.left = area.left() + kMargin + l.rowHeaderWidth;
    l.top = y + l.headerHeight;
    const int heads = std::max(m_data.heads, 1);
    const int layers = std::max(m_data.layers, 1);
    const double width = area.right() - kMargin - l.left;
    const double height = area.bottom() - kMargin - l.top;
    l.tile =
        std::max(6.0, std::floor(std::min(width / heads - kGap, height / layers - l.scoreHeight - kGap)));
    l.pitchX = l.tile + kGap;
    l.pitchY = l.tile + l.scoreHeight + kGap;
    return l;
}

QSize OverviewGrid::sizeForTile(double tile, const Style& style) const
{
    const QFontMetricsF label(style.label);
    const QFontMetricsF small(style.small);
    const double line = std::ceil(label.height());
    const int heads = std::max(m_data.heads, 1);
    const int layers = std::max(m_data.layers, 1);
    const double rowHeader = label.horizontalAdvance(QStringLiteral("L%1").arg(layers)) + 2 * kGap;
    const double width = std::max(2 * kMargin + rowHeader + heads * (tile + kGap), 420.0);
    const double legend =
        small.boundingRect(QRectF(0, 0, width - 2 * kMargin, 1e6), Qt::TextWordWrap, legendText()).height();
    const double title = style.showTitle ? std::ceil(QFontMetricsF(style.title).height()) + kMargin : 0.0;
    const double height = kMargin + title + legend + kMargin + line + kGap + line + 6 +
                          layers * (tile + line + 2 + kGap) + kMargin;
    return QSize(int(std::ceil(width)), int(std::ceil(height)));
}

const QImage& OverviewGrid::scaledThumbnail(int index, int pixels) const
{
    if (pixels != m_scaledSize) {
        m_scaled = QVector<QImage>(m_thumbnails.size());
        m_scaledSize = pixels;
    }
    QImage& scaled = m_scaled[index];
    const QImage& source = m_thumbnails[index];
    if (scaled.isNull() && !source.isNull())
        scaled = source.scaled(pixels, pixels, Qt::IgnoreAspectRatio,
                               source.width() > pixels ? Qt::SmoothTransformation : Qt::FastTransformation);
    return scaled;
}

void OverviewGrid::paintGrid(QPainter& painter, const Layout& l, const Style& style, bool interactive) const
{
    painter.save();
    const QFontMetricsF label(style.label);
    const QFontMetricsF small(style.small);
    if (style.showTitle) {
        painter.setFont(style.title);
        painter.setPen(style.text);
        painter.drawText(l.title, Qt::AlignLeft | Qt::AlignVCenter,
                         tr("Attention of every head, with no-op scores"));
    }
    painter.setFont(style.small);
    painter.setPen(style.secondary);
    painter.drawText(l.legend, Qt::TextWordWrap | Qt::AlignLeft | Qt::AlignTop, legendText());

    // Colour key: the thumbnails' scale and the high-score cue.
    QRectF bar(l.key.left(), l.key.top() + 2, kKeyBarWidth, l.key.height() - 4);
    QLinearGradient gradient(bar.topLeft(), bar.topRight());
    for (int i = 0; i <= 16; ++i)
        gradient.setColorAt(i / 16.0, ColorMap::sequential(i / 16.0));
    painter.fillRect(bar, gradient);
    painter.setPen(style.text);
    double x = bar.right() + kGap;
    const QString scale = tr("attention probability 0 \u2013 %1").arg(QString::number(m_colorMax, 'g', 3));
    painter.drawText(QRectF(x, l.key.top(), small.horizontalAdvance(scale) + 2, l.key.height()),
                     Qt::AlignLeft | Qt::AlignVCenter, scale);
    x += small.horizontalAdvance(scale) + 3 * kGap;
    const QRectF cue(x, l.key.top() + 2, l.key.height() - 4, l.key.height() - 4);
    painter.setPen(QPen(kHighScore, 2.5));
    painter.setBrush(Qt::NoBrush);
    painter.drawRect(cue);
    painter.setPen(style.text);
    painter.drawText(
        QRectF(cue.right() + kGap, l.key.top(), l.key.right() - cue.right() - kGap, l.key.height()),
        Qt::AlignLeft | Qt::AlignVCenter,
        tr("score \u2265 %1 (red, bold)").arg(QString::number(m_threshold, 'f', 2)));

    // Head and layer numbers (1-based).
    painter.setFont(style.label);
    painter.setPen(style.text);
    for (int h = 0; h < m_data.heads; ++h)
        painter.drawText(
            QRectF(l.left + h * l.pitchX - kGap / 2, l.top - l.headerHeight, l.tile + kGap, l.headerHeight),
            Qt::AlignHCenter | Qt::AlignBottom, QStringLiteral("H%1").arg(h + 1));
    for (int layer = 0; layer < m_data.layers; ++layer)
        painter.drawText(
            QRectF(l.areaLeft + kMargin, l.top + layer * l.pitchY, l.rowHeaderWidth - kGap, l.tile),
            Qt::AlignRight | Qt::AlignVCenter, QStringLiteral("L%1").arg(layer + 1));

    QFont boldSmall = style.small;
    boldSmall.setBold(true);
    const bool scoresFit = small.horizontalAdvance(QStringLiteral("0.00")) <= l.tile + kGap;
    const double dpr = interactive ? devicePixelRatioF() : 1.0;
    for (int layer = 0; layer < m_data.layers; ++layer)
        for (int h = 0; h < m_data.heads; ++h) {
            const int i = layer * m_data.heads + h;
            const QRectF tile = l.tileRect(layer, h);
            const QImage& image =
                interactive ? scaledThumbnail(i, int(std::lround(l.tile * dpr))) : m_thumbnails[i];
            painter.setRenderHint(QPainter::SmoothPixmapTransform, !interactive && image.width() > l.tile);
            if (image.isNull())
                painter.fillRect(tile, style.background.darker(110));
            else
                painter.drawImage(tile, image);
            const bool hasScore = i < m_data.noopScore.size() && std::isfinite(m_data.noopScore[i]);
            const double score = hasScore ? m_data.noopScore[i] : 0.0;
            const bool high = hasScore && score >= m_threshold;
            painter.setBrush(Qt::NoBrush);
            if (high) {
                painter.setPen(QPen(kHighScore, 2.5));
                painter.drawRect(tile.adjusted(-1.25, -1.25, 1.25, 1.25));
            } else {
                painter.setPen(QPen(FigureStyle::gridLine(), 1));
                painter.drawRect(tile);
            }
            if (scoresFit) {
                painter.setFont(high ? boldSmall : style.small);
                painter.setPen(high ? kHighScore : style.text);
                painter.drawText(
                    QRectF(tile.left() - kGap / 2, tile.bottom() + 1, l.tile + kGap, l.scoreHeight),
                    Qt::AlignHCenter | Qt::AlignVCenter,
                    hasScore ? QString::number(score, 'f', 2) : QStringLiteral("\u2013"));
            }
            if (interactive && layer == m_currentLayer && h == m_currentHead) {
                QPen pen(style.focus, 2, hasFocus() ? Qt::DashLine : Qt::SolidLine);
                painter.setPen(pen);
                painter.drawRect(tile.adjusted(-3, -3, 3, 3 + l.scoreHeight));
            }
        }
    painter.restore();
}

QRect OverviewGrid::thumbnailRect(int layer, int head) const
{
    return layoutFor(rect(), widgetStyle()).tileRect(layer, head).toAlignedRect();
}

bool OverviewGrid::tileAt(const QPoint& pos, int* layer, int* head) const
{
    const Layout l = layoutFor(rect(), widgetStyle());
    const double dx = pos.x() - l.left;
    const double dy = pos.y() - l.top;
    if (dx < 0 || dy < 0) return false;
    const int h = int(dx / l.pitchX);
    const int r = int(dy / l.pitchY);
    if (h >= m_data.heads || r >= m_data.layers) return false;
    // The thumbnail and the score under it; not the gaps.
    if (dx - h * l.pitchX > l.tile || dy - r * l.pitchY > l.tile + l.scoreHeight) return false;
    *layer = r;
    *head = h;
    return true;
}

void OverviewGrid::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    const Style style = widgetStyle();
    painter.fillRect(rect(), style.background);
    paintGrid(painter, layoutFor(rect(), style), style, true);
}

void OverviewGrid::mousePressEvent(QMouseEvent* event)
{
    int layer, head;
    if (event->button() == Qt::LeftButton && tileAt(event->position().toPoint(), &layer, &head)) {
        setFocus(Qt::MouseFocusReason);
        setCurrent(layer, head);
        Q_EMIT headActivated(layer, head);
        event->accept();
        return;
    }
    QWidget::mousePressEvent(event);
}

void OverviewGrid::keyPressEvent(QKeyEvent* event)
{
    switch (event->key()) {
    case Qt::Key_Left:
        setCurrent(m_currentLayer, m_currentHead - 1);
        break;
    case Qt::Key_Right:
        setCurrent(m_currentLayer, m_currentHead + 1);
        break;
    case Qt::Key_Up:
        setCurrent(m_currentLayer - 1, m_currentHead);
        break;
    case Qt::Key_Down:
        setCurrent(m_currentLayer + 1, m_currentHead);
        break;
    case Qt::Key_Home:
        setCurrent(m_currentLayer, 0);
        break;
    case Qt::Key_End:
        setCurrent(m_currentLayer, m_data.heads - 1);
        break;
    case Qt::Key_Return:
    case Qt::Key_Enter:
    case Qt::Key_Space:
        if (m_data.layers > 0 && m_data.heads > 0) Q_EMIT headActivated(m_currentLayer, m_currentHead);
        break;
    default:
        QWidget::keyPressEvent(event);
        return;
    }
    event->accept();
}

bool OverviewGrid::event(QEvent* event)
{
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        int layer, head;
        if (tileAt(help->pos(), &layer, &head)) {
            const int i = layer * m_data.heads + head;
            const QString score = i < m_data.noopScore.size()
                                      ? QString::asprintf("%.4f", double(m_data.noopScore[i]))
                                      : QStringLiteral("\u2013");
            QToolTip::showText(help->globalPos(),
                               tr("Layer %1, head %2\nno-op score %3\n%4")
                                   .arg(layer + 1)
                                   .arg(head + 1)
                                   .arg(score, m_data.scoreDescription),
                               this, thumbnailRect(layer, head));
        } else {
            QToolTip::hideText();
            event->ignore();
        }
        return true;
    }
    if (event->type() == QEvent::FocusIn || event->type() == QEvent::FocusOut) update();
    return QWidget::event(event);
}

QSize OverviewGrid::sizeHint() const
{
    return sizeForTile(72, widgetStyle());
}

QSize OverviewGrid::minimumSizeHint() const
{
    return sizeForTile(28, widgetStyle());
}

QSize OverviewGrid::preferredFigureSize() const
{
    return sizeForTile(64, figureStyle()).expandedTo(QSize(640, 240));
}

void OverviewGrid::paintFigure(QPainter& painter, const QRect& area) const
{
    const Style style = figureStyle();
    painter.fillRect(area, style.background);
    paintGrid(painter, layoutFor(area, style), style, false);
}

QString OverviewGrid::figureCsv() const
{
    QString csv = QStringLiteral("layer,head,score\n");
    for (int layer = 0; layer < m_data.layers; ++layer)
        for (int h = 0; h < m_data.heads; ++h) {
            const int i = layer * m_data.heads + h;
            csv += QString::number(layer + 1) + QLatin1Char(',') + QString::number(h + 1) + QLatin1Char(',') +
                   (i < m_data.noopScore.size() ? csvNumber(m_data.noopScore[i]) : QString()) +
                   QLatin1Char('\n');
        }
    return csv;
}

} // namespace outlierlens
