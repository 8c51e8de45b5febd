// HeatmapView: hover tooltips name the exact value and both labels, clicks map to cells, zoom and pan
// keep the mapping right, exact zeros are marked (and tiny non-zeros are not), CSV.

#include "colormap.h"
#include "figure_style.h"
#include "head_test_data.h"
#include "heatmap_view.h"

#include <QFontMetricsF>
#include <QPainter>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTest>
#include <QToolTip>
#include <QWheelEvent>

using namespace outlierlens;

namespace {

int colorDistance(QRgb a, QRgb b)
{
    return std::max(
        {std::abs(qRed(a) - qRed(b)), std::abs(qGreen(a) - qGreen(b)), std::abs(qBlue(a) - qBlue(b))});
}

MatrixData labelledRamp(int rows, int cols)
{
    MatrixData m = testdata::ramp(rows, cols);
    for (int r = 0; r < rows; ++r)
        m.rowLabels << QStringLiteral("q%1").arg(r);
    for (int c = 0; c < cols; ++c)
        m.colLabels << QStringLiteral("k%1").arg(c);
    m.rowTitle = QStringLiteral("query token");
    m.colTitle = QStringLiteral("key token");
    m.valueTitle = QStringLiteral("attention probability");
    return m;
}

/// Centre of a cell in viewport coordinates, computed from the cell size and the scroll bars (not from
/// the view's own mapping functions).
QPoint cellCentre(const HeatmapView& view, int row, int col)
{
    const QRect area = view.cellArea();
    const double s = view.cellSize();
    return QPoint(int(area.left() + (col + 0.5) * s - view.horizontalScrollBar()->value()),
                  int(area.top() + (row + 0.5) * s - view.verticalScrollBar()->value()));
}

void sendCtrlWheel(QWidget* viewport, const QPoint& pos, int delta)
{
    QWheelEvent event(pos, viewport->mapToGlobal(pos), QPoint(), QPoint(0, delta), Qt::NoButton,
                      Qt::ControlModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(viewport, &event);
}

void sendMouse(QWidget* viewport, QEvent::Type type, const QPoint& pos, Qt::MouseButton button,
               Qt::MouseButtons buttons)
{
    QMouseEvent event(type, pos, viewport->mapToGlobal(pos), button, buttons, Qt::NoModifier);
    QApplication::sendEvent(viewport, &event);
}

QImage renderFigure(const HeatmapView& view, const QSize& size)
{
    QImage image(size, QImage::Format_RGB32);
    QPainter painter(&image);
    view.paintFigure(painter, QRect(QPoint(0, 0), size));
    return image;
}

} // namespace

class TestHeatmap : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void hoverShowsValueAndLabels_data();
    void hoverShowsValueAndLabels();
    void clickEmitsCell();
    void exactZerosAreMarked_data();
    void exactZerosAreMarked();
    void causalMaskIsDrawnAsMasked();
    void zoomKeepsCellMapping();
    void dragPans();
    void highlightedRowIsOutlined();
    void csvIsLongFormat();
    void largeMatrixLevelOfDetailKeepsCells();
    void everyTokenLabelledWhenThereIsRoom();
};

void TestHeatmap::hoverShowsValueAndLabels_data()
{
    QTest::addColumn<int>("row");
    QTest::addColumn<int>("col");
    QTest::newRow("first cell") << 0 << 0;
    QTest::newRow("middle") << 7 << 11;
    QTest::newRow("last cell") << 19 << 19;
}

void TestHeatmap::hoverShowsValueAndLabels()
{
    QFETCH(int, row);
    QFETCH(int, col);
    HeatmapView view;
    const MatrixData data = labelledRamp(20, 20);
    view.setData(data, ColorScale::Sequential);
    view.resize(600, 560);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QSignalSpy hovered(&view, &HeatmapView::cellHovered);

    QTest::mouseMove(view.viewport(), cellCentre(view, row, col));
    QTRY_VERIFY(!hovered.isEmpty());
    QCOMPARE(hovered.last().at(0).toInt(), row);
    QCOMPARE(hovered.last().at(1).toInt(), col);
    QTRY_VERIFY(QToolTip::isVisible());
    const QString tip = QToolTip::text();
    const QString value = QString::asprintf("%.6g", double(data.at(row, col)));
    QVERIFY2(tip.contains(value), qPrintable(tip + " lacks " + value));
    QVERIFY2(tip.contains(QStringLiteral("query token: q%1 (position %1)").arg(row)), qPrintable(tip));
    QVERIFY2(tip.contains(QStringLiteral("key token: k%1 (position %1)").arg(col)), qPrintable(tip));
    QVERIFY(tip.contains(QStringLiteral("attention probability")));
    QToolTip::hideText();
}

