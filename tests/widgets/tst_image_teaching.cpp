// ImageView and TeachingView offscreen: hover, click and drop on real widgets, the overlay toggle,
// the optional data-set panel, the gate box and captions per model kind, size-independent figures
// and their CSV.

#include "image_view.h"
#include "teaching_view.h"

#include <QCheckBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QMimeData>
#include <QSignalSpy>
#include <QUrl>
#include <QtTest>

using outlierlens::ImageView;
using outlierlens::ImageViewData;
using outlierlens::TeachingData;
using outlierlens::TeachingView;

namespace {

constexpr int kGrid = 14;
constexpr int kTokens = 1 + kGrid * kGrid;

// A grey picture with two outlier patches, (3,7) and (0,13), where head 3 of layer 11 looks.
ImageViewData imageData(bool withDataset)
{
    ImageViewData d;
    d.image = QImage(224, 224, QImage::Format_RGB32);
    d.image.fill(QColor(128, 128, 128));
    d.credit = QStringLiteral("grey test card, CC0");
    d.gridRows = kGrid;
    d.gridCols = kGrid;
    d.layer = 9;
    d.head = 2;
    d.patchOutliers = QVector<float>(kGrid * kGrid, 0.0f);
    d.patchOutliers[3 * kGrid + 7] = 12;
    d.patchOutliers[0 * kGrid + 13] = 5;
    d.cumulativeAttention = QVector<float>(kGrid * kGrid, 0.5f);
    d.cumulativeAttention[3 * kGrid + 7] = 4.5f;
    d.clsCumulativeAttention = 2.5f;
    d.attention.rows = kTokens;
    d.attention.cols = kTokens;
    d.attention.values = QVector<float>(kTokens * kTokens, 1.0f / kTokens);
    d.meanAbsValueOutlierPatches = 0.1;
    d.meanAbsValueOtherPatches = 0.8;
    if (withDataset) {
        d.datasetPatchOutliers = QVector<float>(kGrid * kGrid, 1.0f);
        d.datasetPatchOutliers[0] = 300;
        d.datasetPatchOutliers[5 * kGrid + 6] = 42;
        d.datasetDescription = QStringLiteral("ImageNet validation, 500 images");
    }
    d.provenance.model = QStringLiteral("vit-s16");
    d.provenance.input = QStringLiteral("grey.png");
    return d;
}

TeachingData teachingData(const QString& kind)
{
    TeachingData d;
    d.modelDescription = kind;
    d.token = QStringLiteral("[SEP]");
    d.layer = 10;
    d.head = 2;
    d.ffnOutputMax = 120;
    d.layerNormMin = -3.25;
    d.layerNormMax = 18.5;
    d.softmaxInputMin = -30;
    d.softmaxInputMax = 45;
    d.largestProbability = 0.998;
    d.largestProbabilityKey = QStringLiteral("[SEP]");
    d.largestKeyIsSink = true;
    d.sinkProbability = 0.999;
    d.sinkTokens = QStringLiteral("[CLS], [SEP] and punctuation");
    d.contextNorm = 0.0123;
    d.clipped = kind == QLatin1String("clipped");
    d.gated = kind == QLatin1String("gated");
    d.gate = d.gated ? 0.002 : -1;
    d.outlierRule = QStringLiteral("6\u03c3");
    d.outlierTensor = QStringLiteral("ffn_out");
    d.keyOutliers = 3;
    d.keyInputMax = 120;
    d.tokenOutliers = 3;
    d.visibleKeys = 40;
    d.exactZeros = d.clipped ? 37 : 0;
    return d;
}

QImage renderFigure(const outlierlens::Figure& figure, const QSize& size)
{
    QImage image(size, QImage::Format_ARGB32);
    image.fill(Qt::transparent);
    QPainter painter(&image);
    figure.paintFigure(painter, QRect(QPoint(0, 0), size));
    return image;
}

} // namespace

