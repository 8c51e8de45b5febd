// The chart views (OutlierDashboard, TrainingCharts, SweepView) driven as a user would, offscreen:
// real clicks on bars, the series each view shows, CSV text and figures that depend only on data.
// Set OUTLIERLENS_SAVE_FIGURES=DIR to also write each figure as a PNG for a look.

#include "nice_numbers.h"
#include "outlier_dashboard.h"
#include "sweep_view.h"
#include "training_charts.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QHorizontalBarSeries>
#include <QImage>
#include <QLineSeries>
#include <QLocale>
#include <QLogValueAxis>
#include <QPainter>
#include <QScatterSeries>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>
#include <QToolTip>
#include <QValueAxis>

#include <cmath>
#include <limits>
#include <memory>

using namespace outlierlens;

namespace {

/// A small deterministic generator so the data look noisy but never change.
struct Noise
{
    quint32 state = 12345;
    double next()
    {
        state = state * 1664525u + 1013904223u;
        return double(state >> 8) / double(1u << 24);
    }
};

/// BERT-base-like statistics of layer 11's FFN output (0-based layer 10): two huge dimensions
/// and delimiter tokens carrying most outliers.
OutlierDashboardData dashboardData(int d = 768, int layers = 12)
{
    OutlierDashboardData data;
    data.sourceDescription = QStringLiteral("statistics file mnli_dev.h5 (9,815 pairs)");
    data.layer = 10;
    data.tensor = QStringLiteral("ffn_out");
    data.headDim = 64;
    data.criterion = QStringLiteral("|x - mean| > 6 std");
    data.perDimension.axisTitle = QStringLiteral("outliers (count)");
    Noise noise;
    for (int k = 0; k < d; ++k) {
        data.perDimension.labels << QString::number(k);
        data.perDimension.values << std::floor(noise.next() * noise.next() * 40);
    }
    data.perDimension.values[308] = 4000;
    data.perDimension.values[381] = 2500;
    data.perDimension.values[0] = 2;
    data.perDimension.values[d - 1] = 3;
    const QStringList tokens{
        QStringLiteral("[SEP]"), QStringLiteral("."),    QStringLiteral(","),    QStringLiteral("the"),
        QStringLiteral("[CLS]"), QStringLiteral("and"),  QStringLiteral("of"),   QStringLiteral("a"),
        QStringLiteral("to"),    QStringLiteral("'"),    QStringLiteral("in"),   QStringLiteral("is"),
        QStringLiteral("?"),     QStringLiteral("that"), QStringLiteral("-"),    QStringLiteral("was"),
        QStringLiteral("for"),   QStringLiteral("it"),   QStringLiteral("with"), QStringLiteral("he"),
        QStringLiteral("as"),    QStringLiteral("on"),   QStringLiteral("be"),   QStringLiteral("at")};
    const QVector<double> counts{3000, 1800, 900, 60, 55, 41, 40, 33, 30, 28, 25, 22,
                                 21,   20,   19,  18, 15, 14, 12, 11, 10, 9,  8,  7};
    // Shuffled order: the dashboard sorts.
    for (int i : {2, 0, 5, 1, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}) {
        data.perToken.labels << tokens[i];
        data.perToken.values << counts[i];
    }
    const double norms[] = {5.1, 6.3, 7.0, 8.2, 9.9, 12.5, 15.0, 21.0, 42.0, 150.0, 560.0, 290.0};
    const double kurt[] = {3.2, 3.9, 4.5, 5.8, 8.0, 12.0, 19.0, 35.0, 120.0, 640.0, 1830.0, 900.0};
    for (int l = 0; l < layers; ++l) {
        data.maxInfNormPerLayer << norms[l % 12];
        data.kurtosisPerLayer << kurt[l % 12];
    }
    data.provenance.model = QStringLiteral("bert-base-uncased");
    data.provenance.checkpointSha256 =
        QStringLiteral("68d45e234eb4a928074dfd868cead0219ab85354cc53d20e772753c6bb9169d3");
    data.provenance.input = QStringLiteral("MNLI validation");
    data.provenance.selection = QStringLiteral("layer 11, ffn_out");
    return data;
}

/// A masked-LM run of `lastStep` steps (of 3,000) on a 6-layer model: loss every 10 steps,
/// evaluation every 100, outliers growing in the last layers.
TrainingCurveData trainingData(int lastStep = 3000, int layers = 6)
{
    TrainingCurveData data;
    data.name = QStringLiteral("bert-6L-vanilla");
    data.evalName = QStringLiteral("perplexity");
    Noise noise;
    for (int step = 10; step <= lastStep; step += 10) {
        data.steps << step;
        data.loss << 2.2 + 8.0 * std::exp(-step / 400.0) + 0.25 * (noise.next() - 0.5);
    }
    for (int step = 100; step <= lastStep; step += 100) {
        data.evalSteps << step;
        data.evalValue << std::exp(2.3 + 8.0 * std::exp(-step / 400.0));
        QVector<double> norm, kurt;
        for (int l = 0; l < layers; ++l) {
            const double growth = 1.0 - std::exp(-step / 1200.0);
            norm << 4.0 + l * 2.0 + (l >= layers - 2 ? 180.0 * growth * (l - layers + 3) : 10.0 * growth);
            kurt << 3.0 + (l >= layers - 2 ? 900.0 * growth * growth * (l - layers + 3) : 20.0 * growth * l);
        }
        data.maxInfNorm << norm;
        data.kurtosis << kurt;
    }
    return data;
}

SweepPointData sweepPoint(const QString& alpha, const QString& length, double relative, double norm)
{
    SweepPointData p;
    p.name = QStringLiteral("alpha=%1,max_seq_length=%2").arg(alpha, length);
    p.settings = {{QStringLiteral("alpha"), alpha}, {QStringLiteral("max_seq_length"), length}};
    p.metricName = QStringLiteral("perplexity");
    p.relativeMetric = relative;
    p.metric = std::exp(2.0 * relative);
    p.maxInfNorm = norm;
    p.avgKurtosis = norm * 3;
    return p;
}

/// Clipped-softmax sweep (Figure 6): a vanilla baseline, then alpha x T; the grid order puts
/// alpha 16 before 4 on purpose (the view sorts numerically).
QVector<SweepPointData> sweepData()
{
    SweepPointData baseline;
    baseline.name = QStringLiteral("baseline");
    baseline.settings = {{QStringLiteral("softmax"), QStringLiteral("vanilla")}};
    baseline.metricName = QStringLiteral("perplexity");
    baseline.metric = 7.0;
    baseline.relativeMetric = 1.0;
    baseline.maxInfNorm = 735;
    baseline.avgKurtosis = 3076;
    return {baseline,
            sweepPoint(QStringLiteral("16"), QStringLiteral("64"), 1.04, 40),
            sweepPoint(QStringLiteral("16"), QStringLiteral("128"), 1.02, 60),
            sweepPoint(QStringLiteral("4"), QStringLiteral("64"), 0.99, 300),
            sweepPoint(QStringLiteral("4"), QStringLiteral("128"), 1.00, 420),
            sweepPoint(QStringLiteral("12"), QStringLiteral("64"), 1.01, 70),
            sweepPoint(QStringLiteral("12"), QStringLiteral("128"), 0.995, 80)};
}

QChartView* chartView(QWidget* parent, const char* name)
{
    auto* view = parent->findChild<QChartView*>(QString::fromLatin1(name));
    if (!view) qFatal("no chart view named %s", name);
    return view;
}

template<typename T>
QList<T*> seriesOf(QChart* chart)
{
    QList<T*> result;
    for (QAbstractSeries* s : chart->series())
        if (auto* t = qobject_cast<T*>(s)) result << t;
    return result;
}

QLineSeries* lineNamed(QChart* chart, const QString& name)
{
    for (QLineSeries* s : seriesOf<QLineSeries>(chart))
        if (s->name() == name) return s;
    return nullptr;
}

/// Where a point of chart value space appears in the view's viewport (what a user would click).
QPoint viewportPos(QChartView* view, const QPointF& value, QAbstractSeries* series)
{
    QChart* chart = view->chart();
    return view->mapFromScene(chart->mapToScene(chart->mapToPosition(value, series)));
}

QImage renderFigure(const Figure& figure, const QSize& size)
{
    QImage image(size, QImage::Format_ARGB32);
    image.fill(Qt::transparent);
    QPainter painter(&image);
    figure.paintFigure(painter, QRect(QPoint(0, 0), size));
    painter.end();
    return image;
}

/// Share of pixels that are neither white nor transparent.
double inkedShare(const QImage& image)
{
    qint64 inked = 0;
    for (int y = 0; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x) {
            const QRgb px = image.pixel(x, y);
            if (qAlpha(px) > 0 && (qRed(px) < 245 || qGreen(px) < 245 || qBlue(px) < 245)) ++inked;
        }
    return double(inked) / double(image.width() * image.height());
}

void maybeSave(const QImage& image, const QString& name)
{
    const QString dir = qEnvironmentVariable("OUTLIERLENS_SAVE_FIGURES");
    if (dir.isEmpty()) return;
    QDir().mkpath(dir);
    QVERIFY(image.save(dir + QLatin1Char('/') + name + QStringLiteral(".png")));
}

} // namespace

