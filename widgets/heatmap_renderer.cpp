#include "heatmap_renderer.h"

#include "colormap.h"
#include "figure_style.h"
#include "heatmap_parts.h"
#include "nice_numbers.h"

#include <QFontMetricsF>
#include <QHash>
#include <QPaintEngine>
#include <QPainter>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

namespace outlierlens {
namespace {

using namespace heatmap_parts;

constexpr double kMaxLabelWidth = 120.0; // longer labels are elided
constexpr int kLutSize = 1024;
const QRgb kNonFinite = qRgb(255, 0, 255); // impossible to mistake for a colour-map value

/// Positions to label between first and last (exclusive): `priority` ones (highlights) first, then every
/// step-th, keeping labels at least `spacing` pixels apart. `step` receives the step.
QVector<int> labelPositions(int first, int last, double cell, double spacing, const QVector<int>& priority,
                            int* step)
{
    *step = int(niceStep(std::max(1.0, spacing / std::max(cell, 1e-9))));
    QVector<int> chosen;
    const auto clear = [&](int i) {
        return std::all_of(chosen.begin(), chosen.end(),
                           [&](int j) { return std::abs(i - j) * cell >= spacing - 1e-9; });
    };
    for (int p : priority)
        if (p >= first && p < last && clear(p)) chosen.append(p);
    const int prioritized = chosen.size();
    for (int i = (first + *step - 1) / *step * *step; i < last; i += *step) {
        const bool free = std::all_of(chosen.begin(), chosen.begin() + prioritized,
                                      [&](int j) { return std::abs(i - j) * cell >= spacing - 1e-9; });
        if (free) chosen.append(i);
    }
    return chosen;
}

/// Visible cell range [first, last) along one axis.
void visibleRange(double clipStart, double clipEnd, double origin, double cell, int count, int* first,
                  int* last)
{
    *first = std::clamp(int(std::floor((clipStart - origin) / cell)), 0, count);
    *last = std::clamp(int(std::ceil((clipEnd - origin) / cell)), 0, count);
}

} // namespace

HeatmapRenderer::Fonts HeatmapRenderer::figureFonts()
{
    Fonts f;
    f.title = FigureStyle::captionFont();
    f.label = FigureStyle::labelFont();
    f.small = FigureStyle::smallFont();
    f.text = FigureStyle::text();
    f.secondary = FigureStyle::secondaryText();
    f.background = FigureStyle::background();
    return f;
}

void HeatmapRenderer::setData(const MatrixData& data, ColorScale scale)
{
    m_data = data;
    if (m_data.values.size() != qsizetype(m_data.rows) * m_data.cols || m_data.rows < 0 || m_data.cols < 0) {
        qWarning("HeatmapRenderer: %d x %d matrix with %lld values; showing nothing", m_data.rows,
                 m_data.cols, static_cast<long long>(m_data.values.size()));
        m_data = MatrixData();
    }
    m_scale = scale;
    m_highlightRows.clear();
    m_highlightCols.clear();
    m_level = LevelImage();
    updateColorRange();
}

void HeatmapRenderer::setFixedMaximum(double maximum)
{
    m_fixedMax = maximum;
    m_level = LevelImage();
    updateColorRange();
}

QStringList HeatmapRenderer::legendEntries() const
{
    QStringList entries;
    if (m_markZeros && m_hasZeros) entries << tr("exactly 0");
    if (hasMaskedCells()) entries << m_data.maskedName();
    return entries;
}

void HeatmapRenderer::setMarkExactZeros(bool mark)
{
    m_markZeros = mark;
    m_level = LevelImage();
}

QString HeatmapRenderer::rowLabel(int row) const
{
    return row < m_data.rowLabels.size() ? m_data.rowLabels[row] : QString::number(row);
}

QString HeatmapRenderer::columnLabel(int col) const
{
    return col < m_data.colLabels.size() ? m_data.colLabels[col] : QString::number(col);
}

QString HeatmapRenderer::subtitle() const
{
    // "query token × key token": what rows and columns are, short enough for narrow panels.
    if (!m_data.rowTitle.isEmpty() && !m_data.colTitle.isEmpty())
        return tr("%1 × %2").arg(m_data.rowTitle, m_data.colTitle);
    if (!m_data.rowTitle.isEmpty()) return tr("rows: %1").arg(m_data.rowTitle);
    if (!m_data.colTitle.isEmpty()) return tr("columns: %1").arg(m_data.colTitle);
    return QString();
}

HeatmapRenderer::Metrics HeatmapRenderer::measure(const Fonts& fonts) const
{
    Metrics m;
    const QFontMetricsF label(fonts.label);
    const QFontMetricsF title(fonts.title);
    const QFontMetricsF small(fonts.small);
    m.lineHeight = std::ceil(label.height());
    if (!m_title.isEmpty()) m.titleHeight += std::ceil(title.height()) + kGap;
    if (!subtitle().isEmpty()) m.titleHeight += std::ceil(small.height()) + kGap;

    double widestRow = 0, widestCol = 0;
    widestLabels(fonts.label, &widestRow, &widestCol);
    widestCol = std::min(std::ceil(widestCol), kMaxLabelWidth);
    // Numbers (dimensions) stay horizontal; words (tokens) stand on end.
    m.rotateColumns = widestCol > label.horizontalAdvance(QStringLiteral("0000"));
    m.headerHeight = m.rotateColumns ? widestCol + 2 * kGap : m.lineHeight + kGap;
    // Glyphs need less than the line height (which includes leading): denser labels still don't touch.
    const double glyphs = std::ceil(label.height() * 0.85);
    m.colSpacing = m.rotateColumns ? glyphs : widestCol + 2 * kGap;
    m.rowSpacing = glyphs;

    if (m_rowLabelsVisible) {
        m.rowLabelWidth = std::min(std::ceil(widestRow), kMaxLabelWidth) + 2 * kGap;
    }

    if (m_colorBarVisible) measureColorBar(fonts, &m);
    return m;
}

HeatmapRenderer::Frame HeatmapRenderer::figureFrame(const QPointF& topLeft, const QSizeF& cell, int top) const
{
    Frame f;
    f.figure = true;
    f.fonts = figureFonts();
    f.metrics = measure(f.fonts);
    const Metrics& m = f.metrics;
    const double width = m.rowLabelWidth + m_data.cols * cell.width() + m.colorBarWidth;
    f.cells = QRectF(topLeft.x() + m.rowLabelWidth, topLeft.y() + top, m_data.cols * cell.width(),
                     m_data.rows * cell.height());
    f.title = QRectF(topLeft.x(), topLeft.y(), width, m.titleHeight);
    f.header = QRectF(f.cells.left(), f.cells.top() - m.headerHeight, f.cells.width(), m.headerHeight);
    f.rowLabels = QRectF(topLeft.x(), f.cells.top(), m.rowLabelWidth, f.cells.height());
    f.origin = f.cells.topLeft();
    f.exposed = f.cells;
    f.cellWidth = cell.width();
    f.cellHeight = cell.height();
    f.bottom = f.cells.bottom() + std::max(m.legendHeight + kGap, kMinBarHeight - f.cells.height());
    return f;
}

QMargins HeatmapRenderer::figureMargins() const
{
    const Metrics m = measure(figureFonts());
    return QMargins(int(std::ceil(m.rowLabelWidth)), int(std::ceil(m.titleHeight + m.headerHeight)),
                    int(std::ceil(m.colorBarWidth)), int(std::ceil(m.legendHeight + kGap)));
}

void HeatmapRenderer::figurePlacement(const QRect& area, QPointF* topLeft, double* cellSize) const
{
    const QMargins m = figureMargins();
    const int rows = std::max(m_data.rows, 1);
    const int cols = std::max(m_data.cols, 1);
    double s = std::min(double(area.width() - m.left() - m.right()) / cols,
                        double(area.height() - m.top() - m.bottom()) / rows);
    s = std::max(s, kMinCellSize);
    const double width = m.left() + cols * s + m.right();
    *topLeft = QPointF(area.left() + std::max(0.0, (area.width() - width) / 2), area.top());
    *cellSize = s;
}

QSize HeatmapRenderer::preferredFigureSize() const
{
    const QMargins m = figureMargins();
    const int rows = std::max(m_data.rows, 1);
    const int cols = std::max(m_data.cols, 1);
    const double s = std::clamp(640.0 / std::max(rows, cols), 2.0, 28.0);
    return QSize(std::max(240, int(std::ceil(m.left() + cols * s + m.right()))),
                 std::max(160, int(std::ceil(m.top() + rows * s + m.bottom()))));
}

void HeatmapRenderer::paintFigure(QPainter& painter, const QRect& area) const
{
    painter.fillRect(area, FigureStyle::background());
    QPointF topLeft;
    double s = 1;
    figurePlacement(area, &topLeft, &s);
    paint(painter, figureFrame(topLeft, QSizeF(s, s), figureMargins().top()));
}

QRectF HeatmapRenderer::figureCellRect(const QRect& area, int row, int col) const
{
    QPointF topLeft;
    double s = 1;
    figurePlacement(area, &topLeft, &s);
    const Frame f = figureFrame(topLeft, QSizeF(s, s), figureMargins().top());
    return QRectF(f.origin.x() + col * s, f.origin.y() + row * s, s, s);
}

void HeatmapRenderer::paint(QPainter& painter, const Frame& f) const
{
    painter.save();
    const Metrics& m = f.metrics;
    // Title and subtitle, starting over the cells when there is room.
    double y = f.title.top();
    const auto drawTitleLine = [&](const QFont& font, const QColor& color, QString text, bool subtitle) {
        const QFontMetricsF fm(font);
        // A narrow panel's subtitle drops its note in parentheses ("(0-based)") before it elides anything.
        const int note = text.lastIndexOf(QLatin1String(" ("));
        if (subtitle && note > 0 && text.endsWith(QLatin1Char(')')) &&
            fm.horizontalAdvance(text) > f.title.right() - f.title.left() - kGap)
            text = text.left(note);
        const double width = fm.horizontalAdvance(text);
        const double x = width <= f.title.right() - f.cells.left() ? f.cells.left() : f.title.left() + kGap;
        painter.setFont(font);
        painter.setPen(color);
        const QRectF line(x, y, f.title.right() - x, std::ceil(fm.height()));
        painter.drawText(line, Qt::AlignLeft | Qt::AlignVCenter,
                         fm.elidedText(text, Qt::ElideRight, line.width()));
        y += std::ceil(fm.height()) + kGap;
    };
    if (!m_title.isEmpty()) drawTitleLine(f.fonts.title, f.fonts.text, m_title, false);
    if (!subtitle().isEmpty()) drawTitleLine(f.fonts.small, f.fonts.secondary, subtitle(), true);

    if (!m_data.isEmpty()) {
        paintCells(painter, f);
        paintZeroCrosses(painter, f);
        paintHighlights(painter, f);
        paintRowLabels(painter, f);
        paintColumnLabels(painter, f);
        if (m.colorBarWidth > 0) paintColorBar(painter, f);
    }
    painter.restore();
}

void HeatmapRenderer::paintCells(QPainter& painter, const Frame& f) const
{
    const double w = f.cellWidth, h = f.cellHeight;
    if (f.exposed.isEmpty()) return;
    int c0, c1, r0, r1;
    visibleRange(f.exposed.left(), f.exposed.right(), f.origin.x(), w, m_data.cols, &c0, &c1);
    visibleRange(f.exposed.top(), f.exposed.bottom(), f.origin.y(), h, m_data.rows, &r0, &r1);
    if (c0 >= c1 || r0 >= r1) return;
    const bool zeros = m_markZeros && m_hasZeros && std::min(w, h) < kCrossMinCell;
    // Level of detail: blocks of cells at least one device pixel wide and high, so that scaling the
    // image never skips a block (nearest-neighbour downscaling would drop single sharp cells).
    const QTransform t = painter.deviceTransform();
    const double sx = std::max(std::hypot(t.m11(), t.m12()), 1e-9);
    const double sy = std::max(std::hypot(t.m21(), t.m22()), 1e-9);
    const int kx = std::max(1, int(std::ceil(1.0 / (w * sx) - 1e-9)));
    const int ky = std::max(1, int(std::ceil(1.0 / (h * sy) - 1e-9)));
    const QRect needed(QPoint(c0 / kx, r0 / ky), QPoint((c1 - 1) / kx, (r1 - 1) / ky));
    if (m_level.kx != kx || m_level.ky != ky || m_level.zeros != zeros || !m_level.blocks.contains(needed)) {
        // Keep some cells around the visible part, so that scrolling a little reuses the image.
        const int bx = (m_data.cols + kx - 1) / kx, by = (m_data.rows + ky - 1) / ky;
        const QRect all(0, 0, bx, by);
        const QRect blocks =
            needed
                .adjusted(-needed.width() / 2, -needed.height() / 2, needed.width() / 2, needed.height() / 2)
                .intersected(all);
        m_level = LevelImage{kx, ky, blocks, zeros, colorBlocks(kx, ky, blocks, zeros)};
    }
    const QRect source = needed.translated(-m_level.blocks.topLeft());
    const QRectF target(f.origin.x() + needed.left() * kx * w, f.origin.y() + needed.top() * ky * h,
                        needed.width() * kx * w, needed.height() * ky * h);
    // A last, partial block would reach past the matrix: clip there.
    const QRectF content(f.origin, QSizeF(m_data.cols * w, m_data.rows * h));
    painter.save();
    painter.setClipRect(f.cells.intersected(content), Qt::IntersectClip);
    painter.setRenderHint(QPainter::SmoothPixmapTransform, false);
    const QImage& image = m_level.image;
    if (f.figure) {
        // Viewers smooth embedded images they scale (SVG, PDF): hand them the cells already enlarged
        // with nearest-neighbour sampling, at the device's resolution (twice that for vector devices).
        const QPaintEngine* engine = painter.paintEngine();
        const bool vector =
            engine && (engine->type() == QPaintEngine::SVG || engine->type() == QPaintEngine::Pdf);
        const double scale = std::max({sx, sy, 1.0}) * (vector ? 2.0 : 1.0);
        const QSize pixels(int(std::ceil(target.width() * scale)), int(std::ceil(target.height() * scale)));
        if (qint64(pixels.width()) * pixels.height() <= 4096LL * 4096LL && pixels.width() >= source.width() &&
            pixels.height() >= source.height())
            painter.drawImage(
                target, image.copy(source).scaled(pixels, Qt::IgnoreAspectRatio, Qt::FastTransformation));
        else
            painter.drawImage(target, image, source);
    } else {
        painter.drawImage(target, image, source);
    }
    painter.restore();
}

void HeatmapRenderer::paintZeroCrosses(QPainter& painter, const Frame& f) const
{
    const double w = f.cellWidth, h = f.cellHeight;
    const double s = std::min(w, h);
    if (!m_markZeros || !m_hasZeros || s < kCrossMinCell) return;
    if (f.exposed.isEmpty()) return;
    int c0, c1, r0, r1;
    visibleRange(f.exposed.left(), f.exposed.right(), f.origin.x(), w, m_data.cols, &c0, &c1);
    visibleRange(f.exposed.top(), f.exposed.bottom(), f.origin.y(), h, m_data.rows, &r0, &r1);
    QColor color = ColorMap::textOn(ColorMap::color(m_scale, 0.0, m_colorMax));
    color.setAlpha(150); // visible, yet the pattern of non-zero cells stays readable
    const QPen pen(color, std::max(1.2, s * 0.08), Qt::SolidLine, Qt::RoundCap);
    const double inset = s * 0.2;
    painter.save();
    painter.setClipRect(f.cells, Qt::IntersectClip);
    const QPaintEngine* engine = painter.paintEngine();
    const QTransform device = painter.deviceTransform();
    if (engine && engine->type() == QPaintEngine::Raster && device.type() <= QTransform::TxTranslate) {
        // Thousands of antialiased lines take ~100 ms; stamping one pre-drawn cross takes a few.
        QImage cross(int(std::ceil(w)), int(std::ceil(h)), QImage::Format_ARGB32_Premultiplied);
        cross.fill(Qt::transparent);
        {
            QPainter p(&cross);
            p.setRenderHint(QPainter::Antialiasing);
            p.setPen(pen);
            p.drawLine(QPointF(inset, inset), QPointF(w - inset, h - inset));
            p.drawLine(QPointF(w - inset, inset), QPointF(inset, h - inset));
        }
        for (int r = r0; r < r1; ++r) {
            const float* row = m_data.values.constData() + qsizetype(r) * m_data.cols;
            for (int c = c0; c < c1; ++c)
                if (row[c] == 0.0f && !m_data.isMasked(r, c))
                    painter.drawImage(
                        QPointF(std::round(f.origin.x() + c * w), std::round(f.origin.y() + r * h)), cross);
        }
    } else {
        QVector<QLineF> lines;
        for (int r = r0; r < r1; ++r)
            for (int c = c0; c < c1; ++c)
                if (m_data.at(r, c) == 0.0f && !m_data.isMasked(r, c)) {
                    const double x = f.origin.x() + c * w;
                    const double y = f.origin.y() + r * h;
                    lines << QLineF(x + inset, y + inset, x + w - inset, y + h - inset)
                          << QLineF(x + w - inset, y + inset, x + inset, y + h - inset);
                }
        painter.setRenderHint(QPainter::Antialiasing);
        painter.setPen(pen);
        painter.drawLines(lines);
    }
    painter.restore();
}

QSizeF HeatmapRenderer::fittedCell(double width, double height, int rows, int cols, double maxRowHeight)
{
    const double h = std::clamp(height / std::max(rows, 1), kMinCellSize, maxRowHeight);
    return {std::clamp(width / std::max(cols, 1), kMinCellSize, h), h};
}

void HeatmapRenderer::paintHighlights(QPainter& painter, const Frame& f) const
{
    if ((m_highlightRows.isEmpty() && m_highlightCols.isEmpty()) || !m_highlightOutlines) return;
    const double w = f.cellWidth, h = f.cellHeight;
    const QRectF content(f.origin, QSizeF(m_data.cols * w, m_data.rows * h));
    painter.save();
    painter.setClipRect(f.cells.adjusted(-2, -2, 2, 2), Qt::IntersectClip);
    painter.setBrush(Qt::NoBrush);
    painter.setPen(QPen(FigureStyle::highlight(), 2));
    for (int r : m_highlightRows)
        if (r >= 0 && r < m_data.rows)
            painter.drawRect(QRectF(content.left(), f.origin.y() + r * h, content.width(), h));
    for (int c : m_highlightCols)
        if (c >= 0 && c < m_data.cols)
            painter.drawRect(QRectF(f.origin.x() + c * w, content.top(), w, content.height()));
    painter.restore();
}

QVector<HeatmapRenderer::Label> HeatmapRenderer::rowLabels(const Frame& f) const
{
    QVector<Label> labels;
    if (f.metrics.rowLabelWidth <= 0 || m_data.isEmpty()) return labels;
    int r0, r1, step = 1;
    visibleRange(f.cells.top(), f.cells.bottom(), f.origin.y(), f.cellHeight, m_data.rows, &r0, &r1);
    // Sparse words mean little; sparse positions work as a ruler.
    const QVector<int> rows =
        labelPositions(r0, r1, f.cellHeight, f.metrics.rowSpacing, m_highlightRows, &step);
    const bool numbers = step >= 5 && m_data.rows > 1;
    for (int r : rows) {
        const double y = f.origin.y() + (r + 0.5) * f.cellHeight;
        if (y < f.cells.top() - 1 || y > f.cells.bottom() + 1) continue;
        const bool highlighted = m_highlightRows.contains(r);
        labels.append({r, y, numbers && !highlighted ? QString::number(r) : rowLabel(r), highlighted});
    }
    return labels;
}

QVector<HeatmapRenderer::Label> HeatmapRenderer::columnLabels(const Frame& f) const
{
    QVector<Label> labels;
    if (m_data.isEmpty()) return labels;
    int c0, c1, step = 1;
    visibleRange(f.cells.left(), f.cells.right(), f.origin.x(), f.cellWidth, m_data.cols, &c0, &c1);
    const QVector<int> cols =
        labelPositions(c0, c1, f.cellWidth, f.metrics.colSpacing, m_highlightCols, &step);
    const bool numbers = step >= 5 && m_data.cols > 1;
    // A label that would stick out of the panel (a panel without row labels or colour bar has no room
    // beside its cells) would be cut in half: it is left out instead.
    const QFontMetricsF fm(f.fonts.label);
    const double leftEdge = f.rowLabels.left(), rightEdge = f.cells.right() + f.metrics.colorBarWidth;
    for (int c : cols) {
        const double x = f.origin.x() + (c + 0.5) * f.cellWidth;
        if (x < f.cells.left() - 1 || x > f.cells.right() + 1) continue;
        const bool highlighted = m_highlightCols.contains(c);
        const QString text = numbers && !highlighted ? QString::number(c) : columnLabel(c);
        const double half =
            f.metrics.rotateColumns ? f.metrics.lineHeight / 2 : fm.horizontalAdvance(text) / 2;
        if (x - half < leftEdge - 1 || x + half > rightEdge + 1) continue;
        labels.append({c, x, text, highlighted});
    }
    return labels;
}

void HeatmapRenderer::paintRowLabels(QPainter& painter, const Frame& f) const
{
    const Metrics& m = f.metrics;
    if (m.rowLabelWidth <= 0) return;
    const QFontMetricsF fm(f.fonts.label);
    QFont bold = f.fonts.label;
    bold.setBold(true);
    painter.save();
    painter.setClipRect(f.rowLabels.adjusted(0, -m.lineHeight / 2, 0, m.lineHeight / 2), Qt::IntersectClip);
    for (const Label& label : rowLabels(f)) {
        const QRectF box(f.rowLabels.left(), label.centre - m.lineHeight / 2, m.rowLabelWidth - kGap,
                         m.lineHeight);
        painter.setFont(label.highlighted ? bold : f.fonts.label);
        painter.setPen(label.highlighted ? FigureStyle::highlight() : f.fonts.text);
        painter.drawText(box, Qt::AlignRight | Qt::AlignVCenter,
                         fm.elidedText(label.text, Qt::ElideRight, box.width() - kGap));
    }
    painter.restore();
}

void HeatmapRenderer::paintColumnLabels(QPainter& painter, const Frame& f) const
{
    const Metrics& m = f.metrics;
    const QFontMetricsF fm(f.fonts.label);
    QFont bold = f.fonts.label;
    bold.setBold(true);
    painter.save();
    const double spill = m.rotateColumns ? m.lineHeight / 2 : m.colSpacing / 2;
    painter.setClipRect(f.header.adjusted(-spill, 0, spill, 0), Qt::IntersectClip);
    for (const Label& label : columnLabels(f)) {
        const double x = label.centre;
        const QString& text = label.text;
        painter.setFont(label.highlighted ? bold : f.fonts.label);
        painter.setPen(label.highlighted ? FigureStyle::highlight() : f.fonts.text);
        if (m.rotateColumns) {
            const double length = f.header.height() - 2 * kGap;
            painter.save();
            painter.translate(x, f.header.bottom() - kGap);
            painter.rotate(-90);
            painter.drawText(QRectF(0, -m.lineHeight / 2, length, m.lineHeight),
                             Qt::AlignLeft | Qt::AlignVCenter, fm.elidedText(text, Qt::ElideRight, length));
            painter.restore();
        } else {
            const QRectF box(x - m.colSpacing / 2, f.header.top(), m.colSpacing,
                             f.header.height() - kGap / 2);
            painter.drawText(box, Qt::AlignHCenter | Qt::AlignBottom, text);
        }
    }
    painter.restore();
}

QString HeatmapRenderer::csv() const
{
    QString csv = QStringLiteral("row,col,row_label,col_label,value\n");
    csv.reserve(csv.size() + m_data.rows * m_data.cols * 24);
    for (int r = 0; r < m_data.rows; ++r)
        for (int c = 0; c < m_data.cols; ++c)
            csv += QString::number(r) + QLatin1Char(',') + QString::number(c) + QLatin1Char(',') +
                   csvField(rowLabel(r)) + QLatin1Char(',') + csvField(columnLabel(c)) + QLatin1Char(',') +
                   // A masked cell (a causal key after its query) has no value: empty, never the 0 of
                   // clipped softmax's exact zeros.
                   (m_data.isMasked(r, c) ? QString() : csvNumber(m_data.at(r, c))) + QLatin1Char('\n');
    return csv;
}

QString HeatmapRenderer::cellToolTip(int row, int col) const
{
    if (row < 0 || col < 0 || row >= m_data.rows || col >= m_data.cols) return QString();
    const float v = m_data.at(row, col);
    QString value = QString::asprintf("%.6g", double(v));
    if (m_data.isMasked(row, col))
        value =
            col > row
                ? tr("masked (the key comes after the query: causal attention never looks there)")
                : tr("masked (the key is outside the query's sliding window of %1 keys)").arg(m_data.window);
    else if (v == 0.0f && m_markZeros)
        value += tr("  (exactly 0)");
    const QString valueTitle = m_data.valueTitle.isEmpty() ? tr("value") : m_data.valueTitle;
    const QString rowTitle = m_data.rowTitle.isEmpty() ? tr("row") : m_data.rowTitle;
    const QString colTitle = m_data.colTitle.isEmpty() ? tr("column") : m_data.colTitle;
    return tr("%1: %2\n%3: %4 (position %5)\n%6: %7 (position %8)")
        .arg(valueTitle, value, rowTitle, rowLabel(row), QString::number(row), colTitle, columnLabel(col),
             QString::number(col));
}

void HeatmapRenderer::updateColorRange()
{
    const int rows = m_data.rows, cols = m_data.cols;
    const bool sequential = m_scale == ColorScale::Sequential;
    double magnitude = 0;
    bool zeros = false;
    for (int r = 0; r < rows; ++r) {
        const float* values = m_data.values.constData() + qsizetype(r) * cols;
        const int end = m_data.endSeen(r); // masked cells are not values
        float top = 0;
        for (int c = m_data.firstSeen(r); c < end; ++c) {
            const float v = values[c];
            if (!std::isfinite(v)) continue;
            top = std::max(top, sequential ? v : std::abs(v));
            zeros = zeros || v == 0.0f;
        }
        magnitude = std::max(magnitude, double(top));
    }
    m_hasZeros = zeros;
    m_colorMax = m_fixedMax > 0 ? m_fixedMax : (magnitude > 0 ? magnitude : 1.0);
}

QImage HeatmapRenderer::colorBlocks(int kx, int ky, const QRect& blocks, bool zeros) const
{
    // A lookup table keeps colouring to a few nanoseconds a cell.
    std::array<QRgb, kLutSize> lut;
    for (int i = 0; i < kLutSize; ++i) {
        const double t = double(i) / (kLutSize - 1);
        lut[i] =
            (m_scale == ColorScale::Sequential ? ColorMap::sequential(t) : ColorMap::diverging(2 * t - 1))
                .rgb();
    }
    const bool sequential = m_scale == ColorScale::Sequential;
    const double inverse = 1.0 / m_colorMax;
    QImage image(std::max(blocks.width(), 1), std::max(blocks.height(), 1), QImage::Format_RGB32);
    image.fill(FigureStyle::background());
    const int width = blocks.width();
    // Per block: the value of largest key (value or |value|), whether any cell was seen (unmasked),
    // whether one was not finite, whether all were exactly 0.
    std::vector<float> best(std::size_t(std::max(width, 0)));
    std::vector<float> key(best.size());
    std::vector<unsigned char> seen(best.size()), nonFinite(best.size()), allZero(best.size());
    for (int by = 0; by < blocks.height(); ++by) {
        std::fill(key.begin(), key.end(), -std::numeric_limits<float>::infinity());
        std::fill(seen.begin(), seen.end(), 0);
        std::fill(nonFinite.begin(), nonFinite.end(), 0);
        std::fill(allZero.begin(), allZero.end(), 1);
        const int rowStart = (blocks.top() + by) * ky;
        const int rowEnd = std::min(rowStart + ky, m_data.rows);
        const int colStart = blocks.left() * kx;
        const int colEnd = std::min((blocks.left() + width) * kx, m_data.cols);
        for (int r = rowStart; r < rowEnd; ++r) {
            const float* values = m_data.values.constData() + qsizetype(r) * m_data.cols;
            const int end = std::min(colEnd, m_data.endSeen(r));
            for (int c = std::max(colStart, m_data.firstSeen(r)); c < end; ++c) {
                const std::size_t b = std::size_t((c - colStart) / kx);
                const float v = values[c];
                seen[b] = 1;
                if (!std::isfinite(v)) {
                    nonFinite[b] = 1;
                    continue;
                }
                const float k = sequential ? v : std::abs(v);
                if (k > key[b]) key[b] = k, best[b] = v;
                if (v != 0.0f) allZero[b] = 0;
            }
        }
        auto* line = reinterpret_cast<QRgb*>(image.scanLine(by));
        for (int b = 0; b < width; ++b) {
            const std::size_t i = std::size_t(b);
            if (!seen[i]) {
                line[b] = kMaskedFill; // every cell of the block is masked (or outside the matrix)
            } else if (nonFinite[i]) {
                line[b] = kNonFinite;
            } else if (zeros && allZero[i]) {
                line[b] = kZeroFill;
            } else {
                double t = best[i] * inverse;
                if (!sequential) t = 0.5 * (t + 1.0);
                line[b] = lut[std::size_t(std::clamp(int(std::lround(t * (kLutSize - 1))), 0, kLutSize - 1))];
            }
        }
    }
    return image;
}

void HeatmapRenderer::widestLabels(const QFont& font, double* rows, double* cols) const
{
    LabelWidths& cache = m_labelWidths;
    const QString fontKey = font.key();
    if (cache.fontKey != fontKey || cache.rowCount != m_data.rows || cache.colCount != m_data.cols ||
        cache.rows != m_data.rowLabels || cache.cols != m_data.colLabels) {
        const QFontMetricsF fm(font);
        // Token labels repeat: measure each distinct one once.
        QHash<QString, double> widths;
        const auto widest = [&](int count, const std::function<QString(int)>& text) {
            double most = 0;
            for (int i = 0; i < count; ++i) {
                const QString t = text(i);
                auto it = widths.find(t);
                if (it == widths.end()) it = widths.insert(t, fm.horizontalAdvance(t));
                most = std::max(most, *it);
            }
            return most;
        };
        cache.widestRow = widest(m_data.rows, [this](int r) { return rowLabel(r); });
        cache.widestCol = widest(m_data.cols, [this](int c) { return columnLabel(c); });
        cache.fontKey = fontKey;
        cache.rows = m_data.rowLabels, cache.cols = m_data.colLabels;
        cache.rowCount = m_data.rows, cache.colCount = m_data.cols;
    }
    *rows = cache.widestRow;
    *cols = cache.widestCol;
}

} // namespace outlierlens
