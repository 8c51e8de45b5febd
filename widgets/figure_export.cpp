#include "figure_export.h"

#include "figure_style.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QFontMetricsF>
#include <QImage>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QSaveFile>
#include <QSvgGenerator>

#include <algorithm>
#include <cmath>

namespace outlierlens {
namespace {

constexpr double kFooterPadding = 3.0;

QString tr(const char* text)
{
    return QCoreApplication::translate("FigureExport", text);
}

QString software()
{
    return QStringLiteral("OutlierLens " OUTLIERLENS_VERSION);
}

QString shortHash(const QString& sha256)
{
    return sha256.left(12);
}

QString sourceText(const Provenance& p)
{
    QString source = p.model;
    if (!p.checkpointSha256.isEmpty())
        source += QStringLiteral(" (checkpoint sha256 %1)").arg(p.checkpointSha256);
    return source;
}

QString commentText(const Provenance& p)
{
    QStringList lines;
    if (!p.input.isEmpty()) lines << QStringLiteral("Input: %1").arg(p.input);
    if (!p.selection.isEmpty()) lines << QStringLiteral("Selection: %1").arg(p.selection);
    lines << Provenance::indexingNote();
    return lines.join(QLatin1Char('\n'));
}

QString xmlEscaped(const QString& text)
{
    return text.toHtmlEscaped();
}

QByteArray xmpMetadata(const QString& title, const Provenance& p)
{
    const QString description = sourceText(p) + QLatin1Char('\n') + commentText(p);
    const QString xmp =
        QStringLiteral(
            "<?xpacket begin=\"\uFEFF\" id=\"W5M0MpCehiHzreSzNTczkc9d\"?>\n"
            "<x:xmpmeta xmlns:x=\"adobe:ns:meta/\">\n"
            " <rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">\n"
            "  <rdf:Description rdf:about=\"\" xmlns:dc=\"http://purl.org/dc/elements/1.1/\""
            " xmlns:xmp=\"http://ns.adobe.com/xap/1.0/\" xmlns:pdf=\"http://ns.adobe.com/pdf/1.3/\">\n"
            "   <dc:title><rdf:Alt><rdf:li xml:lang=\"x-default\">%1</rdf:li></rdf:Alt></dc:title>\n"
            "   <dc:description><rdf:Alt><rdf:li xml:lang=\"x-default\">%2</rdf:li></rdf:Alt>"
            "</dc:description>\n"
            "   <dc:source>%3</dc:source>\n"
            "   <xmp:CreatorTool>%4</xmp:CreatorTool>\n"
            "   <pdf:Producer>%4</pdf:Producer>\n"
            "  </rdf:Description>\n"
            " </rdf:RDF>\n"
            "</x:xmpmeta>\n"
            "<?xpacket end=\"w\"?>")
            .arg(xmlEscaped(title), xmlEscaped(description), xmlEscaped(sourceText(p)),
                 xmlEscaped(software()));
    return xmp.toUtf8();
}

/// The figure above a one-line provenance footer, in logical pixels (96 DPI).
void renderWithFooter(const Figure& figure, QPainter& painter, const QSizeF& logical)
{
    painter.setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
    painter.fillRect(QRectF(QPointF(0, 0), logical), FigureStyle::background());
    const QFont font = FigureStyle::smallFont();
    const QFontMetricsF metrics(font);
    const double footer = std::ceil(metrics.height()) + 2 * kFooterPadding;
    const QRect area(0, 0, int(logical.width()), std::max(1, int(logical.height() - footer)));
    painter.save();
    painter.setClipRect(area);
    figure.paintFigure(painter, area);
    painter.restore();
    const QRectF line(kFooterPadding * 2, logical.height() - footer, logical.width() - kFooterPadding * 4,
                      footer);
    painter.setFont(font);
    painter.setPen(FigureStyle::secondaryText());
    painter.drawText(
        line, Qt::AlignLeft | Qt::AlignVCenter,
        metrics.elidedText(provenanceFooter(figure.figureProvenance()), Qt::ElideRight, line.width()));
}

QString cannotWrite(const QString& path, const QString& reason)
{
    return tr("Cannot write %1: %2").arg(QDir::toNativeSeparators(path), reason);
}

bool fail(QString* error, const QString& message)
{
    if (error) *error = message;
    return false;
}

/// Single-line metadata value for "# key: value" lines.
QString oneLine(QString text)
{
    text.replace(QLatin1String("\r\n"), QLatin1String("\\n"));
    text.replace(QLatin1Char('\n'), QLatin1String("\\n"));
    text.replace(QLatin1Char('\r'), QLatin1String("\\n"));
    return text;
}

} // namespace

ExportFormat exportFormatForPath(const QString& path)
{
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix == QLatin1String("svg")) return ExportFormat::Svg;
    if (suffix == QLatin1String("pdf")) return ExportFormat::Pdf;
    return ExportFormat::Png;
}

QString exportSuffix(ExportFormat format)
{
    switch (format) {
    case ExportFormat::Svg:
        return QStringLiteral("svg");
    case ExportFormat::Pdf:
        return QStringLiteral("pdf");
    default:
        return QStringLiteral("png");
    }
}

