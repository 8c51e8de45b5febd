#include "head_view.h"

#include "chart_support.h"
#include "figure_style.h"
#include "heatmap_view.h"

#include <QEvent>
#include <QFontMetricsF>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalBlocker>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace outlierlens {
namespace {

constexpr int kPanelGap = 28;     // between panels in figures
constexpr int kPanelSpacing = 12; // between panels in the widget
// Fit-to-window stops at this row height: a 5-token input need not fill a page with 150-pixel cells.
constexpr double kMaxFitRowHeight = 48.0;
// Value columns (V and P.V) are narrower than rows: d_head = 64 square columns would take the width the
// attention matrix needs. A value panel gets at most this share of the attention matrix's width, but
// columns no narrower than kMinValueColumn (nor wider than rows).
constexpr double kValuePanelShare = 1.0 / 3.0;
constexpr double kMinValueColumn = 2.0;
// Fit to a narrow window: columns may narrow to this share of the row height before rows shrink.
constexpr double kMinColumnShare = 0.25;
constexpr double kMaxColumnShare = 4.0;
constexpr double kMinNarrowedColumn = 1.0;
// The distribution panel's bins are legible columns whatever the row height.
constexpr double kMinDistributionColumn = 6.0;
constexpr double kMaxDistributionColumn = 16.0;

// Left to right: the distribution sits next to the probabilities it describes.
constexpr std::array<int, HeadView::kPanelCount> kDisplayOrder{
    HeadView::GatePanel,   HeadView::ProbabilitiesPanel, HeadView::DistributionPanel,
    HeadView::ValuesPanel, HeadView::ProductPanel,       HeadView::GatedProductPanel};

const char* panelName(int panel)
{
    switch (panel) {
    case HeadView::GatePanel:
        return "gate";
    case HeadView::ProbabilitiesPanel:
        return "probabilities";
    case HeadView::ValuesPanel:
        return "values";
    case HeadView::GatedProductPanel:
        return "gated product";
    case HeadView::DistributionPanel:
        return "distribution";
    default:
        return "product";
    }
}

/// The largest x in [lo, hi] with fits(x), for fits true up to some x and false beyond; lo if none.
template<typename Fits>
double largestFitting(double lo, double hi, Fits fits)
{
    if (hi <= lo || fits(hi)) return std::max(lo, hi);
    for (int i = 0; i < 48; ++i) {
        const double mid = 0.5 * (lo + hi);
        (fits(mid) ? lo : hi) = mid;
    }
    return lo;
}

/// Token labels for rows (and key columns) the app left unlabelled.
MatrixData withTokens(MatrixData m, const QStringList& tokens, bool columnsToo)
{
    if (m.rowLabels.isEmpty() && tokens.size() == m.rows) m.rowLabels = tokens;
    if (columnsToo && m.colLabels.isEmpty() && tokens.size() == m.cols) m.colLabels = tokens;
    return m;
}

} // namespace

MatrixData probabilityDistributionPerRow(const MatrixData& probabilities)
{
    // Lower edges of the bins after "exactly 0" and "(0, 1e-8)".
    static constexpr float kEdges[] = {1e-8f, 1e-7f, 1e-6f, 1e-5f, 1e-4f, 1e-3f, 1e-2f, 0.1f, 0.5f};
    constexpr int kEdgeCount = int(sizeof(kEdges) / sizeof(kEdges[0]));
    MatrixData d;
    d.rows = probabilities.rows;
    d.cols = kEdgeCount + 2;
    d.values.fill(0.0f, d.rows * d.cols);
    d.rowLabels = probabilities.rowLabels;
    d.colLabels = QStringList{QStringLiteral("0"), QStringLiteral(">0")};
    for (float edge : kEdges)
        d.colLabels << QStringLiteral("\u2265") +
                           (edge < 0.005f ? QStringLiteral("1e%1").arg(std::lround(std::log10(edge)))
                                          : QString::number(edge));
    d.rowTitle = probabilities.rowTitle;
    d.colTitle = QObject::tr("probability (bin)");
    d.valueTitle = QObject::tr("share of the query's keys");
    // On the GUI thread for every shown head: one pass over the keys a query sees, bins counted from the
    // small end, where most probabilities of a long input fall (2,048 causal tokens with probabilities
    // spread over the decades: 34 ms, against 58 ms with a binary search and a mask test per cell).
    std::array<int, kEdgeCount + 2> counts{};
    for (int r = 0; r < probabilities.rows; ++r) {
        counts.fill(0);
        const int first = probabilities.firstSeen(r), seen = probabilities.endSeen(r);
        const float* row = probabilities.values.constData() + qsizetype(r) * probabilities.cols;
        for (int c = first; c < seen; ++c) {
            const float p = row[c];
            int bin = 0;
            if (p > 0)
                for (bin = 1; bin <= kEdgeCount && p >= kEdges[bin - 1];)
                    ++bin;
            ++counts[std::size_t(bin)];
        }
        for (int c = 0; c < d.cols && seen > 0; ++c)
            d.values[r * d.cols + c] = float(counts[std::size_t(c)]) / float(seen);
    }
    return d;
}

