// OverviewGrid: clicks and keyboard give 0-based (layer, head); tooltips and CSV are 1-based.

#include "head_test_data.h"
#include "overview_grid.h"

#include <QHelpEvent>
#include <QPainter>
#include <QSignalSpy>
#include <QTest>
#include <QToolTip>

using namespace outlierlens;

namespace {

OverviewData overview(int layers, int heads)
{
    OverviewData o;
    o.layers = layers;
    o.heads = heads;
    o.tokens = testdata::tokens(13);
    o.scoreDescription = QStringLiteral("share of attention on [SEP] keys with small values");
    for (int l = 0; l < layers; ++l)
        for (int h = 0; h < heads; ++h) {
            o.probabilities << testdata::sepAttention(o.tokens, false);
            o.noopScore << float(l * heads + h) / float(layers * heads);
        }
    o.provenance.model = QStringLiteral("tiny-bert");
    return o;
}

} // namespace

class TestOverviewGrid : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void clickEmitsZeroBased();
    void keyboardNavigation();
    void tooltipNamesHeadAndScore();
    void csvIsOneBased();
    void figureAndLegend();
};

void TestOverviewGrid::clickEmitsZeroBased()
{
    OverviewGrid grid;
    grid.setData(overview(4, 5));
    grid.resize(700, 640);
    grid.show();
    QVERIFY(QTest::qWaitForWindowExposed(&grid));
    QSignalSpy activated(&grid, &OverviewGrid::headActivated);
    // Layer 2, head 3 as displayed.
    QTest::mouseClick(&grid, Qt::LeftButton, {}, grid.thumbnailRect(1, 2).center());
    QCOMPARE(activated.size(), 1);
    QCOMPARE(activated.first(), (QVariantList{1, 2}));
    QCOMPARE(grid.currentLayer(), 1);
    QCOMPARE(grid.currentHead(), 2);
    // The last head of the last layer, and a click in the gap between thumbnails does nothing.
    QTest::mouseClick(&grid, Qt::LeftButton, {}, grid.thumbnailRect(3, 4).center());
    QCOMPARE(activated.last(), (QVariantList{3, 4}));
    const QRect a = grid.thumbnailRect(0, 0), b = grid.thumbnailRect(0, 1);
    QTest::mouseClick(&grid, Qt::LeftButton, {}, QPoint((a.right() + b.left()) / 2, a.center().y()));
    QCOMPARE(activated.size(), 2);
}

void TestOverviewGrid::keyboardNavigation()
{
    OverviewGrid grid;
    grid.setData(overview(3, 4));
    grid.resize(600, 500);
    grid.show();
    QVERIFY(QTest::qWaitForWindowExposed(&grid));
    grid.setFocus();
    QSignalSpy activated(&grid, &OverviewGrid::headActivated);
    QSignalSpy current(&grid, &OverviewGrid::currentChanged);
    QCOMPARE(grid.currentLayer(), 0);
    QCOMPARE(grid.currentHead(), 0);
    QTest::keyClick(&grid, Qt::Key_Right);
    QTest::keyClick(&grid, Qt::Key_Right);
    QTest::keyClick(&grid, Qt::Key_Down);
    QCOMPARE(current.size(), 3);
    QCOMPARE(current.last(), (QVariantList{1, 2}));
    QCOMPARE(activated.size(), 0); // moving is not choosing
    QTest::keyClick(&grid, Qt::Key_Return);
    QCOMPARE(activated.size(), 1);
    QCOMPARE(activated.last(), (QVariantList{1, 2}));
    // The focus stays inside the grid.
    for (int i = 0; i < 5; ++i)
        QTest::keyClick(&grid, Qt::Key_Up);
    for (int i = 0; i < 9; ++i)
        QTest::keyClick(&grid, Qt::Key_Right);
    QCOMPARE(grid.currentLayer(), 0);
    QCOMPARE(grid.currentHead(), 3);
    QTest::keyClick(&grid, Qt::Key_Enter);
    QCOMPARE(activated.last(), (QVariantList{0, 3}));
    QTest::keyClick(&grid, Qt::Key_Home);
    QTest::keyClick(&grid, Qt::Key_Space);
    QCOMPARE(activated.last(), (QVariantList{0, 0}));
}

void TestOverviewGrid::tooltipNamesHeadAndScore()
{
    OverviewGrid grid;
    const OverviewData data = overview(4, 5);
    grid.setData(data);
    grid.resize(700, 640);
    grid.show();
    QVERIFY(QTest::qWaitForWindowExposed(&grid));
    const QPoint pos = grid.thumbnailRect(2, 1).center();
    QHelpEvent help(QEvent::ToolTip, pos, grid.mapToGlobal(pos));
    QApplication::sendEvent(&grid, &help);
    QTRY_VERIFY(QToolTip::isVisible());
    const QString tip = QToolTip::text();
    QVERIFY2(tip.contains(QStringLiteral("Layer 3, head 2")), qPrintable(tip));
    QVERIFY2(tip.contains(QString::asprintf("%.4f", double(data.noopScore[2 * 5 + 1]))), qPrintable(tip));
    QVERIFY(tip.contains(data.scoreDescription));
    QToolTip::hideText();
}

void TestOverviewGrid::csvIsOneBased()
{
    OverviewGrid grid;
    const OverviewData data = overview(4, 5);
    grid.setData(data);
    const QStringList lines = grid.figureCsv().split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 1 + 4 * 5);
    QCOMPARE(lines.first(), QStringLiteral("layer,head,score"));
    QCOMPARE(lines[1], QStringLiteral("1,1,0"));
    QCOMPARE(lines[1 + 1 * 5 + 2],
             QStringLiteral("2,3,%1").arg(QString::asprintf("%.9g", double(data.noopScore[7]))));
    QCOMPARE(grid.figureName(), QStringLiteral("overview"));
}

void TestOverviewGrid::figureAndLegend()
{
    OverviewGrid grid;
    grid.setData(overview(12, 12));
    QCOMPARE(grid.highScoreThreshold(), 0.5);
    const QSize size = grid.preferredFigureSize();
    QVERIFY(size.width() >= 640 && size.height() >= 640);
    QImage image(size, QImage::Format_RGB32);
    QPainter painter(&image);
    grid.paintFigure(painter, image.rect());
    painter.end();
    // High scores (>= 0.5: the lower half of the layers) are framed in red; low ones are not.
    int red = 0;
    for (int y = image.height() / 2; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x)
            red += image.pixel(x, y) == qRgb(0xd6, 0x27, 0x28);
    int redTop = 0;
    for (int y = image.height() / 6; y < image.height() / 3; ++y)
        for (int x = 0; x < image.width(); ++x)
            redTop += image.pixel(x, y) == qRgb(0xd6, 0x27, 0x28);
    QVERIFY2(red > 1000, qPrintable(QString::number(red)));
    QCOMPARE(redTop, 0);
}

QTEST_MAIN(TestOverviewGrid)
#include "tst_overview_grid.moc"
