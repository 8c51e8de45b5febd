// SystematicView (An et al.'s systematic outliers) from hand-made data with known values: highlighted
// rows and columns, Table 1's cells, the CSV, the painted figure, clicks on the heatmaps and the table,
// log-scale charts that never receive a non-positive value, wide matrices that fit, and empty data.
// Set OUTLIERLENS_SAVE_FIGURES=DIR to also write the window (each section) and the figure as PNGs.

#include "heatmap_view.h"
#include "systematic_view.h"

#include <QAbstractSeries>
#include <QAreaSeries>
#include <QChart>
#include <QChartView>
#include <QDir>
#include <QImage>
#include <QLabel>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPainter>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableWidget>
#include <QTest>

#include <cmath>
#include <limits>

using namespace outlierlens;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

MatrixData matrix(int rows, int cols, const QStringList& rowLabels, float base, int spikeRow, int spikeCol)
{
    MatrixData m;
    m.rows = rows;
    m.cols = cols;
    m.rowLabels = rowLabels;
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c)
            m.values << (r == spikeRow && c == spikeCol ? 100.0f : base + 0.01f * float(r * cols + c));
    return m;
}

/// 6 tokens x 8 channels, token 0 heavy in channel 3; K = 3 down-projection channels; 3 layers
/// (layer 2 chosen); 4 heads, head 3's consistency undefined.
SystematicViewData sampleData(int channels = 8)
{
    const QStringList tokens{QStringLiteral("<s>"), QStringLiteral("The"), QStringLiteral("cat"),
                             QStringLiteral("sat"), QStringLiteral("."),   QStringLiteral("\\n")};
    SystematicViewData d;
    d.sourceDescription = QStringLiteral("current input: The cat sat.");
    d.rule = QStringLiteral("max |x| > 1000 x mean |x|");
    d.layer = 1;
    d.headDim = 2;
    d.hidden = matrix(6, channels, tokens, 0.5f, 0, 3);
    d.hidden.rowTitle = QStringLiteral("token");
    d.hidden.colTitle = QStringLiteral("channel (0-based)");
    d.downInput = matrix(6, 3, tokens, 0.25f, 0, 1);
    d.downWeight = matrix(3, channels, {QStringLiteral("j=7"), QStringLiteral("j=2"), QStringLiteral("j=5")},
                          0.125f, 1, 3);
    d.attention = matrix(6, 6, tokens, 0.02f, 5, 0);
    for (int r = 0; r < 6; ++r)
        d.attention.values[r * 6] = 0.875f; // every query attends to token 0
    d.attention.colLabels = tokens;
    d.attention.causal = true;
    d.heavyTokens = {0};
    d.heavyDownTokens = {0};
    d.outlierChannels = {3};
    d.outlierKeys = {0};

    d.hiddenPerLayer = {QStringLiteral("Layer outputs h"),
                        QStringLiteral("|h|"),
                        {QStringLiteral("top 1"), QStringLiteral("median")},
                        {{2.5, 1234.5, 987.25}, {0.5, kNaN, 0.25}}};
    d.downPerLayer = {QStringLiteral("Down-projection inputs"),
                      QStringLiteral("|x_down|"),
                      {QStringLiteral("top 1"), QStringLiteral("median")},
                      {{3.5, 4321.75, 0.0}, {-1.0, 0.375, 0.125}}};
    d.weightPerLayer = {QStringLiteral("W_down extremal ratio"),
                        QStringLiteral("ratio"),
                        {QStringLiteral("max")},
                        {{12.5, 250.5, 31.25}}};
    d.attentionPerLayer = {QStringLiteral("Received attention"),
                           QStringLiteral("A_j"),
                           {QStringLiteral("top 1"), QStringLiteral("median")},
                           {{1.5, 5.625, 4.75}, {0.0625, 0.03125, 0.046875}}};

    const QStringList categories{QStringLiteral("initial token"), QStringLiteral("strong delimiter"),
                                 QStringLiteral("weak semantic"), QStringLiteral("other")};
    d.heavyByCategory = {
        QStringLiteral("heavy tokens of h"), QStringLiteral("tokens"), categories, {7, 2, 0, 1}};
    d.downHeavyByCategory = {
        QStringLiteral("heavy tokens of x_down"), QStringLiteral("tokens"), categories, {6, 1, 0, 0}};
    d.outlierKeysByCategory = {
        QStringLiteral("outlier keys"), QStringLiteral("tokens"), categories, {9, 3, 1, 0}};
    d.tokensByCategory = {
        QStringLiteral("tokens"), QStringLiteral("tokens"), categories, {10, 120, 300, 917}};

    d.heads = {{0.125, 1, 0.5}, {0.5, 2, 1.0}, {0.75, 3, kNaN}, {0.0625, 0, 0.25}};
    d.consistencySamples = 7;
    d.provenance.model = QStringLiteral("tiny-llama");
    d.provenance.input = QStringLiteral("The cat sat.");
    return d;
}

