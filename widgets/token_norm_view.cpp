#include "token_norm_view.h"

#include "colormap.h"
#include "figure_painting.h"

#include <QPaintEvent>

#include <algorithm>
#include <cmath>

namespace outlierlens {

using namespace painting;

namespace {

const QColor kNormalBar(67, 147, 195);
const QColor kHighBar(214, 96, 77);

enum class Panel { Image, NormMap, Histogram, ClsMaps, Dataset };

QVector<Panel> panelsOf(const TokenNormData& d)
{
    QVector<Panel> panels = {Panel::Image, Panel::NormMap, Panel::Histogram};
    if (!d.clsAttention.isEmpty()) panels << Panel::ClsMaps;
    if (!d.datasetHistogram.isEmpty()) panels << Panel::Dataset;
    return panels;
}

QString titleOf(const TokenNormData& d, Panel panel)
{
    switch (panel) {
    case Panel::Image:
        return TokenNormView::tr("image, high-norm patches outlined");
    case Panel::NormMap:
        return TokenNormView::tr("token norm, layer %1 output").arg(d.layer + 1);
    case Panel::Histogram:
        return TokenNormView::tr("norms of this image's tokens");
    case Panel::ClsMaps:
        return TokenNormView::tr("[CLS] attention, layer %1, per head").arg(d.attentionLayer + 1);
    case Panel::Dataset:
        return TokenNormView::tr("norms over the data set (log)");
    }
    return {};
}

bool validGrid(const QVector<float>& v, int rows, int cols)
{
    return rows > 0 && cols > 0 && v.size() == rows * cols;
}

double maxNorm(const TokenNormData& d)
{
    double m = 0;
    for (float v : d.patchNorms)
        if (std::isfinite(v)) m = std::max(m, double(v));
    for (float v : d.prefixNorms)
        if (std::isfinite(v)) m = std::max(m, double(v));
    return m;
}

QString csvValue(double v)
{
    return QString::number(v, 'g', 8);
}

/// A histogram of bars over [edges[i], edges[i+1]) with a horizontal axis of `logX` or linear scale.
struct Histogram
{
    QVector<double> edges;  ///< bins + 1
    QVector<double> normal; ///< bins
    QVector<double> high;   ///< bins (drawn on top of normal, in the high-norm colour)
    bool logX = false;
    double cutoff = std::nan("");
};

void drawHistogram(QPainter& p, const QRectF& plot, const Histogram& h, const QString& xTitle, double b)
{
    p.setPen(QPen(frameColor(), 1));
    p.drawLine(plot.bottomLeft(), plot.bottomRight());
    p.drawLine(plot.bottomLeft(), plot.topLeft());
    const int bins = int(h.normal.size());
    if (bins == 0 || h.edges.size() != bins + 1) return;
    // Only the bins that hold something, widened by one on each side.
    int first = bins, last = -1;
    double top = 0;
    for (int i = 0; i < bins; ++i)
        if (h.normal[i] + h.high.value(i) > 0) {
            first = std::min(first, i), last = std::max(last, i);
            top = std::max(top, h.normal[i] + h.high.value(i));
        }
    if (last < 0) return;
    first = std::max(0, first - 1), last = std::min(bins - 1, last + 1);
    const auto axis = [&](double x) { return h.logX ? std::log10(std::max(x, 1e-300)) : x; };
    const double x0 = axis(h.edges[first]), x1 = axis(h.edges[last + 1]);
    const auto xOf = [&](double x) { return plot.left() + (axis(x) - x0) / (x1 - x0) * plot.width(); };
    const auto yOf = [&](double count) { return plot.bottom() - count / top * plot.height(); };
    for (int i = first; i <= last; ++i) {
        const double left = xOf(h.edges[i]), right = xOf(h.edges[i + 1]);
        const double normal = h.normal[i], high = h.high.value(i);
        p.fillRect(QRectF(QPointF(left, yOf(normal)), QPointF(right, plot.bottom())), kNormalBar);
        if (high > 0)
            p.fillRect(QRectF(QPointF(left, yOf(normal + high)), QPointF(right, yOf(normal))), kHighBar);
    }
    if (std::isfinite(h.cutoff) && axis(h.cutoff) >= x0 && axis(h.cutoff) <= x1) {
        p.setPen(QPen(textColor(), std::max(1.0, 0.1 * b), Qt::DashLine));
        p.drawLine(QPointF(xOf(h.cutoff), plot.top()), QPointF(xOf(h.cutoff), plot.bottom()));
    }
    p.setPen(textColor());
    p.setFont(pixelFont(0.65 * b));
    const QRectF under(plot.left(), plot.bottom() + 0.15 * b, plot.width(), 0.9 * b);
    p.drawText(under, Qt::AlignLeft | Qt::AlignTop, displayNumber(h.edges[first]));
    p.drawText(under, Qt::AlignRight | Qt::AlignTop, displayNumber(h.edges[last + 1]));
    p.drawText(under.translated(0, 0.9 * b), Qt::AlignHCenter | Qt::AlignTop, xTitle);
    p.drawText(QRectF(plot.left() - 3.2 * b, plot.top() - 0.4 * b, 3.0 * b, 0.9 * b),
               Qt::AlignRight | Qt::AlignVCenter, displayNumber(top));
    p.drawText(QRectF(plot.left() - 3.2 * b, plot.bottom() - 0.5 * b, 3.0 * b, 0.9 * b),
               Qt::AlignRight | Qt::AlignVCenter, QStringLiteral("0"));
}

/// The histogram of one image's token norms: 24 equal bins from 0 to the largest norm.
Histogram imageHistogram(const TokenNormData& d)
{
    Histogram h;
    const double top = maxNorm(d);
    if (!(top > 0)) return h;
    const int bins = 24;
    for (int i = 0; i <= bins; ++i)
        h.edges << top * 1.0001 * i / bins;
    h.normal = h.high = QVector<double>(bins, 0.0);
    const auto add = [&](float norm) {
        if (!std::isfinite(norm)) return;
        const int bin = std::clamp(int(norm / (top * 1.0001) * bins), 0, bins - 1);
        (norm > d.cutoff ? h.high : h.normal)[bin] += 1;
    };
    for (float n : d.patchNorms)
        add(n);
    for (float n : d.prefixNorms)
        add(n);
    h.cutoff = d.cutoff;
    return h;
}

void drawRow(QPainter& p, const QRectF& area, const TokenNormData& d, double b)
{
    const QVector<Panel> panels = panelsOf(d);
    p.setPen(textColor());
    p.setFont(pixelFont(0.95 * b, true));
    const QRectF title(area.left(), area.top(), area.width(), 1.5 * b);
    const int high = d.highNormPatches();
    drawElided(p, title, Qt::AlignLeft | Qt::AlignVCenter,
               TokenNormView::tr("%1: %n high-norm patch(es) (%2)", nullptr, high)
                   .arg(d.model.isEmpty() ? TokenNormView::tr("model") : d.model, d.rule));
    const double titleH = 1.4 * b, bottomH = 4.8 * b, gap = 1.6 * b;
    // Weights: square panels 1, the histograms 1.3, the head maps 1.2.
    QVector<double> weight;
    for (Panel k : panels)
        weight << (k == Panel::Histogram || k == Panel::Dataset ? 1.3 : k == Panel::ClsMaps ? 1.2 : 1.0);
    double total = 0;
    for (double w : weight)
        total += w;
    const double unit = (area.width() - gap * (panels.size() - 1)) / total;
    // Panels as tall as a square one is wide (no taller than the row), at the top of the row.
    const double height = std::min(area.bottom() - title.bottom() - 0.3 * b, unit + titleH + bottomH);
    const QRectF body(area.left(), title.bottom() + 0.3 * b, area.width(), height);
    double x = body.left();
    const bool grid = validGrid(d.patchNorms, d.gridRows, d.gridCols);
    const double aspect = grid ? double(d.gridCols) / d.gridRows : 1.0;
    const double top = maxNorm(d);
    for (int i = 0; i < panels.size(); ++i) {
        const QRectF frame(x, body.top(), unit * weight[i], body.height());
        x += unit * weight[i] + gap;
        p.setPen(textColor());
        p.setFont(pixelFont(0.8 * b, true));
        drawElided(p, QRectF(frame.left(), frame.top(), frame.width(), titleH),
                   Qt::AlignLeft | Qt::AlignVCenter, titleOf(d, panels[i]));
        const QRectF content = frame.adjusted(0, titleH, 0, -bottomH);
        switch (panels[i]) {
        case Panel::Image: {
            const QRectF r =
                fitAspect(content, d.image.isNull() ? aspect : double(d.image.width()) / d.image.height());
            if (d.image.isNull()) {
                drawNoData(p, r, TokenNormView::tr("no image"), b);
                break;
            }
            p.drawImage(r, d.image);
            if (!grid) break;
            p.setPen(QPen(kHighBar, std::max(1.5, 0.15 * b)));
            for (int row = 0; row < d.gridRows; ++row)
                for (int col = 0; col < d.gridCols; ++col)
                    if (d.patchNorms[row * d.gridCols + col] > d.cutoff)
                        p.drawRect(cellRect(r, d.gridRows, d.gridCols, row, col));
            break;
        }
        case Panel::NormMap: {
            const QRectF r = fitAspect(content, aspect);
            if (!grid) {
                drawNoData(p, content, TokenNormView::tr("no norms"), b);
                break;
            }
            drawHeatGrid(p, r, d.patchNorms, d.gridRows, d.gridCols, top);
            p.setPen(QPen(QColor(255, 255, 255), std::max(1.0, 0.1 * b), Qt::DotLine));
            for (int row = 0; row < d.gridRows; ++row)
                for (int col = 0; col < d.gridCols; ++col)
                    if (d.patchNorms[row * d.gridCols + col] > d.cutoff)
                        p.drawRect(cellRect(r, d.gridRows, d.gridCols, row, col).adjusted(1, 1, -1, -1));
            drawColorBar(p, QRectF(r.left(), r.bottom() + 0.4 * b, r.width(), 0.7 * b), top,
                         TokenNormView::tr("L2 norm"), b);
            // The tokens that are not patches, by name.
            QStringList prefix;
            for (int t = 0; t < d.prefixLabels.size(); ++t)
                prefix << QStringLiteral("%1 %2").arg(d.prefixLabels[t],
                                                      displayNumber(d.prefixNorms.value(t)));
            p.setPen(mutedColor());
            p.setFont(pixelFont(0.68 * b));
            drawTwoLines(p,
                         QRectF(r.left(), r.bottom() + 2.6 * b, std::max(r.width(), frame.width()), 1.0 * b),
                         Qt::AlignLeft | Qt::AlignTop, prefix.join(QStringLiteral(" \u00b7 ")));
            break;
        }
        case Panel::Histogram:
            drawHistogram(p, content.adjusted(3.4 * b, 0.4 * b, -0.4 * b, 0), imageHistogram(d),
                          TokenNormView::tr("token norm (dashed: cutoff %1)").arg(displayNumber(d.cutoff)),
                          b);
            break;
        case Panel::ClsMaps: {
            const int heads = int(d.clsAttention.size());
            const int cols = int(std::ceil(std::sqrt(double(heads))));
            const int rows = (heads + cols - 1) / cols;
            const double cellGap = 0.35 * b, label = 0.8 * b;
            const double w = (content.width() - (cols - 1) * cellGap) / cols;
            const double h = (content.height() - rows * label - (rows - 1) * cellGap) / rows;
            for (int head = 0; head < heads; ++head) {
                const QRectF cell(content.left() + (head % cols) * (w + cellGap),
                                  content.top() + (head / cols) * (h + label + cellGap), w, h + label);
                const QVector<float>& a = d.clsAttention[head];
                const QRectF map = fitAspect(cell.adjusted(0, label, 0, 0), aspect);
                double m = 0;
                for (float v : a)
                    m = std::max(m, double(v));
                if (validGrid(a, d.gridRows, d.gridCols) && !map.isEmpty())
                    drawHeatGrid(p, map, a, d.gridRows, d.gridCols, m);
                p.setPen(mutedColor());
                p.setFont(pixelFont(0.6 * b));
                drawElided(p, QRectF(map.left(), cell.top(), map.width(), label),
                           Qt::AlignLeft | Qt::AlignBottom, TokenNormView::tr("h%1").arg(head + 1));
            }
            p.setFont(pixelFont(0.65 * b));
            drawElided(p, QRectF(content.left(), content.bottom() + 0.3 * b, content.width(), 1.0 * b),
                       Qt::AlignLeft | Qt::AlignTop, TokenNormView::tr("each map scaled to its own maximum"));
            break;
        }
        case Panel::Dataset: {
            Histogram h;
            h.edges = d.datasetBinEdges, h.logX = true;
            h.high = d.datasetHistogramHighNorm;
            for (int bin = 0; bin < d.datasetHistogram.size(); ++bin)
                h.normal << d.datasetHistogram[bin] - d.datasetHistogramHighNorm.value(bin);
            drawHistogram(p, content.adjusted(3.4 * b, 0.4 * b, -0.4 * b, 0), h,
                          TokenNormView::tr("token norm"), b);
            p.setPen(mutedColor());
            p.setFont(pixelFont(0.62 * b));
            drawElided(p, QRectF(content.left(), content.bottom() + 1.9 * b, content.width(), 0.9 * b),
                       Qt::AlignLeft | Qt::AlignTop, d.datasetDescription);
            break;
        }
        }
    }
}

} // namespace

TokenNormView::TokenNormView(QWidget* parent)
    : QWidget(parent)
{
    setBackgroundRole(QPalette::Base);
    setAutoFillBackground(true);
}

void TokenNormView::setRows(const QVector<TokenNormData>& rows)
{
    m_rows = rows;
    update();
}

QStringList TokenNormView::panelTitles(int row) const
{
    QStringList titles;
    if (row < 0 || row >= m_rows.size()) return titles;
    for (Panel k : panelsOf(m_rows[row]))
        titles << titleOf(m_rows[row], k);
    return titles;
}

QSize TokenNormView::preferredFigureSize() const
{
    return QSize(1600, 80 + 440 * std::max<int>(1, int(m_rows.size())));
}

void TokenNormView::paintFigure(QPainter& p, const QRect& areaRect) const
{
    p.save();
    p.setRenderHint(QPainter::Antialiasing, true);
    p.fillRect(areaRect, Qt::white);
    const QRectF area(areaRect);
    const int n = std::max<int>(1, int(m_rows.size()));
    const double b = std::clamp(std::min(area.width() / 85.0, area.height() / n / 24.0), 7.0, 40.0);
    const QRectF inner = area.adjusted(0.8 * b, 0.5 * b, -0.8 * b, -0.5 * b);
    if (m_rows.isEmpty()) {
        p.setPen(mutedColor());
        p.setFont(pixelFont(b));
        p.drawText(inner, Qt::AlignCenter | Qt::TextWordWrap,
                   tr("Open an image model and an image: the token norms of Darcet et al. appear here."));
        p.restore();
        return;
    }
    const double footer = 1.2 * b, gap = 1.2 * b;
    const double rowH = (inner.height() - footer - gap * (n - 1)) / n;
    for (int i = 0; i < m_rows.size(); ++i)
        drawRow(p, QRectF(inner.left(), inner.top() + i * (rowH + gap), inner.width(), rowH), m_rows[i], b);
    p.setPen(mutedColor());
    p.setFont(pixelFont(0.7 * b));
    drawElided(p, QRectF(inner.left(), inner.bottom() - footer, inner.width(), footer),
               Qt::AlignLeft | Qt::AlignBottom,
               tr("Darcet et al. 2024: high-norm tokens (red), %1. %2")
                   .arg(m_rows.front().rule, Provenance::indexingNote()));
    p.restore();
}

void TokenNormView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    paintFigure(p, rect());
}

