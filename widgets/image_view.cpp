#include "image_view.h"

#include "figure_painting.h"

#include <QCheckBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileInfo>
#include <QImageReader>
#include <QLabel>
#include <QMimeData>
#include <QMouseEvent>
#include <QPainter>
#include <QUrl>

#include <algorithm>

namespace outlierlens {

using painting::cellRect;
using painting::displayNumber;

struct ImageView::Hit
{
    enum Kind { None, Patch, Cls, Matrix };
    Kind kind = None;
    int row = -1;
    int col = -1;
};

ImageView::ImageView(QWidget* parent)
    : QWidget(parent)
{
    setMouseTracking(true);
    setAcceptDrops(true);
    m_overlayToggle = new QCheckBox(tr("Tint patches by their outlier count"), this);
    m_overlayToggle->setChecked(m_figure.isOverlayVisible());
    connect(m_overlayToggle, &QCheckBox::toggled, this, &ImageView::setOverlayVisible);
    m_hoverLabel = new QLabel(this);
    setHover(-1, -1, QString());
}

ImageView::~ImageView() = default;

void ImageView::setData(const ImageViewData& data)
{
    m_figure.setData(data);
    m_overlayToggle->setText(
        tr("Tint patches by their outlier count in %1").arg(ImageFigure::layerWords(data.layer)));
    placeChildren(); // placed by hand, not by a layout: grow with the text
    setHover(-1, -1, QString());
    update();
}

void ImageView::setOverlayVisible(bool visible)
{
    if (visible == m_figure.isOverlayVisible()) return;
    m_figure.setOverlayVisible(visible);
    const QSignalBlocker blocker(m_overlayToggle);
    m_overlayToggle->setChecked(visible);
    update();
}

QSize ImageView::preferredFigureSize() const
{
    return m_figure.preferredSize();
}

QSize ImageView::sizeHint() const
{
    return QSize(1000, 800);
}

QSize ImageView::minimumSizeHint() const
{
    return QSize(400, 320);
}

Provenance ImageView::figureProvenance() const
{
    return m_figure.provenance();
}

QString ImageView::figureName() const
{
    return m_figure.name();
}

QString ImageView::figureCsv() const
{
    return m_figure.csv();
}

void ImageView::paintFigure(QPainter& painter, const QRect& area) const
{
    m_figure.paint(painter, area);
}

QRect ImageView::canvasRect() const
{
    const int top = m_overlayToggle->geometry().bottom() + 3;
    const int bottom = m_hoverLabel->geometry().top() - 3;
    return QRect(0, top, width(), std::max(0, bottom - top));
}

QRect ImageView::patchRect(int row, int col) const
{
    const int rows = data().gridRows, cols = data().gridCols;
    if (row < 0 || col < 0 || row >= rows || col >= cols) return {};
    const ImageFigure::Layout l = m_figure.layout(canvasRect());
    if (l.image.isEmpty()) return {};
    return cellRect(l.image, rows, cols, row, col).toAlignedRect();
}

ImageView::Hit ImageView::hitTest(const QPoint& pos) const
{
    Hit hit;
    const ImageFigure::Layout l = m_figure.layout(canvasRect());
    if (l.empty) return hit;
    const QPointF point(pos);
    const auto cellOf = [&](const QRectF& rect, int rows, int cols) {
        hit.row = std::clamp(int((point.y() - rect.top()) / rect.height() * rows), 0, rows - 1);
        hit.col = std::clamp(int((point.x() - rect.left()) / rect.width() * cols), 0, cols - 1);
    };
    const int rows = data().gridRows, cols = data().gridCols;
    if (rows > 0 && cols > 0)
        for (const QRectF& grid : {l.image, l.cumulative, l.dataset})
            if (!grid.isEmpty() && grid.contains(point)) {
                hit.kind = Hit::Patch;
                cellOf(grid, rows, cols);
                return hit;
            }
    if (!l.cls.isEmpty() && l.cls.contains(point)) {
        hit.kind = Hit::Cls;
        return hit;
    }
    const MatrixData& m = data().attention;
    if (!l.matrix.isEmpty() && l.matrix.contains(point) && !m.isEmpty() &&
        m.values.size() == m.rows * m.cols) {
        hit.kind = Hit::Matrix;
        cellOf(l.matrix, m.rows, m.cols);
    }
    return hit;
}

void ImageView::updateHover(const QPoint& pos)
{
    const Hit hit = hitTest(pos);
    const ImageViewData& d = data();
    QStringList parts;
    switch (hit.kind) {
    case Hit::None:
        break;
    case Hit::Patch: {
        const int index = hit.row * d.gridCols + hit.col;
        parts << tr("patch %1,%2").arg(hit.row).arg(hit.col);
        if (ImageFigure::validGrid(d.patchOutliers, d.gridRows, d.gridCols)) {
            const float v = d.patchOutliers[index];
            parts << (v == 1 ? tr("1 outlier in %1") : tr("%1 outliers in %2").arg(displayNumber(v)))
                         .arg(ImageFigure::layerWords(d.layer));
        }
        if (ImageFigure::validGrid(d.cumulativeAttention, d.gridRows, d.gridCols))
            parts << tr("cumulative attention %1").arg(displayNumber(d.cumulativeAttention[index]));
        if (ImageFigure::validGrid(d.datasetPatchOutliers, d.gridRows, d.gridCols))
            parts << tr("data set: %1 outliers").arg(displayNumber(d.datasetPatchOutliers[index]));
        break;
    }
    case Hit::Cls:
        parts << QStringLiteral("CLS")
              << tr("cumulative attention %1").arg(displayNumber(d.clsCumulativeAttention));
        break;
    case Hit::Matrix: {
        const MatrixData& m = d.attention;
        const QString query = hit.row < m.rowLabels.size() ? m.rowLabels[hit.row] : QString::number(hit.row);
        const QString key = hit.col < m.colLabels.size() ? m.colLabels[hit.col] : QString::number(hit.col);
        parts << tr("query %1 \u2192 key %2").arg(query, key)
              << tr("probability %1").arg(displayNumber(m.at(hit.row, hit.col)));
        break;
    }
    }
    const bool patch = hit.kind == Hit::Patch;
    setHover(patch ? hit.row : -1, patch ? hit.col : -1, parts.join(QStringLiteral("  \u00b7  ")));
}

void ImageView::setHover(int row, int col, const QString& text)
{
    const bool moved = row != m_hoveredRow || col != m_hoveredCol;
    m_hoveredRow = row;
    m_hoveredCol = col;
    m_hoverText = text;
    m_hoverLabel->setText(
        text.isEmpty() ? tr("Hover a patch for its numbers; drop an image file here to analyse it.") : text);
    setToolTip(text);
    if (moved) {
        update();
        Q_EMIT patchHovered(row, col);
    }
}

void ImageView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QRect canvas = canvasRect();
    m_figure.paint(p, canvas);
    if (m_hoveredRow < 0) return;
    // The hover highlight belongs to the widget only, never to exports.
    const ImageFigure::Layout l = m_figure.layout(canvas);
    const int rows = data().gridRows, cols = data().gridCols;
    for (const QRectF& grid : {l.image, l.cumulative, l.dataset}) {
        if (grid.isEmpty()) continue;
        const QRectF cell = cellRect(grid, rows, cols, m_hoveredRow, m_hoveredCol);
        p.setBrush(Qt::NoBrush);
        p.setPen(QPen(Qt::black, 3));
        p.drawRect(cell);
        p.setPen(QPen(Qt::white, 1));
        p.drawRect(cell);
    }
}