HeadView::HeadView(QWidget* parent)
    : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    m_title = makeViewTitle(this);
    layout->addWidget(m_title);

    auto* body = new QHBoxLayout;
    body->setSpacing(0);
    layout->addLayout(body, 1);
    m_scroll = new QScrollArea(this);
    m_scroll->setFrameShape(QFrame::NoFrame);
    m_scroll->setWidgetResizable(true);
    m_scroll->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    m_scroll->viewport()->installEventFilter(this);
    body->addWidget(m_scroll, 1);
    m_vbar = new QScrollBar(Qt::Vertical, this);
    m_vbar->hide();
    body->addWidget(m_vbar);

    auto* row = new QWidget(m_scroll);
    // The gaps between panels have the panels' background, not the window's grey.
    row->setBackgroundRole(QPalette::Base);
    row->setAutoFillBackground(true);
    auto* rowLayout = new QHBoxLayout(row);
    rowLayout->setContentsMargins(0, 0, 0, 0);
    rowLayout->setSpacing(kPanelSpacing);
    for (int i : kDisplayOrder) {
        auto* view = new HeatmapView(row);
        m_panels[i] = view;
        view->setRowLabelsVisible(false);
        // Panels are exactly as wide as their cells; rows scroll with the shared bar.
        view->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
        view->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
        rowLayout->addWidget(view);
        connect(view, &HeatmapView::cellHovered, this,
                [this, i](int r, int c) { Q_EMIT cellHovered(i, r, c); });
        connect(view, &HeatmapView::cellClicked, this,
                [this, i](int r, int c) { Q_EMIT cellClicked(i, r, c); });
        connect(view, &HeatmapView::cellContextMenuRequested, this,
                [this, i](int r, int c, const QPoint& at) { Q_EMIT cellContextMenuRequested(i, r, c, at); });
        connect(view, &HeatmapView::userZoomed, this, [this, view] { onPanelZoomed(view); });
        connect(view->verticalScrollBar(), &QScrollBar::valueChanged, this,
                [this, view](int value) { onPanelScrolled(view, value); });
        connect(view->verticalScrollBar(), &QScrollBar::rangeChanged, this, &HeadView::updateScrollRange);
    }
    rowLayout->addStretch(1);
    m_scroll->setWidget(row);
    connect(m_vbar, &QScrollBar::valueChanged, this, [this](int value) {
        setVerticalScroll(value);
        Q_EMIT verticalScrolled(value);
    });

    m_panels[GatePanel]->setTitle(tr("gate \u03c0"));
    m_panels[GatePanel]->setFixedMaximum(1.0);
    m_panels[ValuesPanel]->setTitle(tr("values V"));
    m_panels[DistributionPanel]->setTitle(tr("distribution per query"));
    m_panels[DistributionPanel]->setFixedMaximum(1.0);
    setData(HeadViewData());
}

