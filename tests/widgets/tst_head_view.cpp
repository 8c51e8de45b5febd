// HeadView: the gate column only for gated models, the per-row distribution on request, rows aligned across
// panels, zoom and scroll shared, signals name the panel, long-format CSV, title 1-based.

#include "head_test_data.h"
#include "head_view.h"
#include "heatmap_view.h"

#include <QPainter>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTest>

#include <cmath>

using namespace outlierlens;

namespace {

QPoint cellCentre(const HeatmapView& view, int row, int col)
{
    const QRect area = view.cellArea();
    return QPoint(int(area.left() + (col + 0.5) * view.cellWidth() - view.horizontalScrollBar()->value()),
                  int(area.top() + (row + 0.5) * view.cellHeight() - view.verticalScrollBar()->value()));
}

QVector<HeatmapView*> shownPanels(const HeadView& view)
{
    QVector<HeatmapView*> panels;
    for (int p = HeadView::GatePanel; p < HeadView::kPanelCount; ++p)
        if (view.panel(HeadView::Panel(p))->isVisible()) panels << view.panel(HeadView::Panel(p));
    return panels;
}

} // namespace

class TestHeadView : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void gateColumnOnlyWithGates_data();
    void gateColumnOnlyWithGates();
    void rowsLineUpAcrossPanels();
    void zoomAndScrollTogether();
    void signalsNameThePanel();
    void valueColumnsNarrowerForWideHeads();
    void narrowWindowKeepsRowsReadable();
    void csvIsLongFormat_data();
    void csvIsLongFormat();
    void figureProvenance();
    void distributionPerRow();
    void distributionPanelOnRequest();
};

void TestHeadView::gateColumnOnlyWithGates_data()
{
    QTest::addColumn<bool>("gated");
    QTest::newRow("vanilla") << false;
    QTest::newRow("gated") << true;
}

void TestHeadView::gateColumnOnlyWithGates()
{
    QFETCH(bool, gated);
    HeadView view;
    view.setData(testdata::head(13, 16, gated, false));
    view.resize(1100, 500);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QCOMPARE(view.title(), QStringLiteral("Layer 11, head 3"));
    QCOMPARE(view.hasGatePanel(), gated);
    QCOMPARE(view.panel(HeadView::GatePanel)->isVisible(), gated);
    QVERIFY(view.panel(HeadView::ProbabilitiesPanel)->isVisible());
    QVERIFY(view.panel(HeadView::ValuesPanel)->isVisible());
    QVERIFY(view.panel(HeadView::ProductPanel)->isVisible());
    QCOMPARE(view.figureCsv().contains(QStringLiteral("\ngate,")), gated);
    if (gated) {
        QCOMPARE(view.panel(HeadView::GatePanel)->data().rows, 13);
        QCOMPARE(view.panel(HeadView::GatePanel)->data().cols, 1);
        QCOMPARE(view.panel(HeadView::GatePanel)->data().at(5, 0), 0.03f); // [SEP]
        // Figure 15: P.V after the gate, each token's row times its pi; the strip at least 12 px wide.
        const MatrixData& after = view.panel(HeadView::GatedProductPanel)->data();
        const MatrixData& before = view.panel(HeadView::ProductPanel)->data();
        QCOMPARE(after.rows, 13);
        QCOMPARE(after.at(5, 7), before.at(5, 7) * 0.03f);
        QCOMPARE(after.at(2, 0), before.at(2, 0) * view.data().gate[2]);
        QVERIFY(view.figureCsv().contains(QStringLiteral("\ngated product,")));
        view.setCellSize(3);
        QVERIFY(view.panel(HeadView::GatePanel)->cellWidth() >= HeadView::kMinGateWidth);
    }
    QCOMPARE(view.panel(HeadView::GatedProductPanel)->isVisible(), gated);
    // The same view with the other kind of model.
    view.setData(testdata::head(13, 16, !gated, false));
    QCOMPARE(view.panel(HeadView::GatePanel)->isVisible(), !gated);
}