class TestCharts : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void niceStepIsOneTwoFiveTimesAPowerOfTen();
    void dashboardClickEmitsDimension_data();
    void dashboardClickEmitsDimension();
    void dashboardClickOutsideBarsIsIgnored();
    void dashboardHoverNamesHead_data();
    void dashboardHoverNamesHead();
    void dashboardSetDataReplaces();
    void dashboardShowsOnlyOutlierDimensions();
    void dashboardLayersAreOneBased();
    void dashboardTopTokens();
    void dashboardCsv();
    void trainingKeepsOneSeriesPerLayer();
    void trainingCsv();
    void sweepGroupsByOtherKey();
    void sweepLogScaleAndTable();
    void sweepCsv();
    void figureIndependentOfWidgetSize_data();
    void figureIndependentOfWidgetSize();
};

void TestCharts::niceStepIsOneTwoFiveTimesAPowerOfTen()
{
    // Worked by hand: the smallest of 1, 2, 5 x 10^k that is >= the argument.
    const QVector<QPair<double, double>> cases = {
        {0.3, 0.5}, {0.05, 0.05}, {0.051, 0.1}, {1, 1},       {1.5, 2},     {2, 2},       {2.01, 5},
        {7, 10},    {10, 10},     {11, 20},     {1000, 1000}, {1001, 2000}, {4999, 5000}, {5001, 10000}};
    for (const auto& c : cases)
        QVERIFY2(qFuzzyCompare(niceStep(c.first), c.second), qPrintable(QString::number(c.first)));
    QCOMPARE(niceStep(0), 1.0);
    QCOMPARE(niceStep(-3), 1.0);
    QCOMPARE(niceStep(std::numeric_limits<double>::quiet_NaN()), 1.0);
    QCOMPARE(niceStep(std::numeric_limits<double>::infinity()), 1.0);
}

