#include "outlier_dashboard.h"
#include "figure_style.h"

#include "chart_support.h"
#include "nice_numbers.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QContextMenuEvent>
#include <QCursor>
#include <QEvent>
#include <QGridLayout>
#include <QHorizontalBarSeries>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QMouseEvent>
#include <QScatterSeries>
#include <QToolTip>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace outlierlens {

namespace {

const QColor kBarColor(31, 119, 180);      ///< tokens: blue, as the paper's Figure 1
const QColor kDimensionColor(44, 160, 44); ///< hidden dimensions: green, as the paper's Figure 1
const QColor kSelectedColor(214, 39, 40);
const QColor kInfNormColor(31, 119, 180);
const QColor kKurtosisColor(255, 127, 14);
/// At most this many dimensions, those with at least a fifth of the largest count, are numbered.
constexpr int kLabelledDimensions = 5;
/// Up to this many dimensions with outliers, the chart shows only them, each numbered on the axis (the
/// paper's Figure 1); with more, every dimension on a numbered axis.
constexpr int kCompactDimensions = 32;
constexpr double kTokenRowHeight = 17;
/// The paper's layout numbers at most this many dimensions, those with the most outliers.
constexpr int kPaperDimensions = 40;

QString elided(const QString& text, int maxChars)
{
    return text.size() <= maxChars ? text : text.left(maxChars - 1) + QChar(0x2026);
}

/// Token rows sorted by count (largest first); ties keep the data's order.
QVector<int> tokensByCount(const BarData& tokens)
{
    QVector<int> order(std::min<int>(tokens.labels.size(), tokens.values.size()));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return tokens.values[a] > tokens.values[b]; });
    return order;
}

/// QBarCategoryAxis drops repeated categories; a token seen twice ("[SEP]" of both sentences)
/// gets its occurrence number.
QStringList uniqueLabels(const QStringList& labels)
{
    QStringList result;
    for (const QString& label : labels) {
        QString candidate = label.isEmpty() ? QStringLiteral("(empty)") : label;
        for (int n = 2; result.contains(candidate); ++n)
            candidate = QStringLiteral("%1 (%2)").arg(label).arg(n);
        result << candidate;
    }
    return result;
}

} // namespace

/// The three charts of a dashboard and the objects to refill them. The window keeps one set for
/// its lifetime; each export builds a fresh set from the same code, so both look alike.
struct DashboardCharts
{
    QChart* dimensions = nullptr;
    QBarSeries* dimensionSeries = nullptr;
    QBarSet* dimensionSet = nullptr;
    QCategoryAxis* dimensionAxis = nullptr; ///< labels on the bars' positions
    QVector<int> shownDimensions;           ///< the dimension of each bar, ascending
    QValueAxis* dimensionCountAxis = nullptr;
    QScatterSeries* topDimensions = nullptr; ///< invisible points that carry the spikes' numbers

    QChart* tokens = nullptr;
    QAbstractBarSeries* tokenSeries = nullptr; ///< horizontal bars, vertical in the paper's layout
    QBarSet* tokenSet = nullptr;
    QBarCategoryAxis* tokenAxis = nullptr;
    QValueAxis* tokenCountAxis = nullptr;
    QStringList tokenLabels; ///< bottom to top, as the axis shows them

    QChart* layers = nullptr;
    QLineSeries* infNorm = nullptr;
    QLineSeries* kurtosis = nullptr;
    QScatterSeries* selectedInfNorm = nullptr;
    QScatterSeries* selectedKurtosis = nullptr;
    QLineSeries* originalInfNorm = nullptr; ///< before an intervention (OutlierDashboardData::original...)
    QLineSeries* originalKurtosis = nullptr;
    QValueAxis* layerAxis = nullptr;
    QValueAxis* infNormAxis = nullptr;
    QValueAxis* kurtosisAxis = nullptr;

    /// `paper`: the paper's Figure 1 (OutlierDashboard::setPaperLayout()).
    explicit DashboardCharts(bool paper = false);
    bool paper = false;
    int tokenRows = OutlierDashboard::kTopTokens; ///< rows the token chart has room for