void ImageView::resizeEvent(QResizeEvent* event)
{
    QWidget::resizeEvent(event);
    placeChildren();
}

void ImageView::placeChildren()
{
    const int margin = 4;
    const QSize toggle = m_overlayToggle->sizeHint();
    m_overlayToggle->setGeometry(margin, margin, std::min(toggle.width(), width() - 2 * margin),
                                 toggle.height());
    const int labelHeight = m_hoverLabel->sizeHint().height();
    m_hoverLabel->setGeometry(margin, height() - margin - labelHeight, width() - 2 * margin, labelHeight);
}

void ImageView::mouseMoveEvent(QMouseEvent* event)
{
    updateHover(event->position().toPoint());
    QWidget::mouseMoveEvent(event);
}

void ImageView::mouseReleaseEvent(QMouseEvent* event)
{
    const Hit hit = event->button() == Qt::LeftButton ? hitTest(event->position().toPoint()) : Hit();
    if (hit.kind == Hit::Patch) {
        Q_EMIT patchClicked(hit.row, hit.col);
        event->accept();
        return;
    }
    QWidget::mouseReleaseEvent(event);
}

void ImageView::leaveEvent(QEvent* event)
{
    setHover(-1, -1, QString());
    QWidget::leaveEvent(event);
}

QString ImageView::droppedImagePath(const QMimeData* mime)
{
    if (!mime || !mime->hasUrls()) return {};
    // The backend decodes with OpenCV, which reads a few formats Qt may lack plugins for.
    static const QList<QByteArray> extra = {"png",  "jpg",  "jpeg", "bmp", "tif",
                                            "tiff", "webp", "ppm",  "pgm", "pnm"};
    const QList<QByteArray> formats = QImageReader::supportedImageFormats();
    for (const QUrl& url : mime->urls()) {
        if (!url.isLocalFile()) continue;
        const QString path = url.toLocalFile();
        const QByteArray suffix = QFileInfo(path).suffix().toLower().toLatin1();
        if (!suffix.isEmpty() && (formats.contains(suffix) || extra.contains(suffix))) return path;
    }
    return {};
}

void ImageView::dragEnterEvent(QDragEnterEvent* event)
{
    if (!droppedImagePath(event->mimeData()).isEmpty()) event->acceptProposedAction();
}

void ImageView::dragMoveEvent(QDragMoveEvent* event)
{
    if (!droppedImagePath(event->mimeData()).isEmpty()) event->acceptProposedAction();
}

void ImageView::dropEvent(QDropEvent* event)
{
    const QString path = droppedImagePath(event->mimeData());
    if (path.isEmpty()) return;
    event->acceptProposedAction();
    Q_EMIT imageDropped(path);
}

} // namespace outlierlens