void TestCharts::dashboardClickEmitsDimension_data()
{
    QTest::addColumn<int>("dimension");
    QTest::newRow("spike 308") << 308;
    QTest::newRow("spike 381") << 381;
    QTest::newRow("first") << 0;
    QTest::newRow("last") << 767;
}

void TestCharts::dashboardClickEmitsDimension()
{
    QFETCH(int, dimension);
    OutlierDashboard dashboard;
    dashboard.resize(1200, 900);
    dashboard.setData(dashboardData());
    dashboard.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dashboard));

    QChartView* view = chartView(&dashboard, "dimensionChart");
    const QList<QBarSeries*> bars = seriesOf<QBarSeries>(view->chart());
    QCOMPARE(bars.size(), 1);
    QBarSet* set = bars[0]->barSets().at(0);
    const QPoint pos = viewportPos(view, QPointF(dimension, set->at(dimension) / 2), bars[0]);
    QVERIFY(view->viewport()->rect().contains(pos));

    QSignalSpy clicked(&dashboard, &OutlierDashboard::dimensionClicked);
    QTest::mouseClick(view->viewport(), Qt::LeftButton, Qt::NoModifier, pos);
    QCOMPARE(clicked.count(), 1);
    QCOMPARE(clicked.at(0).at(0).toInt(), dimension);
    QCOMPARE(dashboard.selectedDimension(), dimension);
    QCOMPARE(set->selectedBars(), QList<int>{dimension});
}

void TestCharts::dashboardClickOutsideBarsIsIgnored()
{
    OutlierDashboard dashboard;
    dashboard.resize(1000, 800);
    dashboard.setData(dashboardData());
    dashboard.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dashboard));
    QChartView* view = chartView(&dashboard, "dimensionChart");
    QSignalSpy clicked(&dashboard, &OutlierDashboard::dimensionClicked);
    // The chart's title area and the left axis labels are not bars.
    QTest::mouseClick(view->viewport(), Qt::LeftButton, Qt::NoModifier, QPoint(5, 5));
    const QRectF plot = view->chart()->plotArea();
    const QPoint leftOfPlot =
        view->mapFromScene(view->chart()->mapToScene(plot.left() - 10, plot.center().y()));
    QTest::mouseClick(view->viewport(), Qt::LeftButton, Qt::NoModifier, leftOfPlot);
    QCOMPARE(clicked.count(), 0);
}

void TestCharts::dashboardHoverNamesHead_data()
{
    QTest::addColumn<int>("dimension");
    QTest::addColumn<QString>("text");
    QTest::newRow("308 -> head 5") << 308
                                   << QStringLiteral(
                                          "dimension 308: 4000 outliers (head 5 of the next layer)");
    QTest::newRow("381 -> head 6") << 381
                                   << QStringLiteral(
                                          "dimension 381: 2500 outliers (head 6 of the next layer)");
    QTest::newRow("0 -> head 1") << 0 << QStringLiteral("dimension 0: 2 outliers (head 1 of the next layer)");
    QTest::newRow("63 -> head 1") << 63 << QString();
    QTest::newRow("64 -> head 2") << 64 << QString();
    QTest::newRow("767 -> head 12") << 767
                                    << QStringLiteral(
                                           "dimension 767: 3 outliers (head 12 of the next layer)");
}