    /// Refills every chart; the token chart gets at most `rows` tokens.
    void fill(const OutlierDashboardData& data, int rows);
    void fillTokens(const OutlierDashboardData& data, int rows);
    /// How many token rows a token chart of this height shows without hiding labels.
    static int tokenRowsFor(double chartHeight);
};

DashboardCharts::DashboardCharts(bool paperLayout)
    : paper(paperLayout)
{
    // Per dimension: one bar set on a value axis, so the axis labels every n-th dimension only.
    dimensions = charts::makeChart(QString());
    dimensionSet = new QBarSet(QStringLiteral("outliers"));
    dimensionSet->setColor(kDimensionColor);
    QPen barPen(kDimensionColor);
    barPen.setCosmetic(true); // at least one pixel wide when d bars share a few hundred pixels
    dimensionSet->setPen(barPen);
    dimensionSet->setSelectedColor(kSelectedColor);
    dimensionSeries = new QBarSeries;
    dimensionSeries->setBarWidth(1.0);
    dimensionSeries->append(dimensionSet);
    dimensions->addSeries(dimensionSeries);
    dimensionAxis = new QCategoryAxis;
    dimensionAxis->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
    dimensionAxis->setGridLineVisible(false);
    dimensionCountAxis = new QValueAxis;
    dimensionCountAxis->setLabelFormat(QStringLiteral("%.4g"));
    dimensions->addAxis(dimensionAxis, Qt::AlignBottom);
    dimensions->addAxis(dimensionCountAxis, Qt::AlignLeft);
    dimensionSeries->attachAxis(dimensionAxis);
    dimensionSeries->attachAxis(dimensionCountAxis);
    // The few dimensions that dominate get their number written above the bar, as in Figure 1.
    topDimensions = new QScatterSeries;
    topDimensions->setName(QStringLiteral("largest dimensions"));
    topDimensions->setMarkerSize(1);
    topDimensions->setColor(Qt::transparent);
    topDimensions->setBorderColor(Qt::transparent);
    topDimensions->setPointLabelsVisible(true);
    topDimensions->setPointLabelsFormat(QStringLiteral("@xPoint"));
    topDimensions->setPointLabelsClipping(false);
    topDimensions->setPointLabelsColor(QColor(40, 40, 40));
    dimensions->addSeries(topDimensions);
    topDimensions->attachAxis(dimensionAxis);
    topDimensions->attachAxis(dimensionCountAxis);
    dimensions->legend()->hide();

    tokens = charts::makeChart(QString());
    tokenSet = new QBarSet(QStringLiteral("outliers"));
    tokenSet->setColor(kBarColor);
    tokenSet->setBorderColor(kBarColor);
    if (paper)
        tokenSeries = new QBarSeries;
    else
        tokenSeries = new QHorizontalBarSeries;
    tokenSeries->setBarWidth(0.75);
    tokenSeries->append(tokenSet);
    tokens->addSeries(tokenSeries);
    tokenAxis = new QBarCategoryAxis;
    tokenAxis->setGridLineVisible(false);
    tokenAxis->setTruncateLabels(false); // labels are elided to 24 characters beforehand
    if (paper) tokenAxis->setLabelsAngle(-60);
    tokenCountAxis = new QValueAxis;
    tokenCountAxis->setLabelFormat(QStringLiteral("%.4g"));
    charts::setAxisTitle(tokenAxis, QString());
    tokens->addAxis(tokenAxis, paper ? Qt::AlignBottom : Qt::AlignLeft);
    tokens->addAxis(tokenCountAxis, paper ? Qt::AlignLeft : Qt::AlignBottom);
    tokenSeries->attachAxis(tokenAxis);
    tokenSeries->attachAxis(tokenCountAxis);
    tokens->legend()->hide();

    layers = charts::makeChart(QStringLiteral("Max inf norm and kurtosis per layer"));
    infNorm = new QLineSeries;
    infNorm->setName(QStringLiteral("max inf norm"));
    infNorm->setPen(QPen(kInfNormColor, 2));
    infNorm->setPointsVisible(true);
    kurtosis = new QLineSeries;
    kurtosis->setName(QStringLiteral("kurtosis"));
    kurtosis->setPen(QPen(kKurtosisColor, 2, Qt::DashLine));
    kurtosis->setPointsVisible(true);
    selectedInfNorm = new QScatterSeries;
    selectedKurtosis = new QScatterSeries;
    for (QScatterSeries* marker : {selectedInfNorm, selectedKurtosis}) {
        marker->setMarkerSize(13);
        marker->setColor(kSelectedColor);
        marker->setBorderColor(Qt::white);
    }
    originalInfNorm = new QLineSeries;
    // One legend entry for both dotted curves: the legend stays one row in a narrow chart.
    originalInfNorm->setName(QStringLiteral("before (dotted)"));
    originalInfNorm->setPen(QPen(kInfNormColor.lighter(160), 2, Qt::DotLine));
    originalKurtosis = new QLineSeries;
    originalKurtosis->setPen(QPen(kKurtosisColor.lighter(140), 2, Qt::DotLine));
    for (QAbstractSeries* series : std::initializer_list<QAbstractSeries*>{
             infNorm, kurtosis, selectedInfNorm, selectedKurtosis, originalInfNorm, originalKurtosis})
        layers->addSeries(series);
    layerAxis = new QValueAxis;
    layerAxis->setLabelFormat(QStringLiteral("%d"));
    layerAxis->setTickType(QValueAxis::TicksDynamic);
    layerAxis->setTickAnchor(1);
    charts::setAxisTitle(layerAxis, QStringLiteral("layer (1-based)"));
    infNormAxis = new QValueAxis;
    infNormAxis->setLabelFormat(QStringLiteral("%.4g"));
    infNormAxis->setLinePenColor(kInfNormColor);
    charts::setAxisTitle(infNormAxis, QStringLiteral("max inf norm"));
    kurtosisAxis = new QValueAxis;
    kurtosisAxis->setLabelFormat(QStringLiteral("%.4g"));
    kurtosisAxis->setLinePenColor(kKurtosisColor);
    kurtosisAxis->setGridLineVisible(false);
    charts::setAxisTitle(kurtosisAxis, QStringLiteral("kurtosis (Pearson)"));
    layers->addAxis(layerAxis, Qt::AlignBottom);
    layers->addAxis(infNormAxis, Qt::AlignLeft);
    layers->addAxis(kurtosisAxis, Qt::AlignRight);
    for (QXYSeries* series : std::initializer_list<QXYSeries*>{infNorm, selectedInfNorm, originalInfNorm}) {
        series->attachAxis(layerAxis);
        series->attachAxis(infNormAxis);
    }
    for (QXYSeries* series :
         std::initializer_list<QXYSeries*>{kurtosis, selectedKurtosis, originalKurtosis}) {
        series->attachAxis(layerAxis);
        series->attachAxis(kurtosisAxis);
    }
    // One legend entry for both markers.
    for (QLegendMarker* marker : layers->legend()->markers(selectedKurtosis))
        marker->setVisible(false);
}

