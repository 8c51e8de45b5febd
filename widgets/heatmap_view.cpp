#include "heatmap_view.h"

#include <QApplication>
#include <QContextMenuEvent>
#include <QEvent>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPaintEvent>
#include <QPainter>
#include <QScrollBar>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace outlierlens {
namespace {

constexpr double kZoomStep = 1.25;

QString toolTipHtml(const QString& plain)
{
    return QStringLiteral("<p style='white-space:pre'>") +
           plain.toHtmlEscaped().replace(QLatin1Char('\n'), QLatin1String("<br>")) + QStringLiteral("</p>");
}

} // namespace

HeatmapView::HeatmapView(QWidget* parent)
    : QAbstractScrollArea(parent)
{
    viewport()->setMouseTracking(true);
    viewport()->setAutoFillBackground(false);
    setFocusPolicy(Qt::StrongFocus);
    setFrameShape(QFrame::NoFrame);
}

HeatmapView::~HeatmapView() = default;

void HeatmapView::changed()
{
    invalidateMetrics();
    if (m_fit) m_cell = fitCellSize();
    updateScrollBars();
    viewport()->update();
}

void HeatmapView::setData(const MatrixData& data, ColorScale scale)
{
    m_renderer.setData(data, scale);
    m_hoverRow = m_hoverCol = -1;
    changed();
}

void HeatmapView::setTitle(const QString& title)
{
    m_renderer.setTitle(title);
    changed();
}

void HeatmapView::setFixedMaximum(double maximum)
{
    m_renderer.setFixedMaximum(maximum);
    changed();
}

void HeatmapView::setMarkExactZeros(bool mark)
{
    m_renderer.setMarkExactZeros(mark);
    changed();
}

void HeatmapView::setHighlightedRows(const QVector<int>& rows)
{
    m_renderer.setHighlightedRows(rows);
    viewport()->update();
}

void HeatmapView::setHighlightedColumns(const QVector<int>& columns)
{
    m_renderer.setHighlightedColumns(columns);
    viewport()->update();
}

void HeatmapView::setRowLabelsVisible(bool visible)
{
    m_renderer.setRowLabelsVisible(visible);
    changed();
}

void HeatmapView::setColorBarVisible(bool visible)
{
    m_renderer.setColorBarVisible(visible);
    changed();
}

QString HeatmapView::cellToolTip(int row, int col) const
{
    return m_renderer.cellToolTip(row, col);
}

// ---- Figure: drawn from the data alone ----

QSize HeatmapView::preferredFigureSize() const
{
    return m_renderer.preferredFigureSize();
}

void HeatmapView::paintFigure(QPainter& painter, const QRect& area) const
{
    m_renderer.paintFigure(painter, area);
}

QString HeatmapView::figureCsv() const
{
    return m_renderer.csv();
}

QString HeatmapView::figureName() const
{
    return m_figureName.isEmpty() ? QStringLiteral("heatmap") : m_figureName;
}

QMargins HeatmapView::figureMargins() const
{
    return m_renderer.figureMargins();
}

void HeatmapView::paintFigureWithCellSize(QPainter& painter, const QPointF& topLeft, double cellSize,
                                          int top) const
{
    paintFigureWithCellDimensions(painter, topLeft, QSizeF(cellSize, cellSize), top);
}

void HeatmapView::paintFigureWithCellDimensions(QPainter& painter, const QPointF& topLeft, const QSizeF& cell,
                                                int top) const
{
    m_renderer.paint(painter, m_renderer.figureFrame(topLeft, cell, top));
}

QRectF HeatmapView::figureCellRect(const QRect& area, int row, int col) const
{
    return m_renderer.figureCellRect(area, row, col);
}

// ---- widget geometry, zoom and pan ----

HeatmapRenderer::Fonts HeatmapView::widgetFonts() const
{
    HeatmapRenderer::Fonts f;
    f.label = font();
    f.title = font();
    f.title.setBold(true);
    f.small = font();
    if (f.small.pointSizeF() > 0) f.small.setPointSizeF(f.small.pointSizeF() * 0.9);
    f.text = palette().color(QPalette::Text);
    f.secondary = palette().color(QPalette::PlaceholderText);
    f.background = palette().color(QPalette::Base);
    return f;
}

const HeatmapView::Metrics& HeatmapView::widgetMetrics() const
{
    if (!m_metrics) m_metrics = m_renderer.measure(widgetFonts());
    return *m_metrics;
}

void HeatmapView::invalidateMetrics()
{
    m_metrics.reset();
    updateGeometry();
}

int HeatmapView::naturalTopMargin() const
{
    const Metrics& m = widgetMetrics();
    return int(std::ceil(m.titleHeight + m.headerHeight));
}