void TestHeatmap::clickEmitsCell()
{
    HeatmapView view;
    view.setData(labelledRamp(12, 30), ColorScale::Diverging);
    view.resize(700, 400);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QSignalSpy clicked(&view, &HeatmapView::cellClicked);
    QTest::mouseClick(view.viewport(), Qt::LeftButton, {}, cellCentre(view, 4, 27));
    QCOMPARE(clicked.size(), 1);
    QCOMPARE(clicked.first().at(0).toInt(), 4);
    QCOMPARE(clicked.first().at(1).toInt(), 27);
    // Outside the matrix (the title area): nothing.
    QTest::mouseClick(view.viewport(), Qt::LeftButton, {}, QPoint(2, 2));
    QCOMPARE(clicked.size(), 1);
}

void TestHeatmap::exactZerosAreMarked_data()
{
    QTest::addColumn<int>("size");   // matrix side
    QTest::addColumn<int>("pixels"); // figure side
    QTest::addColumn<bool>("mark");
    // 8 cells in 400 pixels: ~40-pixel cells get a cross; 100 cells: ~3-pixel cells are filled grey.
    QTest::newRow("big cells, marked") << 8 << 400 << true;
    QTest::newRow("tiny cells, marked") << 100 << 420 << true;
    QTest::newRow("big cells, not marked") << 8 << 400 << false;
}

void TestHeatmap::exactZerosAreMarked()
{
    QFETCH(int, size);
    QFETCH(int, pixels);
    QFETCH(bool, mark);
    MatrixData data = testdata::ramp(size, size);
    const int r = size / 2, zeroCol = size / 2 - 2, tinyCol = size / 2 + 2;
    data.values[r * size + zeroCol] = 0.0f;
    data.values[r * size + tinyCol] = 1e-7f;
    HeatmapView view;
    view.setMarkExactZeros(mark);
    view.setData(data, ColorScale::Sequential);
    const QImage image = renderFigure(view, QSize(pixels, pixels));
    const QRectF zeroCell = view.figureCellRect(image.rect(), r, zeroCol);
    const QRectF tinyCell = view.figureCellRect(image.rect(), r, tinyCol);
    QVERIFY(image.rect().contains(zeroCell.center().toPoint()));

    const QRgb zeroColour = ColorMap::color(ColorScale::Sequential, 0.0, view.colorMaximum()).rgb();
    const QRgb tinyColour = ColorMap::color(ColorScale::Sequential, 1e-7, view.colorMaximum()).rgb();
    const QRgb atZero = image.pixel(zeroCell.center().toPoint());
    const QRgb atTiny = image.pixel(tinyCell.center().toPoint());
    // The tiny non-zero value is never marked: its centre has the colour map's colour.
    QVERIFY2(colorDistance(atTiny, tinyColour) <= 3, qPrintable(QColor(atTiny).name()));
    if (mark) {
        QVERIFY2(colorDistance(atZero, zeroColour) > 60, qPrintable(QColor(atZero).name()));
        if (zeroCell.width() < 6) // too small for a cross: grey fill
            QVERIFY2(colorDistance(atZero, qRgb(150, 150, 150)) <= 3, qPrintable(QColor(atZero).name()));
    } else {
        QVERIFY2(colorDistance(atZero, zeroColour) <= 3, qPrintable(QColor(atZero).name()));
    }
    QCOMPARE(view.cellToolTip(r, zeroCol).contains(QStringLiteral("exactly 0")), mark);
    QVERIFY(!view.cellToolTip(r, tinyCol).contains(QStringLiteral("exactly 0")));
    QVERIFY(view.cellToolTip(r, tinyCol).contains(QStringLiteral("1e-07")));
}