void HeadView::setData(const HeadViewData& data)
{
    m_data = data;
    m_title->setText(title());

    MatrixData gate;
    if (hasGatePanel()) {
        gate.rows = m_data.gate.size();
        gate.cols = 1;
        gate.values = m_data.gate;
        gate.rowLabels = m_data.tokens.size() == gate.rows ? m_data.tokens : QStringList();
        gate.colLabels = QStringList{QStringLiteral("\u03c0")};
        gate.valueTitle = tr("gate probability \u03c0");
    }
    m_panels[GatePanel]->setData(gate, ColorScale::Sequential);
    for (int i = 0; i < kPanelCount; ++i)
        m_panels[i]->setVisible(panelShown(i));
    // Without V and P.V (the compact form), the gate strip reads off the probabilities' colour bar: the
    // same colour map over [0, 1].
    m_panels[GatePanel]->setColorBarVisible(m_valuePanelsVisible);

    HeatmapView* probabilities = m_panels[ProbabilitiesPanel];
    probabilities->setTitle(m_data.clippedSoftmax ? tr("attention probabilities (clipped softmax)")
                                                  : tr("attention probabilities"));
    probabilities->setMarkExactZeros(m_data.clippedSoftmax);
    probabilities->setData(withTokens(m_data.probabilities, m_data.tokens, true), ColorScale::Sequential);
    m_panels[ValuesPanel]->setData(withTokens(m_data.values, m_data.tokens, false), ColorScale::Diverging);
    m_panels[ProductPanel]->setTitle(hasGatePanel() ? tr("P\u00b7V (pre-gate)") : tr("P\u00b7V"));
    m_panels[ProductPanel]->setData(withTokens(m_data.product, m_data.tokens, false), ColorScale::Diverging);
    // After the gate: each token's row of P.V times its pi, what the head adds to the output (Figure 15).
    MatrixData gated;
    if (hasGatePanel() && m_data.gate.size() == m_data.product.rows) {
        gated = m_data.product;
        for (int r = 0; r < gated.rows; ++r)
            for (int c = 0; c < gated.cols; ++c)
                gated.values[r * gated.cols + c] *= m_data.gate[r];
        gated.valueTitle = tr("π · (P·V)");
    }
    m_panels[GatedProductPanel]->setTitle(tr("π·(P·V) (gated)"));
    m_panels[GatedProductPanel]->setData(withTokens(gated, m_data.tokens, false), ColorScale::Diverging);
    m_panels[DistributionPanel]->setData(
        m_distributionPanelVisible
            ? probabilityDistributionPerRow(withTokens(m_data.probabilities, m_data.tokens, false))
            : MatrixData(),
        ColorScale::Sequential);

    // Token labels once, on the leftmost panel.
    for (int i : kDisplayOrder) {
        HeatmapView* view = m_panels[i];
        view->setRowLabelsVisible(view == visiblePanels().value(0));
        view->setProvenance(figureProvenance());
        view->setFigureName(figureName() + QLatin1Char('-') + QLatin1String(panelName(i)));
    }
    syncTopMargins();
    m_fit = true;
    refit();
}

QString HeadView::title() const
{
    if (m_data.layer < 0 || m_data.head < 0) return tr("No head selected");
    return tr("Layer %1, head %2").arg(m_data.layer + 1).arg(m_data.head + 1);
}

void HeadView::setTitleVisible(bool visible)
{
    m_titleVisible = visible;
    m_title->setVisible(visible);
}

bool HeadView::panelShown(int panel) const
{
    if (panel == GatePanel) return hasGatePanel();
    if (panel == GatedProductPanel) return hasGatePanel() && m_valuePanelsVisible;
    if (panel == DistributionPanel) return m_distributionPanelVisible;
    return panel == ProbabilitiesPanel || m_valuePanelsVisible;
}

void HeadView::setValuePanelsVisible(bool visible)
{
    if (m_valuePanelsVisible == visible) return;
    m_valuePanelsVisible = visible;
    setData(m_data); // panels, labels and the fit follow
}

void HeadView::setDistributionPanelVisible(bool visible)
{
    if (m_distributionPanelVisible == visible) return;
    m_distributionPanelVisible = visible;
    setData(m_data);
}

QVector<HeatmapView*> HeadView::visiblePanels() const
{
    QVector<HeatmapView*> panels;
    for (int i : kDisplayOrder)
        if (panelShown(i)) panels.append(m_panels[i]);
    return panels;
}

