// Figure export: PNG/SVG/PDF read back with their size, DPI and provenance metadata; CSV with provenance
// comment lines; failures name the path and leave no file; the export dialog.

#include "export_dialog.h"
#include "figure_export.h"
#include "head_test_data.h"
#include "head_view.h"

#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QImageReader>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpression>
#include <QSettings>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using namespace outlierlens;

namespace {

QByteArray readAll(const QString& path)
{
    QFile file(path);
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

QByteArray utf16be(const QString& text)
{
    QByteArray bytes;
    for (QChar c : text)
        bytes.append(char(c.unicode() >> 8)).append(char(c.unicode() & 0xff));
    return bytes;
}

} // namespace

class TestFigureExport : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void init();
    void pngHasSizeDpiAndText();
    void svgHasTitleAndDescription();
    void pdfHasTitle();
    void csvRoundTrip();
    void failureNamesPathAndLeavesNoFile_data();
    void failureNamesPathAndLeavesNoFile();
    void replacesExistingFileAtomically();
    void formatFromSuffix_data();
    void formatFromSuffix();
    void dialog();

private:
    QString path(const QString& name) const { return m_dir->filePath(name); }
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<HeadView> m_view;
};

void TestFigureExport::initTestCase()
{
    // The export dialog remembers its folder in QSettings: keep the user's own settings out of it.
    QStandardPaths::setTestModeEnabled(true);
    QCoreApplication::setOrganizationName(QStringLiteral("OutlierLensTest"));
    QCoreApplication::setApplicationName(QStringLiteral("tst_figure_export"));
    QSettings().clear();
}

void TestFigureExport::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_view = std::make_unique<HeadView>();
    m_view->setData(testdata::head(13, 16, true, false));
}

void TestFigureExport::pngHasSizeDpiAndText()
{
    QString error;
    QVERIFY2(exportFigure(*m_view, path("head.png"), ExportFormat::Png, QSize(900, 400), 192, &error),
             qPrintable(error));
    QImageReader reader(path("head.png"));
    QCOMPARE(reader.format(), QByteArray("png"));
    QCOMPARE(reader.text(QStringLiteral("Title")), QStringLiteral("head-L11-H3"));
    QVERIFY(reader.text(QStringLiteral("Software")).startsWith(QStringLiteral("OutlierLens ")));
    const QString source = reader.text(QStringLiteral("Source"));
    QVERIFY(source.contains(QStringLiteral("sample_data/models/tiny-bert")));
    QVERIFY(
        source.contains(QStringLiteral("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")));
    const QString comment = reader.text(QStringLiteral("Comment"));
    QVERIFY(comment.contains(QStringLiteral("the cat sat. / a cat, it sat.")));
    QVERIFY(comment.contains(QStringLiteral("layer 11, head 3")));
    QVERIFY(comment.contains(Provenance::indexingNote()));
    const QImage image = reader.read();
    QCOMPARE(image.size(), QSize(900, 400));
    QCOMPARE(qRound(image.dotsPerMeterX() * 0.0254), 192);
    QCOMPARE(qRound(image.dotsPerMeterY() * 0.0254), 192);
    // The footer line: grey text in the last rows, on white.
    int ink = 0;
    for (int y = image.height() - 24; y < image.height(); ++y)
        for (int x = 0; x < image.width() / 2; ++x)
            ink += image.pixel(x, y) != qRgb(255, 255, 255);
    QVERIFY(ink > 100);
}

void TestFigureExport::svgHasTitleAndDescription()
{
    QString error;
    QVERIFY2(exportFigure(*m_view, path("head.svg"), ExportFormat::Svg, QSize(1000, 420), 96, &error),
             qPrintable(error));
    const QString svg = QString::fromUtf8(readAll(path("head.svg")));
    QVERIFY(svg.contains(QStringLiteral("<svg")));
    QVERIFY(svg.contains(QStringLiteral("<title>head-L11-H3</title>")));
    const qsizetype desc = svg.indexOf(QStringLiteral("<desc>"));
    QVERIFY(desc >= 0);
    const QString description = svg.mid(desc, svg.indexOf(QStringLiteral("</desc>")) - desc);
    QVERIFY(description.contains(QStringLiteral("sample_data/models/tiny-bert")));
    QVERIFY(description.contains(QStringLiteral("checkpoint sha256 0123456789abcdef")));
    QVERIFY(description.contains(QStringLiteral("layer 11, head 3")));
    QVERIFY(description.contains(Provenance::indexingNote()));
    QVERIFY(svg.contains(QStringLiteral("viewBox=\"0 0 1000 420\"")));
}