void TestCharts::dashboardHoverNamesHead()
{
    QFETCH(int, dimension);
    QFETCH(QString, text);
    OutlierDashboard dashboard;
    dashboard.resize(1200, 900);
    const OutlierDashboardData data = dashboardData();
    dashboard.setData(data);
    if (text.isEmpty())
        text = QStringLiteral("dimension %1: %2 outliers (head %3 of the next layer)")
                   .arg(dimension)
                   .arg(data.perDimension.values[dimension])
                   .arg(dimension / 64 + 1);
    QCOMPARE(dashboard.dimensionToolTip(dimension), text);
    QVERIFY(dashboard.dimensionToolTip(768).isEmpty());

    // And through the mouse: moving onto the bar's column names that dimension.
    dashboard.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dashboard));
    QChartView* view = chartView(&dashboard, "dimensionChart");
    QBarSeries* bars = seriesOf<QBarSeries>(view->chart()).at(0);
    QSignalSpy hovered(&dashboard, &OutlierDashboard::dimensionHovered);
    const QPoint pos = viewportPos(view, QPointF(dimension, bars->barSets()[0]->at(dimension) / 2), bars);
    QTest::mouseMove(view->viewport(), pos);
    QTRY_VERIFY(!hovered.isEmpty());
    QCOMPARE(hovered.last().at(0).toInt(), dimension);
    QTRY_COMPARE(QToolTip::text(), text);
}

void TestCharts::dashboardSetDataReplaces()
{
    OutlierDashboard dashboard;
    dashboard.resize(1000, 800);
    dashboard.setData(dashboardData());
    QChart* dims = chartView(&dashboard, "dimensionChart")->chart();
    QChart* tokens = chartView(&dashboard, "tokenChart")->chart();
    QChart* layers = chartView(&dashboard, "layerChart")->chart();
    QCOMPARE(seriesOf<QBarSeries>(dims).at(0)->barSets().at(0)->count(), 768);

    OutlierDashboardData large = dashboardData(1024, 24);
    large.perToken.labels = QStringList{QStringLiteral("patch 0,0"), QStringLiteral("patch 3,4")};
    large.perToken.values = {12, 40};
    dashboard.setData(large);
    dashboard.setData(large);

    QCOMPARE(dims->series().size(), 2); // the bars and the numbers above the largest ones
    QCOMPARE(seriesOf<QBarSeries>(dims).size(), 1);
    QCOMPARE(seriesOf<QScatterSeries>(dims).at(0)->points(),
             (QList<QPointF>{QPointF(308, 4000), QPointF(381, 2500)}));
    QBarSeries* bars = seriesOf<QBarSeries>(dims).at(0);
    QCOMPARE(bars->count(), 1);
    QCOMPARE(bars->barSets().at(0)->count(), 1024);
    QCOMPARE(bars->barSets().at(0)->at(308), 4000.0);
    auto* dimAxis = qobject_cast<QCategoryAxis*>(dims->axes(Qt::Horizontal).at(0));
    QVERIFY(dimAxis);
    QCOMPARE(dimAxis->max(), 1023.5);
    // Most dimensions have outliers here: every dimension is drawn, and the axis numbers every n-th.
    QVERIFY(dimAxis->categoriesLabels().size() <= 25);
    QCOMPARE(dimAxis->categoriesLabels().value(1), QStringLiteral("100"));

    QCOMPARE(tokens->series().size(), 1);
    auto* tokenBars = seriesOf<QHorizontalBarSeries>(tokens).at(0);
    QCOMPARE(tokenBars->barSets().size(), 1);
    QCOMPARE(tokenBars->barSets().at(0)->count(), 2);
    auto* tokenAxis = qobject_cast<QBarCategoryAxis*>(tokens->axes(Qt::Vertical).at(0));
    QCOMPARE(tokenAxis->categories(),
             (QStringList{QStringLiteral("patch 0,0"), QStringLiteral("patch 3,4")}));

    QCOMPARE(layers->series().size(), 4); // two lines and the two markers of the selected layer
    QCOMPARE(seriesOf<QLineSeries>(layers).at(0)->count(), 24);
    QCOMPARE(dashboard.data().perDimension.values.size(), 1024);
}