void HeadView::setHighlightedTokens(const QVector<int>& tokens)
{
    for (HeatmapView* view : m_panels)
        view->setHighlightedRows(tokens);
    m_panels[ProbabilitiesPanel]->setHighlightedColumns(tokens);
}

int HeadView::verticalScroll() const
{
    return m_panels[ProbabilitiesPanel]->verticalScrollBar()->value();
}

void HeadView::syncTopMargins()
{
    int top = 0;
    for (HeatmapView* view : visiblePanels()) {
        view->setMinimumTopMargin(0);
        top = std::max(top, view->naturalTopMargin());
    }
    for (HeatmapView* view : visiblePanels())
        view->setMinimumTopMargin(top);
}

double HeadView::valueColumnWidth(double rowHeight) const
{
    const int tokens = m_data.values.rows, dims = m_data.values.cols;
    if (tokens <= 0 || dims <= 0) return rowHeight;
    const double ratio = std::min(1.0, kValuePanelShare * tokens / dims);
    return std::min(rowHeight, std::max(kMinValueColumn, ratio * rowHeight));
}

QSizeF HeadView::panelCell(int panel, double rowHeight, double columnShare) const
{
    // Narrowed value columns stay at least kMinNarrowedColumn wide (or as wide as they were, if
    // narrower). The attention matrix's columns may go below a pixel: its renderer shows a block's largest
    // probability, so a sink column stays visible (512 keys in a third of a 1280 px window).
    if (panel == ValuesPanel || panel == ProductPanel || panel == GatedProductPanel) {
        const double width = valueColumnWidth(rowHeight);
        return QSizeF(columnShare >= 1.0 ? width
                                         : std::max(std::min(width, kMinNarrowedColumn), width * columnShare),
                      rowHeight);
    }
    if (panel == GatePanel) return QSizeF(std::max(rowHeight, kMinGateWidth), rowHeight);
    if (panel == DistributionPanel)
        return QSizeF(std::clamp(rowHeight, kMinDistributionColumn, kMaxDistributionColumn), rowHeight);
    return QSizeF(rowHeight * columnShare, rowHeight);
}

double HeadView::cellsWidth(double rowHeight, double columnShare) const
{
    double width = 0;
    for (int i = 0; i < kPanelCount; ++i)
        if (panelShown(i)) width += m_panels[i]->data().cols * panelCell(i, rowHeight, columnShare).width();
    return width;
}

double HeadView::fitCellSize() const
{
    return fitCells().first;
}

std::pair<double, double> HeadView::fitCells() const
{
    return fitCellsFor(m_scroll->viewport()->size());
}

std::pair<double, double> HeadView::fitCellsFor(const QSize& available) const
{
    const QVector<HeatmapView*> panels = visiblePanels();
    double fixed = kPanelSpacing * (panels.size() - 1) + panels.size(); // + a pixel each for rounding
    int top = 0, bottom = 0;
    for (HeatmapView* view : panels) {
        const QMargins m = view->cellMargins();
        fixed += m.left() + m.right() + 2 * view->frameWidth();
        top = std::max(top, m.top() + 2 * view->frameWidth());
        // The last row's label and the colour bar's lowest number reach below the cells.
        bottom = std::max(bottom, view->figureMargins().bottom());
    }
    const int rows = std::max(m_data.probabilities.rows, 1);
    // The rows fit the height. When the panels are then too wide (many of them: a gated head has five),
    // the columns narrow first, down to kMinColumnShare of the rows, so that rows keep their token
    // labels and the page its height; only then do the rows shrink too.
    const double byHeight = std::clamp(double(available.height() - top - bottom) / rows,
                                       HeatmapRenderer::kMinCellSize, kMaxFitRowHeight);
    const auto fits = [&](double h, double share) {
        return fixed + cellsWidth(h, share) <= available.width();
    };
    // Rows thinner than a pixel (hundreds of tokens in a short box, as when Compare stacks three heads):
    // the attention matrix's columns widen, up to kMaxColumnShare, into the width a square matrix would
    // leave empty.
    if (fits(byHeight, 1.0))
        return {byHeight, byHeight >= 1.0 ? 1.0 : largestFitting(1.0, kMaxColumnShare, [&](double c) {
                    return fits(byHeight, c);
                })};
    if (fits(byHeight, kMinColumnShare))
        return {byHeight, largestFitting(kMinColumnShare, 1.0, [&](double c) { return fits(byHeight, c); })};
    const double s = largestFitting(HeatmapRenderer::kMinCellSize, byHeight,
                                    [&](double h) { return fits(h, kMinColumnShare); });
    return {std::clamp(s, HeatmapRenderer::kMinCellSize, kMaxFitRowHeight), kMinColumnShare};
}

