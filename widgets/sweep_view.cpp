#include "sweep_view.h"

#include "chart_support.h"

#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLegend>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QMap>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <limits>

namespace outlierlens {

namespace {

const QColor kReferenceColor(90, 90, 90);

QString settingOf(const SweepPointData& point, const QString& key, bool* found = nullptr)
{
    for (const auto& setting : point.settings)
        if (setting.first == key) {
            if (found) *found = true;
            return setting.second;
        }
    if (found) *found = false;
    return QString();
}

/// Numbers compare as numbers ("4" < "16"), anything else as text.
bool valueLess(const QString& a, const QString& b)
{
    bool okA = false, okB = false;
    const double x = a.toDouble(&okA), y = b.toDouble(&okB);
    if (okA && okB) return x < y;
    if (okA != okB) return okA; // numbers first
    return a < b;
}

/// The sweep arranged for one x key: x values in sorted order (positions 0..n-1), one line per
/// combination of the other grid keys, and reference points that lack the x key.
struct SweepLines
{
    struct Line
    {
        QString name;
        QStringList otherValues; ///< for ordering the lines
        QList<QPointF> relative, infNorm;
    };
    struct Reference
    {
        QString name;
        double relative = 0, infNorm = 0;
    };
    QStringList xValues;
    QVector<Line> lines;
    QVector<Reference> references;
};

/// The paper's symbol for a sweep setting in a legend (Figures 6 and 7: "T=64", not "max_seq_length=64",
/// which the legend would cut); other keys as they are.
QString legendKey(const QString& key)
{
    static const QMap<QString, QString> kSymbols{{QStringLiteral("max_seq_length"), QStringLiteral("T")},
                                                 {QStringLiteral("alpha"), QStringLiteral("\u03b1")},
                                                 {QStringLiteral("gamma"), QStringLiteral("\u03b3")},
                                                 {QStringLiteral("zeta"), QStringLiteral("\u03b6")},
                                                 {QStringLiteral("pi_init"), QStringLiteral("\u03c0_init")},
                                                 {QStringLiteral("n_hid"), QStringLiteral("n_hid")}};
    return kSymbols.value(key, key);
}

SweepLines arrange(const QVector<SweepPointData>& points, const QStringList& gridKeys, const QString& xKey)
{
    SweepLines result;
    QStringList otherKeys = gridKeys;
    otherKeys.removeAll(xKey);
    for (const SweepPointData& point : points) {
        bool has = false;
        const QString x = settingOf(point, xKey, &has);
        if (has && !result.xValues.contains(x)) result.xValues << x;
    }
    std::stable_sort(result.xValues.begin(), result.xValues.end(), valueLess);

    for (const SweepPointData& point : points) {
        bool has = false;
        const QString x = settingOf(point, xKey, &has);
        if (!has) {
            result.references.push_back({point.name.isEmpty() ? QStringLiteral("reference") : point.name,
                                         point.relativeMetric, point.maxInfNorm});
            continue;
        }
        QStringList parts, values;
        for (const QString& key : otherKeys) {
            bool present = false;
            const QString value = settingOf(point, key, &present);
            if (!present) continue;
            parts << legendKey(key) + QLatin1Char('=') + value;
            values << value;
        }
        const QString name =
            parts.isEmpty() ? QStringLiteral("all points") : parts.join(QStringLiteral(", "));
        auto line = std::find_if(result.lines.begin(), result.lines.end(),
                                 [&](const SweepLines::Line& l) { return l.name == name; });
        if (line == result.lines.end()) {
            result.lines.push_back({name, values, {}, {}});
            line = result.lines.end() - 1;
        }
        const double position = result.xValues.indexOf(x);
        if (std::isfinite(point.relativeMetric)) line->relative << QPointF(position, point.relativeMetric);
        if (std::isfinite(point.maxInfNorm)) line->infNorm << QPointF(position, point.maxInfNorm);
    }
    auto byX = [](const QPointF& a, const QPointF& b) { return a.x() < b.x(); };
    for (SweepLines::Line& line : result.lines) {
        std::stable_sort(line.relative.begin(), line.relative.end(), byX);
        std::stable_sort(line.infNorm.begin(), line.infNorm.end(), byX);
    }
    std::stable_sort(result.lines.begin(), result.lines.end(),
                     [](const SweepLines::Line& a, const SweepLines::Line& b) {
                         for (int i = 0; i < std::min(a.otherValues.size(), b.otherValues.size()); ++i) {
                             if (valueLess(a.otherValues[i], b.otherValues[i])) return true;
                             if (valueLess(b.otherValues[i], a.otherValues[i])) return false;
                         }
                         return a.otherValues.size() < b.otherValues.size();
                     });
    return result;
}

QStringList gridKeysOf(const QVector<SweepPointData>& points)
{
    QStringList keys, varying;
    for (const SweepPointData& point : points)
        for (const auto& setting : point.settings)
            if (!keys.contains(setting.first)) keys << setting.first;
    for (const QString& key : keys) {
        QStringList values;
        for (const SweepPointData& point : points) {
            bool has = false;
            const QString value = settingOf(point, key, &has);
            if (has && !values.contains(value)) values << value;
        }
        if (values.size() > 1) varying << key;
    }
    return varying.isEmpty() ? keys : varying;
}

QString relativeTitle(const QVector<SweepPointData>& points)
{
    const QString metric = points.isEmpty() || points.front().metricName.isEmpty()
                               ? QStringLiteral("metric")
                               : points.front().metricName;
    // As `outlierlens sweep` computes it: log-perplexity ratio, or a plain ratio, to the first point.
    return metric == QLatin1String("perplexity")
               ? QStringLiteral("relative perplexity (log ratio to first point)")
               : QStringLiteral("relative %1 (ratio to first point)").arg(metric);
}

} // namespace

/// The two sweep charts. They are rebuilt whenever the points or the x key change (a handful of
/// series, each filled with one replace()).
struct SweepChartSet
{
    QChart* relative = nullptr;
    QChart* infNorm = nullptr;