/// Few dimensions with outliers (the paper's Figure 1): only they are drawn, green, each numbered on
/// the axis; a click on a bar gives its dimension, and the CSV still has every dimension.
void TestCharts::dashboardShowsOnlyOutlierDimensions()
{
    OutlierDashboardData data = dashboardData();
    for (double& v : data.perDimension.values)
        v = 0;
    data.perDimension.values[180] = 40;
    data.perDimension.values[308] = 4000;
    data.perDimension.values[720] = 900;
    OutlierDashboard dashboard;
    dashboard.resize(1200, 900);
    dashboard.setData(data);
    dashboard.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dashboard));
    QChartView* view = chartView(&dashboard, "dimensionChart");
    QBarSeries* bars = seriesOf<QBarSeries>(view->chart()).at(0);
    QBarSet* set = bars->barSets().at(0);
    QCOMPARE(set->count(), 3);
    QCOMPARE(set->at(1), 4000.0);
    QCOMPARE(set->color(), QColor(44, 160, 44));
    auto* axis = qobject_cast<QCategoryAxis*>(view->chart()->axes(Qt::Horizontal).at(0));
    QVERIFY(axis);
    QCOMPARE(axis->categoriesLabels(),
             (QStringList{QStringLiteral("180"), QStringLiteral("308"), QStringLiteral("720")}));
    QVERIFY(seriesOf<QScatterSeries>(view->chart()).at(0)->points().isEmpty()); // the axis numbers them all

    QSignalSpy clicked(&dashboard, &OutlierDashboard::dimensionClicked);
    QTest::mouseClick(view->viewport(), Qt::LeftButton, Qt::NoModifier, dashboard.dimensionBarCenter(720));
    QCOMPARE(clicked.count(), 1);
    QCOMPARE(clicked.at(0).at(0).toInt(), 720);
    QCOMPARE(set->selectedBars(), QList<int>{2});
    QVERIFY(dashboard.dimensionToolTip(720).startsWith(QStringLiteral("dimension 720: 900 outliers")));
    QCOMPARE(dashboard.figureCsv().count(QLatin1Char('\n')) > 768, true);
    maybeSave(dashboard.grab().toImage(), QStringLiteral("dashboard-outlier-dimensions"));
}

void TestCharts::dashboardLayersAreOneBased()
{
    OutlierDashboard dashboard;
    const OutlierDashboardData data = dashboardData();
    dashboard.setData(data);
    QChart* layers = chartView(&dashboard, "layerChart")->chart();
    auto* axis = qobject_cast<QValueAxis*>(layers->axes(Qt::Horizontal).at(0));
    QVERIFY(axis);
    QCOMPARE(axis->min(), 0.5);
    QCOMPARE(axis->max(), 12.5);
    QCOMPARE(axis->tickAnchor(), 1.0);
    QVERIFY(axis->titleText().contains(QStringLiteral("1-based")));

    QLineSeries* norm = lineNamed(layers, QStringLiteral("max inf norm"));
    QLineSeries* kurt = lineNamed(layers, QStringLiteral("kurtosis"));
    QVERIFY(norm && kurt);
    QCOMPARE(norm->count(), 12);
    for (int i = 0; i < 12; ++i) {
        QCOMPARE(norm->at(i), QPointF(i + 1, data.maxInfNormPerLayer[i]));
        QCOMPARE(kurt->at(i), QPointF(i + 1, data.kurtosisPerLayer[i]));
    }
    // The dashboard's layer (0-based 10) is marked at 11 on both lines.
    const QList<QScatterSeries*> markers = seriesOf<QScatterSeries>(layers);
    QCOMPARE(markers.size(), 2);
    QCOMPARE(markers[0]->points(), QList<QPointF>{QPointF(11, 560.0)});
    QCOMPARE(markers[1]->points(), QList<QPointF>{QPointF(11, 1830.0)});
    QVERIFY(markers[0]->name().contains(QStringLiteral("layer 11")));
    QCOMPARE(dashboard.figureName(), QStringLiteral("outliers-L11-ffn_out"));
}

void TestCharts::dashboardTopTokens()
{
    OutlierDashboard dashboard;
    OutlierDashboardData data = dashboardData();
    data.perToken.labels << QStringLiteral("[SEP]"); // the same token at another position
    data.perToken.values << 500;
    dashboard.setData(data);
    dashboard.resize(1000, 1200);
    dashboard.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dashboard));
    QChartView* view = chartView(&dashboard, "tokenChart");
    QChart* tokens = view->chart();
    auto* axis = qobject_cast<QBarCategoryAxis*>(tokens->axes(Qt::Vertical).at(0));
    QBarSet* set = seriesOf<QHorizontalBarSeries>(tokens).at(0)->barSets().at(0);
    QCOMPARE(axis->count(), OutlierDashboard::kTopTokens);
    QCOMPARE(set->count(), OutlierDashboard::kTopTokens);
    QVERIFY(tokens->title().contains(QStringLiteral("top 20")));
    // Largest at the top (last category of a horizontal bar chart).
    QStringList categories = axis->categories();
    QCOMPARE(categories.last(), QStringLiteral("[SEP]"));
    QCOMPARE(set->at(set->count() - 1), 3000.0);
    QCOMPARE(categories.at(categories.size() - 2), QStringLiteral("."));
    QCOMPARE(categories.at(categories.size() - 3), QStringLiteral(","));
    QCOMPARE(categories.at(categories.size() - 4), QStringLiteral("[SEP] (2)"));
    QCOMPARE(set->at(set->count() - 4), 500.0);
    for (int i = 1; i < set->count(); ++i)
        QVERIFY(set->at(i - 1) <= set->at(i));

    // A short window shows fewer rows rather than letting Qt hide the top labels.
    dashboard.resize(900, 560);
    QTRY_VERIFY(axis->count() < OutlierDashboard::kTopTokens);
    QVERIFY(axis->count() >= 3);
    QCOMPARE(set->count(), axis->count());
    categories = axis->categories();
    QCOMPARE(categories.last(), QStringLiteral("[SEP]"));
    QCOMPARE(categories.at(categories.size() - 2), QStringLiteral("."));
    QVERIFY(tokens->title().contains(QStringLiteral("top %1").arg(axis->count())));
}

