#include "head_grid.h"

#include "chart_support.h"
#include "figure_style.h"
#include "head_view.h"

#include "figure_painting.h"

#include <QRegularExpression>
#include <QScrollArea>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace outlierlens {
namespace {

/// A row's height in the window: enough for a readable attention matrix, the rest scrolls.
constexpr int kRowHeight = 360;
/// Sub-figures: the label line above each head, and the space between heads (natural pixels).
constexpr double kLabelHeight = 22;
constexpr double kSubfigureGap = 18;
/// The attention matrix of a sub-figure is at least this tall before the figure, rather than its cells,
/// is scaled down (its text with it).
constexpr double kMinMatrixSide = 150;
/// A head's figure width at a row height, sampled once (it is piecewise linear in the row height:
/// value columns have a floor) and interpolated, so that arranging does not measure labels again.
constexpr double kSamples[] = {0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0};

/// "a" of "(a) layer 10 ...": the sub-figure's letter for the CSV.
QString letterOf(const QString& label)
{
    const QRegularExpressionMatch m = QRegularExpression(QStringLiteral("^\\(([^)]*)\\)")).match(label);
    return m.hasMatch() ? m.captured(1) : label;
}

} // namespace

/// How the sub-figures are placed: `cols` x `rows` cells of `cell` natural pixels (label included), drawn
/// at row height `cellSize` and scaled by `scale` as a whole.
struct HeadGrid::Arrangement
{
    int cols = 1, rows = 1;
    double cellSize = 1, scale = 1;
    QSizeF cell;
    QSizeF natural() const
    {
        return {cols * cell.width() + (cols - 1) * kSubfigureGap,
                rows * cell.height() + (rows - 1) * kSubfigureGap};
    }
};

HeadGrid::Arrangement HeadGrid::arrange(const QSizeF& size) const
{
    const int n = std::max(1, int(m_views.size()));
    // Per head: extent(0) and the sampled widths.
    struct Shape
    {
        double fixedHeight = 0;
        int rows = 1;
        QVector<double> widths;
    };
    QVector<Shape> shapes;
    int maxRows = 1;
    for (const HeadView* view : m_views) {
        Shape s;
        s.rows = std::max(1, view->data().probabilities.rows);
        s.fixedHeight = view->figureExtent(0.0).height();
        for (double h : kSamples)
            s.widths << view->figureExtent(h).width();
        maxRows = std::max(maxRows, s.rows);
        shapes << s;
    }
    const auto widthAt = [](const Shape& s, double h) {
        const int last = int(std::size(kSamples)) - 1;
        for (int i = 0; i < last; ++i)
            if (h <= kSamples[i + 1])
                return s.widths[i] +
                       (s.widths[i + 1] - s.widths[i]) * (h - kSamples[i]) / (kSamples[i + 1] - kSamples[i]);
        return s.widths[last] + (s.widths[last] - s.widths[last - 1]) * (h - kSamples[last]) /
                                    (kSamples[last] - kSamples[last - 1]);
    };
    // The row height at which every head fits a cell of `cell` natural pixels (label excluded).
    const auto cellSizeFor = [&](const QSizeF& cell) {
        double best = 1e9;
        for (const Shape& s : shapes) {
            double hi = std::max(0.0, (cell.height() - s.fixedHeight) / s.rows), lo = 0;
            if (widthAt(s, hi) > cell.width()) {
                for (int i = 0; i < 40; ++i) {
                    const double mid = 0.5 * (lo + hi);
                    (widthAt(s, mid) <= cell.width() ? lo : hi) = mid;
                }
                hi = lo;
            }
            best = std::min(best, hi);
        }
        return std::min(best, 24.0);
    };
    Arrangement best;
    double bestScore = -1;
    const int firstCols = m_columns > 0 ? std::min(m_columns, n) : 1;
    const int lastCols = m_columns > 0 ? firstCols : n;
    for (int c = firstCols; c <= lastCols; ++c) {
        const int r = (n + c - 1) / c;
        // The largest scale (text size) at which the attention matrices keep kMinMatrixSide.
        for (double k = 1.0; k > 0.2; k -= 0.05) {
            const QSizeF room(size.width() / k, size.height() / k);
            const QSizeF cell((room.width() - (c - 1) * kSubfigureGap) / c,
                              (room.height() - (r - 1) * kSubfigureGap) / r);
            const double s = cellSizeFor(QSizeF(cell.width(), cell.height() - kLabelHeight));
            const bool enough = s * maxRows >= std::min(kMinMatrixSide, 24.0 * maxRows);
            if (!enough && k > 0.25) continue;
            const double score = enough ? k + 1e-3 * s : k * s * maxRows / kMinMatrixSide;
            if (score > bestScore) {
                bestScore = score;
                best.cols = c, best.rows = r, best.scale = k, best.cellSize = s;
                // The cell as the heads use it (no wider or taller than the widest and tallest head).
                double w = 0, h = 0;
                for (const Shape& shape : shapes) {
                    w = std::max(w, widthAt(shape, s));
                    h = std::max(h, shape.fixedHeight + shape.rows * s);
                }
                best.cell = QSizeF(std::min(w, cell.width()),
                                   std::min(h, cell.height() - kLabelHeight) + kLabelHeight);
            }
            break;
        }
    }
    return best;
}

