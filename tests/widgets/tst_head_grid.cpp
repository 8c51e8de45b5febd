// HeadGrid: one HeadView per head, in order; the figure stacks them, the CSV names layer and head
// (1-based), a click names the head, and fewer heads remove rows.

#include "head_grid.h"
#include "head_test_data.h"
#include "head_view.h"
#include "heatmap_view.h"

#include <QImage>
#include <QPainter>
#include <QSignalSpy>
#include <QTest>

using namespace outlierlens;

namespace {

QVector<HeadViewData> threeHeads()
{
    QVector<HeadViewData> heads;
    for (int h = 0; h < 3; ++h) {
        HeadViewData d = testdata::head(9, 8, h == 2, false);
        d.layer = 1;
        d.head = h;
        heads << d;
    }
    return heads;
}

/// Share of pixels in `rect` that are not white.
double inked(const QImage& image, const QRect& rect)
{
    int count = 0;
    for (int y = rect.top(); y <= rect.bottom(); ++y)
        for (int x = rect.left(); x <= rect.right(); ++x)
            if (image.pixel(x, y) != qRgb(255, 255, 255)) ++count;
    return double(count) / (rect.width() * rect.height());
}

} // namespace

class TestHeadGrid : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void oneRowPerHead()
    {
        HeadGrid grid;
        grid.resize(1200, 800);
        grid.setHeads(threeHeads());
        grid.show();
        QVERIFY(QTest::qWaitForWindowExposed(&grid));
        for (int h = 0; h < 3; ++h) {
            QVERIFY(grid.view(h));
            QCOMPARE(grid.view(h)->title(), QStringLiteral("Layer 2, head %1").arg(h + 1));
        }
        QVERIFY(grid.view(2)->hasGatePanel());
        QVERIFY(!grid.view(0)->hasGatePanel());
        QCOMPARE(grid.figureName(), QStringLiteral("heads-L2"));
        QCOMPARE(grid.figureProvenance().selection, QStringLiteral("layer 2, heads 1-3"));

        // The CSV: every head's rows, layer and head in front.
        const QString csv = grid.figureCsv();
        QVERIFY(csv.startsWith(QStringLiteral("layer (1-based),head (1-based),panel,row,col,")));
        const QStringList lines = csv.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        const int perHead = 9 * 9 + 2 * 9 * 8;               // probabilities, V, P.V
        QCOMPARE(lines.size(), 1 + 3 * perHead + 9 + 9 * 8); // head 3 is gated: pi and P.V after it
        QVERIFY(lines.contains(QStringLiteral("2,3,gate,5,0,[SEP],\u03c0,0.0299999993")));

        // A click in the second head names it.
        QSignalSpy clicked(&grid, &HeadGrid::headClicked);
        HeatmapView* probabilities = grid.view(1)->panel(HeadView::ProbabilitiesPanel);
        const QRect area = probabilities->cellArea();
        QTest::mouseClick(probabilities->viewport(), Qt::LeftButton, {},
                          QPoint(int(area.left() + probabilities->cellWidth() / 2),
                                 int(area.top() + probabilities->cellHeight() / 2)));
        QCOMPARE(clicked.count(), 1);
        QCOMPARE(clicked.first().first().toInt(), 1);

        // Fewer heads: rows go.
        grid.setHeads(threeHeads().mid(0, 1));
        QVERIFY(grid.view(0) && !grid.view(1));
    }

    void figureStacksTheHeads()
    {
        HeadGrid grid;
        grid.setHeads(threeHeads());
        const QSize size = grid.preferredFigureSize();
        QVERIFY(size.height() >= 3 * 200);
        QImage image(size, QImage::Format_RGB32);
        image.fill(Qt::white);
        QPainter painter(&image);
        grid.paintFigure(painter, image.rect());
        painter.end();
        // Each third of the height holds a head's figure.
        for (int h = 0; h < 3; ++h)
            QVERIFY2(inked(image, QRect(0, h * size.height() / 3, size.width(), size.height() / 3)) > 0.05,
                     qPrintable(QStringLiteral("head %1").arg(h + 1)));
    }
};

QTEST_MAIN(TestHeadGrid)
#include "tst_head_grid.moc"
