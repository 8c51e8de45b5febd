// CompareView: one column per model with its caption, shared zoom, arrangement, CSV and provenance,
// the per-row distribution panels of Figure 14.

#include "compare_view.h"
#include "head_test_data.h"
#include "head_view.h"
#include "heatmap_view.h"

#include <QLabel>
#include <QSignalSpy>
#include <QTest>

using namespace outlierlens;

namespace {

QVector<CompareEntry> threeModels(int t, int d)
{
    HeadViewData vanilla = testdata::head(t, d, false, false);
    HeadViewData clipped = testdata::head(t, d, false, true);
    HeadViewData gated = testdata::head(t, d, true, false);
    vanilla.provenance.model = QStringLiteral("models/vanilla");
    clipped.provenance.model = QStringLiteral("models/clipped");
    gated.provenance.model = QStringLiteral("models/gated");
    return {{QStringLiteral("vanilla"),
             {QStringLiteral("max inf norm 73.2"), QStringLiteral("kurtosis 1830")},
             vanilla},
            {QStringLiteral("clipped softmax, gamma -0.025"), {QStringLiteral("max inf norm 21.5")}, clipped},
            {QStringLiteral("gated attention"), {QStringLiteral("max inf norm 18.9")}, gated}};
}

} // namespace

class TestCompareView : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void columnsWithCaptions();
    void arrangement();
    void onScreenUsesTheRoom();
    void zoomIsShared();
    void csvAndProvenance();
    void distributionPanels();
    void longInputWithDistribution();
};

void TestCompareView::columnsWithCaptions()
{
    CompareView view;
    view.setEntries(threeModels(13, 16));
    view.resize(1400, 900);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QCOMPARE(view.entries().size(), 3);
    QCOMPARE(view.title(), QStringLiteral("Layer 11, head 3"));
    for (int i = 0; i < 3; ++i)
        QVERIFY(view.headView(i)->isVisible());
    QVERIFY(!view.headView(0)->hasGatePanel());
    QVERIFY(view.headView(2)->hasGatePanel());
    QVERIFY(view.headView(1)->panel(HeadView::ProbabilitiesPanel)->marksExactZeros());
    QCOMPARE(view.caption(0), QStringLiteral("vanilla\nmax inf norm 73.2\nkurtosis 1830"));
    // The captions on screen.
    QStringList shown;
    for (QLabel* label : view.findChildren<QLabel*>())
        shown << label->text();
    QVERIFY(
        shown.join(QLatin1Char('|')).contains(QStringLiteral("<b>gated attention</b><br>max inf norm 18.9")));
    // Replacing the entries replaces the columns.
    view.setEntries(threeModels(13, 16).mid(0, 2));
    QCOMPARE(view.headView(2), nullptr);
    QVERIFY(view.headView(1)->isVisible());
}

void TestCompareView::arrangement()
{
    CompareView view;
    view.setValuePanelsVisible(true);
    view.setEntries(threeModels(13, 64));
    // 13 tokens x 64 dimensions, V and P.V shown: each head is wide, so automatic stacks them.
    QCOMPARE(view.arrangement(), CompareView::Arrangement::Automatic);
    QCOMPARE(view.orientation(), Qt::Vertical);
    view.setArrangement(CompareView::Arrangement::SideBySide);
    QCOMPARE(view.orientation(), Qt::Horizontal);
    const QSize sideBySide = view.preferredFigureSize();
    view.setArrangement(CompareView::Arrangement::Stacked);
    QCOMPARE(view.orientation(), Qt::Vertical);
    const QSize stacked = view.preferredFigureSize();
    QVERIFY(sideBySide.width() > stacked.width());
    QVERIFY(sideBySide.height() < stacked.height());
}

void TestCompareView::onScreenUsesTheRoom()
{
    // Issue #14.4: on a 1280x800 window the page has about 770 x 650 px. Three 64-token heads take the
    // arrangement with the larger cells, share the width equally, and ask for no width of their own.
    CompareView view;
    view.setEntries(threeModels(64, 64));
    QVERIFY(!view.valuePanelsVisible()); // the probabilities get the room by default
    view.resize(770, 650);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    const Qt::Orientation chosen = view.orientation();
    const Qt::Orientation other = chosen == Qt::Horizontal ? Qt::Vertical : Qt::Horizontal;
    QVERIFY(view.figureCellSizeFor(view.size(), chosen) >= view.figureCellSizeFor(view.size(), other));
    QCOMPARE(chosen, Qt::Horizontal);
    for (int i = 0; i < 3; ++i) {
        const int width = view.headView(i)->parentWidget()->width();
        QVERIFY2(width >= 770 / 3 - 20, qPrintable(QString::number(width)));
        // The probabilities panel is drawn whole, not cut behind a scroll bar.
        HeatmapView* probabilities = view.headView(i)->panel(HeadView::ProbabilitiesPanel);
        QVERIFY(probabilities->isVisible());
        QVERIFY2(probabilities->geometry().right() <= view.headView(i)->width(),
                 qPrintable(QString::number(probabilities->geometry().right())));
    }
    // Long captions wrap inside their column; the view does not widen the window (or squeeze a dock).
    QVERIFY2(view.minimumSizeHint().width() < 200,
             qPrintable(QString::number(view.minimumSizeHint().width())));
    view.setValuePanelsVisible(true);
    QVERIFY(view.headView(0)->panel(HeadView::ValuesPanel)->isVisible());
}

