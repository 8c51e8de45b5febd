#include "image_figure.h"

#include "colormap.h"
#include "figure_painting.h"

#include <QFontMetricsF>

#include <algorithm>
#include <cmath>

namespace outlierlens {

using namespace painting;

namespace {

const QColor kOutlierBar(214, 96, 77);
const QColor kOtherBar(67, 147, 195);

QString csvValue(double v)
{
    return QString::number(v, 'g', 8);
}

double maxOf(const QVector<float>& values)
{
    double m = 0;
    for (float v : values)
        if (std::isfinite(v)) m = std::max(m, double(v));
    return m;
}

} // namespace

double ImageFigure::cumulativeColorMax(const ImageViewData& data)
{
    return std::max(maxOf(data.cumulativeAttention), double(data.clsCumulativeAttention));
}

bool ImageFigure::validGrid(const QVector<float>& values, int rows, int cols)
{
    return rows > 0 && cols > 0 && values.size() == rows * cols;
}

QString ImageFigure::layerWords(int zeroBased)
{
    return zeroBased >= 0 ? tr("layer %1").arg(zeroBased + 1) : tr("the chosen layer");
}

QString ImageFigure::headWords(const ImageViewData& d)
{
    const QString head = d.head >= 0 ? tr("head %1").arg(d.head + 1) : tr("the head");
    const QString layer = d.layer >= 0 ? tr("layer %1").arg(d.layer + 2) : tr("the next layer");
    return tr("%1 of %2").arg(head, layer);
}

QSize ImageFigure::preferredSize() const
{
    return m_data.datasetPatchOutliers.isEmpty() ? QSize(1000, 900) : QSize(1400, 900);
}

ImageFigure::Layout ImageFigure::layout(const QRect& areaRect) const
{
    Layout l;
    const QRectF area(areaRect);
    l.base = std::clamp(std::min(area.width() / 72.0, area.height() / 52.0), 8.0, 48.0);
    const double b = l.base;
    const QRectF inner = area.adjusted(0.8 * b, 0.5 * b, -0.8 * b, -0.5 * b);
    l.title = QRectF(inner.left(), inner.top(), inner.width(), 1.8 * b);
    l.footer = QRectF(inner.left(), inner.bottom() - 1.2 * b, inner.width(), 1.2 * b);
    l.body = QRectF(inner.left(), l.title.bottom() + 0.5 * b, inner.width(),
                    l.footer.top() - l.title.bottom() - 1.0 * b);
    const bool hasGrid = m_data.gridRows > 0 && m_data.gridCols > 0;
    if ((m_data.image.isNull() && !hasGrid) || l.body.width() <= 0 || l.body.height() <= 0) return l;
    l.empty = false;

    QVector<Panel> kinds = {Panel::Image, Panel::Cumulative, Panel::Matrix, Panel::Bars};
    if (!m_data.datasetPatchOutliers.isEmpty()) kinds.append(Panel::Dataset);
    const int n = int(kinds.size());
    const double titleH = 1.6 * b, bottomH = 4.7 * b, gap = 1.4 * b;
    // As many columns as make the square panels largest.
    int cols = 1;
    double best = -1;
    for (int c = 1; c <= n; ++c) {
        const int rows = (n + c - 1) / c;
        const double w = (l.body.width() - (c - 1) * gap) / c;
        const double h = (l.body.height() - (rows - 1) * gap) / rows;
        const double side = std::min(w, h - titleH - bottomH);
        if (side > best + 1e-9) {
            best = side;
            cols = c;
        }
    }
    const int rows = (n + cols - 1) / cols;
    const double cellW = (l.body.width() - (cols - 1) * gap) / cols;
    const double cellH = (l.body.height() - (rows - 1) * gap) / rows;
    const double imageAspect = m_data.image.isNull()
                                   ? double(std::max(1, m_data.gridCols)) / std::max(1, m_data.gridRows)
                                   : double(m_data.image.width()) / m_data.image.height();
    const double gridAspect = hasGrid ? double(m_data.gridCols) / m_data.gridRows : 1.0;
    for (int i = 0; i < n; ++i) {
        const int r = i / cols;
        const int inRow = std::min(cols, n - r * cols);
        const double offset = (cols - inRow) * (cellW + gap) / 2; // centre a short last row
        const QRectF frame(l.body.left() + offset + (i % cols) * (cellW + gap),
                           l.body.top() + r * (cellH + gap), cellW, cellH);
        const QRectF content = frame.adjusted(0, titleH, 0, -bottomH);
        QRectF drawn; // what the panel draws, for its title
        switch (kinds[i]) {
        case Panel::Image:
            drawn = l.image = fitAspect(content, imageAspect);
            break;
        case Panel::Cumulative: {
            const double strip = 3.6 * b;
            l.cumulative = fitAspect(content.adjusted(strip, 0, 0, 0), gridAspect);
            const double side = std::min(2.2 * b, strip - 0.8 * b);
            l.cls = l.cumulative.isEmpty() ? QRectF()
                                           : QRectF(l.cumulative.left() - strip / 2 - side / 2,
                                                    l.cumulative.top() + 1.3 * b, side, side);
            drawn = l.cumulative.adjusted(-strip, 0, 0, 0);
            break;
        }
        case Panel::Matrix:
            l.matrix = fitAspect(content.adjusted(1.5 * b, 0, 0, 0), 1.0);
            drawn = l.matrix.adjusted(-1.5 * b, 0, 0, 0);
            break;
        case Panel::Bars:
            l.bars = content.adjusted(4.4 * b, 1.4 * b, -0.6 * b, 0);
            drawn = content;
            break;
        case Panel::Dataset:
            drawn = l.dataset = fitAspect(content, gridAspect);
            break;
        }
        // The title starts where the drawing starts, widened (within the cell) when it is longer.
        double left = drawn.isEmpty() ? frame.left() : drawn.left();
        double right = drawn.isEmpty() ? frame.right() : drawn.right();
        const double wanted =
            QFontMetricsF(pixelFont(0.9 * b, true)).horizontalAdvance(panelTitle(kinds[i])) + 2;
        if (right - left < wanted) {
            const double extra = (wanted - (right - left)) / 2;
            left = std::max(frame.left(), left - extra);
            right = std::min(frame.right(), left + wanted);
            left = std::max(frame.left(), right - wanted);
        }
        l.panels.append({kinds[i], QRectF(left, frame.top(), right - left, titleH)});
    }
    return l;
}

void ImageFigure::paint(QPainter& p, const QRect& area) const
{
    const Layout l = layout(area);
    const double b = l.base;
    const ImageViewData& d = m_data;
    const int rows = d.gridRows, cols = d.gridCols;
    p.save();
    p.setClipRect(area);
    p.fillRect(area, Qt::white);
    p.setRenderHint(QPainter::Antialiasing, false);
    p.setRenderHint(QPainter::TextAntialiasing, true);

    p.setPen(textColor());
    p.setFont(pixelFont(1.15 * b, true));
    drawElided(p, l.title, Qt::AlignLeft | Qt::AlignVCenter,
               tr("Outliers in %1 and where %2 attends").arg(layerWords(d.layer), headWords(d)));
    p.setPen(mutedColor());
    p.setFont(pixelFont(0.7 * b));
    QStringList footer;
    for (const QString& part : {d.provenance.model, d.provenance.input})
        if (!part.isEmpty()) footer << part;
    footer << tr("Patches are numbered (row, col) from 0.") + QLatin1Char(' ') + Provenance::indexingNote();
    drawElided(p, l.footer, Qt::AlignLeft | Qt::AlignVCenter, footer.join(QStringLiteral("  \u00b7  ")));

    if (l.empty) {
        p.setFont(pixelFont(1.1 * b));
        p.drawText(l.body, Qt::AlignCenter | Qt::TextWordWrap,
                   tr("No image yet: open an image or drop an image file here."));
        p.restore();
        return;
    }

    const bool outliersValid = validGrid(d.patchOutliers, rows, cols);
    const double maxOutliers = outliersValid ? maxOf(d.patchOutliers) : 0;
    for (const Layout::PanelTitle& panel : l.panels) {
        p.setPen(textColor());
        p.setFont(pixelFont(0.9 * b, true));
        drawElided(p, panel.titleBand, Qt::AlignLeft | Qt::AlignVCenter, panelTitle(panel.kind));
        switch (panel.kind) {
        case Panel::Image: {
            if (l.image.isEmpty()) break;
            if (d.image.isNull()) {
                p.fillRect(l.image, QColor(225, 225, 225));
            } else {
                p.save();
                p.setRenderHint(QPainter::SmoothPixmapTransform,
                                false); // crisp pixels, as the model sees them
                p.drawImage(l.image, d.image);
                p.restore();
            }
            if (m_overlayVisible && rows > 0 && cols > 0) {
                // Tint only patches carrying outliers so the photo stays readable around them.
                for (int r = 0; r < rows && outliersValid; ++r)
                    for (int c = 0; c < cols; ++c) {
                        const float v = d.patchOutliers[r * cols + c];
                        if (!(v > 0) || !(maxOutliers > 0)) continue;
                        QColor tint = ColorMap::sequential(v / maxOutliers);
                        tint.setAlphaF(0.7f);
                        p.fillRect(cellRect(l.image, rows, cols, r, c), tint);
                    }
                p.setPen(QPen(QColor(255, 255, 255, 110), 1));
                for (int c = 1; c < cols; ++c) {
                    const double x = cellRect(l.image, rows, cols, 0, c).left();
                    p.drawLine(QPointF(x, l.image.top()), QPointF(x, l.image.bottom()));
                }
                for (int r = 1; r < rows; ++r) {
                    const double y = cellRect(l.image, rows, cols, r, 0).top();
                    p.drawLine(QPointF(l.image.left(), y), QPointF(l.image.right(), y));
                }
                // A solid edge in the patch's colour keeps small counts visible on dark photos.
                for (int r = 0; r < rows && outliersValid && maxOutliers > 0; ++r)
                    for (int c = 0; c < cols; ++c) {
                        const float v = d.patchOutliers[r * cols + c];
                        if (!(v > 0)) continue;
                        const double w = std::max(1.0, 0.15 * b);
                        p.setPen(QPen(ColorMap::sequential(v / maxOutliers), w, Qt::SolidLine, Qt::SquareCap,
                                      Qt::MiterJoin));
                        p.drawRect(
                            cellRect(l.image, rows, cols, r, c).adjusted(w / 2, w / 2, -w / 2, -w / 2));
                    }
            }
            p.setPen(QPen(frameColor(), 1));
            p.drawRect(l.image);
            int creditLines = 0;
            if (!d.credit.isEmpty()) {
                p.setPen(mutedColor());
                p.setFont(pixelFont(0.68 * b, false, true));
                creditLines = drawTwoLines(
                    p, QRectF(l.image.left(), l.image.bottom() + 0.2 * b, l.image.width(), 1.0 * b),
                    Qt::AlignLeft | Qt::AlignTop, d.credit);
            }
            if (m_overlayVisible && outliersValid)
                drawColorBar(p,
                             QRectF(l.image.left(), l.image.bottom() + (0.5 + std::max(1, creditLines)) * b,
                                    l.image.width(), 0.8 * b),
                             maxOutliers, tr("outliers per patch"), b);
            break;
        }
        case Panel::Cumulative: {
            if (l.cumulative.isEmpty()) break;
            if (!validGrid(d.cumulativeAttention, rows, cols)) {
                drawNoData(p, l.cumulative, tr("no attention"), b);
                break;
            }
            const double maxAttention = cumulativeColorMax(d);
            drawHeatGrid(p, l.cumulative, d.cumulativeAttention, rows, cols, maxAttention);
            // Outline the outlier patches: the head's attention should land on them.
            p.setPen(QPen(QColor(255, 255, 255), std::max(1.0, 0.09 * b), Qt::DotLine));
            for (int r = 0; r < rows && outliersValid; ++r)
                for (int c = 0; c < cols; ++c)
                    if (d.patchOutliers[r * cols + c] > 0)
                        p.drawRect(cellRect(l.cumulative, rows, cols, r, c).adjusted(1, 1, -1, -1));
            p.fillRect(l.cls,
                       ColorMap::color(ColorScale::Sequential, d.clsCumulativeAttention, maxAttention));
            p.setPen(QPen(frameColor(), 1));
            p.drawRect(l.cls);
            p.setPen(textColor());
            p.setFont(pixelFont(0.75 * b, true));
            const QRectF clsColumn(l.cls.center().x() - 1.8 * b, l.cls.top() - 1.2 * b, 3.6 * b, 1.1 * b);
            p.drawText(clsColumn, Qt::AlignHCenter | Qt::AlignBottom, QStringLiteral("CLS"));
            p.setFont(pixelFont(0.7 * b));
            p.drawText(clsColumn.translated(0, l.cls.height() + 1.3 * b), Qt::AlignHCenter | Qt::AlignTop,
                       displayNumber(d.clsCumulativeAttention));
            if (!d.registerCumulativeAttention.isEmpty()) { // registers: not patches, their sum under CLS
                double sum = 0;
                for (float a : d.registerCumulativeAttention)
                    sum += a;
                p.setFont(pixelFont(0.68 * b, true));
                p.drawText(clsColumn.translated(0, l.cls.height() + 3.0 * b), Qt::AlignHCenter | Qt::AlignTop,
                           tr("%n reg.", nullptr, int(d.registerCumulativeAttention.size())));
                p.setFont(pixelFont(0.7 * b));
                p.drawText(clsColumn.translated(0, l.cls.height() + 4.2 * b), Qt::AlignHCenter | Qt::AlignTop,
                           displayNumber(sum));
            }
            const QRectF bar(l.cumulative.left(), l.cumulative.bottom() + 0.5 * b, l.cumulative.width(),
                             0.8 * b);
            drawColorBar(p, bar, maxAttention, tr("\u03a3 over queries"), b);
            if (outliersValid && maxOutliers > 0) {
                p.setPen(mutedColor());
                p.setFont(pixelFont(0.68 * b));
                drawElided(p, QRectF(bar.left(), bar.bottom() + 1.3 * b, bar.width(), 1.1 * b),
                           Qt::AlignHCenter | Qt::AlignTop, tr("dotted: patches with outliers"));
            }
            break;
        }
        case Panel::Matrix: {
            if (l.matrix.isEmpty()) break;
            const MatrixData& m = d.attention;
            if (m.isEmpty() || m.values.size() != m.rows * m.cols) {
                drawNoData(p, l.matrix, tr("no attention matrix"), b);
                break;
            }
            const double maxP = maxOf(m.values);
            QImage heat(m.cols, m.rows, QImage::Format_RGB32);
            for (int r = 0; r < m.rows; ++r)
                for (int c = 0; c < m.cols; ++c)
                    heat.setPixelColor(c, r, ColorMap::color(ColorScale::Sequential, m.at(r, c), maxP));
            p.save();
            p.setRenderHint(QPainter::SmoothPixmapTransform, false);
            p.drawImage(l.matrix, heat);
            p.restore();
            p.setPen(QPen(frameColor(), 1));
            p.drawRect(l.matrix);
            p.setPen(textColor());
            p.setFont(pixelFont(0.75 * b));
            p.save();
            p.translate(l.matrix.left() - 0.8 * b, l.matrix.center().y());
            p.rotate(-90);
            p.drawText(QRectF(-l.matrix.height() / 2, -0.7 * b, l.matrix.height(), 1.4 * b), Qt::AlignCenter,
                       m.rowTitle.isEmpty() ? tr("query token") : m.rowTitle);
            p.restore();
            drawElided(p, QRectF(l.matrix.left(), l.matrix.bottom() + 0.2 * b, l.matrix.width(), 1.1 * b),
                       Qt::AlignHCenter | Qt::AlignTop,
                       m.colTitle.isEmpty() ? (d.registerCumulativeAttention.isEmpty()
                                                   ? tr("key (0 = CLS, then patches by row)")
                                                   : tr("key (0 = CLS, registers, then patches by row)"))
                                            : m.colTitle);
            drawColorBar(p, QRectF(l.matrix.left(), l.matrix.bottom() + 1.5 * b, l.matrix.width(), 0.8 * b),
                         maxP, m.valueTitle.isEmpty() ? tr("probability") : m.valueTitle, b);
            break;
        }
        case Panel::Bars:
            drawBarPlot(p, l.bars,
                        {{tr("outlier patches"), d.meanAbsValueOutlierPatches, kOutlierBar},
                         {tr("other patches"), d.meanAbsValueOtherPatches, kOtherBar}},
                        QStringLiteral("mean |V|"), b);
            if (d.meanAbsValueOutlierPatches > 0 && d.meanAbsValueOtherPatches > 0) {
                p.setPen(mutedColor());
                p.setFont(pixelFont(0.75 * b));
                drawElided(
                    p, QRectF(l.bars.left(), l.bars.bottom() + 1.5 * b, l.bars.width(), 1.2 * b),
                    Qt::AlignHCenter | Qt::AlignTop,
                    tr("other / outlier = %1\u00d7")
                        .arg(displayNumber(d.meanAbsValueOtherPatches / d.meanAbsValueOutlierPatches)));
            }
            break;
        case Panel::Dataset: {
            if (l.dataset.isEmpty()) break;
            if (!validGrid(d.datasetPatchOutliers, rows, cols)) {
                drawNoData(p, l.dataset, tr("statistics do not match the patch grid"), b);
                break;
            }
            const double maxCount = maxOf(d.datasetPatchOutliers);
            drawHeatGrid(p, l.dataset, d.datasetPatchOutliers, rows, cols, maxCount);
            const QRectF bar(l.dataset.left(), l.dataset.bottom() + 0.5 * b, l.dataset.width(), 0.8 * b);
            drawColorBar(p, bar, maxCount, tr("outliers per position"), b);
            p.setPen(mutedColor());
            p.setFont(pixelFont(0.68 * b));
            drawTwoLines(p, QRectF(bar.left(), bar.bottom() + 1.3 * b, bar.width(), 1.0 * b),
                         Qt::AlignHCenter | Qt::AlignTop, d.datasetDescription);
            break;
        }
        }
    }
    p.restore();
}

QString ImageFigure::panelTitle(Panel kind) const
{
    switch (kind) {
    case Panel::Image:
        return m_overlayVisible ? tr("Input, outliers per patch (%1)").arg(layerWords(m_data.layer))
                                : tr("Input");
    case Panel::Cumulative:
        return tr("Cumulative attention, %1").arg(headWords(m_data));
    case Panel::Matrix:
        return tr("Attention matrix, %1").arg(headWords(m_data));
    case Panel::Bars:
        return tr("Mean |V| of outlier and other keys");
    case Panel::Dataset:
        return tr("Outliers per patch position over a data set");
    }
    return {};
}

QStringList ImageFigure::panelTitles() const
{
    QStringList titles;
    for (const Layout::PanelTitle& panel : layout(QRect(QPoint(0, 0), preferredSize())).panels)
        titles << panelTitle(panel.kind);
    return titles;
}

QString ImageFigure::csv() const
{
    const ImageViewData& d = m_data;
    QString csv = QStringLiteral("quantity,row,col,value\n");
    const auto grid = [&](const char* name, const QVector<float>& values) {
        if (!validGrid(values, d.gridRows, d.gridCols)) return;
        for (int r = 0; r < d.gridRows; ++r)
            for (int c = 0; c < d.gridCols; ++c)
                csv += QStringLiteral("%1,%2,%3,%4\n")
                           .arg(QLatin1String(name))
                           .arg(r)
                           .arg(c)
                           .arg(csvValue(values[r * d.gridCols + c]));
    };
    grid("patch_outliers", d.patchOutliers);
    grid("cumulative_attention", d.cumulativeAttention);
    csv += QStringLiteral("cls_cumulative_attention,,,%1\n").arg(csvValue(d.clsCumulativeAttention));
    for (int r = 0; r < d.registerCumulativeAttention.size(); ++r) // row = register, 0-based
        csv += QStringLiteral("register_cumulative_attention,%1,,%2\n")
                   .arg(r)
                   .arg(csvValue(d.registerCumulativeAttention[r]));
    csv +=
        QStringLiteral("mean_abs_value_outlier_patches,,,%1\n").arg(csvValue(d.meanAbsValueOutlierPatches));
    csv += QStringLiteral("mean_abs_value_other_patches,,,%1\n").arg(csvValue(d.meanAbsValueOtherPatches));
    grid("dataset_patch_outliers", d.datasetPatchOutliers);
    const MatrixData& m = d.attention;
    if (!m.isEmpty() && m.values.size() == m.rows * m.cols)
        for (int r = 0; r < m.rows; ++r)
            for (int c = 0; c < m.cols; ++c)
                csv += QStringLiteral("attention,%1,%2,%3\n").arg(r).arg(c).arg(csvValue(m.at(r, c)));
    return csv;
}

Provenance ImageFigure::provenance() const
{
    Provenance provenance = m_data.provenance;
    if (provenance.selection.isEmpty())
        provenance.selection =
            QStringLiteral("outliers of %1, %2").arg(layerWords(m_data.layer), headWords(m_data));
    return provenance;
}

QString ImageFigure::name() const
{
    if (m_data.layer < 0 || m_data.head < 0) return QStringLiteral("image");
    return QStringLiteral("image-L%1-L%2-H%3")
        .arg(m_data.layer + 1)
        .arg(m_data.layer + 2)
        .arg(m_data.head + 1);
}

} // namespace outlierlens