/// Centre of a cell in viewport coordinates from the view's cell area, pitches and scroll bars.
QPoint cellCentre(const HeatmapView& view, int row, int col)
{
    const QRect area = view.cellArea();
    return QPoint(int(area.left() + (col + 0.5) * view.cellWidth() - view.horizontalScrollBar()->value()),
                  int(area.top() + (row + 0.5) * view.cellHeight() - view.verticalScrollBar()->value()));
}

int nonWhitePixels(const QImage& image, const QRect& rect)
{
    int count = 0;
    for (int y = rect.top(); y <= rect.bottom(); y += 2)
        for (int x = rect.left(); x <= rect.right(); x += 2)
            if (image.pixelColor(x, y).lightness() < 235) ++count;
    return count;
}

/// The grey texts shown in place of Figure 1 panels, in panel order.
QStringList messages(const SystematicView& view)
{
    QStringList texts;
    for (const QLabel* label : view.sections()->widget(0)->findChildren<QLabel*>())
        if (label->isVisibleTo(view.sections()->widget(0))) texts << label->text();
    return texts;
}

void maybeSave(const QImage& image, const QString& name)
{
    const QString dir = qEnvironmentVariable("OUTLIERLENS_SAVE_FIGURES");
    if (!dir.isEmpty()) QVERIFY(image.save(QDir(dir).filePath(name)));
}

} // namespace

class TstSystematicView : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void highlightsAndTitles();
    void headTable();
    void csvHasEveryNumber();
    void logChartsGetOnlyPositiveValues();
    void figurePaintsEveryQuadrant();
    void clicksEmitChannelKeyAndHead();
    void wideMatrixFitsItsPanel();
    void emptyDataShowsMessages();
};

void TstSystematicView::highlightsAndTitles()
{
    SystematicView view;
    view.setData(sampleData());
    QCOMPARE(view.hiddenView()->highlightedRows(), QVector<int>{0});
    QCOMPARE(view.hiddenView()->highlightedColumns(), QVector<int>{3});
    QCOMPARE(view.downInputView()->highlightedRows(), QVector<int>{0});
    QCOMPARE(view.attentionView()->highlightedColumns(), QVector<int>{0});
    QVERIFY(view.attentionView()->data().causal);
    QCOMPARE(view.downWeightView()->data().rows, 3);
    for (HeatmapView* panel :
         {view.hiddenView(), view.downInputView(), view.downWeightView(), view.attentionView()})
        QVERIFY(panel->isVisibleTo(&view));
    QVERIFY(messages(view).isEmpty());
    QCOMPARE(view.figureName(), QStringLiteral("systematic-L2"));
    const QStringList titles = view.chartTitles();
    QCOMPARE(titles.size(), 6);
    QCOMPARE(titles[0], QStringLiteral("Layer outputs h"));
    for (const QString& title : titles)
        QVERIFY2(!title.contains(QStringLiteral("no data")), qPrintable(title));
    bool titled = false;
    for (const QLabel* label : view.findChildren<QLabel*>())
        titled = titled || label->text() == QStringLiteral("Systematic outliers in layer 2");
    QVERIFY(titled);
}