void TestHeatmap::causalMaskIsDrawnAsMasked()
{
    // A decoder's attention: keys after the query are masked (probability 0, never computed).
    const int size = 8;
    MatrixData data = labelledRamp(size, size);
    for (int r = 0; r < size; ++r)
        for (int c = r + 1; c < size; ++c)
            data.values[r * size + c] = 0.0f;
    data.values[5 * size + 1] = 0.0f; // a real exact zero below the diagonal (clipped softmax)
    data.values[0 * size + 7] = 0.9f; // whatever a masked cell holds, it is drawn as masked
    data.causal = true;
    HeatmapView view;
    view.setMarkExactZeros(true);
    view.setData(data, ColorScale::Sequential);
    const QImage image = renderFigure(view, QSize(400, 400));
    const QRgb masked = image.pixel(view.figureCellRect(image.rect(), 1, 6).center().toPoint());
    const QRgb zeroColour = ColorMap::color(ColorScale::Sequential, 0.0, view.colorMaximum()).rgb();
    // Masked cells are light grey: neither the colour of 0 nor the exact-zero marker.
    QVERIFY2(colorDistance(masked, qRgb(228, 228, 228)) <= 3, qPrintable(QColor(masked).name()));
    QVERIFY(colorDistance(masked, zeroColour) > 60);
    // The real zero below the diagonal is still a crossed cell of the colour of 0 (looked at near the
    // middle of its top edge, away from the cross's diagonals).
    const QRectF zeroCell = view.figureCellRect(image.rect(), 5, 1);
    const QRgb realZero =
        image.pixel(QPointF(zeroCell.center().x(), zeroCell.top() + 0.12 * zeroCell.height()).toPoint());
    QVERIFY2(colorDistance(realZero, zeroColour) <= 3, qPrintable(QColor(realZero).name()));
    QVERIFY(view.cellToolTip(1, 6).contains(QStringLiteral("masked")));
    QVERIFY(!view.cellToolTip(1, 6).contains(QStringLiteral("exactly 0")));
    QVERIFY(view.cellToolTip(5, 1).contains(QStringLiteral("exactly 0")));
    // The colour scale ignores masked cells: its maximum is the largest unmasked value.
    float largest = 0;
    for (int r = 0; r < size; ++r)
        for (int c = 0; c <= r; ++c)
            largest = std::max(largest, data.values[r * size + c]);
    QCOMPARE(view.colorMaximum(), double(largest));

    // Without the flag the same matrix is coloured as values.
    data.causal = false;
    view.setMarkExactZeros(false);
    view.setData(data, ColorScale::Sequential);
    const QImage plain = renderFigure(view, QSize(400, 400));
    QVERIFY(colorDistance(plain.pixel(view.figureCellRect(plain.rect(), 1, 6).center().toPoint()),
                          qRgb(228, 228, 228)) > 30);
}

void TestHeatmap::zoomKeepsCellMapping()
{
    HeatmapView view;
    view.setData(labelledRamp(40, 40), ColorScale::Sequential);
    view.resize(520, 480);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setFocus();
    QVERIFY(view.isFitToWindow());
    const double fit = view.cellSize();
    QSignalSpy zoomed(&view, &HeatmapView::userZoomed);

    QTest::keyClick(&view, Qt::Key_Plus);
    QCOMPARE(zoomed.size(), 1);
    QVERIFY(!view.isFitToWindow());
    QVERIFY(qFuzzyCompare(view.cellSize(), fit * 1.25));

    // Ctrl+wheel over a cell zooms around it: the same cell stays under the mouse.
    const QPoint anchor = cellCentre(view, 10, 12);
    sendCtrlWheel(view.viewport(), anchor, 120);
    QVERIFY(qFuzzyCompare(view.cellSize(), fit * 1.25 * 1.25));
    int row = -1, col = -1;
    QVERIFY(view.cellAt(anchor, &row, &col));
    QCOMPARE(row, 10);
    QCOMPARE(col, 12);
    sendCtrlWheel(view.viewport(), anchor, 240);
    QVERIFY(view.horizontalScrollBar()->maximum() > 0); // now larger than the window

    // Hovering after zoom and scroll still names the right cell.
    view.horizontalScrollBar()->setValue(view.horizontalScrollBar()->maximum() / 2);
    view.verticalScrollBar()->setValue(view.verticalScrollBar()->maximum() / 3);
    QSignalSpy hovered(&view, &HeatmapView::cellHovered);
    const QRect area = view.cellArea();
    const int visibleCol = int((view.horizontalScrollBar()->value() + area.width() / 2) / view.cellSize());
    const int visibleRow = int((view.verticalScrollBar()->value() + area.height() / 2) / view.cellSize());
    QTest::mouseMove(view.viewport(), cellCentre(view, visibleRow, visibleCol));
    QTRY_VERIFY(!hovered.isEmpty());
    QCOMPARE(hovered.last().at(0).toInt(), visibleRow);
    QCOMPARE(hovered.last().at(1).toInt(), visibleCol);
    QTRY_VERIFY(QToolTip::text().contains(QStringLiteral("q%1 ").arg(visibleRow)));
    QToolTip::hideText();

    // 0 fits the window again; - at the fit stays there.
    QTest::keyClick(&view, Qt::Key_0);
    QVERIFY(view.isFitToWindow());
    QCOMPARE(view.horizontalScrollBar()->maximum(), 0);
    // The scroll bars hide after the event loop runs; the fit follows the larger viewport.
    QTRY_VERIFY(qFuzzyCompare(view.cellSize(), fit));
    QTest::keyClick(&view, Qt::Key_Minus);
    QVERIFY(view.isFitToWindow());
    QVERIFY(qFuzzyCompare(view.cellSize(), fit));
}