    SweepChartSet();
    void fill(const QVector<SweepPointData>& points, const QStringList& gridKeys, const QString& xKey,
              bool logInfNorm);
};

SweepChartSet::SweepChartSet()
{
    relative = charts::makeChart(QStringLiteral("Relative metric"));
    infNorm = charts::makeChart(QStringLiteral("Max inf norm"));
}

void SweepChartSet::fill(const QVector<SweepPointData>& points, const QStringList& gridKeys,
                         const QString& xKey, bool logInfNorm)
{
    const SweepLines arranged = arrange(points, gridKeys, xKey);
    const int n = int(arranged.xValues.size());
    const double xMin = -0.5, xMax = std::max(1, n) - 0.5;

    for (QChart* chart : {relative, infNorm}) {
        chart->removeAllSeries();
        for (QAbstractAxis* axis : chart->axes()) {
            chart->removeAxis(axis);
            delete axis;
        }
        auto* x = new QCategoryAxis;
        x->setStartValue(xMin);
        for (int i = 0; i < n; ++i)
            x->append(arranged.xValues[i], i);
        x->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
        x->setRange(xMin, xMax);
        charts::setAxisTitle(x, xKey);
        chart->addAxis(x, Qt::AlignBottom);
    }
    relative->setTitle(xKey.isEmpty() ? QStringLiteral("Relative metric")
                                      : QStringLiteral("Relative metric vs %1").arg(xKey));
    infNorm->setTitle(xKey.isEmpty() ? QStringLiteral("Max inf norm")
                                     : QStringLiteral("Max inf norm vs %1").arg(xKey));

    auto* relativeY = new QValueAxis;
    relativeY->setLabelFormat(QStringLiteral("%.3g"));
    charts::setAxisTitle(relativeY, relativeTitle(points));
    relative->addAxis(relativeY, Qt::AlignLeft);
    QAbstractAxis* infNormY = nullptr;
    if (logInfNorm) {
        auto* axis = new QLogValueAxis;
        axis->setBase(10);
        axis->setLabelFormat(QStringLiteral("%g"));
        axis->setMinorTickCount(-1);
        axis->setMinorGridLineVisible(false);
        infNormY = axis;
    } else {
        auto* axis = new QValueAxis;
        axis->setLabelFormat(QStringLiteral("%.4g"));
        infNormY = axis;
    }
    charts::setAxisTitle(infNormY, logInfNorm ? QStringLiteral("max inf norm (log scale)")
                                              : QStringLiteral("max inf norm"));
    infNorm->addAxis(infNormY, Qt::AlignLeft);

    double relMin = std::numeric_limits<double>::infinity(), relMax = -relMin;
    double normMin = relMin, normMax = -relMin;
    auto addSeries = [&](QChart* chart, QAbstractAxis* y, const QString& name, const QList<QPointF>& points,
                         const QPen& pen, bool markers) {
        auto* series = new QLineSeries;
        series->setName(name);
        series->setPen(pen);
        series->setPointsVisible(markers);
        series->replace(points);
        chart->addSeries(series);
        series->attachAxis(chart->axes(Qt::Horizontal).front());
        series->attachAxis(y);
    };
    const int lineCount = int(arranged.lines.size());
    for (int i = 0; i < lineCount; ++i) {
        const SweepLines::Line& line = arranged.lines[i];
        const QPen pen(charts::orderedColor(i, lineCount), 2.5);
        addSeries(relative, relativeY, line.name, line.relative, pen, true);
        QList<QPointF> norms;
        for (const QPointF& p : line.infNorm)
            if (!logInfNorm || p.y() > 0) norms << p;
        addSeries(infNorm, infNormY, line.name, norms, pen, true);
        for (const QPointF& p : line.relative)
            relMin = std::min(relMin, p.y()), relMax = std::max(relMax, p.y());
        for (const QPointF& p : norms)
            normMin = std::min(normMin, p.y()), normMax = std::max(normMax, p.y());
    }
    QPen referencePen(kReferenceColor, 1.5, Qt::DashLine);
    for (const SweepLines::Reference& reference : arranged.references) {
        if (std::isfinite(reference.relative)) {
            addSeries(relative, relativeY, reference.name,
                      {QPointF(xMin, reference.relative), QPointF(xMax, reference.relative)}, referencePen,
                      false);
            relMin = std::min(relMin, reference.relative), relMax = std::max(relMax, reference.relative);
        }
        if (std::isfinite(reference.infNorm) && (!logInfNorm || reference.infNorm > 0)) {
            addSeries(infNorm, infNormY, reference.name,
                      {QPointF(xMin, reference.infNorm), QPointF(xMax, reference.infNorm)}, referencePen,
                      false);
            normMin = std::min(normMin, reference.infNorm), normMax = std::max(normMax, reference.infNorm);
        }
    }
    // Relative metrics sit close to 1: a margin keeps the extreme points off the plot's edge.
    const double relPad = relMin <= relMax ? std::max(0.08 * (relMax - relMin), 1e-3) : 0.0;
    charts::setNiceRange(relativeY, relMin - relPad, relMax + relPad);
    if (auto* axis = qobject_cast<QLogValueAxis*>(infNormY)) {
        const bool valid = normMin <= normMax;
        const double low = valid ? std::pow(10.0, std::floor(std::log10(normMin))) : 1.0;
        const double high = valid ? std::pow(10.0, std::ceil(std::log10(normMax))) : 10.0;
        axis->setRange(low, high > low ? high : low * 10);
    } else {
        charts::setNiceRange(static_cast<QValueAxis*>(infNormY), 0, normMin <= normMax ? normMax : 1.0);
    }
    for (QChart* chart : {relative, infNorm})
        chart->legend()->setVisible(!chart->series().isEmpty());
}

SweepView::SweepView(QWidget* parent)
    : QWidget(parent)
    , m_charts(std::make_unique<SweepChartSet>())
{
    m_xKeyCombo = new QComboBox(this);
    m_xKeyCombo->setObjectName(QStringLiteral("xKeyCombo"));
    m_xKeyCombo->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    m_logCheck = new QCheckBox(tr("Log scale for max inf norm"), this);
    m_logCheck->setObjectName(QStringLiteral("logInfNormCheck"));
    auto* xLabel = new QLabel(tr("&x axis:"), this);
    xLabel->setBuddy(m_xKeyCombo);

    m_relativeView = charts::makeChartView(m_charts->relative, QStringLiteral("relativeMetricChart"), this);
    m_infNormView = charts::makeChartView(m_charts->infNorm, QStringLiteral("infNormChart"), this);
    m_table = new QTableWidget(this);
    m_table->setObjectName(QStringLiteral("pointTable"));
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setStretchLastSection(true);

    auto* controls = new QHBoxLayout;
    controls->addWidget(xLabel);
    controls->addWidget(m_xKeyCombo);
    controls->addSpacing(16);
    controls->addWidget(m_logCheck);
    controls->addStretch(1);
    auto* chartsRow = new QWidget(this);
    auto* chartsLayout = new QHBoxLayout(chartsRow);
    chartsLayout->setContentsMargins(0, 0, 0, 0);
    chartsLayout->addWidget(m_relativeView);
    chartsLayout->addWidget(m_infNormView);
    auto* splitter = new QSplitter(Qt::Vertical, this);
    splitter->addWidget(chartsRow);
    splitter->addWidget(m_table);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 2);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(controls);
    layout->addWidget(splitter, 1);

