#include "image_grid.h"

#include "chart_support.h"
#include "figure_painting.h"
#include "figure_style.h"

#include <QPaintEvent>
#include <QPainter>

#include <algorithm>

namespace outlierlens {
namespace {

constexpr double kGap = 10;
constexpr double kLabelHeight = 16;

struct Arrangement
{
    int cols = 1, rows = 1;
    QSizeF cell;
};

} // namespace

ImageGrid::ImageGrid(QWidget* parent)
    : QWidget(parent)
{}

void ImageGrid::setImages(const QVector<ImageViewData>& images, const QStringList& labels)
{
    m_figures.clear();
    for (const ImageViewData& data : images) {
        ImageFigure f;
        f.setData(data);
        m_figures << f;
    }
    m_labels = labels;
    update();
}

static Arrangement arrange(const QVector<ImageFigure>& figures, const QSizeF& size)
{
    // As many columns as make the pictures largest (ImageFigure lays out each cell itself).
    Arrangement best;
    double bestSide = -1;
    const int n = std::max(1, int(figures.size()));
    for (int c = 1; c <= n; ++c) {
        const int r = (n + c - 1) / c;
        const QSizeF cell((size.width() - (c - 1) * kGap) / c,
                          (size.height() - r * kLabelHeight - (r - 1) * kGap) / r);
        if (cell.width() < 40 || cell.height() < 40) continue;
        const double side =
            figures.isEmpty() ? 0 : figures.first().layout(QRect(QPoint(0, 0), cell.toSize())).image.width();
        if (side > bestSide + 0.5) bestSide = side, best = Arrangement{c, r, cell};
    }
    if (bestSide < 0) best = Arrangement{1, n, QSizeF(size.width(), size.height() / n)};
    return best;
}

int ImageGrid::columnsFor(const QSize& size) const
{
    return arrange(m_figures, QSizeF(size)).cols;
}

QSize ImageGrid::preferredFigureSize() const
{
    // One image alone keeps ImageFigure's own size; several share an A4 landscape page.
    if (m_figures.size() <= 1)
        return m_figures.isEmpty()
                   ? QSize(480, 240)
                   : m_figures.first().preferredSize().boundedTo(QSize(kMaxFigureWidth, kMaxFigureHeight));
    return {kMaxFigureWidth, kMaxFigureHeight};
}

void ImageGrid::paintFigure(QPainter& painter, const QRect& area) const
{
    painter.fillRect(area, FigureStyle::background());
    const Arrangement a = arrange(m_figures, QSizeF(area.size()));
    for (int i = 0; i < m_figures.size(); ++i) {
        const int row = i / a.cols, col = i % a.cols;
        const double x = area.left() + col * (a.cell.width() + kGap);
        const double y = area.top() + row * (a.cell.height() + kLabelHeight + kGap);
        painter.save();
        painter.setPen(FigureStyle::text());
        painting::drawFitted(painter, QRectF(x + 4, y, a.cell.width() - 8, kLabelHeight),
                             Qt::AlignLeft | Qt::AlignVCenter, m_labels.value(i), FigureStyle::captionFont());
        painter.restore();
        const QRect cell(int(x), int(y + kLabelHeight), int(a.cell.width()), int(a.cell.height()));
        painter.save();
        painter.setClipRect(cell);
        m_figures[i].paint(painter, cell);
        painter.restore();
    }
}

void ImageGrid::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    painter.setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing |
                           QPainter::SmoothPixmapTransform);
    paintFigure(painter, rect());
}

QString ImageGrid::figureCsv() const
{
    QString csv = QStringLiteral("subfigure,quantity,row,col,value\n");
    for (int i = 0; i < m_figures.size(); ++i)
        csv += charts::prefixedCsvRows(m_figures[i].csv(), csvField(m_labels.value(i)) + QLatin1Char(','));
    return csv;
}

Provenance ImageGrid::figureProvenance() const
{
    Provenance p = m_figures.isEmpty() ? Provenance{} : m_figures.first().provenance();
    QStringList inputs;
    for (const QString& label : m_labels)
        inputs << label;
    p.input = inputs.join(QStringLiteral("; "));
    return p;
}

} // namespace outlierlens