void TestFigureExport::pdfHasTitle()
{
    QString error;
    QVERIFY2(exportFigure(*m_view, path("head.pdf"), ExportFormat::Pdf, QSize(960, 480), 96, &error),
             qPrintable(error));
    const QByteArray pdf = readAll(path("head.pdf"));
    QVERIFY(pdf.startsWith("%PDF"));
    // The document information dictionary (UTF-16) and the XMP metadata (UTF-8) both carry the title.
    QVERIFY(pdf.contains(utf16be(QStringLiteral("head-L11-H3"))));
    QVERIFY(pdf.contains("<rdf:li xml:lang=\"x-default\">head-L11-H3</rdf:li>"));
    QVERIFY(pdf.contains("tiny-bert"));
    // 960 x 480 pixels at 96 DPI is 720 x 360 points.
    const QRegularExpressionMatch box =
        QRegularExpression(QStringLiteral("/MediaBox \\[0 0 ([0-9.]+) ([0-9.]+)\\]"))
            .match(QString::fromLatin1(pdf));
    QVERIFY(box.hasMatch());
    QCOMPARE(box.captured(1).toDouble(), 720.0);
    QCOMPARE(box.captured(2).toDouble(), 360.0);
}

void TestFigureExport::csvRoundTrip()
{
    QString error;
    QVERIFY2(exportFigureCsv(*m_view, path("head.csv"), &error), qPrintable(error));
    const QString text = QString::fromUtf8(readAll(path("head.csv")));
    QMap<QString, QString> meta;
    QString body;
    for (const QString& line : text.split(QLatin1Char('\n'))) {
        if (line.startsWith(QStringLiteral("# "))) {
            QVERIFY(body.isEmpty()); // comments only lead
            meta.insert(line.mid(2).section(QStringLiteral(": "), 0, 0),
                        line.section(QStringLiteral(": "), 1));
        } else if (!line.isEmpty()) {
            body += line + QLatin1Char('\n');
        }
    }
    const Provenance p = m_view->figureProvenance();
    QCOMPARE(meta.value(QStringLiteral("title")), QStringLiteral("head-L11-H3"));
    QCOMPARE(meta.value(QStringLiteral("model")), p.model);
    QCOMPARE(meta.value(QStringLiteral("checkpoint_sha256")), p.checkpointSha256);
    QCOMPARE(meta.value(QStringLiteral("input")), p.input);
    QCOMPARE(meta.value(QStringLiteral("selection")), QStringLiteral("layer 11, head 3"));
    QVERIFY(meta.value(QStringLiteral("indexing")).startsWith(Provenance::indexingNote()));
    QVERIFY(meta.value(QStringLiteral("software")).startsWith(QStringLiteral("OutlierLens")));
    QCOMPARE(body, m_view->figureCsv());
}

void TestFigureExport::failureNamesPathAndLeavesNoFile_data()
{
    QTest::addColumn<QString>("name");
    QTest::newRow("png") << QStringLiteral("figure.png");
    QTest::newRow("svg") << QStringLiteral("figure.svg");
    QTest::newRow("pdf") << QStringLiteral("figure.pdf");
    QTest::newRow("csv") << QStringLiteral("figure.csv");
}

void TestFigureExport::failureNamesPathAndLeavesNoFile()
{
    QFETCH(QString, name);
    // A regular file where a folder should be: nobody can write there, not even root.
    QFile blocker(path(QStringLiteral("blocker")));
    QVERIFY(blocker.open(QIODevice::WriteOnly));
    blocker.close();
    const QString target = path(QStringLiteral("blocker/") + name);
    QString error;
    const bool ok =
        name.endsWith(QStringLiteral(".csv"))
            ? exportFigureCsv(*m_view, target, &error)
            : exportFigure(*m_view, target, exportFormatForPath(target), QSize(400, 300), 96, &error);
    QVERIFY(!ok);
    QVERIFY2(error.contains(QDir::toNativeSeparators(target)), qPrintable(error));
    QVERIFY(!QFileInfo::exists(target));
    QCOMPARE(QDir(m_dir->path()).entryList(QDir::NoDotAndDotDot | QDir::AllEntries), QStringList{"blocker"});
    // A bad size fails the same way, before touching the disk.
    QVERIFY(
        !exportFigure(*m_view, path(QStringLiteral("ok.png")), ExportFormat::Png, QSize(0, 10), 96, &error));
    QVERIFY(error.contains(QStringLiteral("ok.png")));
    QVERIFY(!QFileInfo::exists(path(QStringLiteral("ok.png"))));
}