void DashboardCharts::fillTokens(const OutlierDashboardData& data, int rows)
{
    // The largest at the top. Qt Charts hides category labels that would overlap, which would
    // hide exactly the top tokens; so a short chart shows fewer rows instead.
    tokenRows = rows;
    const QVector<int> order = tokensByCount(data.perToken);
    const int shown = std::min<int>(rows, order.size());
    QStringList labels;
    QList<qreal> values;
    double maxToken = 1.0;
    for (int i = 0; i < shown; ++i) {
        labels << elided(data.perToken.labels[order[i]], 24);
        // Horizontal bars: the first category is drawn lowest; vertical ones read left to right.
        if (paper)
            values.append(data.perToken.values[order[i]]);
        else
            values.prepend(data.perToken.values[order[i]]);
        maxToken = std::max(maxToken, data.perToken.values[order[i]]);
    }
    // The largest keeps the plain label; a horizontal bar chart draws its first category lowest.
    tokenLabels = uniqueLabels(labels);
    if (!paper) std::reverse(tokenLabels.begin(), tokenLabels.end());
    tokens->setTitle((data.perToken.title.isEmpty()
                          ? QStringLiteral("Tokens with the most outliers (top %1)").arg(std::max(shown, 1))
                          : data.perToken.title) +
                     (shown == 0 ? QStringLiteral(": none here") : QString()));
    // Qt Charts keeps the label items of a category axis that becomes empty on screen (the previous
    // model's or layer's tokens): without tokens the labels are hidden.
    tokenAxis->setLabelsVisible(shown > 0);
    if (tokenSet->count() > 0) tokenSet->remove(0, tokenSet->count());
    tokenAxis->clear();
    QStringList axisLabels; // the axis draws its labels as rich text: OPT's BOS "</s>" would vanish
    for (const QString& label : tokenLabels)
        axisLabels << label.toHtmlEscaped();
    tokenAxis->append(axisLabels);
    tokenSet->append(values);
    charts::setAxisTitle(tokenCountAxis, paper                               ? QStringLiteral("outlier count")
                                         : data.perToken.axisTitle.isEmpty() ? QStringLiteral("outliers")
                                                                             : data.perToken.axisTitle);
    charts::setCountRange(tokenCountAxis, maxToken);
}