void TestCharts::dashboardCsv()
{
    OutlierDashboard dashboard;
    const OutlierDashboardData data = dashboardData();
    dashboard.setData(data);
    const QStringList lines = dashboard.figureCsv().split(QLatin1Char('\n'));
    QCOMPARE(lines.at(0), QStringLiteral("dimension (0-based),count"));
    QCOMPARE(lines.at(1), QStringLiteral("0,2"));
    QCOMPARE(lines.at(1 + 308), QStringLiteral("308,4000"));
    QCOMPARE(lines.at(1 + 381), QStringLiteral("381,2500"));
    QCOMPARE(lines.at(768), QStringLiteral("767,3"));
    QCOMPARE(lines.at(769), QString());
    QCOMPARE(lines.at(770), QStringLiteral("token,count"));
    QCOMPARE(lines.at(771), QStringLiteral("[SEP],3000"));
    QCOMPARE(lines.at(772), QStringLiteral(".,1800"));
    QCOMPARE(lines.at(773), QStringLiteral("\",\",900")); // a comma token is quoted
    const int layerHeader = int(lines.indexOf(QStringLiteral("layer (1-based),max inf norm,kurtosis")));
    QCOMPARE(layerHeader, 770 + 1 + int(data.perToken.labels.size()) + 1);
    QCOMPARE(lines.at(layerHeader + 1), QStringLiteral("1,5.1,3.2"));
    QCOMPARE(lines.at(layerHeader + 11), QStringLiteral("11,560,1830"));
    QCOMPARE(lines.at(layerHeader + 12), QStringLiteral("12,290,900"));
}

void TestCharts::trainingKeepsOneSeriesPerLayer()
{
    TrainingCharts charts;
    charts.resize(1000, 700);
    charts.show();
    QVERIFY(QTest::qWaitForWindowExposed(&charts));
    QChart* loss = chartView(&charts, "lossChart")->chart();
    QChart* norm = chartView(&charts, "infNormChart")->chart();
    QChart* kurt = chartView(&charts, "kurtosisChart")->chart();

    QList<QAbstractSeries*> firstSeries;
    for (int step = 300; step <= 3000; step += 300) {
        const TrainingCurveData data = trainingData(step);
        charts.setCurves(data);
        QCOMPARE(norm->series().size(), 6);
        QCOMPARE(kurt->series().size(), 6);
        QCOMPARE(loss->series().size(), 2);
        if (firstSeries.isEmpty()) firstSeries = norm->series();
        QCOMPARE(norm->series(), firstSeries); // refilled, not recreated
        for (int l = 0; l < 6; ++l) {
            auto* line = qobject_cast<QLineSeries*>(norm->series().at(l));
            QCOMPARE(line->name(), QStringLiteral("layer %1").arg(l + 1));
            QCOMPARE(line->count(), int(data.evalSteps.size()));
            QCOMPARE(line->at(line->count() - 1), QPointF(data.evalSteps.last(), data.maxInfNorm.last()[l]));
            QCOMPARE(qobject_cast<QLineSeries*>(kurt->series().at(l))->at(0).y(), data.kurtosis[0][l]);
        }
        QCOMPARE(lineNamed(loss, QStringLiteral("training loss"))->count(), int(data.steps.size()));
        QCOMPARE(lineNamed(loss, QStringLiteral("perplexity (eval)"))->count(), int(data.evalSteps.size()));
        auto* stepAxis = qobject_cast<QValueAxis*>(norm->axes(Qt::Horizontal).at(0));
        QVERIFY(stepAxis->max() >= step);
        auto* valueAxis = qobject_cast<QValueAxis*>(norm->axes(Qt::Vertical).at(0));
        double maxNorm = 0;
        for (double v : data.maxInfNorm.last())
            maxNorm = std::max(maxNorm, v);
        QVERIFY(valueAxis->max() >= maxNorm);
    }
    // Perplexity spans orders of magnitude: log axis on the right.
    QCOMPARE(loss->axes(Qt::Vertical).size(), 2);
    QVERIFY(qobject_cast<QLogValueAxis*>(loss->axes(Qt::Vertical).at(1)));

    // A different model: the layer count changes, so do the series.
    charts.setCurves(trainingData(1000, 3));
    QCOMPARE(norm->series().size(), 3);
    QCOMPARE(norm->series().at(2)->name(), QStringLiteral("layer 3"));
    charts.setCurves(TrainingCurveData{});
    QCOMPARE(norm->series().size(), 0);
}