void TstSystematicView::headTable()
{
    SystematicView view;
    view.setData(sampleData());
    QTableWidget* table = view.headTable();
    QCOMPARE(table->rowCount(), 4);
    QCOMPARE(table->columnCount(), 4);
    QCOMPARE(table->horizontalHeaderItem(0)->text(), QStringLiteral("Head"));
    QCOMPARE(table->horizontalHeaderItem(2)->text(), QStringLiteral("Outlier keys\n(own rule)"));
    QCOMPARE(table->horizontalHeaderItem(3)->text(), QStringLiteral("Consistency"));
    const QStringList expected[] = {{"1", "12.5 %", "1", "50.0 %"},
                                    {"2", "50.0 %", "2", "100.0 %"},
                                    {"3", "75.0 %", "3", QStringLiteral("\u2014")},
                                    {"4", "6.3 %", "0", "25.0 %"}};
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c)
            QCOMPARE(table->item(r, c)->text(), expected[r][c]);
    QVERIFY(table->editTriggers() == QAbstractItemView::NoEditTriggers);
    // Sorting by number, not by text ("100.0 %" < "25.0 %" as text); the undefined consistency counts as
    // the lowest, so the most consistent heads come first and it comes last.
    table->sortItems(3, Qt::DescendingOrder);
    QCOMPARE(table->item(0, 0)->text(), QStringLiteral("2"));
    QCOMPARE(table->item(1, 0)->text(), QStringLiteral("1"));
    QCOMPARE(table->item(2, 0)->text(), QStringLiteral("4"));
    QCOMPARE(table->item(3, 0)->text(), QStringLiteral("3"));
    table->sortItems(3, Qt::AscendingOrder);
    QCOMPARE(table->item(0, 0)->text(), QStringLiteral("3"));
    QCOMPARE(table->item(1, 0)->text(), QStringLiteral("4"));
}

void TstSystematicView::csvHasEveryNumber()
{
    SystematicView view;
    view.setData(sampleData());
    const QString csv = view.figureCsv();
    const QStringList lines = csv.split(QLatin1Char('\n'));
    QCOMPARE(lines.first(), QStringLiteral("quantity,value"));
    QVERIFY(lines.contains(QStringLiteral("layer (1-based),2")));
    QVERIFY(lines.contains(QStringLiteral("consistency samples,7")));
    QVERIFY(lines.contains(QStringLiteral("Layer outputs h,top 1,2,1234.5")));
    QVERIFY(lines.contains(QStringLiteral("Layer outputs h,median,2,nan")));
    QVERIFY(lines.contains(QStringLiteral("Down-projection inputs,top 1,2,4321.75")));
    QVERIFY(lines.contains(QStringLiteral("Received attention,median,3,0.046875")));
    QVERIFY(lines.contains(
        QStringLiteral("category,heavy tokens of h,heavy tokens of x_down,outlier keys,tokens")));
    QVERIFY(lines.contains(QStringLiteral("strong delimiter,2,1,3,120")));
    QVERIFY(lines.contains(QStringLiteral("other,1,0,0,917")));
    QVERIFY(lines.contains(QStringLiteral("3,0.75,3,nan")));
    QVERIFY(lines.contains(QStringLiteral("4,0.0625,0,0.25")));
    QVERIFY(lines.contains(QStringLiteral("rule,max |x| > 1000 x mean |x|")));
    // Figure 1's matrices are exported by the heatmaps themselves, as figures named after this one.
    QCOMPARE(view.hiddenView()->figureName(), QStringLiteral("systematic-L2-h"));
    QVERIFY(view.attentionView()->figureCsv().contains(QStringLiteral("5,0,\\n,<s>,0.875")));
}

void TstSystematicView::logChartsGetOnlyPositiveValues()
{
    SystematicView view;
    view.setData(sampleData());
    const QStringList names{QStringLiteral("hiddenPerLayerChart"), QStringLiteral("downPerLayerChart"),
                            QStringLiteral("weightPerLayerChart"), QStringLiteral("attentionPerLayerChart")};
    for (const QString& name : names) {
        auto* chartView = view.findChild<QChartView*>(name);
        QVERIFY2(chartView, qPrintable(name));
        QChart* chart = chartView->chart();
        QVERIFY(qobject_cast<QLogValueAxis*>(chart->axes(Qt::Vertical).value(0)));
        int points = 0, bands = 0;
        for (QAbstractSeries* series : chart->series()) {
            if (auto* band = qobject_cast<QAreaSeries*>(series)) { // the chosen layer, 1-based on the axis
                ++bands;
                QCOMPARE(band->name(), QStringLiteral("layer 2"));
                QVERIFY(band->upperSeries()->at(0).x() > 1.5 && band->upperSeries()->at(1).x() < 2.5);
                QVERIFY(band->lowerSeries()->at(0).y() > 0); // the band's foot is on the log axis too
            }
            if (auto* xy = qobject_cast<QXYSeries*>(series))
                for (const QPointF& p : xy->points()) {
                    QVERIFY2(std::isfinite(p.y()) && p.y() > 0, qPrintable(name));
                    ++points;
                }
        }
        QVERIFY(points > 0);
        QCOMPARE(bands, 1);
    }
    // x_down: 3 top-1 and 3 median values, of which 0.0 and -1.0 are left out.
    int downPoints = 0;
    for (QAbstractSeries* series : view.findChild<QChartView*>(names[1])->chart()->series())
        if (auto* line = qobject_cast<QLineSeries*>(series)) downPoints += int(line->count());
    QCOMPARE(downPoints, 4);
}