QString provenanceFooter(const Provenance& p)
{
    QStringList parts;
    if (!p.model.isEmpty())
        parts << (p.checkpointSha256.isEmpty()
                      ? p.model
                      : QStringLiteral("%1 (sha256 %2)").arg(p.model, shortHash(p.checkpointSha256)));
    if (!p.selection.isEmpty()) parts << p.selection;
    parts << Provenance::indexingNote();
    if (!p.input.isEmpty()) parts << QStringLiteral("input: %1").arg(oneLine(p.input));
    return parts.join(QStringLiteral("  \u00b7  "));
}

void paintFigureWithFooter(const Figure& figure, QPainter& painter, const QSizeF& size)
{
    renderWithFooter(figure, painter, size);
}

bool exportFigure(const Figure& figure, const QString& path, ExportFormat format, QSize size, int dpi,
                  QString* error)
{
    if (size.width() < 16 || size.height() < 16 || size.width() > 20000 || size.height() > 20000)
        return fail(error, tr("Cannot export %1: a figure size of %2 x %3 pixels is out of range")
                               .arg(QDir::toNativeSeparators(path))
                               .arg(size.width())
                               .arg(size.height()));
    if (dpi < 10 || dpi > 2400)
        return fail(
            error,
            tr("Cannot export %1: %2 DPI is out of range").arg(QDir::toNativeSeparators(path)).arg(dpi));

    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly)) return fail(error, cannotWrite(path, file.errorString()));

    const Provenance provenance = figure.figureProvenance();
    const QString title = figure.figureName();
    bool ok = true;
    switch (format) {
    case ExportFormat::Png: {
        QImage image(size, QImage::Format_RGB32);
        const int dotsPerMeter = int(std::lround(dpi / 0.0254));
        image.setDotsPerMeterX(dotsPerMeter);
        image.setDotsPerMeterY(dotsPerMeter);
        image.fill(FigureStyle::background());
        {
            QPainter painter(&image);
            const double scale = dpi / 96.0;
            painter.scale(scale, scale);
            renderWithFooter(figure, painter, QSizeF(size) / scale);
        }
        image.setText(QStringLiteral("Title"), title);
        image.setText(QStringLiteral("Software"), software());
        image.setText(QStringLiteral("Source"), sourceText(provenance));
        image.setText(QStringLiteral("Comment"), commentText(provenance));
        ok = image.save(&file, "PNG");
        break;
    }
    case ExportFormat::Svg: {
        QSvgGenerator generator;
        generator.setOutputDevice(&file);
        generator.setSize(size);
        generator.setViewBox(QRect(QPoint(0, 0), size));
        generator.setResolution(96);
        generator.setTitle(title);
        generator.setDescription(sourceText(provenance) + QLatin1Char('\n') + commentText(provenance));
        QPainter painter;
        ok = painter.begin(&generator);
        if (ok) {
            renderWithFooter(figure, painter, QSizeF(size));
            ok = painter.end();
        }
        break;
    }
    case ExportFormat::Pdf: {
        QPdfWriter writer(&file);
        writer.setResolution(96);
        writer.setPageSize(
            QPageSize(QSizeF(size) * 72.0 / 96.0, QPageSize::Point, title, QPageSize::ExactMatch));
        writer.setPageMargins(QMarginsF(0, 0, 0, 0));
        writer.setTitle(title);
        writer.setCreator(software());
        writer.setDocumentXmpMetadata(xmpMetadata(title, provenance));
        QPainter painter;
        ok = painter.begin(&writer);
        if (ok) {
            // The page is size * 72 / 96 points, which at 96 DPI is `size` device pixels.
            renderWithFooter(figure, painter, QSizeF(writer.width(), writer.height()));
            ok = painter.end();
        }
        break;
    }
    }
    if (!ok) {
        file.cancelWriting();
        return fail(error, cannotWrite(path, file.error() != QFileDevice::NoError ? file.errorString()
                                                                                  : tr("rendering failed")));
    }
    if (!file.commit()) return fail(error, cannotWrite(path, file.errorString()));
    return true;
}

bool exportFigureCsv(const Figure& figure, const QString& path, QString* error,
                     const QVector<QPair<QString, QString>>& extra)
{
    const Provenance p = figure.figureProvenance();
    QString text;
    const auto meta = [&text](const char* key, const QString& value) {
        text += QStringLiteral("# %1: %2\n").arg(QLatin1String(key), oneLine(value));
    };
    meta("title", figure.figureName());
    meta("software", software());
    meta("model", p.model);
    meta("checkpoint_sha256", p.checkpointSha256);
    meta("input", p.input);
    meta("selection", p.selection);
    for (const auto& [key, value] : extra)
        text += QStringLiteral("# %1: %2\n").arg(key, oneLine(value));
    meta("indexing",
         Provenance::indexingNote() +
             QStringLiteral(" Rows and columns of matrices (token positions, dimensions) count from 0."));
    text += figure.figureCsv();

    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly)) return fail(error, cannotWrite(path, file.errorString()));
    const QByteArray bytes = text.toUtf8();
    if (file.write(bytes) != bytes.size()) {
        file.cancelWriting();
        return fail(error, cannotWrite(path, file.errorString()));
    }
    if (!file.commit()) return fail(error, cannotWrite(path, file.errorString()));
    return true;
}

} // namespace outlierlens