void TestCharts::trainingCsv()
{
    TrainingCharts charts;
    const TrainingCurveData data = trainingData(300, 2);
    charts.setCurves(data);
    const QStringList lines = charts.figureCsv().trimmed().split(QLatin1Char('\n'));
    QCOMPARE(lines.at(0), QStringLiteral("step,loss,perplexity,max inf norm layer 1,max inf norm layer 2,"
                                         "kurtosis layer 1,kurtosis layer 2"));
    QCOMPARE(lines.size(), 1 + 30); // steps 10..300; evaluations at 100, 200, 300 share rows
    QCOMPARE(
        lines.at(1),
        QStringLiteral("10,%1,,,,,").arg(QString::number(data.loss[0], 'g', QLocale::FloatingPointShortest)));
    const QStringList row100 = lines.at(10).split(QLatin1Char(','));
    QCOMPARE(row100.at(0), QStringLiteral("100"));
    QCOMPARE(row100.at(2).toDouble(), data.evalValue[0]);
    QCOMPARE(row100.at(3).toDouble(), data.maxInfNorm[0][0]);
    QCOMPARE(row100.at(6).toDouble(), data.kurtosis[0][1]);
    QCOMPARE(charts.figureName(), QStringLiteral("training-bert-6L-vanilla"));
}

void TestCharts::sweepGroupsByOtherKey()
{
    SweepView view;
    view.resize(1100, 800);
    view.setPoints(sweepData(), QStringLiteral("runs/clipped/summary.json"));
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QCOMPARE(view.gridKeys(), (QStringList{QStringLiteral("alpha"), QStringLiteral("max_seq_length")}));
    QCOMPARE(view.xKey(), QStringLiteral("alpha"));

    QChart* relative = chartView(&view, "relativeMetricChart")->chart();
    QChart* norm = chartView(&view, "infNormChart")->chart();
    auto* xAxis = qobject_cast<QCategoryAxis*>(relative->axes(Qt::Horizontal).at(0));
    QVERIFY(xAxis);
    QCOMPARE(xAxis->categoriesLabels(),
             (QStringList{QStringLiteral("4"), QStringLiteral("12"), QStringLiteral("16")}));
    QCOMPARE(xAxis->titleText(), QStringLiteral("alpha"));
    // One line per T and the baseline as a reference.
    QCOMPARE(relative->series().size(), 3);
    QLineSeries* t64 = lineNamed(relative, QStringLiteral("max_seq_length=64"));
    QLineSeries* t128 = lineNamed(relative, QStringLiteral("max_seq_length=128"));
    QLineSeries* baseline = lineNamed(relative, QStringLiteral("baseline"));
    QVERIFY(t64 && t128 && baseline);
    QCOMPARE(t64->points(), (QList<QPointF>{QPointF(0, 0.99), QPointF(1, 1.01), QPointF(2, 1.04)}));
    QCOMPARE(t128->points(), (QList<QPointF>{QPointF(0, 1.00), QPointF(1, 0.995), QPointF(2, 1.02)}));
    QCOMPARE(baseline->at(0).y(), 1.0);
    QCOMPARE(baseline->at(1).y(), 1.0);
    QCOMPARE(lineNamed(norm, QStringLiteral("max_seq_length=128"))->points(),
             (QList<QPointF>{QPointF(0, 420), QPointF(1, 80), QPointF(2, 60)}));
    QCOMPARE(relative->series().at(0)->name(), QStringLiteral("max_seq_length=64")); // numeric order

    // The user picks the other key: one line per alpha.
    QSignalSpy changed(&view, &SweepView::xKeyChanged);
    auto* combo = view.findChild<QComboBox*>(QStringLiteral("xKeyCombo"));
    QCOMPARE(combo->count(), 2);
    combo->setCurrentIndex(1);
    QCOMPARE(changed.count(), 1);
    QCOMPARE(view.xKey(), QStringLiteral("max_seq_length"));
    QCOMPARE(relative->series().size(), 4);
    QStringList names;
    for (QAbstractSeries* s : relative->series())
        names << s->name();
    QCOMPARE(names, (QStringList{QStringLiteral("alpha=4"), QStringLiteral("alpha=12"),
                                 QStringLiteral("alpha=16"), QStringLiteral("baseline")}));
    QCOMPARE(lineNamed(relative, QStringLiteral("alpha=16"))->points(),
             (QList<QPointF>{QPointF(0, 1.04), QPointF(1, 1.02)}));
    xAxis = qobject_cast<QCategoryAxis*>(relative->axes(Qt::Horizontal).at(0));
    QCOMPARE(xAxis->categoriesLabels(), (QStringList{QStringLiteral("64"), QStringLiteral("128")}));

    // New points that still vary the chosen key keep it.
    view.setPoints(sweepData());
    QCOMPARE(view.xKey(), QStringLiteral("max_seq_length"));
}