    connect(m_xKeyCombo, &QComboBox::currentTextChanged, this, &SweepView::setXKey);
    connect(m_logCheck, &QCheckBox::toggled, this, &SweepView::setLogInfNorm);
    refreshCharts();
}

SweepView::~SweepView() = default;

void SweepView::setPoints(const QVector<SweepPointData>& points, const QString& sourceDescription)
{
    m_points = points;
    m_source = sourceDescription;
    m_gridKeys = gridKeysOf(m_points);
    const QString previous = m_xKey;
    m_xKey =
        m_gridKeys.contains(previous) ? previous : (m_gridKeys.isEmpty() ? QString() : m_gridKeys.front());
    {
        const QSignalBlocker blocker(m_xKeyCombo);
        m_xKeyCombo->clear();
        m_xKeyCombo->addItems(m_gridKeys);
        m_xKeyCombo->setCurrentText(m_xKey);
    }
    fillTable();
    refreshCharts();
    if (m_xKey != previous) Q_EMIT xKeyChanged(m_xKey);
}

void SweepView::setXKey(const QString& key)
{
    if (key == m_xKey || !m_gridKeys.contains(key)) return;
    m_xKey = key;
    {
        const QSignalBlocker blocker(m_xKeyCombo);
        m_xKeyCombo->setCurrentText(key);
    }
    refreshCharts();
    Q_EMIT xKeyChanged(m_xKey);
}