int HeadGrid::columnsFor(const QSize& size) const
{
    return hasSubfigures() ? arrange(QSizeF(size)).cols : 1;
}

void HeadGrid::setSubfigures(const QStringList& labels, const QStringList& inputs, int columns)
{
    m_labels = labels;
    m_inputs = inputs;
    m_columns = columns;
    for (HeadView* view : m_views)
        view->setTitleVisible(labels.isEmpty()); // the label names layer and head
}

HeadGrid::HeadGrid(QWidget* parent)
    : QWidget(parent)
{
    m_scroll = new QScrollArea(this);
    m_scroll->setWidgetResizable(true);
    m_scroll->setFrameShape(QFrame::NoFrame);
    auto* body = new QWidget(m_scroll);
    m_rows = new QVBoxLayout(body);
    m_rows->setContentsMargins(0, 0, 0, 0);
    m_rows->addStretch(1);
    m_scroll->setWidget(body);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_scroll);
}

void HeadGrid::setHeads(const QVector<HeadViewData>& heads)
{
    m_heads = heads;
    while (m_views.size() > heads.size())
        delete m_views.takeLast();
    while (m_views.size() < heads.size()) {
        auto* view = new HeadView;
        view->setMinimumHeight(kRowHeight);
        const int index = int(m_views.size());
        connect(view, &HeadView::cellClicked, this, [this, index] { Q_EMIT headClicked(index); });
        m_rows->insertWidget(m_rows->count() - 1, view); // before the stretch
        m_views << view;
    }
    for (int i = 0; i < heads.size(); ++i) {
        m_views[i]->setData(heads[i]);
        m_views[i]->setTitleVisible(m_labels.isEmpty());
    }
}

void HeadGrid::setHighlightedTokens(const QVector<int>& tokens)
{
    for (HeadView* view : m_views)
        view->setHighlightedTokens(tokens);
}

QSize HeadGrid::preferredFigureSize() const
{
    if (hasSubfigures()) {
        const Arrangement a = arrange(QSizeF(kMaxFigureWidth, kMaxFigureHeight));
        const QSizeF natural = a.natural() * a.scale;
        return QSize(std::clamp(int(std::ceil(natural.width())), 480, kMaxFigureWidth),
                     std::clamp(int(std::ceil(natural.height())), 240, kMaxFigureHeight));
    }
    QSize size(480, 0);
    for (const HeadView* view : m_views) {
        const QSize one = view->preferredFigureSize();
        size = QSize(std::max(size.width(), one.width()), size.height() + one.height());
    }
    return size.expandedTo(QSize(480, 240));
}