void TestCharts::sweepLogScaleAndTable()
{
    SweepView view;
    view.setPoints(sweepData());
    QChart* norm = chartView(&view, "infNormChart")->chart();
    QVERIFY(qobject_cast<QValueAxis*>(norm->axes(Qt::Vertical).at(0)));
    auto* check = view.findChild<QCheckBox*>(QStringLiteral("logInfNormCheck"));
    check->click();
    QVERIFY(view.logInfNorm());
    QCOMPARE(norm->axes(Qt::Vertical).size(), 1);
    auto* log = qobject_cast<QLogValueAxis*>(norm->axes(Qt::Vertical).at(0));
    QVERIFY(log);
    QVERIFY(log->min() <= 40 && log->max() >= 735);
    QCOMPARE(norm->series().size(), 3);
    check->click();
    QVERIFY(qobject_cast<QValueAxis*>(norm->axes(Qt::Vertical).at(0)));

    auto* table = view.findChild<QTableWidget*>(QStringLiteral("pointTable"));
    QCOMPARE(table->rowCount(), 7);
    QStringList headers;
    for (int c = 0; c < table->columnCount(); ++c)
        headers << table->horizontalHeaderItem(c)->text();
    QCOMPARE(headers, (QStringList{QStringLiteral("name"), QStringLiteral("softmax"), QStringLiteral("alpha"),
                                   QStringLiteral("max_seq_length"), QStringLiteral("metric"),
                                   QStringLiteral("value"), QStringLiteral("relative"),
                                   QStringLiteral("max inf norm"), QStringLiteral("avg kurtosis")}));
}

void TestCharts::sweepCsv()
{
    SweepView view;
    view.setPoints(sweepData());
    const QStringList lines = view.figureCsv().trimmed().split(QLatin1Char('\n'));
    QCOMPARE(lines.size(), 8);
    QCOMPARE(lines.at(0),
             QStringLiteral("name,softmax,alpha,max_seq_length,metric_name,metric,relative_metric,"
                            "max_inf_norm,avg_kurtosis"));
    QCOMPARE(lines.at(1), QStringLiteral("baseline,vanilla,,,perplexity,7,1,735,3076"));
    QVERIFY(lines.at(2).startsWith(QStringLiteral("\"alpha=16,max_seq_length=64\",,16,64,perplexity,")));
    QVERIFY(lines.at(2).endsWith(QStringLiteral(",1.04,40,120")));
}

void TestCharts::figureIndependentOfWidgetSize_data()
{
    QTest::addColumn<QString>("kind");
    QTest::newRow("dashboard") << QStringLiteral("dashboard");
    QTest::newRow("training") << QStringLiteral("training");
    QTest::newRow("sweep") << QStringLiteral("sweep");
}

void TestCharts::figureIndependentOfWidgetSize()
{
    QFETCH(QString, kind);
    auto make = [&]() -> std::unique_ptr<QWidget> {
        if (kind == QLatin1String("dashboard")) {
            auto w = std::make_unique<OutlierDashboard>();
            w->setData(dashboardData());
            return w;
        }
        if (kind == QLatin1String("training")) {
            auto w = std::make_unique<TrainingCharts>();
            w->setCurves(trainingData());
            return w;
        }
        auto w = std::make_unique<SweepView>();
        w->setPoints(sweepData(), QStringLiteral("runs/clipped/summary.json"));
        return w;
    };
    std::unique_ptr<QWidget> small = make();
    std::unique_ptr<QWidget> large = make();
    small->resize(500, 400);
    large->resize(1600, 1100);
    large->show();
    QVERIFY(QTest::qWaitForWindowExposed(large.get()));
    const Figure& smallFigure = dynamic_cast<const Figure&>(*small);
    const Figure& largeFigure = dynamic_cast<const Figure&>(*large);

    const QSize size = largeFigure.preferredFigureSize();
    QVERIFY(size.width() >= 800 && size.height() >= 500);
    const QImage a = renderFigure(smallFigure, size);
    const QImage b = renderFigure(largeFigure, size);
    QCOMPARE(a.size(), size);
    QVERIFY(a == b);
    QVERIFY2(inkedShare(a) > 0.02, qPrintable(QString::number(inkedShare(a))));
    maybeSave(a, largeFigure.figureName());

    // Another requested size gives another, equally complete picture.
    const QImage c = renderFigure(largeFigure, QSize(900, 600));
    QCOMPARE(c.size(), QSize(900, 600));
    QVERIFY(inkedShare(c) > 0.02);
    QVERIFY(!largeFigure.figureCsv().isEmpty());
    QCOMPARE(smallFigure.figureCsv(), largeFigure.figureCsv());
    QCOMPARE(smallFigure.figureProvenance().model, largeFigure.figureProvenance().model);
}

QTEST_MAIN(TestCharts)
#include "tst_charts.moc"