void TestHeadView::rowsLineUpAcrossPanels()
{
    HeadView view;
    view.setData(testdata::head(13, 16, true, true));
    view.resize(1200, 520);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    const QVector<HeatmapView*> panels = shownPanels(view);
    QCOMPARE(panels.size(), 5); // gate, probabilities, V, P.V before and after the gate
    for (HeatmapView* panel : panels) {
        QVERIFY(qFuzzyCompare(panel->cellSize(), view.cellSize()));
        // Row 6 is at the same height in every panel.
        const QPoint centre = panel->viewport()->mapTo(&view, cellCentre(*panel, 6, 0));
        const QPoint reference = panels.first()->viewport()->mapTo(&view, cellCentre(*panels.first(), 6, 0));
        QCOMPARE(centre.y(), reference.y());
    }
    // The probabilities mark exact zeros for clipped softmax.
    QVERIFY(view.panel(HeadView::ProbabilitiesPanel)->marksExactZeros());
}

void TestHeadView::zoomAndScrollTogether()
{
    HeadView view;
    view.setData(testdata::head(40, 16, false, false));
    view.resize(1000, 420);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QVERIFY(view.isFitToWindow());
    HeatmapView* probabilities = view.panel(HeadView::ProbabilitiesPanel);
    probabilities->setFocus();
    QSignalSpy zoomed(&view, &HeadView::userZoomed);
    for (int i = 0; i < 4; ++i)
        QTest::keyClick(probabilities, Qt::Key_Plus);
    QCOMPARE(zoomed.size(), 4);
    QVERIFY(!view.isFitToWindow());
    for (HeatmapView* panel : shownPanels(view))
        QVERIFY(qFuzzyCompare(panel->cellSize(), probabilities->cellSize()));

    HeatmapView* values = view.panel(HeadView::ValuesPanel);
    QTRY_VERIFY(values->verticalScrollBar()->maximum() >= 30);
    values->verticalScrollBar()->setValue(30);
    for (HeatmapView* panel : shownPanels(view))
        QCOMPARE(panel->verticalScrollBar()->value(), 30);
    QCOMPARE(view.verticalScroll(), 30);

    QTest::keyClick(probabilities, Qt::Key_0);
    QVERIFY(view.isFitToWindow());
    for (HeatmapView* panel : shownPanels(view))
        QCOMPARE(panel->verticalScrollBar()->value(), 0);
}

void TestHeadView::signalsNameThePanel()
{
    HeadView view;
    view.setData(testdata::head(13, 16, true, false));
    view.resize(1200, 520);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QSignalSpy clicked(&view, &HeadView::cellClicked);
    QSignalSpy hovered(&view, &HeadView::cellHovered);
    HeatmapView* product = view.panel(HeadView::ProductPanel);
    QTest::mouseClick(product->viewport(), Qt::LeftButton, {}, cellCentre(*product, 2, 5));
    QCOMPARE(clicked.size(), 1);
    QCOMPARE(clicked.first(), (QVariantList{int(HeadView::ProductPanel), 2, 5}));
    HeatmapView* gate = view.panel(HeadView::GatePanel);
    QTest::mouseMove(gate->viewport(), cellCentre(*gate, 4, 0));
    QTRY_VERIFY(!hovered.isEmpty());
    QCOMPARE(hovered.last(), (QVariantList{int(HeadView::GatePanel), 4, 0}));
}

void TestHeadView::valueColumnsNarrowerForWideHeads()
{
    // 8 tokens and d_head 64: square value cells would make V eight times as wide as the attention
    // matrix; columns shrink so that V is at most a third as wide, and rows still line up.
    HeadView view;
    view.setData(testdata::head(8, 64, false, false));
    view.resize(1200, 520);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    HeatmapView* probabilities = view.panel(HeadView::ProbabilitiesPanel);
    HeatmapView* values = view.panel(HeadView::ValuesPanel);
    HeatmapView* product = view.panel(HeadView::ProductPanel);
    QVERIFY(qFuzzyCompare(probabilities->cellWidth(), probabilities->cellHeight()));
    QVERIFY(values->cellWidth() < values->cellHeight());
    QVERIFY(qFuzzyCompare(values->cellHeight(), probabilities->cellHeight()));
    QVERIFY(qFuzzyCompare(product->cellWidth(), values->cellWidth()));
    QVERIFY(values->cellWidth() >= 2);
    QVERIFY(qFuzzyCompare(values->cellWidth(), 2.0) ||
            64 * values->cellWidth() <= 8 * probabilities->cellWidth() / 3 + 1e-6);
    // Square cells again when the sequence is at least three times longer than the head is wide.
    view.setData(testdata::head(60, 16, false, false));
    QVERIFY(qFuzzyCompare(view.panel(HeadView::ValuesPanel)->cellWidth(),
                          view.panel(HeadView::ValuesPanel)->cellHeight()));
}

