// The chart views (TrainingCharts, SweepView; the dashboard in tst_outlier_dashboard) driven as a user
// would, offscreen: the series each view shows, CSV text and figures that depend only on data.
// Set OUTLIERLENS_SAVE_FIGURES=DIR to also write each figure as a PNG for a look.

#include "chart_test_support.h"
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

using namespace outlierlens::testcharts;

namespace {

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

} // namespace

class TestCharts : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void niceStepIsOneTwoFiveTimesAPowerOfTen();
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
    QLineSeries* t64 = lineNamed(relative, QStringLiteral("T=64"));
    QLineSeries* t128 = lineNamed(relative, QStringLiteral("T=128"));
    QLineSeries* baseline = lineNamed(relative, QStringLiteral("baseline"));
    QVERIFY(t64 && t128 && baseline);
    QCOMPARE(t64->points(), (QList<QPointF>{QPointF(0, 0.99), QPointF(1, 1.01), QPointF(2, 1.04)}));
    QCOMPARE(t128->points(), (QList<QPointF>{QPointF(0, 1.00), QPointF(1, 0.995), QPointF(2, 1.02)}));
    QCOMPARE(baseline->at(0).y(), 1.0);
    QCOMPARE(baseline->at(1).y(), 1.0);
    QCOMPARE(lineNamed(norm, QStringLiteral("T=128"))->points(),
             (QList<QPointF>{QPointF(0, 420), QPointF(1, 80), QPointF(2, 60)}));
    QCOMPARE(relative->series().at(0)->name(), QStringLiteral("T=64")); // numeric order

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
    // The legend names settings by the paper's symbols (T, α), which it does not cut.
    QCOMPARE(names, (QStringList{QStringLiteral("\u03b1=4"), QStringLiteral("\u03b1=12"),
                                 QStringLiteral("\u03b1=16"), QStringLiteral("baseline")}));
    QCOMPARE(lineNamed(relative, QStringLiteral("\u03b1=16"))->points(),
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