void HeadView::applyCellSize(double cellSize, int scroll)
{
    m_cell = cellSize;
    m_syncing = true;
    for (int i = 0; i < kPanelCount; ++i) {
        if (!panelShown(i)) continue;
        const QSizeF cell = panelCell(i, cellSize, m_columnShare);
        m_panels[i]->setCellDimensions(cell);
        m_panels[i]->setFixedWidth(m_panels[i]->sizeForCellDimensions(cell).width());
    }
    for (HeatmapView* view : visiblePanels())
        view->verticalScrollBar()->setValue(scroll);
    m_syncing = false;
    updateScrollRange();
}

void HeadView::refit()
{
    if (!m_fit || m_syncing) return;
    const auto [rowHeight, columnShare] = fitCells();
    m_columnShare = columnShare;
    applyCellSize(rowHeight, 0);
}

void HeadView::updateScrollRange()
{
    const QScrollBar* bar = m_panels[ProbabilitiesPanel]->verticalScrollBar();
    const QSignalBlocker blocker(m_vbar);
    m_vbar->setRange(bar->minimum(), bar->maximum());
    m_vbar->setPageStep(bar->pageStep());
    m_vbar->setSingleStep(bar->singleStep());
    m_vbar->setValue(bar->value());
    m_vbar->setVisible(bar->maximum() > 0);
}

void HeadView::setCellSize(double pixels)
{
    m_fit = false;
    m_columnShare = 1.0; // square cells when zoomed by hand
    applyCellSize(pixels, verticalScroll());
}

void HeadView::fitToWindow()
{
    m_fit = true;
    refit();
}

void HeadView::setVerticalScroll(int pixels)
{
    m_syncing = true;
    for (HeatmapView* view : visiblePanels())
        view->verticalScrollBar()->setValue(pixels);
    m_syncing = false;
    const QSignalBlocker blocker(m_vbar);
    m_vbar->setValue(pixels);
}

void HeadView::onPanelZoomed(HeatmapView* source)
{
    if (m_syncing) return;
    if (source->isFitToWindow()) {
        fitToWindow();
        Q_EMIT userZoomed(m_cell, true);
        return;
    }
    // The source kept the point under the mouse in place; the others follow its scroll position.
    m_fit = false;
    m_columnShare = 1.0;
    applyCellSize(source->cellHeight(), source->verticalScrollBar()->value());
    Q_EMIT userZoomed(m_cell, false);
}

void HeadView::onPanelScrolled(HeatmapView* source, int value)
{
    if (m_syncing) return;
    m_syncing = true;
    for (HeatmapView* view : visiblePanels())
        if (view != source) view->verticalScrollBar()->setValue(value);
    m_syncing = false;
    const QSignalBlocker blocker(m_vbar);
    m_vbar->setValue(value);
    Q_EMIT verticalScrolled(value);
}

bool HeadView::eventFilter(QObject* watched, QEvent* event)
{
    if (watched == m_scroll->viewport() && event->type() == QEvent::Resize) refit();
    return QWidget::eventFilter(watched, event);
}

void HeadView::changeEvent(QEvent* event)
{
    QWidget::changeEvent(event);
    if (event->type() == QEvent::FontChange) {
        syncTopMargins();
        refit();
    }
}

// ---- Figure ----

int HeadView::figureTitleHeight() const
{
    if (!m_titleVisible) return 0;
    return int(std::ceil(QFontMetricsF(FigureStyle::titleFont()).height())) + 10;
}