void HeatmapView::setMinimumTopMargin(int pixels)
{
    if (pixels == m_minTopMargin) return;
    m_minTopMargin = pixels;
    if (m_fit) m_cell = fitCellSize();
    updateScrollBars();
    viewport()->update();
}

HeatmapView::Frame HeatmapView::widgetFrame() const
{
    Frame f;
    f.fonts = widgetFonts();
    f.metrics = widgetMetrics();
    const Metrics& m = f.metrics;
    const QRectF vp = viewport()->rect();
    const double top = std::max(m.titleHeight + m.headerHeight, double(m_minTopMargin));
    f.cells = QRectF(m.rowLabelWidth, top, std::max(0.0, vp.width() - m.rowLabelWidth - m.colorBarWidth),
                     std::max(0.0, vp.height() - top));
    f.title = QRectF(0, 0, vp.width(), m.titleHeight);
    f.header = QRectF(f.cells.left(), top - m.headerHeight, f.cells.width(), m.headerHeight);
    f.rowLabels = QRectF(0, top, m.rowLabelWidth, f.cells.height());
    f.origin = QPointF(f.cells.left() - horizontalScrollBar()->value(),
                       f.cells.top() - verticalScrollBar()->value());
    f.cellWidth = cellWidth();
    f.cellHeight = m_cell;
    f.bottom = vp.bottom();
    f.exposed = f.cells;
    return f;
}

QRect HeatmapView::cellArea() const
{
    return widgetFrame().cells.toAlignedRect();
}

QPointF HeatmapView::cellOrigin() const
{
    return widgetFrame().origin;
}

QStringList HeatmapView::shownRowLabels() const
{
    QStringList texts;
    for (const HeatmapRenderer::Label& label : m_renderer.rowLabels(widgetFrame()))
        texts << label.text;
    return texts;
}

QStringList HeatmapView::shownColumnLabels() const
{
    QStringList texts;
    for (const HeatmapRenderer::Label& label : m_renderer.columnLabels(widgetFrame()))
        texts << label.text;
    return texts;
}

double HeatmapView::fitCellSize() const
{
    if (data().isEmpty()) return m_cell;
    const Metrics& m = widgetMetrics();
    const QRect vp = viewport()->rect();
    const double top = std::max(m.titleHeight + m.headerHeight, double(m_minTopMargin));
    const double width = vp.width() - m.rowLabelWidth - m.colorBarWidth;
    const double height = vp.height() - top;
    return std::clamp(std::min(width / (data().cols * m_aspect), height / data().rows),
                      HeatmapRenderer::kMinCellSize, HeatmapRenderer::kMaxCellSize);
}

bool HeatmapView::cellAt(const QPoint& viewportPos, int* row, int* col) const
{
    const Frame f = widgetFrame();
    if (data().isEmpty() || !f.cells.contains(viewportPos)) return false;
    const int c = int(std::floor((viewportPos.x() - f.origin.x()) / f.cellWidth));
    const int r = int(std::floor((viewportPos.y() - f.origin.y()) / f.cellHeight));
    if (r < 0 || c < 0 || r >= data().rows || c >= data().cols) return false;
    *row = r;
    *col = c;
    return true;
}

void HeatmapView::updateScrollBars()
{
    const Frame f = widgetFrame();
    const int contentWidth = int(std::ceil(data().cols * f.cellWidth - 1e-6));
    const int contentHeight = int(std::ceil(data().rows * f.cellHeight - 1e-6));
    horizontalScrollBar()->setRange(0, std::max(0, contentWidth - int(f.cells.width())));
    horizontalScrollBar()->setPageStep(std::max(1, int(f.cells.width())));
    horizontalScrollBar()->setSingleStep(std::max(1, int(std::lround(f.cellWidth))));
    verticalScrollBar()->setRange(0, std::max(0, contentHeight - int(f.cells.height())));
    verticalScrollBar()->setPageStep(std::max(1, int(f.cells.height())));
    verticalScrollBar()->setSingleStep(std::max(1, int(std::lround(f.cellHeight))));
}

void HeatmapView::zoomAt(const QSizeF& cell, const QPointF& anchor, bool user)
{
    const Frame f = widgetFrame();
    const QPointF a(std::clamp(anchor.x(), f.cells.left(), f.cells.right()),
                    std::clamp(anchor.y(), f.cells.top(), f.cells.bottom()));
    // Keep the matrix point under the anchor where it is.
    const double cx = (a.x() - f.origin.x()) / f.cellWidth;
    const double cy = (a.y() - f.origin.y()) / f.cellHeight;
    m_fit = false;
    if (cell.width() > 0 && cell.height() > 0) m_aspect = cell.width() / cell.height();
    m_cell = std::clamp(cell.height(), HeatmapRenderer::kMinCellSize, HeatmapRenderer::kMaxCellSize);
    updateScrollBars();
    horizontalScrollBar()->setValue(int(std::lround(cx * cellWidth() - (a.x() - f.cells.left()))));
    verticalScrollBar()->setValue(int(std::lround(cy * m_cell - (a.y() - f.cells.top()))));
    viewport()->update();
    if (user) Q_EMIT userZoomed(m_cell);
}

