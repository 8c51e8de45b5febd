// OutlierDashboard (the paper's Figures 1 and 9) driven as a user would, offscreen: real clicks on bars,
// hover texts, the series it shows, only the outlier dimensions when there are few, and its CSV.
// Set OUTLIERLENS_SAVE_FIGURES=DIR to also write its pictures as PNGs for a look.

#include "chart_test_support.h"
#include "outlier_dashboard.h"

#include <QApplication>
#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QCategoryAxis>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsTextItem>
#include <QHorizontalBarSeries>
#include <QLegend>
#include <QLineSeries>
#include <QScatterSeries>
#include <QSignalSpy>
#include <QTest>
#include <QToolTip>
#include <QValueAxis>

#include <cmath>

using namespace outlierlens;
using namespace outlierlens::testcharts;

class TestOutlierDashboard : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void dashboardClickEmitsDimension_data();
    void dashboardClickEmitsDimension();
    void dashboardClickOutsideBarsIsIgnored();
    void dashboardHoverNamesHead_data();
    void dashboardHoverNamesHead();
    void dashboardSetDataReplaces();
    void dashboardShowsOnlyOutlierDimensions();
    void dashboardLayersAreOneBased();
    void dashboardTopTokens();
    void dashboardWithoutOutlierTokensKeepsNoOldLabels();
    void dashboardSaysWhichLayersHaveOutliers();
    void dashboardCsv();
};

void TestOutlierDashboard::dashboardClickEmitsDimension_data()
{
    QTest::addColumn<int>("dimension");
    QTest::newRow("spike 308") << 308;
    QTest::newRow("spike 381") << 381;
    QTest::newRow("first") << 0;
    QTest::newRow("last") << 767;
}

void TestOutlierDashboard::dashboardClickEmitsDimension()
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

void TestOutlierDashboard::dashboardClickOutsideBarsIsIgnored()
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

void TestOutlierDashboard::dashboardHoverNamesHead_data()
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

void TestOutlierDashboard::dashboardHoverNamesHead()
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

void TestOutlierDashboard::dashboardSetDataReplaces()
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

    // Two lines, the two markers of the selected layer, and the two lines of the run without an
    // intervention, empty when there is none.
    QCOMPARE(layers->series().size(), 6);
    const QList<QLineSeries*> lines = seriesOf<QLineSeries>(layers);
    QCOMPARE(lines.size(), 4);
    QCOMPARE(lines.at(0)->count(), 24);
    QCOMPARE(lines.at(2)->count(), 0);
    QCOMPARE(lines.at(3)->count(), 0);
    QVERIFY(!dashboard.figureCsv().contains(QStringLiteral("without the intervention")));
    QCOMPARE(dashboard.data().perDimension.values.size(), 1024);

    // With the run before an intervention: its curves beside, and in the CSV.
    OutlierDashboardData intervened = dashboard.data();
    intervened.originalMaxInfNormPerLayer = QVector<double>(24, 7.0);
    intervened.originalKurtosisPerLayer = QVector<double>(24, 3.0);
    dashboard.setData(intervened);
    QCOMPARE(lines.at(2)->count(), 24);
    QCOMPARE(lines.at(2)->at(5).y(), 7.0);
    QCOMPARE(lines.at(3)->at(5).y(), 3.0);
    QVERIFY(dashboard.figureCsv().contains(QStringLiteral(",7,3\n")));
}

/// Few dimensions with outliers (the paper's Figure 1): only they are drawn, green, each numbered on
/// the axis; a click on a bar gives its dimension, and the CSV still has every dimension.
void TestOutlierDashboard::dashboardShowsOnlyOutlierDimensions()
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

void TestOutlierDashboard::dashboardLayersAreOneBased()
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

void TestOutlierDashboard::dashboardTopTokens()
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