QString TokenNormView::figureCsv() const
{
    QString csv = QStringLiteral("model,quantity,row,col,value\n");
    for (const TokenNormData& d : m_rows) {
        const QString model = QString(d.model).replace(QLatin1Char(','), QLatin1Char(' '));
        if (validGrid(d.patchNorms, d.gridRows, d.gridCols))
            for (int r = 0; r < d.gridRows; ++r)
                for (int c = 0; c < d.gridCols; ++c)
                    csv += QStringLiteral("%1,patch_norm,%2,%3,%4\n")
                               .arg(model)
                               .arg(r)
                               .arg(c)
                               .arg(csvValue(d.patchNorms[r * d.gridCols + c]));
        for (int t = 0; t < d.prefixNorms.size(); ++t)
            csv +=
                QStringLiteral("%1,prefix_norm,%2,,%3\n").arg(model).arg(t).arg(csvValue(d.prefixNorms[t]));
        csv += QStringLiteral("%1,cutoff,,,%2\n").arg(model, csvValue(d.cutoff));
        for (int h = 0; h < d.clsAttention.size(); ++h)
            for (int k = 0; k < d.clsAttention[h].size(); ++k)
                csv += QStringLiteral("%1,cls_attention,%2,%3,%4\n")
                           .arg(model)
                           .arg(h)
                           .arg(k)
                           .arg(csvValue(d.clsAttention[h][k]));
        for (int h = 0; h < d.clsPrefixAttention.size(); ++h) // [CLS] itself and the registers
            for (int k = 0; k < d.clsPrefixAttention[h].size(); ++k)
                csv += QStringLiteral("%1,cls_prefix_attention,%2,%3,%4\n")
                           .arg(model)
                           .arg(h)
                           .arg(k)
                           .arg(csvValue(d.clsPrefixAttention[h][k]));
        if (validGrid(d.datasetHighNormPatches, d.gridRows, d.gridCols))
            for (int r = 0; r < d.gridRows; ++r)
                for (int c = 0; c < d.gridCols; ++c)
                    csv += QStringLiteral("%1,dataset_high_norm_patch,%2,%3,%4\n")
                               .arg(model)
                               .arg(r)
                               .arg(c)
                               .arg(csvValue(d.datasetHighNormPatches[r * d.gridCols + c]));
        for (int bin = 0; bin < d.datasetHistogram.size(); ++bin)
            csv += QStringLiteral("%1,dataset_histogram,%2,%3,%4\n")
                       .arg(model)
                       .arg(bin)
                       .arg(csvValue(d.datasetBinEdges.value(bin)))
                       .arg(csvValue(d.datasetHistogram[bin]));
    }
    return csv;
}

Provenance TokenNormView::figureProvenance() const
{
    if (m_rows.isEmpty()) return {};
    Provenance p = m_rows.front().provenance;
    if (p.selection.isEmpty())
        p.selection = tr("token norms of layer %1, [CLS] attention of layer %2")
                          .arg(m_rows.front().layer + 1)
                          .arg(m_rows.front().attentionLayer + 1);
    return p;
}

QString TokenNormView::figureName() const
{
    if (m_rows.isEmpty() || m_rows.front().layer < 0) return QStringLiteral("token-norms");
    return QStringLiteral("token-norms-L%1").arg(m_rows.front().layer + 1);
}

} // namespace outlierlens