/// Issue #40.12: a gated head (five panels) in a 1280x800 window's page fills the page's height with
/// rows tall enough for token labels; the columns narrow instead (they had been squares of 1.7 px, the
/// attention matrix 110 px high in the top third of the page).
void TestHeadView::narrowWindowKeepsRowsReadable()
{
    HeadView view;
    view.setData(testdata::head(64, 64, true, false));
    view.resize(920, 680);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QVERIFY(view.isFitToWindow());
    HeatmapView* probabilities = view.panel(HeadView::ProbabilitiesPanel);
    QTRY_VERIFY2(probabilities->cellHeight() >= 7.5,
                 qPrintable(QStringLiteral("rows of %1 px").arg(probabilities->cellHeight())));
    QVERIFY(probabilities->cellWidth() < probabilities->cellHeight());
    QVERIFY(64 * probabilities->cellHeight() >= 0.7 * 680);
    // Everything fits the width: no panel is cut off.
    int right = 0;
    for (HeatmapView* panel : shownPanels(view))
        right = std::max(right, panel->mapTo(&view, QPoint(panel->width(), 0)).x());
    QVERIFY2(right <= view.width(), qPrintable(QStringLiteral("%1 of %2 px").arg(right).arg(view.width())));
    // A zoom by hand gives square cells again.
    view.setCellSize(6);
    QCOMPARE(probabilities->cellWidth(), probabilities->cellHeight());
}

void TestHeadView::csvIsLongFormat_data()
{
    QTest::addColumn<bool>("gated");
    QTest::newRow("vanilla") << false;
    QTest::newRow("gated") << true;
}

void TestHeadView::csvIsLongFormat()
{
    QFETCH(bool, gated);
    const int t = 13, d = 16;
    const HeadViewData data = testdata::head(t, d, gated, false);
    HeadView view;
    view.setData(data);
    const QStringList lines = view.figureCsv().split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    QCOMPARE(lines.first(), QStringLiteral("panel,row,col,row_label,col_label,value"));
    QCOMPARE(lines.size(), 1 + (gated ? t + t * d : 0) + t * t + 2 * t * d); // gated: pi and P.V after it
    // Query [CLS] (0) attending to key [SEP] (5); a value with its token and 0-based dimension.
    const QString attention = QStringLiteral("probabilities,0,5,[CLS],[SEP],%1")
                                  .arg(QString::asprintf("%.9g", double(data.probabilities.at(0, 5))));
    QVERIFY(lines.contains(attention));
    const QString value =
        QStringLiteral("values,2,7,cat,7,%1").arg(QString::asprintf("%.9g", double(data.values.at(2, 7))));
    QVERIFY(lines.contains(value));
    QVERIFY(lines.contains(QStringLiteral("product,12,15,[SEP],15,%1")
                               .arg(QString::asprintf("%.9g", double(data.product.at(12, 15))))));
    if (gated) QVERIFY(lines.contains(QStringLiteral("gate,5,0,[SEP],\u03c0,0.0299999993")));
}

void TestHeadView::figureProvenance()
{
    HeadView view;
    view.setData(testdata::head(13, 16, true, false));
    QCOMPARE(view.figureName(), QStringLiteral("head-L11-H3"));
    QCOMPARE(view.figureProvenance().selection, QStringLiteral("layer 11, head 3"));
    QCOMPARE(view.figureProvenance().model, QStringLiteral("sample_data/models/tiny-bert"));
    // The figure is drawn from the data at any size, shown or not.
    const QSize size = view.preferredFigureSize();
    QVERIFY(size.width() > size.height());
    QImage image(size, QImage::Format_RGB32);
    image.fill(Qt::black);
    QPainter painter(&image);
    view.paintFigure(painter, image.rect());
    painter.end();
    QCOMPARE(image.pixel(0, 0), qRgb(255, 255, 255)); // background filled
}