int DashboardCharts::tokenRowsFor(double chartHeight)
{
    // Title, value axis and margins take about 100 px; a label needs about 17 px.
    return std::clamp(int((chartHeight - 100) / kTokenRowHeight), 3, OutlierDashboard::kTopTokens);
}

/// The dimension chart's title when this layer has no outliers: which layers do, if the data says.
static QString noOutliersNote(const OutlierDashboardData& data)
{
    const QVector<double>& perLayer = data.outliersPerLayer;
    if (perLayer.isEmpty())
        return QStringLiteral(": none here (the line chart shows max |x| and kurtosis per layer)");
    QStringList layers;
    for (int l = 0; l < perLayer.size(); ++l)
        if (perLayer[l] > 0) layers << QString::number(l + 1);
    if (layers.isEmpty()) return QStringLiteral(": no layer has outliers under this rule");
    if (layers.size() > 6) layers = layers.mid(0, 5) << QStringLiteral("...");
    return QStringLiteral(": none here; layer%1 %2 %3 them")
        .arg(layers.size() > 1 ? QStringLiteral("s") : QString(), layers.join(QStringLiteral(", ")),
             layers.size() > 1 ? QStringLiteral("have") : QStringLiteral("has"));
}

void DashboardCharts::fill(const OutlierDashboardData& data, int rows)
{
    // Per dimension.
    const BarData& dims = data.perDimension;
    const bool none = std::all_of(dims.values.begin(), dims.values.end(), [](double v) { return v <= 0; });
    dimensions->setTitle(
        (dims.title.isEmpty() ? QStringLiteral("Outliers per hidden dimension") : dims.title) +
        (none && !dims.values.isEmpty() ? noOutliersNote(data) : QString()));
    charts::setAxisTitle(dimensionCountAxis, paper                      ? QStringLiteral("outlier count")
                                             : dims.axisTitle.isEmpty() ? QStringLiteral("outliers")
                                                                        : dims.axisTitle);
    dimensionSet->deselectAllBars();
    if (dimensionSet->count() > 0) dimensionSet->remove(0, dimensionSet->count());
    const int d = int(dims.values.size());
    shownDimensions.clear();
    for (int k = 0; k < d; ++k)
        if (dims.values[k] > 0) shownDimensions << k;
    const int withOutliers = int(shownDimensions.size());
    if (paper) {
        // The paper's Figure 1: the dimensions with outliers, the largest count first, each numbered.
        std::stable_sort(shownDimensions.begin(), shownDimensions.end(),
                         [&](int a, int b) { return dims.values[a] > dims.values[b]; });
        if (shownDimensions.size() > kPaperDimensions) shownDimensions.resize(kPaperDimensions);
    }
    const bool compact =
        paper || (!shownDimensions.isEmpty() && shownDimensions.size() <= kCompactDimensions &&
                  shownDimensions.size() < d);
    if (!compact) {
        shownDimensions.resize(d);
        std::iota(shownDimensions.begin(), shownDimensions.end(), 0);
    }
    QList<qreal> bars;
    for (int k : shownDimensions)
        bars << dims.values[k];
    dimensionSet->append(bars);
    dimensionSeries->setBarWidth(compact ? 0.6 : 1.0); // hundreds of bars: no gaps to lose pixels to
    const int n = int(shownDimensions.size());
    for (const QString& label : dimensionAxis->categoriesLabels())
        dimensionAxis->remove(label);
    dimensionAxis->setStartValue(-0.5);
    const int step = compact ? 1 : int(niceStep(std::max(1.0, n / 12.0)));
    for (int i = 0; i < n; i += step)
        dimensionAxis->append(QString::number(shownDimensions[i]), i);
    dimensionAxis->setRange(-0.5, std::max(1, n) - 0.5);
    charts::setAxisTitle(
        dimensionAxis,
        paper ? QStringLiteral(
                    "hidden dimension (0-based), by outlier count: %1 of the %2 with outliers (of %3)")
                    .arg(n)
                    .arg(withOutliers)
                    .arg(d)
        : compact ? QStringLiteral("hidden dimension (0-based): the %1 with outliers, of %2").arg(n).arg(d)
                  : QStringLiteral("hidden dimension (0-based)"));
    const double maxCount = d > 0 ? *std::max_element(dims.values.begin(), dims.values.end()) : 1.0;
    charts::setCountRange(dimensionCountAxis, std::max(maxCount * 1.06, 1.0)); // room for the numbers
    QVector<int> byCount(d);
    std::iota(byCount.begin(), byCount.end(), 0);
    std::stable_sort(byCount.begin(), byCount.end(),
                     [&](int a, int b) { return dims.values[a] > dims.values[b]; });
    QList<QPointF> top; // the spikes' numbers over a full axis; a compact one numbers every bar
    for (int i = 0; !compact && i < std::min(d, kLabelledDimensions); ++i)
        if (dims.values[byCount[i]] > 0 && dims.values[byCount[i]] >= 0.2 * maxCount)
            top << QPointF(byCount[i], dims.values[byCount[i]]);
    topDimensions->replace(top);

    fillTokens(data, rows);

    // Per layer, 1-based on the axis.
    QList<QPointF> norms, kurt, selectedNorm, selectedKurt;
    double maxNorm = 0, maxKurt = 0;
    for (int i = 0; i < data.maxInfNormPerLayer.size(); ++i) {
        norms << QPointF(i + 1, data.maxInfNormPerLayer[i]);
        if (std::isfinite(data.maxInfNormPerLayer[i]))
            maxNorm = std::max(maxNorm, data.maxInfNormPerLayer[i]);
        if (i == data.layer) selectedNorm << norms.back();
    }
    for (int i = 0; i < data.kurtosisPerLayer.size(); ++i) {
        kurt << QPointF(i + 1, data.kurtosisPerLayer[i]);
        if (std::isfinite(data.kurtosisPerLayer[i])) maxKurt = std::max(maxKurt, data.kurtosisPerLayer[i]);
        if (i == data.layer) selectedKurt << kurt.back();
    }
    // Beside them, the same input without the intervention (none: no curve, no legend entry).
    QList<QPointF> originalNorms, originalKurt;
    for (int i = 0; i < data.originalMaxInfNormPerLayer.size(); ++i) {
        originalNorms << QPointF(i + 1, data.originalMaxInfNormPerLayer[i]);
        if (std::isfinite(data.originalMaxInfNormPerLayer[i]))
            maxNorm = std::max(maxNorm, data.originalMaxInfNormPerLayer[i]);
    }
    for (int i = 0; i < data.originalKurtosisPerLayer.size(); ++i) {
        originalKurt << QPointF(i + 1, data.originalKurtosisPerLayer[i]);
        if (std::isfinite(data.originalKurtosisPerLayer[i]))
            maxKurt = std::max(maxKurt, data.originalKurtosisPerLayer[i]);
    }
    originalInfNorm->replace(originalNorms);
    originalKurtosis->replace(originalKurt);
    const bool before = originalInfNorm->count() > 0;
    for (QLegendMarker* marker : layers->legend()->markers(originalInfNorm))
        if (marker->isVisible() != before) {
            marker->setVisible(before);
            // Qt Charts does not lay a marker shown later out again: it sat on a row of its own
            // without its label until the legend was laid out anew.
            if (layers->legend()->isVisible()) {
                layers->legend()->hide();
                layers->legend()->show();
            }
        }
    for (QLegendMarker* marker : layers->legend()->markers(originalKurtosis))
        marker->setVisible(false);
    infNorm->replace(norms);
    kurtosis->replace(kurt);
    selectedInfNorm->replace(selectedNorm);
    selectedKurtosis->replace(selectedKurt);
    selectedInfNorm->setName(data.layer >= 0 ? QStringLiteral("layer %1 (above)").arg(data.layer + 1)
                                             : QStringLiteral("selected layer"));
    const int layerCount = int(std::max(data.maxInfNormPerLayer.size(), data.kurtosisPerLayer.size()));
    layerAxis->setRange(0.5, std::max(1, layerCount) + 0.5);
    layerAxis->setTickInterval(niceStep(std::max(1.0, layerCount / 12.0)));
    charts::setNiceRange(infNormAxis, 0, std::max(maxNorm, 1.0));
    charts::setNiceRange(kurtosisAxis, 0, std::max(maxKurt, 1.0));
}