void TestFigureExport::replacesExistingFileAtomically()
{
    QFile old(path("head.png"));
    QVERIFY(old.open(QIODevice::WriteOnly));
    old.write("not a picture");
    old.close();
    QString error;
    QVERIFY2(exportFigure(*m_view, path("head.png"), ExportFormat::Png, QSize(500, 300), 96, &error),
             qPrintable(error));
    QCOMPARE(QImage(path("head.png")).size(), QSize(500, 300));
    // No temporary file is left beside it.
    QCOMPARE(QDir(m_dir->path()).entryList(QDir::NoDotAndDotDot | QDir::AllEntries), QStringList{"head.png"});
}

void TestFigureExport::formatFromSuffix_data()
{
    QTest::addColumn<QString>("path");
    QTest::addColumn<int>("format");
    QTest::newRow("png") << QStringLiteral("/tmp/a.png") << int(ExportFormat::Png);
    QTest::newRow("upper-case svg") << QStringLiteral("b.SVG") << int(ExportFormat::Svg);
    QTest::newRow("pdf") << QStringLiteral("dir.v2/c.Pdf") << int(ExportFormat::Pdf);
    QTest::newRow("no suffix") << QStringLiteral("figure") << int(ExportFormat::Png);
}

void TestFigureExport::formatFromSuffix()
{
    QFETCH(QString, path);
    QFETCH(int, format);
    QCOMPARE(int(exportFormatForPath(path)), format);
}

void TestFigureExport::dialog()
{
    ExportDialog dialog(*m_view);
    auto* width = dialog.findChild<QSpinBox*>(QStringLiteral("width"));
    auto* height = dialog.findChild<QSpinBox*>(QStringLiteral("height"));
    auto* dpi = dialog.findChild<QSpinBox*>(QStringLiteral("dpi"));
    auto* format = dialog.findChild<QComboBox*>(QStringLiteral("format"));
    QVERIFY(width && height && dpi && format);
    QCOMPARE(dialog.figureSize(), m_view->preferredFigureSize());
    QCOMPARE(dialog.dpi(), 96);
    QVERIFY(dialog.path().endsWith(QStringLiteral("head-L11-H3.png")));

    // The format follows the suffix, and the suffix the format.
    dialog.setPath(path("fig.svg"));
    QCOMPARE(dialog.format(), ExportFormat::Svg);
    QVERIFY(!dpi->isEnabled());
    format->setCurrentIndex(format->findData(int(ExportFormat::Pdf)));
    QCOMPARE(dialog.path(), path("fig.pdf"));
    format->setCurrentIndex(format->findData(int(ExportFormat::Png)));
    QCOMPARE(dialog.path(), path("fig.png"));
    QVERIFY(dpi->isEnabled());

    // Doubling the DPI doubles the pixels (same printed size).
    width->setValue(600);
    height->setValue(300);
    dpi->setValue(192);
    QCOMPARE(dialog.figureSize(), QSize(1200, 600));

    dialog.setWritesCsv(true);
    QCOMPARE(dialog.csvPath(), path("fig.csv"));
    QVERIFY(dialog.exportNow());
    QCOMPARE(QImageReader(path("fig.png")).size(), QSize(1200, 600));
    QVERIFY(QFileInfo::exists(path("fig.csv")));

    // A failure stays in the dialog and names the file.
    dialog.setPath(path("missing-folder/fig.png"));
    QVERIFY(!dialog.exportNow());
    QVERIFY2(dialog.errorText().contains(QDir::toNativeSeparators(path("missing-folder/fig.png"))),
             qPrintable(dialog.errorText()));

    // The next dialog starts in the folder of the last export, with "also CSV" as it was last used;
    // labels are mnemonics, not "&File:".
    ExportDialog next(*m_view);
    QCOMPARE(QFileInfo(next.path()).absolutePath(), QFileInfo(path("fig.png")).absolutePath());
    QVERIFY(next.writesCsv());
    // The whole path shows in the file box.
    next.show();
    QVERIFY(QTest::qWaitForWindowExposed(&next));
    auto* box = next.findChild<QLineEdit*>(QStringLiteral("path"));
    QVERIFY(box);
    QVERIFY2(box->width() >= box->fontMetrics().horizontalAdvance(next.path()),
             qPrintable(QStringLiteral("%1 px for %2").arg(box->width()).arg(next.path())));
    next.setWritesCsv(false);
    next.setPath(path("plain.png"));
    QVERIFY(next.exportNow());
    QVERIFY(!ExportDialog(*m_view).writesCsv());
    for (QLabel* label : next.findChildren<QLabel*>())
        if (label->text().contains(QLatin1Char('&')))
            QVERIFY2(label->buddy() != nullptr, qPrintable(label->text()));
}

QTEST_MAIN(TestFigureExport)
#include "tst_figure_export.moc"