void TstSystematicView::figurePaintsEveryQuadrant()
{
    SystematicView view;
    view.setData(sampleData());
    const QSize size = view.preferredFigureSize();
    QImage image(size, QImage::Format_ARGB32);
    image.fill(Qt::white);
    {
        QPainter painter(&image);
        view.paintFigure(painter, image.rect());
    }
    maybeSave(image, QStringLiteral("systematic_figure.png"));
    const int w = size.width() / 2, h = size.height() / 2;
    for (const QRect& quadrant : {QRect(0, 0, w, h), QRect(w, 0, w, h), QRect(0, h, w, h), QRect(w, h, w, h)})
        QVERIFY2(nonWhitePixels(image, quadrant) > 200,
                 qPrintable(QStringLiteral("quadrant at %1,%2 blank").arg(quadrant.x()).arg(quadrant.y())));
    QImage again(size, QImage::Format_ARGB32);
    again.fill(Qt::white);
    {
        QPainter painter(&again);
        view.paintFigure(painter, again.rect());
    }
    QCOMPARE(again, image); // from data alone: the same every time
}

void TstSystematicView::clicksEmitChannelKeyAndHead()
{
    SystematicView view;
    view.resize(1280, 760);
    view.setData(sampleData());
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    maybeSave(view.grab().toImage(), QStringLiteral("systematic_view.png"));

    QSignalSpy channels(&view, &SystematicView::channelClicked);
    HeatmapView* hidden = view.hiddenView();
    QTest::mouseClick(hidden->viewport(), Qt::LeftButton, {}, cellCentre(*hidden, 2, 5));
    QCOMPARE(channels.size(), 1);
    QCOMPARE(channels.first().at(0).toInt(), 5);
    QTest::mouseClick(hidden->viewport(), Qt::LeftButton, {}, cellCentre(*hidden, 4, 3));
    QCOMPARE(channels.size(), 2);
    QCOMPARE(channels.last().at(0).toInt(), 3);

    QSignalSpy keys(&view, &SystematicView::keyClicked);
    HeatmapView* attention = view.attentionView();
    QTest::mouseClick(attention->viewport(), Qt::LeftButton, {}, cellCentre(*attention, 4, 1));
    QCOMPARE(keys.size(), 1);
    QCOMPARE(keys.first().at(0).toInt(), 1);
    QCOMPARE(channels.size(), 2); // the attention is not the channel panel

    view.sections()->setCurrentIndex(1);
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    maybeSave(view.grab().toImage(), QStringLiteral("systematic_view_layers.png"));
    view.sections()->setCurrentIndex(2);
    QTableWidget* table = view.headTable();
    table->sortItems(1, Qt::DescendingOrder); // row 0 is now head 3 (75 %), 0-based 2
    QCOMPARE(table->item(0, 0)->text(), QStringLiteral("3"));
    maybeSave(view.grab().toImage(), QStringLiteral("systematic_view_heads.png"));
    QSignalSpy heads(&view, &SystematicView::headClicked);
    QTest::mouseClick(table->viewport(), Qt::LeftButton, {},
                      table->visualItemRect(table->item(0, 1)).center());
    QCOMPARE(heads.size(), 1);
    QCOMPARE(heads.first().at(0).toInt(), 2);
    QCOMPARE(view.selectedHead(), 2);
}