void HeadGrid::paintFigure(QPainter& painter, const QRect& area) const
{
    painter.fillRect(area, FigureStyle::background());
    if (hasSubfigures()) {
        const Arrangement a = arrange(QSizeF(area.size()));
        const QSizeF natural = a.natural() * a.scale;
        painter.save();
        // Centred horizontally, at the top.
        painter.translate(area.left() + std::max(0.0, (area.width() - natural.width()) / 2), area.top());
        painter.scale(a.scale, a.scale);
        for (int i = 0; i < m_views.size(); ++i) {
            const QPointF at((i % a.cols) * (a.cell.width() + kSubfigureGap),
                             (i / a.cols) * (a.cell.height() + kSubfigureGap));
            painter.setPen(FigureStyle::text());
            painting::drawFitted(painter, QRectF(at.x(), at.y(), a.cell.width(), kLabelHeight),
                                 Qt::AlignLeft | Qt::AlignVCenter, m_labels.value(i),
                                 FigureStyle::captionFont());
            m_views[i]->paintFigureWithCellSize(painter, at + QPointF(0, kLabelHeight), a.cellSize);
        }
        painter.restore();
        return;
    }
    int total = 0;
    for (const HeadView* view : m_views)
        total += view->preferredFigureSize().height();
    double y = area.top();
    for (const HeadView* view : m_views) { // each head gets its share of the height
        const double h = total > 0 ? double(area.height()) * view->preferredFigureSize().height() / total : 0;
        view->paintFigure(painter, QRect(area.left(), int(y), area.width(), int(h)));
        y += h;
    }
}

QString HeadGrid::figureCsv() const
{
    QString csv = QStringLiteral("layer (1-based),head (1-based),panel,row,col,row_label,col_label,value\n");
    if (hasSubfigures()) csv.prepend(QStringLiteral("subfigure,input,"));
    for (int i = 0; i < m_views.size(); ++i) {
        const QString subfigure = hasSubfigures() ? csvField(letterOf(m_labels.value(i))) + QLatin1Char(',') +
                                                        csvField(m_inputs.value(i)) + QLatin1Char(',')
                                                  : QString();
        csv += charts::prefixedCsvRows(
            m_views[i]->figureCsv(),
            subfigure + QStringLiteral("%1,%2,").arg(m_heads[i].layer + 1).arg(m_heads[i].head + 1));
    }
    return csv;
}

Provenance HeadGrid::figureProvenance() const
{
    Provenance p = m_heads.isEmpty() ? Provenance{} : m_heads.first().provenance;
    if (!m_heads.isEmpty() && !hasSubfigures())
        p.selection = QStringLiteral("layer %1, heads %2-%3")
                          .arg(m_heads.first().layer + 1)
                          .arg(m_heads.first().head + 1)
                          .arg(m_heads.last().head + 1);
    if (hasSubfigures()) {
        // Each input once, with the sub-figures that show it: "(a) pair #1 ...; (b, c) pair #5 ...".
        QStringList inputs, letters, selection;
        for (int i = 0; i < m_heads.size(); ++i) {
            const QString input = m_inputs.value(i);
            const int at = int(inputs.indexOf(input));
            if (at < 0)
                inputs << input, letters << letterOf(m_labels.value(i));
            else
                letters[at] += QStringLiteral(", ") + letterOf(m_labels.value(i));
            selection << QStringLiteral("(%1) layer %2 head %3")
                             .arg(letterOf(m_labels.value(i)))
                             .arg(m_heads[i].layer + 1)
                             .arg(m_heads[i].head + 1);
        }
        QStringList parts;
        for (int i = 0; i < inputs.size(); ++i)
            parts << QStringLiteral("(%1) %2").arg(letters[i], inputs[i]);
        p.input = parts.join(QStringLiteral("; "));
        p.selection = selection.join(QStringLiteral(", "));
    }
    return p;
}

QString HeadGrid::figureName() const
{
    if (m_heads.isEmpty()) return QStringLiteral("heads");
    for (const HeadViewData& h : m_heads)
        if (h.layer != m_heads.first().layer) return QStringLiteral("heads");
    return QStringLiteral("heads-L%1").arg(m_heads.first().layer + 1);
}

} // namespace outlierlens