OutlierDashboard::OutlierDashboard(QWidget* parent)
    : QWidget(parent)
    , m_charts(std::make_unique<DashboardCharts>())
{
    m_title = makeViewTitle(this);
    m_details = new QLabel(this);
    m_details->setWordWrap(true);
    m_details->setTextInteractionFlags(Qt::TextSelectableByMouse);

    m_dimensionView = charts::makeChartView(m_charts->dimensions, QStringLiteral("dimensionChart"), this);
    m_tokenView = charts::makeChartView(m_charts->tokens, QStringLiteral("tokenChart"), this);
    m_layerView = charts::makeChartView(m_charts->layers, QStringLiteral("layerChart"), this);
    m_dimensionView->viewport()->setMouseTracking(true);
    m_dimensionView->viewport()->installEventFilter(this);
    m_tokenView->installEventFilter(this);

    connect(m_charts->tokenSet, &QBarSet::hovered, this, [this](bool status, int index) {
        if (!status || index < 0 || index >= m_charts->tokenLabels.size()) {
            QToolTip::hideText();
            return;
        }
        QToolTip::showText(
            QCursor::pos(),
            QStringLiteral("%1: %2 outliers")
                .arg(m_charts->tokenLabels[index], charts::displayNumber(m_charts->tokenSet->at(index))),
            m_tokenView);
    });

    auto* layout = new QGridLayout(this);
    layout->addWidget(m_title, 0, 0, 1, 2);
    layout->addWidget(m_details, 1, 0, 1, 2);
    layout->addWidget(m_dimensionView, 2, 0, 1, 2);
    layout->addWidget(m_tokenView, 3, 0);
    layout->addWidget(m_layerView, 3, 1);
    layout->setRowStretch(2, 1);
    layout->setRowStretch(3, 1);
    layout->setColumnStretch(0, 2);
    layout->setColumnStretch(1, 3);

    setData(OutlierDashboardData{});
}

