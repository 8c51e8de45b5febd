#include "systematic_view.h"

#include "chart_support.h"
#include "figure_painting.h"
#include "figure_style.h"
#include "heatmap_renderer.h"
#include "heatmap_view.h"
#include "layer_series_chart.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QEvent>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLegend>
#include <QStackedWidget>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <tuple>

namespace outlierlens {

namespace {

/// Rows of a short matrix (a few tokens, K weight rows) stay lines, not bands.
constexpr double kMaxRowHeight = 28;
const std::array<QColor, 3> kCategoryColors{QColor(31, 119, 180), QColor(255, 127, 14), QColor(44, 160, 44)};
const QStringList kHeadColumns{QStringLiteral("Head"), QStringLiteral("Attention on outlier keys"),
                               QStringLiteral("Outlier keys (own rule)"), QStringLiteral("Consistency")};
const QString kDash = QStringLiteral("\u2014");
const QString kNeedsInput = QString::fromUtf8(SystematicView::kFigure1NeedsInputText);
const std::array<QString, 4> kLayerTitles{
    QStringLiteral("Layer outputs h: largest and median |h|"),
    QStringLiteral("Down-projection inputs x_down: largest and median |x_down|"),
    QStringLiteral("W_down: column extremal ratio"), QStringLiteral("Received attention (mean over heads)")};
using BarSet = std::tuple<QString, QList<qreal>, QColor>; // name, values, colour

/// One Figure 1 panel: what the window's HeatmapView and the figure's HeatmapRenderer both show.
struct PanelSpec
{
    QString title, name;
    const MatrixData* matrix = nullptr;
    QVector<int> rows, cols; ///< highlighted
};

std::array<PanelSpec, 4> panelSpecs(const SystematicViewData& d)
{
    // Short titles: a figure elides a title to its matrix's width, and x_down has only K columns.
    const QString down = d.downInput.cols > 0 ? QStringLiteral("|x_down|: top %1").arg(d.downInput.cols)
                                              : QStringLiteral("|x_down|: top channels");
    const QVector<int> none;
    return {PanelSpec{QStringLiteral("|h|: layer output"), QStringLiteral("h"), &d.hidden, d.heavyTokens,
                      d.outlierChannels},
            PanelSpec{down, QStringLiteral("x_down"), &d.downInput, d.heavyDownTokens, none},
            PanelSpec{QStringLiteral("|W_down[:, j]|: down-projection weights"), QStringLiteral("W_down"),
                      &d.downWeight, none, d.outlierChannels},
            PanelSpec{QStringLiteral("Attention: mean over heads"), QStringLiteral("attention"), &d.attention,
                      none, d.outlierKeys}};
}

bool noFigure1(const SystematicViewData& d)
{
    return d.hidden.isEmpty() && d.downInput.isEmpty() && d.downWeight.isEmpty() && d.attention.isEmpty();
}

/// HeatmapView and HeatmapRenderer share these setters.
template<class Target>
void configure(Target& target, const PanelSpec& spec)
{
    target.setData(*spec.matrix, ColorScale::Sequential);
    target.setTitle(spec.title);
    target.setHighlightedRows(spec.rows);
    target.setHighlightedColumns(spec.cols);
}

QString panelMessageFor(const PanelSpec& spec, bool allEmpty)
{
    if (!spec.matrix->isEmpty()) return QString();
    return spec.title + QLatin1Char('\n') + (allEmpty ? kNeedsInput : QStringLiteral("Not available here."));
}

const LayerSeriesData& layerSeries(const SystematicViewData& d, int index)
{
    const std::array<const LayerSeriesData*, 4> all{&d.hiddenPerLayer, &d.downPerLayer, &d.weightPerLayer,
                                                    &d.attentionPerLayer};
    return *all[std::size_t(index)];
}

/// The category bars that have data, with their names.
QVector<QPair<const BarData*, QString>> categorySources(const SystematicViewData& d)
{
    QVector<QPair<const BarData*, QString>> sources;
    for (const auto& [bar, name] :
         {qMakePair(&d.heavyByCategory, QStringLiteral("heavy tokens of h")),
          qMakePair(&d.downHeavyByCategory, QStringLiteral("heavy tokens of x_down")),
          qMakePair(&d.outlierKeysByCategory, QStringLiteral("outlier keys"))})
        if (!bar->values.isEmpty()) sources << qMakePair(bar, bar->title.isEmpty() ? name : bar->title);
    return sources;
}

QStringList categoryLabels(const SystematicViewData& d)
{
    QStringList labels;
    for (const auto& source : categorySources(d))
        for (const QString& label : source.first->labels)
            if (!labels.contains(label)) labels << label;
    return labels;
}

/// The value of `bar` for `label`; NaN when it has none.
double valueFor(const BarData& bar, const QString& label)
{
    const int index = int(bar.labels.indexOf(label));
    return index >= 0 && index < bar.values.size() ? bar.values[index] : std::nan("");
}

/// Bars grouped by category; counts get their numbers above the bars.
QChart* makeBarChart(const QString& title, const QStringList& categories, const QString& categoryTitle,
                     const QString& valueTitle, const QVector<BarSet>& sets, bool counts)
{
    QChart* chart = charts::makeChart(title);
    auto* series = new QBarSeries;
    series->setLabelsVisible(counts);
    series->setLabelsPosition(QAbstractBarSeries::LabelsOutsideEnd);
    double maximum = 1;
    for (const auto& [name, values, color] : sets) {
        auto* set = new QBarSet(name);
        set->setColor(color);
        set->setBorderColor(color);
        set->setLabelColor(FigureStyle::text());
        set->setSelectedColor(FigureStyle::highlight());
        set->append(values);
        series->append(set);
        for (qreal v : values)
            maximum = std::max(maximum, double(v));
    }
    chart->addSeries(series);
    auto* bottom = new QBarCategoryAxis;
    bottom->append(categories.isEmpty() ? QStringList{QStringLiteral(" ")} : categories);
    bottom->setGridLineVisible(false);
    charts::setAxisTitle(bottom, categoryTitle);
    auto* left = new QValueAxis;
    charts::setAxisTitle(left, valueTitle);
    charts::setCountRange(left, maximum * 1.12); // whole numbers, room for labels
    chart->addAxis(bottom, Qt::AlignBottom);
    chart->addAxis(left, Qt::AlignLeft);
    series->attachAxis(bottom);
    series->attachAxis(left);
    chart->legend()->setVisible(sets.size() > 1);
    return chart;
}

/// "Which tokens" (their Figs 3b, 6b): one group per token category, one bar per kind of token.
QChart* makeTokenChart(const SystematicViewData& d)
{
    const auto sources = categorySources(d);
    const QStringList labels = categoryLabels(d);
    QVector<BarSet> sets;
    for (int i = 0; i < sources.size(); ++i) {
        QList<qreal> values;
        for (const QString& label : labels)
            values << std::fmax(valueFor(*sources[i].first, label), 0.0); // NaN -> 0
        sets << BarSet(sources[i].second, values, kCategoryColors[std::size_t(i) % 3]);
    }
    const QString axis = sources.isEmpty() ? QString() : sources.front().first->axisTitle;
    return makeBarChart(sources.isEmpty() ? QStringLiteral("Which tokens: no data")
                                          : QStringLiteral("Which tokens: counts by category"),
                        labels, QStringLiteral("token category"),
                        axis.isEmpty() ? QStringLiteral("tokens") : axis, sets, true);
}

/// "Which heads" (their Fig 6c): each head's share of received attention on the outlier keys, in %.
QChart* makeHeadChart(const SystematicViewData& d)
{
    QStringList labels;
    QList<qreal> values;
    for (int h = 0; h < d.heads.size(); ++h) {
        labels << QString::number(h + 1);
        values << std::fmax(100 * d.heads[h].outlierKeyShare, 0.0); // NaN -> 0
    }
    QVector<BarSet> sets;
    if (!values.isEmpty())
        sets << BarSet(QStringLiteral("attention on outlier keys"), values, kCategoryColors[0]);
    return makeBarChart(d.heads.isEmpty() ? QStringLiteral("Which heads: no data")
                                          : QStringLiteral("Which heads: attention on outlier keys"),
                        labels, QStringLiteral("head (1-based)"),
                        QStringLiteral("% of the head's received attention"), sets, false);
}

QString percentText(double share)
{
    return std::isfinite(share) ? QString::number(100 * share, 'f', 1) + QStringLiteral(" %") : kDash;
}

/// Table 1's cells for one head (0-based `head`, shown 1-based).
QStringList headCells(const SystematicHeadRow& row, int head)
{
    return {QString::number(head + 1), percentText(row.outlierKeyShare), QString::number(row.outlierKeys),
            percentText(row.consistency)};
}

QString consistencyCaption(const SystematicViewData& d)
{
    if (d.heads.isEmpty()) return QStringLiteral("No heads to show.");
    if (d.consistencySamples <= 0)
        return QStringLiteral("Consistency: no sample had a heavy token of h (%1).").arg(kDash);
    return QStringLiteral("Consistency: share of the heavy tokens of h that are the head's own outlier keys, "
                          "averaged over %1 sample(s) with a heavy token.")
        .arg(d.consistencySamples);
}

/// Sorts by the number behind the text; NaN ("—") below every number, so a descending sort (the most
/// consistent head first) puts it last.
class NumberItem : public QTableWidgetItem
{
public:
    NumberItem(const QString& text, double key)
        : QTableWidgetItem(text)
    {
        setData(Qt::UserRole, key);
        setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    }
    bool operator<(const QTableWidgetItem& other) const override
    {
        const double a = data(Qt::UserRole).toDouble(), b = other.data(Qt::UserRole).toDouble();
        return std::isnan(a) || std::isnan(b) ? std::isnan(a) && !std::isnan(b) : a < b;
    }
};

/// Figure 1 as a 2 x 2 grid with the window's layout: |h| and x_down in the top row, cells aligned.
void paintFigure1(QPainter& painter, const QRectF& box, const SystematicViewData& d)
{
    if (noFigure1(d)) return painting::drawNoData(painter, box.adjusted(8, 4, -8, -4), kNeedsInput, 15);
    const auto specs = panelSpecs(d);
    std::array<HeatmapRenderer, 4> renderers;
    for (std::size_t i = 0; i < 4; ++i)
        configure(renderers[i], specs[i]);
    const double gap = 14, leftWidth = (box.width() - gap) * 0.6, rowHeight = (box.height() - gap) / 2;
    for (std::size_t row = 0; row < 2; ++row) {
        int top = 0;
        for (std::size_t i = 2 * row; i < 2 * row + 2; ++i)
            if (!specs[i].matrix->isEmpty()) top = std::max(top, renderers[i].figureMargins().top());
        for (std::size_t i = 2 * row; i < 2 * row + 2; ++i) {
            const bool left = i % 2 == 0;
            const QRectF rect(box.left() + (left ? 0 : leftWidth + gap), box.top() + row * (rowHeight + gap),
                              left ? leftWidth : box.width() - leftWidth - gap, rowHeight);
            const MatrixData& m = *specs[i].matrix;
            if (m.isEmpty()) {
                painting::drawNoData(painter, rect, panelMessageFor(specs[i], false), 14);
                continue;
            }
            const QMargins margins = renderers[i].figureMargins();
            const QSizeF cell = HeatmapRenderer::fittedCell(rect.width() - margins.left() - margins.right(),
                                                            rect.height() - top - margins.bottom(), m.rows,
                                                            m.cols, kMaxRowHeight);
            const double width = margins.left() + m.cols * cell.width() + margins.right();
            const QPointF topLeft(rect.left() + std::max(0.0, (rect.width() - width) / 2), rect.top());
            renderers[i].paint(painter, renderers[i].figureFrame(topLeft, cell, top));
        }
    }
}

/// Table 1 as text: caption, header, one row per head (the consistency note is in the footer).
void paintHeadTable(QPainter& painter, const QRectF& box, const SystematicViewData& d)
{
    painter.save();
    painter.setPen(FigureStyle::text());
    painter.setFont(FigureStyle::captionFont());
    painter.drawText(box.adjusted(4, 4, -4, 0), Qt::AlignLeft | Qt::AlignTop,
                     QStringLiteral("Table 1: heads of layer %1").arg(d.layer + 1));
    const QRectF table = box.adjusted(4, 30, -4, -4);
    const double header = 30;
    const double pitch = std::clamp((table.height() - header) / std::max<int>(1, d.heads.size()), 6.0, 22.0);
    const std::array<double, 5> edges{0, 0.14, 0.46, 0.74, 1.0};
    auto cell = [&](int c, double y, double height) {
        return QRectF(table.left() + edges[c] * table.width() + 3, y,
                      (edges[c + 1] - edges[c]) * table.width() - 6, height);
    };
    painter.setPen(FigureStyle::text());
    painter.setFont(painting::pixelFont(10, true));
    for (int c = 0; c < 4; ++c)
        painter.drawText(cell(c, table.top(), header), Qt::AlignRight | Qt::AlignBottom | Qt::TextWordWrap,
                         kHeadColumns[c]);
    painter.setFont(painting::pixelFont(std::clamp(pitch * 0.62, 6.0, 12.0)));
    for (int h = 0; h < d.heads.size(); ++h) {
        const double y = table.top() + header + 2 + h * pitch;
        const QStringList cells = headCells(d.heads[h], h);
        for (int c = 0; c < 4; ++c)
            painter.drawText(cell(c, y, pitch), Qt::AlignRight | Qt::AlignVCenter, cells[c]);
    }
    painter.restore();
}

} // namespace

SystematicView::SystematicView(QWidget* parent)
    : QWidget(parent)
{
    m_title = makeViewTitle(this);
    m_details = new QLabel(this);
    m_details->setWordWrap(true);
    m_details->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_tabs = new QTabWidget(this);
    m_tabs->setDocumentMode(true);
    auto page = [this](const QString& name) {
        auto* widget = new QWidget;
        m_tabs->addTab(widget, name);
        auto* grid = new QGridLayout(widget);
        grid->setContentsMargins(4, 6, 4, 4);
        grid->setColumnStretch(0, 3); // |h| and W_down are d wide; the charts beside Table 1
        grid->setColumnStretch(1, 2);
        return grid;
    };
    QGridLayout* figure1 = page(tr("Figure 1 (this input)"));
    const char* panelNames[] = {"hiddenHeatmap", "downInputHeatmap", "downWeightHeatmap", "attentionHeatmap"};
    for (int i = 0; i < 4; ++i) {
        Panel& p = m_panels[std::size_t(i)];
        p.stack = new QStackedWidget;
        p.view = new HeatmapView(p.stack);
        p.view->setObjectName(QString::fromLatin1(panelNames[i]));
        p.view->viewport()->installEventFilter(this); // fitPanel() on resize
        p.message = new QLabel(p.stack);
        p.message->setAlignment(Qt::AlignCenter);
        p.message->setWordWrap(true);
        p.message->setStyleSheet(QStringLiteral("color: gray"));
        p.stack->addWidget(p.view);
        p.stack->addWidget(p.message);
        connect(p.view, &HeatmapView::userZoomed, this, [this, i] {
            Panel& zoomed = m_panels[std::size_t(i)];
            zoomed.autoFit = zoomed.view->isFitToWindow(); // a zoom sticks; "0" fits the panel again
            fitPanel(i);
        });
        figure1->addWidget(p.stack, i / 2, i % 2);
    }
    connect(hiddenView(), &HeatmapView::cellClicked, this,
            [this](int, int col) { Q_EMIT channelClicked(col); });
    connect(attentionView(), &HeatmapView::cellClicked, this,
            [this](int, int col) { Q_EMIT keyClicked(col); });
    const char* chartNames[] = {"hiddenPerLayerChart",    "downPerLayerChart",  "weightPerLayerChart",
                                "attentionPerLayerChart", "tokenCategoryChart", "headChart"};
    for (std::size_t i = 0; i < m_chartViews.size(); ++i)
        m_chartViews[i] =
            charts::makeChartView(charts::makeChart(QString()), QString::fromLatin1(chartNames[i]), this);
    QGridLayout* perLayer = page(tr("Per layer"));
    for (int i = 0; i < 4; ++i)
        perLayer->addWidget(m_chartViews[std::size_t(i)], i / 2, i % 2);
    m_headTable = new QTableWidget(0, 4, this);
    m_headTable->setObjectName(QStringLiteral("headTable"));
    QStringList headers = kHeadColumns; // two lines: the table has 2/5 of a 1280-pixel window
    headers[1].replace(QStringLiteral("on outlier"), QStringLiteral("on\noutlier"));
    headers[2].replace(QStringLiteral(" ("), QStringLiteral("\n("));
    m_headTable->setHorizontalHeaderLabels(headers);
    m_headTable->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_headTable->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_headTable->setSelectionMode(QAbstractItemView::SingleSelection);
    m_headTable->verticalHeader()->hide();
    m_headTable->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    m_headTable->horizontalHeader()->setSortIndicator(0, Qt::AscendingOrder);
    m_headTable->setSortingEnabled(true);
    connect(m_headTable, &QTableWidget::cellClicked, this, [this](int row, int) {
        const int head = m_headTable->item(row, 0)->data(Qt::UserRole).toInt() - 1;
        selectHead(head);
        Q_EMIT headClicked(head);
    });
    m_tableCaption = new QLabel(this);
    m_tableCaption->setWordWrap(true);
    auto* tableBox = new QVBoxLayout;
    tableBox->addWidget(new QLabel(tr("<b>Table 1</b>: heads of this layer (click a row; a header sorts)")));
    tableBox->addWidget(m_headTable, 1);
    tableBox->addWidget(m_tableCaption);
    QGridLayout* tokensAndHeads = page(tr("Tokens and heads"));
    tokensAndHeads->addWidget(m_chartViews[4], 0, 0);
    tokensAndHeads->addWidget(m_chartViews[5], 1, 0);
    tokensAndHeads->addLayout(tableBox, 0, 1, 2, 1);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    layout->addWidget(m_title);
    layout->addWidget(m_details);
    layout->addWidget(m_tabs, 1);
    setData(SystematicViewData{});
}

SystematicView::~SystematicView() = default;

void SystematicView::setData(const SystematicViewData& data)
{
    m_data = data;
    m_selectedHead = -1;
    m_title->setText(titleText());
    QString source =
        tr("Source: %1").arg(m_data.sourceDescription.isEmpty() ? tr("(none)") : m_data.sourceDescription);
    if (!m_data.rule.isEmpty()) source += QStringLiteral("  \u00b7  ") + tr("Rule: %1").arg(m_data.rule);
    m_details->setText(source + QLatin1Char('\n') + Provenance::indexingNote() + QLatin1Char(' ') +
                       tr("Click a channel of |h|, a key of the attention or a head to select it."));
    fillPanels();
    fillCharts();
    fillHeadTable();
}

QString SystematicView::titleText() const
{
    return m_data.layer < 0 ? tr("Systematic outliers")
                            : tr("Systematic outliers in layer %1").arg(m_data.layer + 1);
}

void SystematicView::fillPanels()
{
    const auto specs = panelSpecs(m_data);
    for (std::size_t i = 0; i < 4; ++i) {
        Panel& p = m_panels[i];
        configure(*p.view, specs[i]);
        p.view->setFigureName(figureName() + QLatin1Char('-') + specs[i].name);
        p.view->setProvenance(m_data.provenance);
        p.message->setText(panelMessageFor(specs[i], noFigure1(m_data)));
        p.stack->setCurrentWidget(specs[i].matrix->isEmpty() ? static_cast<QWidget*>(p.message) : p.view);
        p.autoFit = true;
    }
    // |h| and x_down share their token rows: their cells start at the same height.
    const int top = std::max(hiddenView()->naturalTopMargin(), downInputView()->naturalTopMargin());
    hiddenView()->setMinimumTopMargin(top);
    downInputView()->setMinimumTopMargin(top);
    for (int i = 0; i < 4; ++i)
        fitPanel(i);
}

void SystematicView::fitPanel(int index)
{
    Panel& p = m_panels[std::size_t(index)];
    const MatrixData& m = p.view->data();
    if (!p.autoFit || m.isEmpty()) return;
    // Whole-pixel margins and viewport: the cells never exceed the cell area, so no scroll bar appears.
    const QMargins margins = p.view->cellMargins();
    const QSize viewport = p.view->viewport()->size();
    const QSizeF cell =
        HeatmapRenderer::fittedCell(viewport.width() - margins.left() - margins.right(),
                                    viewport.height() - margins.top(), m.rows, m.cols, kMaxRowHeight);
    if (p.view->isFitToWindow() || cell != p.view->cellDimensions()) p.view->setCellDimensions(cell);
}

bool SystematicView::eventFilter(QObject* watched, QEvent* event)
{
    if (event->type() == QEvent::Resize)
        for (int i = 0; i < 4; ++i)
            if (watched == m_panels[std::size_t(i)].view->viewport()) fitPanel(i);
    return QWidget::eventFilter(watched, event);
}

void SystematicView::fillCharts()
{
    std::array<QChart*, 6> built{};
    for (int i = 0; i < 4; ++i)
        built[std::size_t(i)] =
            makeLayerSeriesChart(layerSeries(m_data, i), kLayerTitles[std::size_t(i)], m_data.layer);
    built[4] = makeTokenChart(m_data);
    built[5] = makeHeadChart(m_data);
    for (std::size_t i = 0; i < built.size(); ++i) {
        QChart* old = m_chartViews[i]->chart();
        m_chartViews[i]->setChart(built[i]); // releases, does not delete, the old chart
        delete old;
    }
    for (QBarSet* set : static_cast<QBarSeries*>(built[5]->series().constFirst())->barSets())
        connect(set, &QBarSet::clicked, this, [this](int index) {
            selectHead(index);
            Q_EMIT headClicked(index);
        });
}

void SystematicView::fillHeadTable()
{
    m_headTable->setSortingEnabled(false);
    m_headTable->clearContents();
    m_headTable->setRowCount(int(m_data.heads.size()));
    for (int h = 0; h < m_data.heads.size(); ++h) {
        const SystematicHeadRow& row = m_data.heads[h];
        const QStringList cells = headCells(row, h);
        const std::array<double, 4> keys{double(h + 1), row.outlierKeyShare, double(row.outlierKeys),
                                         row.consistency};
        for (int c = 0; c < 4; ++c)
            m_headTable->setItem(h, c, new NumberItem(cells[c], keys[std::size_t(c)]));
    }
    m_headTable->setSortingEnabled(true); // sorts by the header's indicator
    m_tableCaption->setText(consistencyCaption(m_data));
}

void SystematicView::selectHead(int head)
{
    m_selectedHead = head;
    for (QBarSet* set :
         static_cast<QBarSeries*>(m_chartViews[5]->chart()->series().constFirst())->barSets()) {
        set->deselectAllBars();
        set->selectBar(head);
    }
    for (int row = 0; row < m_headTable->rowCount(); ++row)
        if (m_headTable->item(row, 0)->data(Qt::UserRole).toInt() == head + 1) m_headTable->selectRow(row);
}

QStringList SystematicView::chartTitles() const
{
    QStringList titles;
    for (QChartView* view : m_chartViews)
        titles << view->chart()->title();
    return titles;
}

// ---- Figure: drawn from the data alone ----

QSize SystematicView::preferredFigureSize() const
{
    return QSize(1600, 1700);
}

QStringList SystematicView::footerLines() const
{
    QStringList lines{consistencyCaption(m_data), Provenance::indexingNote()};
    const QString origin = charts::provenanceLine(m_data.provenance);
    if (!origin.isEmpty()) lines.prepend(origin);
    return lines;
}

void SystematicView::paintFigure(QPainter& painter, const QRect& area) const
{
    painter.save();
    QStringList subtitle;
    if (!m_data.sourceDescription.isEmpty()) subtitle << m_data.sourceDescription;
    if (!m_data.rule.isEmpty()) subtitle << tr("rule: %1").arg(m_data.rule);
    const QRectF body = charts::paintFigureFrame(painter, area, titleText(),
                                                 subtitle.join(QStringLiteral("  \u00b7  ")), footerLines());
    // Figure 1 on top, then the per-layer charts, then tokens and heads. Without Figure 1's matrices (a
    // statistics file) the export leaves it out: the page's hint to choose the current input is for the
    // window, not for a figure.
    const bool figure1 = !noFigure1(m_data);
    const double figure1Height = figure1 ? std::round(body.height() * 0.46) : 0.0;
    if (figure1) paintFigure1(painter, QRectF(body.left(), body.top(), body.width(), figure1Height), m_data);
    const double layerTop = body.top() + (figure1 ? figure1Height + 8 : 0.0),
                 layerHeight = (body.bottom() - layerTop) * 0.46;
    for (int i = 0; i < 4; ++i)
        charts::renderChart(
            std::unique_ptr<QChart>(
                makeLayerSeriesChart(layerSeries(m_data, i), kLayerTitles[std::size_t(i)], m_data.layer)),
            painter, QRectF(body.left() + i * body.width() / 4, layerTop, body.width() / 4, layerHeight));
    const QRectF last(body.left(), layerTop + layerHeight + 6, body.width(),
                      body.bottom() - layerTop - layerHeight - 6);
    const double tokens = last.width() * 0.36, heads = last.width() * 0.34;
    charts::renderChart(std::unique_ptr<QChart>(makeTokenChart(m_data)), painter,
                        QRectF(last.left(), last.top(), tokens, last.height()));
    charts::renderChart(std::unique_ptr<QChart>(makeHeadChart(m_data)), painter,
                        QRectF(last.left() + tokens, last.top(), heads, last.height()));
    paintHeadTable(painter, last.adjusted(tokens + heads, 0, 0, 0), m_data);
    painter.restore();
}

QString SystematicView::figureCsv() const
{
    const QChar nl = QLatin1Char('\n'), comma = QLatin1Char(',');
    QString csv = QStringLiteral("quantity,value\nlayer (1-based),%1\nhead dimension,%2\nrule,%3\nsource,%4\n"
                                 "consistency samples,%5\n")
                      .arg(QString::number(m_data.layer + 1), QString::number(m_data.headDim),
                           charts::csvField(m_data.rule), charts::csvField(m_data.sourceDescription),
                           QString::number(m_data.consistencySamples)); // one pass: no % in the text is read
    csv += QStringLiteral("\nchart,series,layer (1-based),value\n");
    for (int i = 0; i < 4; ++i) {
        const LayerSeriesData& s = layerSeries(m_data, i);
        const QString chart = charts::csvField(s.title.isEmpty() ? kLayerTitles[std::size_t(i)] : s.title);
        for (int k = 0; k < s.series.size(); ++k)
            for (int l = 0; l < s.series[k].size(); ++l)
                csv += chart + comma +
                       charts::csvField(s.names.value(k, QStringLiteral("series %1").arg(k + 1))) + comma +
                       QString::number(l + 1) + comma + charts::csvNumber(s.series[k][l]) + nl;
    }
    const auto sources = categorySources(m_data);
    QStringList labels = categoryLabels(m_data);
    for (const QString& label : m_data.tokensByCategory.labels)
        if (!labels.contains(label)) labels << label;
    csv += QStringLiteral("\ncategory");
    for (const auto& source : sources)
        csv += comma + charts::csvField(source.second);
    csv += QStringLiteral(",tokens\n");
    for (const QString& label : labels) {
        csv += charts::csvField(label);
        for (const auto& source : sources)
            csv += comma + charts::csvNumber(valueFor(*source.first, label));
        csv += comma + charts::csvNumber(valueFor(m_data.tokensByCategory, label)) + nl;
    }
    csv += QStringLiteral("\nhead (1-based),attention on outlier keys (share),outlier keys (own rule),"
                          "consistency (share)\n");
    for (int h = 0; h < m_data.heads.size(); ++h) {
        const SystematicHeadRow& row = m_data.heads[h];
        csv += QString::number(h + 1) + comma + charts::csvNumber(row.outlierKeyShare) + comma +
               QString::number(row.outlierKeys) + comma + charts::csvNumber(row.consistency) + nl;
    }
    return csv;
}

QString SystematicView::figureName() const
{
    return m_data.layer >= 0 ? QStringLiteral("systematic-L%1").arg(m_data.layer + 1)
                             : QStringLiteral("systematic");
}

} // namespace outlierlens