void TestHeatmap::dragPans()
{
    HeatmapView view;
    view.setData(labelledRamp(64, 64), ColorScale::Diverging);
    view.resize(400, 400);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setCellSize(20);
    view.horizontalScrollBar()->setValue(100);
    view.verticalScrollBar()->setValue(100);
    QSignalSpy clicked(&view, &HeatmapView::cellClicked);
    const QPoint start = view.cellArea().center();
    QWidget* vp = view.viewport();
    sendMouse(vp, QEvent::MouseButtonPress, start, Qt::LeftButton, Qt::LeftButton);
    sendMouse(vp, QEvent::MouseMove, start + QPoint(-10, -5), Qt::NoButton, Qt::LeftButton);
    sendMouse(vp, QEvent::MouseMove, start + QPoint(-50, -40), Qt::NoButton, Qt::LeftButton);
    sendMouse(vp, QEvent::MouseButtonRelease, start + QPoint(-50, -40), Qt::LeftButton, Qt::NoButton);
    QCOMPARE(view.horizontalScrollBar()->value(), 150);
    QCOMPARE(view.verticalScrollBar()->value(), 140);
    QCOMPARE(clicked.size(), 0); // a drag is not a click
}

void TestHeatmap::highlightedRowIsOutlined()
{
    HeatmapView view;
    view.setData(labelledRamp(10, 10), ColorScale::Sequential);
    view.setHighlightedRows({3});
    QCOMPARE(view.highlightedRows(), QVector<int>{3});
    const QImage image = renderFigure(view, QSize(400, 400));
    const QRectF cell = view.figureCellRect(image.rect(), 3, 5);
    const QRgb orange = FigureStyle::highlight().rgb();
    const QPoint onEdge(int(cell.center().x()), int(std::floor(cell.top())));
    QVERIFY2(colorDistance(image.pixel(onEdge), orange) <= 40 ||
                 colorDistance(image.pixel(onEdge - QPoint(0, 1)), orange) <= 40,
             qPrintable(QColor(image.pixel(onEdge)).name()));
    // A row that is not highlighted has no outline.
    const QRectF other = view.figureCellRect(image.rect(), 7, 5);
    QVERIFY(colorDistance(image.pixel(int(other.center().x()), int(other.top()) + 1), orange) > 40);
}

void TestHeatmap::csvIsLongFormat()
{
    MatrixData data = labelledRamp(3, 4);
    data.rowLabels[1] = QStringLiteral("a,\"b\"");
    HeatmapView view;
    view.setData(data, ColorScale::Sequential);
    const QStringList lines = view.figureCsv().split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 1 + 3 * 4);
    QCOMPARE(lines.first(), QStringLiteral("row,col,row_label,col_label,value"));
    QCOMPARE(
        lines[1 + 1 * 4 + 2],
        QStringLiteral("1,2,\"a,\"\"b\"\"\",k2,%1").arg(QString::asprintf("%.9g", double(data.at(1, 2)))));
    // Values read back exactly.
    QCOMPARE(lines.last().section(QLatin1Char(','), -1).toFloat(), data.at(2, 3));

    // Issue #40.5: a causal matrix's masked cells (key after query) are empty, its exact zeros are 0.
    MatrixData causal = labelledRamp(3, 3);
    causal.causal = true;
    causal.values[1 * 3 + 0] = 0.0f; // an exact zero the model computed
    view.setData(causal, ColorScale::Sequential);
    const QStringList rows = view.figureCsv().split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c) {
            const QString value = rows[1 + r * 3 + c].section(QLatin1Char(','), -1);
            QVERIFY2(c > r ? value.isEmpty() : !value.isEmpty(), qPrintable(rows[1 + r * 3 + c]));
        }
    QCOMPARE(rows[1 + 1 * 3 + 0].section(QLatin1Char(','), -1), QStringLiteral("0"));
}