OutlierDashboard::~OutlierDashboard() = default;

void OutlierDashboard::setData(const OutlierDashboardData& data)
{
    m_data = data;
    m_hoveredDimension = m_pressedDimension = m_selectedDimension = -1;
    m_charts->fill(m_data, m_charts->tokenRows);
    m_title->setText(titleText());
    QStringList details;
    if (!m_data.sourceDescription.isEmpty()) details << tr("Source: %1").arg(m_data.sourceDescription);
    if (!m_data.criterion.isEmpty()) details << tr("Outlier: %1").arg(m_data.criterion);
    details
        << Provenance::indexingNote() + QLatin1Char(' ') +
               tr("Hover a dimension to see which head of the next layer reads it; click it to select it.");
    m_details->setText(details.join(QLatin1Char('\n')));
}

void OutlierDashboard::setPaperLayout(bool paper)
{
    m_paperLayout = paper;
}

QString OutlierDashboard::titleText() const
{
    if (m_data.layer < 0) return tr("Outliers");
    const QString tensor = m_data.tensor.isEmpty() ? QString() : m_data.tensor + QLatin1Char(' ');
    return tr("Outliers in %1of layer %2").arg(tensor).arg(m_data.layer + 1);
}

QStringList OutlierDashboard::shownTokens() const
{
    QStringList shown = m_charts->tokenLabels;
    std::reverse(shown.begin(), shown.end());
    return shown;
}