void SweepView::setLogInfNorm(bool logarithmic)
{
    if (logarithmic == m_logInfNorm) return;
    m_logInfNorm = logarithmic;
    {
        const QSignalBlocker blocker(m_logCheck);
        m_logCheck->setChecked(logarithmic);
    }
    refreshCharts();
}

void SweepView::refreshCharts()
{
    m_charts->fill(m_points, m_gridKeys, m_xKey, m_logInfNorm);
}

QStringList SweepView::allKeys() const
{
    QStringList keys;
    for (const SweepPointData& point : m_points)
        for (const auto& setting : point.settings)
            if (!keys.contains(setting.first)) keys << setting.first;
    return keys;
}

void SweepView::fillTable()
{
    const QStringList keys = allKeys();
    QStringList headers{tr("name")};
    headers << keys;
    headers << tr("metric") << tr("value") << tr("relative") << tr("max inf norm") << tr("avg kurtosis");
    m_table->setSortingEnabled(false);
    m_table->clear();
    m_table->setColumnCount(int(headers.size()));
    m_table->setHorizontalHeaderLabels(headers);
    m_table->setRowCount(int(m_points.size()));
    auto number = [](double value) {
        auto* item = new QTableWidgetItem;
        item->setData(Qt::DisplayRole, value); // sorts as a number
        item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        return item;
    };
    for (int row = 0; row < m_points.size(); ++row) {
        const SweepPointData& point = m_points[row];
        int column = 0;
        m_table->setItem(row, column++, new QTableWidgetItem(point.name));
        for (const QString& key : keys)
            m_table->setItem(row, column++, new QTableWidgetItem(settingOf(point, key)));
        m_table->setItem(row, column++, new QTableWidgetItem(point.metricName));
        for (double value : {point.metric, point.relativeMetric, point.maxInfNorm, point.avgKurtosis})
            m_table->setItem(row, column++, number(value));
    }
    m_table->setSortingEnabled(true);
    m_table->resizeColumnsToContents();
}