void TstSystematicView::wideMatrixFitsItsPanel()
{
    SystematicView view;
    view.resize(1280, 760);
    SystematicViewData data = sampleData(768);
    data.outlierChannels = {447};
    data.hidden.values[447] = 150.0f;
    view.setData(data);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    maybeSave(view.grab().toImage(), QStringLiteral("systematic_view_wide.png"));
    for (HeatmapView* panel : {view.hiddenView(), view.downWeightView()}) {
        QVERIFY(panel->isVisible());
        const QRect area = panel->cellArea();
        QVERIFY2(panel->cellWidth() * 768 <= area.width() + 1e-6,
                 qPrintable(QStringLiteral("%1 x 768 > %2").arg(panel->cellWidth()).arg(area.width())));
        QVERIFY(panel->cellWidth() * 768 > 0.8 * area.width()); // and uses the width
        QVERIFY(panel->cellHeight() * panel->data().rows <= area.height() + 1e-6);
        QVERIFY(panel->cellHeight() > 4 * panel->cellWidth()); // narrow columns, readable rows
        QCOMPARE(panel->horizontalScrollBar()->maximum(), 0);
        QCOMPARE(panel->verticalScrollBar()->maximum(), 0);
    }
    // Rows of |h| and x_down line up.
    QCOMPARE(view.hiddenView()->cellArea().top(), view.downInputView()->cellArea().top());
    QCOMPARE(view.hiddenView()->cellHeight(), view.downInputView()->cellHeight());
    // Channel 447 is still clickable where it is drawn.
    QSignalSpy channels(&view, &SystematicView::channelClicked);
    HeatmapView* hidden = view.hiddenView();
    QTest::mouseClick(hidden->viewport(), Qt::LeftButton, {}, cellCentre(*hidden, 0, 447));
    QCOMPARE(channels.size(), 1);
    QVERIFY(std::abs(channels.first().at(0).toInt() - 447) <= 1);
    // A user zoom sticks; "0" fits the panel again.
    const double fitted = hidden->cellHeight();
    hidden->zoomIn();
    QVERIFY(hidden->cellHeight() > fitted);
    view.resize(1200, 740);
    QTest::qWait(10);
    QVERIFY(hidden->cellHeight() > fitted);
    hidden->fitToWindow();
    QVERIFY(hidden->cellWidth() * 768 <= hidden->cellArea().width() + 1e-6);
    QCOMPARE(hidden->horizontalScrollBar()->maximum(), 0);
}

void TstSystematicView::emptyDataShowsMessages()
{
    SystematicView view;
    view.resize(1280, 760);
    SystematicViewData data;
    data.sourceDescription = QStringLiteral("statistics file wiki.h5 (100 samples)");
    view.setData(data);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    maybeSave(view.grab().toImage(), QStringLiteral("systematic_view_empty.png"));
    const QString needs = QString::fromUtf8(SystematicView::kFigure1NeedsInputText);
    const QStringList shown = messages(view);
    QCOMPARE(shown.size(), 4);
    for (const QString& message : shown)
        QVERIFY2(message.contains(needs), qPrintable(message));
    QVERIFY(shown[0].startsWith(QStringLiteral("|h|")));
    QVERIFY(!view.hiddenView()->isVisible());
    const QStringList titles = view.chartTitles();
    QCOMPARE(titles.size(), 6);
    for (const QString& title : titles)
        QVERIFY2(title.contains(QStringLiteral("no data")), qPrintable(title));
    QCOMPARE(view.headTable()->rowCount(), 0);
    for (int i = 0; i < 3; ++i) {
        view.sections()->setCurrentIndex(i);
        QTest::qWait(5);
    }
    QImage image(view.preferredFigureSize(), QImage::Format_ARGB32);
    image.fill(Qt::white);
    {
        QPainter painter(&image);
        view.paintFigure(painter, image.rect());
    }
    QVERIFY(nonWhitePixels(image, image.rect()) > 100); // titles and "no data" boxes
    QVERIFY(view.figureCsv().startsWith(QStringLiteral("quantity,value\n")));
    QCOMPARE(view.figureName(), QStringLiteral("systematic"));

    // Statistics-file data: per-layer charts and Table 1 without Figure 1.
    SystematicViewData stats = sampleData();
    stats.hidden = stats.downInput = stats.downWeight = stats.attention = MatrixData();
    stats.heavyTokens.clear();
    view.setData(stats);
    QCOMPARE(messages(view).size(), 4);
    QVERIFY(!view.hiddenView()->isVisible());
    QVERIFY(!view.chartTitles()[0].contains(QStringLiteral("no data")));
    QCOMPARE(view.headTable()->rowCount(), 4);
}

QTEST_MAIN(TstSystematicView)
#include "tst_systematic_view.moc"