/// Another model, input or layer without outlier tokens: the token chart shows none of the previous
/// labels (Qt Charts leaves an emptied category axis's label items on screen) and says that it is empty.
void TestOutlierDashboard::dashboardWithoutOutlierTokensKeepsNoOldLabels()
{
    OutlierDashboard dashboard;
    dashboard.resize(1000, 900);
    dashboard.setData(dashboardData());
    dashboard.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dashboard));
    QChartView* view = chartView(&dashboard, "tokenChart");
    const auto visibleTexts = [&] {
        QStringList texts;
        for (QGraphicsItem* item : view->scene()->items()) {
            if (!item->isVisible()) continue;
            if (auto* text = dynamic_cast<QGraphicsTextItem*>(item)) texts << text->toPlainText();
            if (auto* simple = dynamic_cast<QGraphicsSimpleTextItem*>(item)) texts << simple->text();
        }
        return texts.join(QLatin1Char('|'));
    };
    QTRY_VERIFY2(visibleTexts().contains(QStringLiteral("[SEP]")), qPrintable(visibleTexts()));

    OutlierDashboardData none = dashboardData();
    none.perToken = BarData{};
    none.perToken.title = QStringLiteral("Tokens carrying the most outliers");
    dashboard.setData(none);
    QTest::qWait(50);
    QApplication::processEvents();
    QVERIFY2(!visibleTexts().contains(QStringLiteral("[SEP]")), qPrintable(visibleTexts()));
    QVERIFY2(!visibleTexts().contains(QStringLiteral(",")), qPrintable(visibleTexts()));
    QVERIFY(dashboard.shownTokens().isEmpty());
    QVERIFY2(view->chart()->title().contains(QStringLiteral("none")), qPrintable(view->chart()->title()));

    dashboard.setData(dashboardData()); // and back
    QTRY_VERIFY(visibleTexts().contains(QStringLiteral("[SEP]")));
    QVERIFY(!view->chart()->title().contains(QStringLiteral("none")));
}

/// A layer without outliers: the title says which layers have them, or that none has under the rule.
void TestOutlierDashboard::dashboardSaysWhichLayersHaveOutliers()
{
    OutlierDashboard dashboard;
    dashboard.resize(1000, 800);
    OutlierDashboardData data = dashboardData(768, 4);
    data.perDimension.values.fill(0.0);
    data.outliersPerLayer = {0, 0, 0, 0};
    dashboard.setData(data);
    QChart* dims = chartView(&dashboard, "dimensionChart")->chart();
    QVERIFY2(dims->title().endsWith(QStringLiteral(": no layer has outliers under this rule")),
             qPrintable(dims->title()));
    data.outliersPerLayer = {0, 0, 12, 0};
    dashboard.setData(data);
    QVERIFY2(dims->title().endsWith(QStringLiteral(": none here; layer 3 has them")),
             qPrintable(dims->title()));
    data.outliersPerLayer = {5, 0, 12, 0};
    dashboard.setData(data);
    QVERIFY2(dims->title().endsWith(QStringLiteral(": none here; layers 1, 3 have them")),
             qPrintable(dims->title()));
    data.outliersPerLayer.clear(); // unknown (a statistics file without every layer)
    dashboard.setData(data);
    QVERIFY2(!dims->title().contains(QStringLiteral("have them")), qPrintable(dims->title()));
    data.perDimension.values[7] = 3;
    data.perToken.labels = QStringList{QStringLiteral("[SEP]")};
    data.perToken.values = {2};
    dashboard.setData(data);
    QVERIFY2(!dims->title().contains(QStringLiteral("none")), qPrintable(dims->title()));
    // Counts of 3 and 2: whole-number ticks only (no 0.5 or 0.75 outliers).
    for (QChart* chart : {dims, chartView(&dashboard, "tokenChart")->chart()}) {
        QValueAxis* counts = nullptr;
        for (QAbstractAxis* axis : chart->axes())
            if (auto* value = qobject_cast<QValueAxis*>(axis); value && !qobject_cast<QCategoryAxis*>(axis))
                counts = value;
        QVERIFY(counts);
        const double step = (counts->max() - counts->min()) / (counts->tickCount() - 1);
        QCOMPARE(counts->min(), 0.0);
        QVERIFY2(step >= 1 && step == std::round(step), qPrintable(QString::number(step)));
        QVERIFY(counts->max() >= 3 || chart != dims);
    }
}

void TestOutlierDashboard::dashboardCsv()
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

QTEST_MAIN(TestOutlierDashboard)
#include "tst_outlier_dashboard.moc"