void TestCompareView::zoomIsShared()
{
    CompareView view;
    view.setEntries(threeModels(30, 16));
    view.resize(1400, 900);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    HeatmapView* probabilities = view.headView(1)->panel(HeadView::ProbabilitiesPanel);
    probabilities->setFocus();
    QTest::keyClick(probabilities, Qt::Key_Plus);
    QTest::keyClick(probabilities, Qt::Key_Plus);
    const double s = view.headView(1)->cellSize();
    QVERIFY(!view.headView(1)->isFitToWindow());
    QVERIFY(qFuzzyCompare(view.headView(0)->cellSize(), s));
    QVERIFY(qFuzzyCompare(view.headView(2)->cellSize(), s));
    QVERIFY(qFuzzyCompare(view.headView(2)->panel(HeadView::GatePanel)->cellSize(), s));
}

void TestCompareView::csvAndProvenance()
{
    CompareView view;
    view.setEntries(threeModels(7, 4));
    const QStringList lines = view.figureCsv().split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    QCOMPARE(lines.first(), QStringLiteral("model,panel,row,col,row_label,col_label,value"));
    QCOMPARE(lines.size(), 1 + 3 * 7 * 7 + 7); // the probabilities, + the gate column of the gated model
    view.setValuePanelsVisible(true);
    const int perHead = 7 * 7 + 2 * 7 * 4;
    // The gated model: its gate column and P.V after the gate.
    QCOMPARE(view.figureCsv().split(QLatin1Char('\n'), Qt::SkipEmptyParts).size(),
             1 + 3 * perHead + 7 + 7 * 4);
    QVERIFY(lines[1].startsWith(QStringLiteral("vanilla,probabilities,0,0,[CLS],[CLS],")));
    QVERIFY(
        lines.contains(QStringLiteral("\"clipped softmax, gamma -0.025\",probabilities,0,1,[CLS],the,0")));
    QVERIFY(lines.contains(QStringLiteral("gated attention,gate,0,0,[CLS],\u03c0,0.800000012")));
    const Provenance p = view.figureProvenance();
    QCOMPARE(p.model, QStringLiteral("models/vanilla | models/clipped | models/gated"));
    QCOMPARE(p.selection, QStringLiteral("layer 11, head 3"));
    QCOMPARE(p.input, QStringLiteral("the cat sat. / a cat, it sat."));
    QCOMPARE(view.figureName(), QStringLiteral("compare-L11-H3"));
}

void TestCompareView::distributionPanels()
{
    // Figure 14's per-row distribution: on request, for every model, kept when the entries change.
    CompareView view;
    view.setEntries(threeModels(13, 16));
    view.resize(1400, 900);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    for (int i = 0; i < 3; ++i)
        QVERIFY(!view.headView(i)->panel(HeadView::DistributionPanel)->isVisible());
    view.setDistributionPanelsVisible(true);
    view.setEntries(threeModels(20, 16));
    QTest::qWait(20);
    QVERIFY(view.distributionPanelsVisible());
    for (int i = 0; i < 3; ++i) {
        HeatmapView* distribution = view.headView(i)->panel(HeadView::DistributionPanel);
        QVERIFY(distribution->isVisible());
        QCOMPARE(distribution->data().rows, 20);
        // Inside the view, beside the probabilities.
        const QRect inView(distribution->mapTo(&view, QPoint(0, 0)), distribution->size());
        QVERIFY(view.rect().contains(inView));
    }
    // The clipped model's exact zeros are in column "0"; the vanilla model has none.
    QVERIFY(view.headView(1)->panel(HeadView::DistributionPanel)->data().at(0, 0) > 0.5f);
    QCOMPARE(view.headView(0)->panel(HeadView::DistributionPanel)->data().at(0, 0), 0.0f);
    QVERIFY(
        view.figureCsv().contains(QStringLiteral("\n\"clipped softmax, gamma -0.025\",distribution,0,0,")));
}

void TestCompareView::longInputWithDistribution()
{
    // Issue #40.12: three 512-token heads with the distribution panels on a 1280x800 window's page (about
    // 770 x 650 px) were stacked as ~110 px squares with 40% of the width empty and every title cut. Now the
    // arrangement is chosen by the cells each head really gets on screen, and rows thinner than a pixel
    // let the attention matrix's columns widen into the width.
    CompareView view;
    view.setEntries(threeModels(512, 64));
    view.setDistributionPanelsVisible(true);
    view.resize(770, 650);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QTest::qWait(20);
    QCOMPARE(view.orientation(), Qt::Vertical); // side by side, the panels' labels leave no room for cells
    for (int i = 0; i < 3; ++i) {
        HeadView* head = view.headView(i);
        HeatmapView* probabilities = head->panel(HeadView::ProbabilitiesPanel);
        HeatmapView* distribution = head->panel(HeadView::DistributionPanel);
        // The panels use the head's width: nothing to scroll, at most a sixth left over.
        const int right = distribution->mapTo(head, QPoint(distribution->width(), 0)).x();
        QVERIFY2(right <= head->width() && right >= head->width() * 5 / 6,
                 qPrintable(QStringLiteral("%1 of %2").arg(right).arg(head->width())));
        // Rows fill the height they have; columns are wider than rows, not narrower.
        QVERIFY2(512 * probabilities->cellHeight() >= 0.45 * head->height(),
                 qPrintable(QString::number(512 * probabilities->cellHeight())));
        QVERIFY(probabilities->cellWidth() > 2 * probabilities->cellHeight());
        QVERIFY(probabilities->cellWidth() <= 4 * probabilities->cellHeight() + 1e-9);
        // The whole matrix with its labels is inside the head (nothing cut at the bottom).
        QVERIFY(probabilities->height() <= head->height());
    }
}

QTEST_MAIN(TestCompareView)
#include "tst_compare_view.moc"