QString OutlierDashboard::dimensionToolTip(int dimension) const
{
    const QVector<double>& values = m_data.perDimension.values;
    if (dimension < 0 || dimension >= values.size()) return QString();
    QString text =
        tr("dimension %1: %2 outliers").arg(dimension).arg(charts::displayNumber(values[dimension]));
    if (m_data.headDim > 0) text += tr(" (head %1 of the next layer)").arg(dimension / m_data.headDim + 1);
    return text;
}

QPoint OutlierDashboard::dimensionBarCenter(int dimension) const
{
    QChart* chart = m_dimensionView->chart();
    const int bar = int(m_charts->shownDimensions.indexOf(dimension));
    const double value = bar >= 0 ? m_charts->dimensionSet->at(bar) : 0.0;
    const QPointF top = chart->mapToPosition(QPointF(bar, value / 2), m_charts->dimensionSeries);
    return m_dimensionView->mapFromScene(chart->mapToScene(top));
}

int OutlierDashboard::dimensionAt(const QPoint& viewportPos) const
{
    const int d = m_charts->dimensionSet->count();
    if (d == 0) return -1;
    QChart* chart = m_dimensionView->chart();
    const QPointF chartPos = chart->mapFromScene(m_dimensionView->mapToScene(viewportPos));
    if (!chart->plotArea().contains(chartPos)) return -1;
    // The whole column above a bar counts: with hundreds of bars each is about a pixel wide.
    const double x = chart->mapToValue(chartPos, m_charts->dimensionSeries).x();
    const int k = int(std::floor(x + 0.5));
    return k >= 0 && k < d ? m_charts->shownDimensions.value(k, -1) : -1;
}

void OutlierDashboard::setHoveredDimension(int dimension, const QPoint& globalPos)
{
    if (dimension < 0)
        QToolTip::hideText();
    else
        QToolTip::showText(globalPos, dimensionToolTip(dimension), m_dimensionView);
    if (dimension == m_hoveredDimension) return;
    m_hoveredDimension = dimension;
    Q_EMIT dimensionHovered(dimension);
}

bool OutlierDashboard::eventFilter(QObject* watched, QEvent* event)
{
    if (watched == m_tokenView && event->type() == QEvent::Resize) {
        const int rows = DashboardCharts::tokenRowsFor(m_tokenView->height());
        if (rows != m_charts->tokenRows) m_charts->fillTokens(m_data, rows);
    }
    if (watched != m_dimensionView->viewport()) return QWidget::eventFilter(watched, event);
    switch (event->type()) {
    case QEvent::MouseMove: {
        const auto* mouse = static_cast<QMouseEvent*>(event);
        setHoveredDimension(dimensionAt(mouse->position().toPoint()), mouse->globalPosition().toPoint());
        break;
    }
    case QEvent::Leave:
        setHoveredDimension(-1, QPoint());
        break;
    case QEvent::ContextMenu: {
        const auto* menu = static_cast<QContextMenuEvent*>(event);
        const int dimension = dimensionAt(menu->pos());
        if (dimension < 0) break;
        Q_EMIT dimensionContextMenuRequested(dimension, menu->globalPos());
        return true;
    }
    case QEvent::MouseButtonPress: {
        const auto* mouse = static_cast<QMouseEvent*>(event);
        if (mouse->button() == Qt::LeftButton) m_pressedDimension = dimensionAt(mouse->position().toPoint());
        break;
    }
    case QEvent::MouseButtonRelease: {
        const auto* mouse = static_cast<QMouseEvent*>(event);
        if (mouse->button() != Qt::LeftButton) break;
        const int dimension = dimensionAt(mouse->position().toPoint());
        const bool clicked = dimension >= 0 && dimension == m_pressedDimension;
        m_pressedDimension = -1;
        if (clicked) {
            m_selectedDimension = dimension;
            m_charts->dimensionSet->deselectAllBars();
            m_charts->dimensionSet->selectBar(int(m_charts->shownDimensions.indexOf(dimension)));
            Q_EMIT dimensionClicked(dimension);
        }
        break;
    }
    default:
        break;
    }
    return QWidget::eventFilter(watched, event);
}