class TestImageTeaching : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void hoverShowsPatch_data();
    void hoverShowsPatch();
    void clickEmitsPatch();
    void dropEmitsImagePath();
    void overlayToggleChangesPixels();
    void datasetPanelOnlyWithData();
    void emptyViewIsSafe();
    void imageFigureIndependentOfWidgetSize();
    void imageCsv();
    void cumulativeColourBarCoversCls();
    void teachingGateBoxOnlyWhenGated();
    void teachingCaptionPerKind();
    void teachingFigureIndependentOfWidgetSize();
    void teachingCsv();
};

void TestImageTeaching::hoverShowsPatch_data()
{
    QTest::addColumn<int>("row");
    QTest::addColumn<int>("col");
    QTest::addColumn<QString>("outliers");
    QTest::addColumn<QString>("attention");
    QTest::newRow("outlier patch") << 3 << 7 << "12 outliers in layer 10"
                                   << "cumulative attention 4.5";
    QTest::newRow("corner outlier") << 0 << 13 << "5 outliers in layer 10"
                                    << "cumulative attention 0.5";
    QTest::newRow("plain patch") << 13 << 0 << "0 outliers in layer 10"
                                 << "cumulative attention 0.5";
}

void TestImageTeaching::hoverShowsPatch()
{
    QFETCH(int, row);
    QFETCH(int, col);
    QFETCH(QString, outliers);
    QFETCH(QString, attention);
    ImageView view;
    view.setData(imageData(true));
    view.resize(1200, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QSignalSpy hovered(&view, &ImageView::patchHovered);

    const QRect patch = view.patchRect(row, col);
    QVERIFY(!patch.isEmpty());
    QMouseEvent move(QEvent::MouseMove, QPointF(patch.center()), view.mapToGlobal(QPointF(patch.center())),
                     Qt::NoButton, Qt::NoButton, Qt::NoModifier);
    QApplication::sendEvent(&view, &move);

    QCOMPARE(view.hoveredRow(), row);
    QCOMPARE(view.hoveredColumn(), col);
    QCOMPARE(hovered.count(), 1);
    QCOMPARE(hovered.first().at(0).toInt(), row);
    QCOMPARE(hovered.first().at(1).toInt(), col);
    const QString text = view.hoverText();
    QVERIFY2(text.startsWith(QStringLiteral("patch %1,%2").arg(row).arg(col)), qPrintable(text));
    QVERIFY2(text.contains(outliers), qPrintable(text));
    QVERIFY2(text.contains(attention), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("data set:")), qPrintable(text));
    QCOMPARE(view.toolTip(), text);

    // Leaving the view clears the hover.
    QEvent leave(QEvent::Leave);
    QApplication::sendEvent(&view, &leave);
    QCOMPARE(view.hoveredRow(), -1);
    QVERIFY(view.hoverText().isEmpty());
}