QSize SweepView::preferredFigureSize() const
{
    return QSize(1400, 620);
}

void SweepView::paintFigure(QPainter& painter, const QRect& area) const
{
    painter.save();
    const QString title =
        m_xKey.isEmpty() ? tr("Sweep") : tr("Sweep over %1").arg(m_gridKeys.join(QStringLiteral(", ")));
    const QString subtitle = tr("%1 points").arg(m_points.size()) +
                             (m_source.isEmpty() ? QString() : QStringLiteral("  \u00b7  ") + m_source);
    const QRectF body =
        charts::paintFigureFrame(painter, area, title, subtitle, {Provenance::indexingNote()});
    SweepChartSet fresh;
    fresh.fill(m_points, m_gridKeys, m_xKey, m_logInfNorm);
    const double half = body.width() / 2;
    charts::renderChart(std::unique_ptr<QChart>(fresh.relative), painter,
                        QRectF(body.left(), body.top(), half, body.height()));
    charts::renderChart(std::unique_ptr<QChart>(fresh.infNorm), painter,
                        QRectF(body.left() + half, body.top(), body.width() - half, body.height()));
    painter.restore();
}

QString SweepView::figureCsv() const
{
    const QStringList keys = allKeys();
    QStringList header{QStringLiteral("name")};
    for (const QString& key : keys)
        header << charts::csvField(key);
    header << QStringLiteral("metric_name") << QStringLiteral("metric") << QStringLiteral("relative_metric")
           << QStringLiteral("max_inf_norm") << QStringLiteral("avg_kurtosis");
    QString csv = header.join(QLatin1Char(',')) + QLatin1Char('\n');
    for (const SweepPointData& point : m_points) {
        QStringList cells{charts::csvField(point.name)};
        for (const QString& key : keys)
            cells << charts::csvField(settingOf(point, key));
        cells << charts::csvField(point.metricName) << charts::csvNumber(point.metric)
              << charts::csvNumber(point.relativeMetric) << charts::csvNumber(point.maxInfNorm)
              << charts::csvNumber(point.avgKurtosis);
        csv += cells.join(QLatin1Char(',')) + QLatin1Char('\n');
    }
    return csv;
}

Provenance SweepView::figureProvenance() const
{
    Provenance provenance;
    provenance.model = tr("sweep of %1 training runs").arg(m_points.size());
    provenance.input = m_source;
    provenance.selection = tr("x = %1").arg(m_xKey);
    return provenance;
}

QString SweepView::figureName() const
{
    return m_xKey.isEmpty() ? QStringLiteral("sweep") : QStringLiteral("sweep-") + m_xKey;
}

} // namespace outlierlens