void HeatmapView::zoomBy(double factor, const QPointF& anchor)
{
    zoomAt(cellDimensions() * factor, anchor, true);
}

void HeatmapView::zoomIn()
{
    zoomBy(kZoomStep, cellArea().center());
}

void HeatmapView::zoomOut()
{
    if (m_cell / kZoomStep <= fitCellSize() + 1e-9)
        fitToWindow();
    else
        zoomBy(1.0 / kZoomStep, cellArea().center());
}

void HeatmapView::fitToWindow()
{
    m_fit = true;
    m_cell = fitCellSize();
    updateScrollBars();
    horizontalScrollBar()->setValue(0);
    verticalScrollBar()->setValue(0);
    viewport()->update();
    Q_EMIT userZoomed(m_cell);
}

void HeatmapView::setCellSize(double pixels)
{
    setCellDimensions(QSizeF(pixels, pixels));
}

void HeatmapView::setCellDimensions(const QSizeF& cell)
{
    zoomAt(cell, cellArea().center(), false);
}

void HeatmapView::paintEvent(QPaintEvent* event)
{
    QPainter painter(viewport());
    painter.fillRect(event->rect(), palette().color(QPalette::Base));
    Frame f = widgetFrame();
    f.exposed = f.cells.intersected(QRectF(event->rect()));
    m_renderer.paint(painter, f);
    if (m_hoverRow >= 0 && m_hoverRow < data().rows && m_hoverCol < data().cols) {
        painter.setClipRect(f.cells);
        painter.setPen(QPen(palette().color(QPalette::Highlight), 1.5));
        painter.setBrush(Qt::NoBrush);
        painter.drawRect(QRectF(f.origin.x() + m_hoverCol * f.cellWidth,
                                f.origin.y() + m_hoverRow * f.cellHeight, f.cellWidth, f.cellHeight));
    }
}

void HeatmapView::resizeEvent(QResizeEvent* event)
{
    QAbstractScrollArea::resizeEvent(event);
    if (m_fit) m_cell = fitCellSize();
    updateScrollBars();
}

void HeatmapView::scrollContentsBy(int, int)
{
    viewport()->update();
}

void HeatmapView::changeEvent(QEvent* event)
{
    QAbstractScrollArea::changeEvent(event);
    if (event->type() == QEvent::FontChange || event->type() == QEvent::PaletteChange) {
        invalidateMetrics();
        if (m_fit) m_cell = fitCellSize();
        updateScrollBars();
        viewport()->update();
    }
}

void HeatmapView::wheelEvent(QWheelEvent* event)
{
    if (!(event->modifiers() & Qt::ControlModifier)) {
        QAbstractScrollArea::wheelEvent(event);
        return;
    }
    const double steps = event->angleDelta().y() / 120.0;
    if (steps == 0.0) return;
    const double factor = std::pow(kZoomStep, steps);
    if (steps < 0 && m_cell * factor <= fitCellSize() + 1e-9)
        fitToWindow();
    else
        zoomBy(factor, event->position());
    event->accept();
}

void HeatmapView::keyPressEvent(QKeyEvent* event)
{
    switch (event->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal:
        zoomIn();
        break;
    case Qt::Key_Minus:
        zoomOut();
        break;
    case Qt::Key_0:
        fitToWindow();
        break;
    default:
        QAbstractScrollArea::keyPressEvent(event);
        return;
    }
    event->accept();
}

void HeatmapView::mousePressEvent(QMouseEvent* event)
{
    if (event->button() != Qt::LeftButton) {
        QAbstractScrollArea::mousePressEvent(event);
        return;
    }
    m_pressed = true;
    m_dragging = false;
    m_pressPos = event->position().toPoint();
    m_pressScroll = QPoint(horizontalScrollBar()->value(), verticalScrollBar()->value());
    event->accept();
}