void TestImageTeaching::clickEmitsPatch()
{
    ImageView view;
    view.setData(imageData(false));
    view.resize(1000, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QSignalSpy clicked(&view, &ImageView::patchClicked);

    QTest::mouseClick(&view, Qt::LeftButton, Qt::NoModifier, view.patchRect(5, 2).center());
    QCOMPARE(clicked.count(), 1);
    QCOMPARE(clicked.first().at(0).toInt(), 5);
    QCOMPARE(clicked.first().at(1).toInt(), 2);

    QTest::mouseClick(&view, Qt::LeftButton, Qt::NoModifier, view.patchRect(0, 0).topLeft() + QPoint(1, 1));
    QCOMPARE(clicked.count(), 2);
    QCOMPARE(clicked.last().at(0).toInt(), 0);
    QCOMPARE(clicked.last().at(1).toInt(), 0);

    // Outside every grid (the title line) nothing is emitted.
    QTest::mouseClick(&view, Qt::LeftButton, Qt::NoModifier,
                      QPoint(view.width() / 2, view.patchRect(0, 0).top() - 40));
    QCOMPARE(clicked.count(), 2);
}

void TestImageTeaching::dropEmitsImagePath()
{
    ImageView view;
    view.resize(800, 600);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QVERIFY(view.acceptDrops());
    QSignalSpy dropped(&view, &ImageView::imageDropped);
    const QString path = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/images/chelsea_cat.png");
    const QPointF pos(400, 300);

    QMimeData text;
    text.setUrls({QUrl::fromLocalFile(QStringLiteral("/tmp/notes.txt"))});
    QDragEnterEvent refusedEnter(pos.toPoint(), Qt::CopyAction, &text, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&view, &refusedEnter);
    QVERIFY(!refusedEnter.isAccepted());
    QDropEvent refusedDrop(pos, Qt::CopyAction, &text, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&view, &refusedDrop);
    QCOMPARE(dropped.count(), 0);

    QMimeData image;
    image.setUrls({QUrl(QStringLiteral("https://example.org/remote.png")), QUrl::fromLocalFile(path)});
    QDragEnterEvent enter(pos.toPoint(), Qt::CopyAction, &image, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&view, &enter);
    QVERIFY(enter.isAccepted());
    QDropEvent drop(pos, Qt::CopyAction, &image, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&view, &drop);
    QCOMPARE(dropped.count(), 1);
    QCOMPARE(dropped.first().at(0).toString(), path);
}

void TestImageTeaching::overlayToggleChangesPixels()
{
    ImageView view;
    view.setData(imageData(false));
    view.resize(1000, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QVERIFY(view.isOverlayVisible());
    const QImage on = view.grab().toImage();

    auto* toggle = view.findChild<QCheckBox*>();
    QVERIFY(toggle);
    QVERIFY(toggle->isChecked());
    QTest::mouseClick(toggle, Qt::LeftButton);
    QVERIFY(!view.isOverlayVisible());
    const QImage off = view.grab().toImage();
    QCOMPARE(on.size(), off.size());
    QVERIFY(on != off);

    // The outlier patch is tinted only with the overlay; a patch without outliers keeps its pixels
    // away from the grid lines.
    const QPoint outlier = view.patchRect(3, 7).center();
    const QPoint plain = view.patchRect(8, 2).center();
    QVERIFY(on.pixelColor(outlier) != off.pixelColor(outlier));
    QCOMPARE(off.pixelColor(outlier), QColor(128, 128, 128));
    QCOMPARE(on.pixelColor(plain), off.pixelColor(plain));

    view.setOverlayVisible(true);
    QVERIFY(toggle->isChecked());
    QCOMPARE(view.grab().toImage(), on);
}

void TestImageTeaching::datasetPanelOnlyWithData()
{
    ImageView view;
    view.setData(imageData(false));
    const auto hasDatasetPanel = [&] {
        for (const QString& title : view.panelTitles())
            if (title.contains(QStringLiteral("data set"))) return true;
        return false;
    };
    QCOMPARE(view.panelTitles().size(), 4);
    QVERIFY(!hasDatasetPanel());
    const QImage without = renderFigure(view, QSize(1400, 900));

    view.setData(imageData(true));
    QCOMPARE(view.panelTitles().size(), 5);
    QVERIFY(hasDatasetPanel());
    const QImage with = renderFigure(view, QSize(1400, 900));
    QVERIFY(with != without);
    QVERIFY(view.preferredFigureSize().width() > 1000);
}

void TestImageTeaching::emptyViewIsSafe()
{
    ImageView view;
    view.resize(500, 400);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QVERIFY(view.patchRect(0, 0).isEmpty());
    QVERIFY(view.panelTitles().isEmpty());
    QSignalSpy clicked(&view, &ImageView::patchClicked);
    QTest::mouseClick(&view, Qt::LeftButton, Qt::NoModifier, QPoint(250, 200));
    QCOMPARE(clicked.count(), 0);
    QVERIFY(!renderFigure(view, QSize(300, 200)).isNull());
    QCOMPARE(view.figureCsv().section(QLatin1Char('\n'), 0, 0), QStringLiteral("quantity,row,col,value"));

    // Mismatched sizes (a bug upstream) draw "no data" instead of reading out of bounds.
    ImageViewData broken = imageData(true);
    broken.cumulativeAttention.resize(10);
    broken.datasetPatchOutliers.resize(3);
    broken.attention.values.resize(5);
    view.setData(broken);
    QVERIFY(!view.grab().isNull());
    QVERIFY(!view.figureCsv().contains(QStringLiteral("\ncumulative_attention,")));
}

void TestImageTeaching::imageFigureIndependentOfWidgetSize()
{
    ImageView view;
    view.setData(imageData(true));
    view.resize(420, 330);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    const QImage small = renderFigure(view, QSize(1400, 900));
    view.resize(1600, 1100);
    QCoreApplication::processEvents();
    const QImage large = renderFigure(view, QSize(1400, 900));
    QCOMPARE(small, large);
    // A different requested size gives a different drawing of the same data.
    QCOMPARE(renderFigure(view, QSize(700, 450)).size(), QSize(700, 450));
    QCOMPARE(view.figureName(), QStringLiteral("image-L10-L11-H3"));
    QCOMPARE(view.figureProvenance().model, QStringLiteral("vit-s16"));
    QVERIFY(view.figureProvenance().selection.contains(QStringLiteral("head 3 of layer 11")));
}

void TestImageTeaching::imageCsv()
{
    ImageView view;
    view.setData(imageData(false));
    QStringList lines = view.figureCsv().split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    QCOMPARE(lines.first(), QStringLiteral("quantity,row,col,value"));
    QVERIFY(lines.contains(QStringLiteral("patch_outliers,3,7,12")));
    QVERIFY(lines.contains(QStringLiteral("patch_outliers,13,13,0")));
    QVERIFY(lines.contains(QStringLiteral("cumulative_attention,3,7,4.5")));
    QVERIFY(lines.contains(QStringLiteral("cls_cumulative_attention,,,2.5")));
    QVERIFY(lines.contains(QStringLiteral("mean_abs_value_outlier_patches,,,0.1")));
    QVERIFY(lines.contains(QStringLiteral("mean_abs_value_other_patches,,,0.8")));
    const auto count = [&](const QString& prefix) {
        return std::count_if(lines.begin(), lines.end(),
                             [&](const QString& l) { return l.startsWith(prefix); });
    };
    QCOMPARE(count(QStringLiteral("patch_outliers,")), kGrid * kGrid);
    QCOMPARE(count(QStringLiteral("attention,")), kTokens * kTokens);
    QCOMPARE(count(QStringLiteral("dataset_patch_outliers,")), 0);

    view.setData(imageData(true));
    lines = view.figureCsv().split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    QCOMPARE(count(QStringLiteral("dataset_patch_outliers,")), kGrid * kGrid);
    QVERIFY(lines.contains(QStringLiteral("dataset_patch_outliers,0,0,300")));
    QVERIFY(lines.contains(QStringLiteral("dataset_patch_outliers,5,6,42")));
}

/// Issue #40.8: the cumulative-attention colour bar reaches the CLS cell's value when CLS, a sink, takes
/// more than any patch (the cell is not coloured beyond the bar).
void TestImageTeaching::cumulativeColourBarCoversCls()
{
    ImageViewData d = imageData(false);
    double patchMax = 0;
    for (float v : d.cumulativeAttention)
        patchMax = std::max(patchMax, double(v));
    d.clsCumulativeAttention = float(3 * patchMax + 1);
    QCOMPARE(outlierlens::ImageFigure::cumulativeColorMax(d), double(d.clsCumulativeAttention));
    d.clsCumulativeAttention = 0;
    QCOMPARE(outlierlens::ImageFigure::cumulativeColorMax(d), patchMax);
}

void TestImageTeaching::teachingGateBoxOnlyWhenGated()
{
    TeachingView view;
    const auto hasGate = [&] {
        for (const QString& title : view.boxTitles())
            if (title.startsWith(QStringLiteral("gate"))) return true;
        return false;
    };
    view.setData(teachingData(QStringLiteral("vanilla")));
    QVERIFY(!hasGate());
    QCOMPARE(view.boxTitles().size(), 7);
    QVERIFY(view.boxTitles().contains(QStringLiteral("softmax")));
    const QImage vanilla = renderFigure(view, QSize(1280, 720));

    view.setData(teachingData(QStringLiteral("clipped")));
    QVERIFY(!hasGate());
    QVERIFY(view.boxTitles().contains(QStringLiteral("clipped softmax")));

    view.setData(teachingData(QStringLiteral("gated")));
    QVERIFY(hasGate());
    QCOMPARE(view.boxTitles().size(), 8);
    QCOMPARE(view.boxTitles().indexOf(QStringLiteral("gate \u03c0")),
             view.boxTitles().indexOf(QStringLiteral("P \u00b7 V")) + 1);
    QVERIFY(renderFigure(view, QSize(1280, 720)) != vanilla);
}

void TestImageTeaching::teachingCaptionPerKind()
{
    // Issue #14.5: captions follow from the numbers, with the thresholds they state.
    TeachingView view;
    QCOMPARE(view.caption().count(QLatin1Char('\n')), 1);

    view.setData(teachingData(QStringLiteral("vanilla")));
    QCOMPARE(view.kind(), TeachingView::Kind::Vanilla);
    const QString vanilla = view.caption();
    QCOMPARE(vanilla.count(QLatin1Char('\n')), 1);
    QVERIFY2(vanilla.contains(QStringLiteral("puts 0.999 of its attention on sink tokens ([CLS], [SEP] and "
                                             "punctuation; at least 0.5: a sink) and adds")),
             qPrintable(vanilla));
    QVERIFY2(
        vanilla.contains(QStringLiteral("carries 3 values over 6\u03c3 in layer 10's ffn_out (max |x| 120): "
                                        "those are the outliers")),
        qPrintable(vanilla));
    // The key carries no outlier: the caption says so instead of calling a number an outlier.
    TeachingData clean = teachingData(QStringLiteral("vanilla"));
    clean.keyOutliers = 0;
    clean.keyInputMax = 1.38;
    view.setData(clean);
    QVERIFY2(view.caption().contains(QStringLiteral("No outlier at \u201c[SEP]\u201d: nothing over 6\u03c3")),
             qPrintable(view.caption()));
    QVERIFY2(!view.caption().contains(QStringLiteral("those are the outliers")), qPrintable(view.caption()));
    // A head that spreads its attention is not said to do nothing.
    TeachingData spread = teachingData(QStringLiteral("vanilla"));
    spread.largestProbability = 0.2;
    spread.sinkProbability = 0.3;
    view.setData(spread);
    QVERIFY2(view.caption().contains(QStringLiteral("it is not doing nothing")), qPrintable(view.caption()));
    // Most of the attention on an ordinary token (the synthetic model's "back7") is reading it: no sink.
    TeachingData reading = teachingData(QStringLiteral("vanilla"));
    reading.largestProbability = 0.601;
    reading.largestProbabilityKey = QStringLiteral("back7");
    reading.largestKeyIsSink = false;
    reading.sinkProbability = 0.12;
    view.setData(reading);
    QVERIFY2(view.caption().contains(
                 QStringLiteral("puts p = 0.601 on \u201cback7\u201d, which is no sink token")),
             qPrintable(view.caption()));
    QVERIFY2(!view.caption().contains(QStringLiteral("To do nothing")), qPrintable(view.caption()));
    // Attention spread over many sink tokens (background patches) is doing nothing, too.
    TeachingData patches = reading;
    patches.largestProbability = 0.2;
    patches.largestProbabilityKey = QStringLiteral("patch 0,0");
    patches.sinkProbability = 0.83;
    view.setData(patches);
    QVERIFY2(
        view.caption().contains(QStringLiteral("To do nothing, the head puts 0.83 of its attention on sink")),
        qPrintable(view.caption()));
    QCOMPARE(view.caption().count(QLatin1Char('\n')), 1);
    // Layer 1 reads the embeddings: no earlier layer.
    TeachingData first = teachingData(QStringLiteral("vanilla"));
    first.keyOutliers = -1;
    view.setData(first);
    QVERIFY2(view.caption().contains(QStringLiteral("reads the embeddings")), qPrintable(view.caption()));

    view.setData(teachingData(QStringLiteral("clipped")));
    QCOMPARE(view.kind(), TeachingView::Kind::Clipped);
    const QString clipped = view.caption();
    QVERIFY2(clipped.contains(QStringLiteral("37 of this query's 40 probabilities are exactly 0")),
             qPrintable(clipped));
    TeachingData off = teachingData(QStringLiteral("clipped"));
    off.exactZeros = off.visibleKeys;
    off.largestProbability = 0;
    view.setData(off);
    QVERIFY2(view.caption().contains(QStringLiteral("all 40 of this query's probabilities are exactly 0: the "
                                                    "head is switched off")),
             qPrintable(view.caption()));
    QVERIFY2(!view.caption().contains(QStringLiteral("p = 0 on")), qPrintable(view.caption()));

    view.setData(teachingData(QStringLiteral("gated")));
    QCOMPARE(view.kind(), TeachingView::Kind::Gated);
    const QString gated = view.caption();
    QVERIFY2(gated.contains(QStringLiteral("gate is closed (\u03c0 = 0.002 < 0.1)")), qPrintable(gated));
    TeachingData initial = teachingData(QStringLiteral("gated"));
    initial.gate = 0.257; // the initial gate value is not "closed"
    view.setData(initial);
    QVERIFY2(view.caption().contains(QStringLiteral("half open (\u03c0 = 0.257, between 0.1 and 0.5)")),
             qPrintable(view.caption()));

    QVERIFY(vanilla != clipped && clipped != gated && vanilla != gated);
}

void TestImageTeaching::teachingFigureIndependentOfWidgetSize()
{
    TeachingView view;
    view.setData(teachingData(QStringLiteral("gated")));
    view.resize(500, 300);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    const QImage before = renderFigure(view, QSize(1280, 720));
    view.resize(1700, 1000);
    QCoreApplication::processEvents();
    QCOMPARE(renderFigure(view, QSize(1280, 720)), before);
    // The widget shows the same drawing at its own size.
    view.resize(1280, 720);
    QCoreApplication::processEvents();
    QCOMPARE(view.grab().toImage().convertToFormat(QImage::Format_ARGB32), before);
    QCOMPARE(view.figureName(), QStringLiteral("teaching-L11-H3"));
}

void TestImageTeaching::teachingCsv()
{
    TeachingView view;
    TeachingData data = teachingData(QStringLiteral("vanilla"));
    data.largestProbabilityKey = QStringLiteral(",");
    view.setData(data);
    QStringList lines = view.figureCsv().split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    QCOMPARE(lines.first(), QStringLiteral("quantity,value"));
    QVERIFY(lines.contains(QStringLiteral("token,[SEP]")));
    QVERIFY(lines.contains(QStringLiteral("layer_1_based,11")));
    QVERIFY(lines.contains(QStringLiteral("head_1_based,3")));
    QVERIFY(lines.contains(QStringLiteral("ffn_output_max,120")));
    QVERIFY(lines.contains(QStringLiteral("softmax_input_min,-30")));
    QVERIFY(lines.contains(QStringLiteral("softmax_input_max,45")));
    QVERIFY(lines.contains(QStringLiteral("largest_probability,0.998")));
    QVERIFY(lines.contains(QStringLiteral("largest_probability_key,\",\"")));
    QVERIFY(lines.contains(QStringLiteral("context_norm,0.0123")));
    QVERIFY(!view.figureCsv().contains(QStringLiteral("gate,")));

    view.setData(teachingData(QStringLiteral("gated")));
    lines = view.figureCsv().split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    QVERIFY(lines.contains(QStringLiteral("gate,0.002")));
}

QTEST_MAIN(TestImageTeaching)
#include "tst_image_teaching.moc"