QSize OutlierDashboard::preferredFigureSize() const
{
    // The paper's layout fits an A4 landscape page under the figure set's title and caption.
    return m_paperLayout ? QSize(1120, 600) : QSize(1500, 1000);
}

void OutlierDashboard::paintFigure(QPainter& painter, const QRect& area) const
{
    painter.save();
    QStringList subtitle;
    if (!m_data.sourceDescription.isEmpty()) subtitle << m_data.sourceDescription;
    if (!m_data.criterion.isEmpty()) subtitle << tr("outlier: %1").arg(m_data.criterion);
    QStringList footer;
    const QString origin = charts::provenanceLine(m_data.provenance);
    if (!origin.isEmpty()) footer << origin;
    footer << Provenance::indexingNote();
    const QRectF body = charts::paintFigureFrame(painter, area, titleText(),
                                                 subtitle.join(QStringLiteral("  \u00b7  ")), footer);
    const double upper = body.height() * 0.5;
    const double left = body.width() * 0.42;
    DashboardCharts fresh(m_paperLayout);
    fresh.fill(m_data, m_paperLayout ? kTopTokens : DashboardCharts::tokenRowsFor(body.height() - upper));
    charts::renderChart(std::unique_ptr<QChart>(fresh.dimensions), painter,
                        QRectF(body.left(), body.top(), body.width(), upper));
    charts::renderChart(std::unique_ptr<QChart>(fresh.tokens), painter,
                        QRectF(body.left(), body.top() + upper, left, body.height() - upper));
    charts::renderChart(
        std::unique_ptr<QChart>(fresh.layers), painter,
        QRectF(body.left() + left, body.top() + upper, body.width() - left, body.height() - upper));
    painter.restore();
}

QString OutlierDashboard::figureCsv() const
{
    QString csv = QStringLiteral("dimension (0-based),count\n");
    const QVector<double>& dims = m_data.perDimension.values;
    for (int k = 0; k < dims.size(); ++k)
        csv += QString::number(k) + QLatin1Char(',') + charts::csvNumber(dims[k]) + QLatin1Char('\n');
    csv += QStringLiteral("\ntoken,count\n");
    for (int i : tokensByCount(m_data.perToken))
        csv += charts::csvField(m_data.perToken.labels[i]) + QLatin1Char(',') +
               charts::csvNumber(m_data.perToken.values[i]) + QLatin1Char('\n');
    const bool original = !m_data.originalMaxInfNormPerLayer.isEmpty();
    csv += original ? QStringLiteral("\nlayer (1-based),max inf norm,kurtosis,max inf norm without the "
                                     "intervention,kurtosis without the intervention\n")
                    : QStringLiteral("\nlayer (1-based),max inf norm,kurtosis\n");
    const int layers = int(std::max(m_data.maxInfNormPerLayer.size(), m_data.kurtosisPerLayer.size()));
    const auto cell = [&](const QVector<double>& values, int i) {
        return QLatin1Char(',') + (i < values.size() ? charts::csvNumber(values[i]) : QString());
    };
    for (int i = 0; i < layers; ++i) {
        csv += QString::number(i + 1) + cell(m_data.maxInfNormPerLayer, i) + cell(m_data.kurtosisPerLayer, i);
        if (original)
            csv += cell(m_data.originalMaxInfNormPerLayer, i) + cell(m_data.originalKurtosisPerLayer, i);
        csv += QLatin1Char('\n');
    }
    return csv;
}

QString OutlierDashboard::figureName() const
{
    QString name = QStringLiteral("outliers");
    if (m_data.layer >= 0) name += QStringLiteral("-L%1").arg(m_data.layer + 1);
    if (!m_data.tensor.isEmpty()) name += QLatin1Char('-') + m_data.tensor;
    return name;
}

} // namespace outlierlens