void HeatmapView::mouseMoveEvent(QMouseEvent* event)
{
    const QPoint pos = event->position().toPoint();
    if (m_pressed && (event->buttons() & Qt::LeftButton)) {
        const QPoint delta = pos - m_pressPos;
        if (!m_dragging && delta.manhattanLength() >= QApplication::startDragDistance()) {
            m_dragging = true;
            viewport()->setCursor(Qt::ClosedHandCursor);
            QToolTip::hideText();
        }
        if (m_dragging) {
            horizontalScrollBar()->setValue(m_pressScroll.x() - delta.x());
            verticalScrollBar()->setValue(m_pressScroll.y() - delta.y());
            return;
        }
    }
    updateHover(pos, event->globalPosition().toPoint());
}

void HeatmapView::mouseReleaseEvent(QMouseEvent* event)
{
    if (event->button() != Qt::LeftButton || !m_pressed) {
        QAbstractScrollArea::mouseReleaseEvent(event);
        return;
    }
    const bool wasDragging = m_dragging;
    m_pressed = m_dragging = false;
    viewport()->unsetCursor();
    int row, col;
    if (!wasDragging && cellAt(event->position().toPoint(), &row, &col)) Q_EMIT cellClicked(row, col);
    event->accept();
}

void HeatmapView::updateHover(const QPoint& viewportPos, const QPoint& globalPos)
{
    int row, col;
    if (!cellAt(viewportPos, &row, &col)) {
        if (m_hoverRow >= 0) {
            m_hoverRow = m_hoverCol = -1;
            QToolTip::hideText();
            viewport()->update();
        }
        return;
    }
    if (row != m_hoverRow || col != m_hoverCol) {
        m_hoverRow = row;
        m_hoverCol = col;
        viewport()->update();
        Q_EMIT cellHovered(row, col);
    }
    const Frame f = widgetFrame();
    const QRect cell =
        QRectF(f.origin.x() + col * f.cellWidth, f.origin.y() + row * f.cellHeight, f.cellWidth, f.cellHeight)
            .toAlignedRect();
    QToolTip::showText(globalPos, toolTipHtml(m_renderer.cellToolTip(row, col)), viewport(), cell);
}

bool HeatmapView::viewportEvent(QEvent* event)
{
    switch (event->type()) {
    case QEvent::ContextMenu: {
        auto* menu = static_cast<QContextMenuEvent*>(event);
        int row, col;
        if (cellAt(menu->pos(), &row, &col)) {
            Q_EMIT cellContextMenuRequested(row, col, menu->globalPos());
            return true;
        }
        break;
    }
    case QEvent::ToolTip: {
        auto* help = static_cast<QHelpEvent*>(event);
        updateHover(help->pos(), help->globalPos());
        return true;
    }
    case QEvent::Leave:
        if (m_hoverRow >= 0) {
            m_hoverRow = m_hoverCol = -1;
            viewport()->update();
        }
        break;
    default:
        break;
    }
    return QAbstractScrollArea::viewportEvent(event);
}

QMargins HeatmapView::cellMargins() const
{
    const Metrics& m = widgetMetrics();
    const double top = std::max(m.titleHeight + m.headerHeight, double(m_minTopMargin));
    return QMargins(int(std::ceil(m.rowLabelWidth)), int(std::ceil(top)), int(std::ceil(m.colorBarWidth)), 0);
}

QSize HeatmapView::sizeForCellSize(double cellSize) const
{
    return sizeForCellDimensions(QSizeF(cellSize, cellSize));
}

QSize HeatmapView::sizeForCellDimensions(const QSizeF& cell) const
{
    const Metrics& m = widgetMetrics();
    const double top = std::max(m.titleHeight + m.headerHeight, double(m_minTopMargin));
    const int frame = 2 * frameWidth();
    return QSize(int(std::ceil(m.rowLabelWidth + data().cols * cell.width() + m.colorBarWidth)) + frame,
                 int(std::ceil(top + std::max(data().rows * cell.height(), HeatmapRenderer::kMinBarHeight) +
                               m.legendHeight)) +
                     frame);
}

QSize HeatmapView::sizeHint() const
{
    // Nominal 12-pixel cells, capped: the hint must not follow the zoom or layouts would jump.
    const Metrics& m = widgetMetrics();
    const int frame = 2 * frameWidth();
    return QSize(int(m.rowLabelWidth + std::min(data().cols * 12.0, 800.0) + m.colorBarWidth) + frame,
                 int(m.titleHeight + m.headerHeight +
                     std::max(std::min(data().rows * 12.0, 600.0), HeatmapRenderer::kMinBarHeight) +
                     m.legendHeight) +
                     frame);
}

QSize HeatmapView::minimumSizeHint() const
{
    const Metrics& m = widgetMetrics();
    return QSize(int(m.rowLabelWidth + m.colorBarWidth) + 24, int(m.titleHeight + m.headerHeight) + 48);
}

} // namespace outlierlens