QTEST_MAIN(TestHeatmap)
void TestHeatmap::largeMatrixLevelOfDetailKeepsCells()
{
    // A 2,048-token attention matrix zoomed out to fit: cells are well below a pixel. Three single hot
    // cells (attention sinks) must stay visible where they are, and hover must name the cell under
    // the mouse exactly as at any zoom.
    const int n = 2048;
    MatrixData data;
    data.rows = data.cols = n;
    data.values = QVector<float>(qsizetype(n) * n, 0.001f);
    const QVector<QPoint> hot = {{700, 1500}, {2040, 3}, {0, 2047}}; // (col, row)
    for (const QPoint& p : hot)
        data.values[qsizetype(p.y()) * n + p.x()] = 1.0f;
    data.rowTitle = QStringLiteral("query token");
    data.colTitle = QStringLiteral("key token");
    HeatmapView view;
    view.setData(data, ColorScale::Sequential);
    view.resize(900, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QVERIFY(view.isFitToWindow());
    const double s = view.cellSize();
    QVERIFY2(s < 0.5, qPrintable(QString::number(s)));
    QCOMPARE(view.colorMaximum(), 1.0);

    const QImage image = view.viewport()->grab().toImage().convertToFormat(QImage::Format_RGB32);
    const QRgb hotColour = ColorMap::color(ColorScale::Sequential, 1.0, 1.0).rgb();
    const QRgb coldColour = ColorMap::color(ColorScale::Sequential, 0.001, 1.0).rgb();
    const QPointF origin = view.cellOrigin();
    const int block = int(std::ceil(1.0 / s)); // cells per pixel of the level of detail, at most
    QVector<QPoint> hotPixels;
    // The matrix, not the colour bar beside it.
    const QRect cells = QRectF(origin, QSizeF(n * s, n * s)).toAlignedRect().intersected(view.cellArea());
    for (int y = cells.top(); y <= cells.bottom() && y < image.height(); ++y)
        for (int x = cells.left(); x <= cells.right() && x < image.width(); ++x)
            if (colorDistance(image.pixel(x, y), hotColour) <= 8) hotPixels << QPoint(x, y);
    QVERIFY2(!hotPixels.isEmpty(), "the hot cells vanished when zoomed out");
    QVector<bool> found(hot.size(), false);
    for (const QPoint& px : hotPixels) {
        // The view maps a position to cells by geometry alone; a pixel straddling the matrix's edge
        // is drawn but belongs to no cell.
        const int col = int(std::floor((px.x() - origin.x()) / s));
        const int row = int(std::floor((px.y() - origin.y()) / s));
        int r = -1, c = -1;
        if (view.cellAt(px, &r, &c)) {
            QCOMPARE(r, row);
            QCOMPARE(c, col);
        } else {
            QVERIFY2(row >= -1 && row <= n && col >= -1 && col <= n,
                     qPrintable(QStringLiteral("hot pixel at %1,%2").arg(px.x()).arg(px.y())));
        }
        // Every hot pixel lies over (or within one block of) a hot cell: nothing shifted.
        bool near = false;
        for (int i = 0; i < hot.size(); ++i)
            if (std::abs(col - hot[i].x()) <= block && std::abs(row - hot[i].y()) <= block) {
                near = true;
                found[i] = true;
            }
        QVERIFY2(near, qPrintable(QStringLiteral("hot pixel at cell %1,%2").arg(row).arg(col)));
    }
    for (int i = 0; i < hot.size(); ++i)
        QVERIFY2(found[i],
                 qPrintable(QStringLiteral("hot cell %1,%2 not drawn").arg(hot[i].y()).arg(hot[i].x())));
    // Elsewhere the cells keep their colour.
    const QPoint cold(int(origin.x() + 1000.5 * s), int(origin.y() + 200.5 * s));
    QVERIFY(colorDistance(image.pixel(cold), coldColour) <= 8);

    // Hovering a hot pixel names the cell under it (its value, labels and positions).
    int row = -1, col = -1;
    const auto inside = std::find_if(hotPixels.begin(), hotPixels.end(),
                                     [&](const QPoint& p) { return view.cellAt(p, &row, &col); });
    QVERIFY(inside != hotPixels.end());
    const QPoint px = *inside;
    QSignalSpy hovered(&view, &HeatmapView::cellHovered);
    QTest::mouseMove(view.viewport(), px);
    QTRY_VERIFY(!hovered.isEmpty());
    QCOMPARE(hovered.last().at(0).toInt(), row);
    QCOMPARE(hovered.last().at(1).toInt(), col);
    QTRY_VERIFY(QToolTip::isVisible());
    const QString tip = QToolTip::text();
    QVERIFY2(tip.contains(QStringLiteral("(position %1)").arg(row)), qPrintable(tip));
    QVERIFY2(tip.contains(QStringLiteral("(position %1)").arg(col)), qPrintable(tip));
    QVERIFY2(tip.contains(QString::asprintf("%.6g", double(data.at(row, col)))), qPrintable(tip));
    QToolTip::hideText();

    // Zoomed in on the sink at row 1500, column 700: the cell under its centre is exactly it.
    view.setCellSize(10);
    view.horizontalScrollBar()->setValue(700 * 10 - 200);
    view.verticalScrollBar()->setValue(1500 * 10 - 200);
    const QPoint centre = cellCentre(view, 1500, 700);
    QVERIFY(view.cellAt(centre, &row, &col));
    QCOMPARE(row, 1500);
    QCOMPARE(col, 700);
    const QImage zoomed = view.viewport()->grab().toImage().convertToFormat(QImage::Format_RGB32);
    QVERIFY(colorDistance(zoomed.pixel(centre), hotColour) <= 8);
    QVERIFY(colorDistance(zoomed.pixel(cellCentre(view, 1500, 701)), coldColour) <= 8);
    QVERIFY(view.cellToolTip(1500, 700).contains(QStringLiteral("1\n")));
}

/// Issue #14.9: token axes labelled only every other token although each row had room for its label.
/// Rows as high as a line of the label font get every label, rows and (rotated) key columns alike;
/// only rows too low for their labels get fewer.
void TestHeatmap::everyTokenLabelledWhenThereIsRoom()
{
    MatrixData data = testdata::ramp(20, 20);
    for (int i = 0; i < 20; ++i)
        data.rowLabels << QStringLiteral("token%1").arg(i);
    data.colLabels = data.rowLabels;
    HeatmapView view;
    view.setData(data, ColorScale::Sequential);
    const double line = std::ceil(QFontMetricsF(view.font()).height());
    view.resize(int(40 * line + 300), int(24 * line + 200));
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setCellSize(line);
    QTest::qWait(20);
    QCOMPARE(view.shownRowLabels(), data.rowLabels);
    QCOMPARE(view.shownColumnLabels(), data.colLabels);
    // Half a line per row: every other token (labels would touch otherwise).
    view.setCellSize(line / 2);
    QTest::qWait(20);
    QStringList everyOther;
    for (int i = 0; i < 20; i += 2)
        everyOther << data.rowLabels[i];
    QCOMPARE(view.shownRowLabels(), everyOther);
    // Without row labels the panel has no room left of its first column: a label there would be cut in
    // half (the compact Compare page's attention beside its gate strip), so it is left out.
    view.setCellSize(line / 8);
    QTest::qWait(20);
    QCOMPARE(view.shownColumnLabels().value(0), QStringLiteral("0"));
    view.setRowLabelsVisible(false);
    QTest::qWait(20);
    QCOMPARE(view.shownColumnLabels().value(0), QStringLiteral("10"));
    view.setRowLabelsVisible(true);
    // A fifth of a line: positions, as a ruler.
    view.setCellSize(line / 5);
    QTest::qWait(20);
    QCOMPARE(view.shownRowLabels(), (QStringList{QStringLiteral("0"), QStringLiteral("5"),
                                                 QStringLiteral("10"), QStringLiteral("15")}));
}

#include "tst_heatmap.moc"