QSize HeadView::figureExtent(double cellSize) const
{
    double width = 0;
    int top = 0, bottom = 0;
    const QVector<HeatmapView*> panels = visiblePanels();
    for (HeatmapView* view : panels) {
        const QMargins m = view->figureMargins();
        width += m.left() + m.right();
        top = std::max(top, m.top());
        bottom = std::max(bottom, m.bottom());
    }
    width += cellsWidth(cellSize) + kPanelGap * (panels.size() - 1);
    const double height =
        figureTitleHeight() + top + std::max(m_data.probabilities.rows, 1) * cellSize + bottom;
    return QSize(int(std::ceil(width)), int(std::ceil(height)));
}

double HeadView::figureCellSizeFor(const QSizeF& size) const
{
    // The height is linear in the row height, the width piecewise linear (value columns have a floor).
    const QSize fixed = figureExtent(0.0);
    const int rows = std::max(m_data.probabilities.rows, 1);
    const double byHeight = (size.height() - fixed.height()) / rows;
    return largestFitting(HeatmapRenderer::kMinCellSize, byHeight,
                          [&](double h) { return figureExtent(h).width() <= size.width(); });
}

void HeadView::paintFigureWithCellSize(QPainter& painter, const QPointF& topLeft, double cellSize) const
{
    painter.save();
    const QSize extent = figureExtent(cellSize);
    painter.setFont(FigureStyle::titleFont());
    painter.setPen(FigureStyle::text());
    if (m_titleVisible)
        painter.drawText(QRectF(topLeft.x(), topLeft.y(), std::max(extent.width(), 400), figureTitleHeight()),
                         Qt::AlignLeft | Qt::AlignVCenter, title());
    int top = 0;
    for (HeatmapView* view : visiblePanels())
        top = std::max(top, view->figureMargins().top());
    double x = topLeft.x();
    for (int i : kDisplayOrder) {
        if (!panelShown(i)) continue;
        const HeatmapView* view = m_panels[i];
        const QMargins m = view->figureMargins();
        const QSizeF cell = panelCell(i, cellSize);
        view->paintFigureWithCellDimensions(painter, QPointF(x, topLeft.y() + figureTitleHeight()), cell,
                                            top);
        x += m.left() + view->data().cols * cell.width() + m.right() + kPanelGap;
    }
    painter.restore();
}

QSize HeadView::preferredFigureSize() const
{
    // From the data alone: rows up to 24 px, the attention matrix up to 720 px high, cells up to 1800 px
    // wide in all, never below 2 px.
    const int rows = std::max(m_data.probabilities.rows, 1);
    const double s = largestFitting(2.0, std::clamp(720.0 / rows, 2.0, 24.0),
                                    [&](double h) { return cellsWidth(h) <= 1800.0; });
    return figureExtent(s).expandedTo(QSize(480, 240));
}

void HeadView::paintFigure(QPainter& painter, const QRect& area) const
{
    painter.fillRect(area, FigureStyle::background());
    const double s = figureCellSizeFor(area.size());
    const QSize extent = figureExtent(s);
    const double x = area.left() + std::max(0.0, (area.width() - extent.width()) / 2.0);
    paintFigureWithCellSize(painter, QPointF(x, area.top()), s);
}

QString HeadView::figureCsv() const
{
    QString csv = QStringLiteral("panel,row,col,row_label,col_label,value\n");
    for (int i : kDisplayOrder) {
        if (!panelShown(i)) continue;
        // The panel's rows without its own header, each with the panel's name in front.
        csv +=
            charts::prefixedCsvRows(m_panels[i]->figureCsv(), QLatin1String(panelName(i)) + QLatin1Char(','));
    }
    return csv;
}

Provenance HeadView::figureProvenance() const
{
    Provenance p = m_data.provenance;
    if (p.selection.isEmpty() && m_data.layer >= 0)
        p.selection = tr("layer %1, head %2").arg(m_data.layer + 1).arg(m_data.head + 1);
    return p;
}

QString HeadView::figureName() const
{
    if (m_data.layer < 0) return QStringLiteral("head");
    return QStringLiteral("head-L%1-H%2").arg(m_data.layer + 1).arg(m_data.head + 1);
}

} // namespace outlierlens