void TestHeadView::distributionPerRow()
{
    // Causal probabilities: query t sees keys 0..t, whatever the masked cells hold (here 0.25).
    MatrixData p;
    p.rows = p.cols = 4;
    p.causal = true;
    p.rowLabels =
        QStringList{QStringLiteral("a"), QStringLiteral("b"), QStringLiteral("c"), QStringLiteral("d")};
    p.values = {1.0f,  0.25f, 0.25f,        0.25f, //
                0.0f,  1.0f,  0.25f,        0.25f, //
                1e-9f, 0.3f,  0.7f - 1e-9f, 0.25f, //
                1e-8f, 5e-5f, 0.01f,        0.98995f};
    const MatrixData d = probabilityDistributionPerRow(p);
    QCOMPARE(d.rows, 4);
    QCOMPARE(d.cols, 11);
    QCOMPARE(d.rowLabels, p.rowLabels);
    QStringList labels{QStringLiteral("0"), QStringLiteral(">0")};
    for (const char* edge : {"1e-8", "1e-7", "1e-6", "1e-5", "1e-4", "1e-3", "0.01", "0.1", "0.5"})
        labels << QStringLiteral("\u2265") + QLatin1String(edge);
    QCOMPARE(d.colLabels, labels);
    // Expected shares, bin by bin, counted by hand.
    const QVector<QVector<float>> expected{
        {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},                   // p = 1
        {0.5f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.5f},             // an exact zero and 1
        {0, 1 / 3.f, 0, 0, 0, 0, 0, 0, 0, 1 / 3.f, 1 / 3.f}, // 1e-9, 0.3, 0.7
        {0, 0, 0.25f, 0, 0, 0.25f, 0, 0, 0.25f, 0, 0.25f}};  // 1e-8, 5e-5, 0.01, 0.99
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 11; ++c)
            QVERIFY2(std::abs(d.at(r, c) - expected[r][c]) < 1e-7f,
                     qPrintable(QStringLiteral("%1,%2").arg(r).arg(c)));
    // Without the mask every key counts: row 0 has three keys of 0.25 ([0.1, 0.5)) and one of 1.
    p.causal = false;
    QCOMPARE(probabilityDistributionPerRow(p).at(0, 9), 0.75f);
}

void TestHeadView::distributionPanelOnRequest()
{
    const int t = 13, d = 16;
    HeadView view;
    view.setData(testdata::head(t, d, false, true));
    view.resize(1400, 500);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QVERIFY(!view.panel(HeadView::DistributionPanel)->isVisible());
    QVERIFY(!view.figureCsv().contains(QStringLiteral("\ndistribution,")));
    view.setDistributionPanelVisible(true);
    QTest::qWait(20);
    HeatmapView* distribution = view.panel(HeadView::DistributionPanel);
    QVERIFY(distribution->isVisible());
    QCOMPARE(distribution->data().rows, t);
    // Right of the probabilities it describes, left of V; rows line up with the attention's.
    HeatmapView* probabilities = view.panel(HeadView::ProbabilitiesPanel);
    const int probabilitiesX = probabilities->mapTo(&view, QPoint(0, 0)).x();
    const int distributionX = distribution->mapTo(&view, QPoint(0, 0)).x();
    QVERIFY(probabilitiesX < distributionX);
    QVERIFY(distributionX < view.panel(HeadView::ValuesPanel)->mapTo(&view, QPoint(0, 0)).x());
    QCOMPARE(distribution->cellHeight(), probabilities->cellHeight());
    // The clipped test head has exact zeros: each row's share of them is in column "0".
    const MatrixData& probs = view.data().probabilities;
    for (int r = 0; r < t; ++r) {
        int zeros = 0;
        for (int c = 0; c < t; ++c)
            zeros += probs.at(r, c) == 0.0f ? 1 : 0;
        QCOMPARE(distribution->data().at(r, 0), float(zeros) / t);
    }
    QVERIFY(distribution->data().at(0, 0) > 0.5f);
    const QStringList lines = view.figureCsv().split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 1 + t * t + t * 11 + 2 * t * d);
    QVERIFY(lines.contains(QStringLiteral("distribution,0,0,[CLS],0,%1")
                               .arg(QString::asprintf("%.9g", double(distribution->data().at(0, 0))))));
}

QTEST_MAIN(TestHeadView)
#include "tst_head_view.moc"
