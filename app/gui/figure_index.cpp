#include "figure_index.h"

#include "figure_style.h"

#include "analysis/statistics_file.h"
#include "common/atomic_file.h"
#include "common/error.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QFontMetricsF>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>

#include <cmath>

namespace outlierlens {
namespace {

constexpr double kMargin = 16;
constexpr double kMinPageWidth = 640;
// A4 landscape (297 x 210 mm) in the index's units, pixels at 96 DPI (841.9 x 595.3 pt).
constexpr double kA4LandscapeWidth = 297.0 / 25.4 * 96.0;
constexpr double kA4LandscapeHeight = 210.0 / 25.4 * 96.0;

QString fileFor(const FigureOutcome& f, const QString& suffix)
{
    return QStringLiteral("figure-%1.%2").arg(f.id, suffix);
}

QString tableCaption(const StatisticsFile& stats)
{
    QString tensors;
    for (const std::string& t : stats.summary.kurtosisTensors)
        tensors += (tensors.isEmpty() ? QString() : QStringLiteral(" and ")) + QString::fromStdString(t);
    return QStringLiteral(
               "Per layer over %1 inputs: the mean per-input max |x| of %2 (max inf norm) and the "
               "mean Pearson kurtosis of %3; the model's max inf norm is %4 (layer %5), its average "
               "kurtosis %6.")
        .arg(stats.samples)
        .arg(QString::fromStdString(stats.summary.infNormTensor), tensors)
        .arg(stats.summary.maxInfNorm, 0, 'f', 2)
        .arg(stats.summary.maxInfNormLayer + 1)
        .arg(stats.summary.avgKurtosis, 0, 'f', 2);
}

} // namespace

FigureOutcome layerTableOutcome(const StatisticsFile* stats)
{
    FigureOutcome f;
    f.id = f.number = QStringLiteral("table");
    f.title = QStringLiteral("Table: max inf norm and kurtosis per layer");
    if (stats) f.caption = tableCaption(*stats);
    f.page = QStringLiteral("Outliers");
    f.statistics = true;
    return f;
}

FigureIndexWriter::FigureIndexWriter(const QString& outDir, const ModelInfo& model, const QString& ruleText,
                                     const QString& dataText, const QString& precisionText)
    : m_outDir(outDir)
    , m_model(model)
    , m_rule(ruleText)
    , m_data(dataText)
    , m_precision(precisionText)
    , m_pdfTemp(QDir(outDir).filePath(QStringLiteral("index.pdf.tmp")))
{}

FigureIndexWriter::~FigureIndexWriter()
{
    if (m_painter && m_painter->isActive()) m_painter->end();
    m_painter.reset();
    m_pdf.reset();
    QFile::remove(m_pdfTemp); // finish() renamed it unless the set was cut short
}

void FigureIndexWriter::beginPage(const QSizeF& size)
{
    const QPageSize page(size * 72.0 / 96.0, QPageSize::Point, QString(), QPageSize::ExactMatch);
    if (!m_pdf) {
        m_pdf = std::make_unique<QPdfWriter>(m_pdfTemp);
        m_pdf->setResolution(96);
        m_pdf->setPageSize(page);
        m_pdf->setPageMargins(QMarginsF(0, 0, 0, 0));
        m_pdf->setTitle(QStringLiteral("Figures of %1").arg(m_model.name));
        m_pdf->setCreator(QStringLiteral("OutlierLens " OUTLIERLENS_VERSION));
        m_painter = std::make_unique<QPainter>();
        if (!m_painter->begin(m_pdf.get())) throw Error(m_pdfTemp.toStdString() + ": cannot write");
    } else {
        m_pdf->setPageSize(page);
        m_pdf->newPage();
    }
    m_painter->resetTransform();
    m_painter->fillRect(QRectF(QPointF(0, 0), size), FigureStyle::background());
}

/// The height of the title and caption above a figure on a page `width` wide.
double FigureIndexWriter::headingHeight(const FigureOutcome& f, double width)
{
    const QRectF area(0, 0, width - 2 * kMargin, 100000);
    const double title =
        QFontMetricsF(FigureStyle::titleFont()).boundingRect(area, Qt::TextWordWrap, f.title).height();
    const double caption =
        QFontMetricsF(FigureStyle::labelFont()).boundingRect(area, Qt::TextWordWrap, f.caption).height();
    return std::ceil(kMargin + title + 6 + caption + kMargin);
}

void FigureIndexWriter::drawHeading(const FigureOutcome& f, double width)
{
    QPainter& p = *m_painter;
    p.setPen(FigureStyle::text());
    p.setFont(FigureStyle::titleFont());
    const QRectF area(kMargin, kMargin, width - 2 * kMargin, 100000);
    const double title = QFontMetricsF(p.font()).boundingRect(area, Qt::TextWordWrap, f.title).height();
    p.drawText(area, Qt::TextWordWrap, f.title);
    p.setFont(FigureStyle::labelFont());
    p.drawText(area.translated(0, title + 6), Qt::TextWordWrap, f.caption);
}

void FigureIndexWriter::draw(const Figure& figure, FigureOutcome& f, const QVector<ExportFormat>& formats,
                             int dpi)
{
    const QSize size = figure.preferredFigureSize();
    f.size = size;
    QString error;
    for (ExportFormat format : formats) {
        const QString name = fileFor(f, exportSuffix(format));
        // A PNG at `dpi` keeps the figure's layout: its pixels grow with the resolution.
        const QSize pixels = format == ExportFormat::Png ? size * (dpi / 96.0) : size;
        if (!exportFigure(figure, QDir(m_outDir).filePath(name), format, pixels, dpi, &error))
            throw Error(error.toStdString());
        f.files << name;
    }
    const QString csv = fileFor(f, QStringLiteral("csv"));
    if (!exportFigureCsv(figure, QDir(m_outDir).filePath(csv), &error,
                         {{QStringLiteral("figure"), f.title},
                          {QStringLiteral("data"), m_data},
                          {QStringLiteral("rule"), m_rule},
                          {QStringLiteral("precision"), m_precision}}))
        throw Error(error.toStdString());
    f.files << csv;

    // The PDF index: one A4 landscape page per figure (no page taller, issue #39), the heading, then the
    // figure laid out in the rest of the page: a figure draws itself at any size (widgets/figure.h), so its
    // text keeps its size where a scaled picture would shrink it.
    const double heading = headingHeight(f, kA4LandscapeWidth);
    beginPage(QSizeF(kA4LandscapeWidth, kA4LandscapeHeight));
    drawHeading(f, kA4LandscapeWidth);
    m_painter->translate(0, heading);
    paintFigureWithFooter(figure, *m_painter, QSizeF(kA4LandscapeWidth, kA4LandscapeHeight - heading));
}

void FigureIndexWriter::drawTable(const StatisticsFile& stats, FigureOutcome& f)
{
    QString csv =
        QStringLiteral(
            "# title: %1\n# model: %2\n# checkpoint_sha256: %3\n# data: %4\n# rule: %5\n# precision: %6\n")
            .arg(f.title, m_model.dir, m_model.sha256, m_data, m_rule, m_precision);
    // The columns name their tensors (#39.8): the inf norm is one tensor's, the kurtosis a mean over several.
    QString kurtosisOf;
    for (const std::string& t : stats.summary.kurtosisTensors)
        kurtosisOf +=
            (kurtosisOf.isEmpty() ? QString() : QStringLiteral("_and_")) + QString::fromStdString(t);
    csv += QStringLiteral("layer,max_inf_norm_%1,mean_kurtosis_%2\n")
               .arg(QString::fromStdString(stats.summary.infNormTensor), kurtosisOf);
    for (std::size_t i = 0; i < stats.summary.layers.size(); ++i)
        csv += QStringLiteral("%1,%2,%3\n")
                   .arg(stats.summary.layers[i] + 1)
                   .arg(csvNumber(stats.summary.meanMaxInfNorm[i]), csvNumber(stats.summary.meanKurtosis[i]));
    const QString name = QStringLiteral("table.csv");
    writeTextFileAtomically(QDir(m_outDir).filePath(name).toStdString(), csv.toStdString());
    f.files << name;

    const double width = kMinPageWidth;
    const double row = 18;
    double y = headingHeight(f, width);
    f.size = QSize(int(width), int(y + row * double(stats.summary.layers.size() + 1) + kMargin));
    beginPage(QSizeF(f.size));
    drawHeading(f, width);
    QPainter& p = *m_painter;
    p.setFont(FigureStyle::labelFont());
    const QStringList header{
        QStringLiteral("layer"),
        QStringLiteral("max inf norm (%1)").arg(QString::fromStdString(stats.summary.infNormTensor)),
        QStringLiteral("kurtosis (%1)")
            .arg(QString(kurtosisOf).replace(QStringLiteral("_and_"), QStringLiteral(", ")))};
    for (int c = 0; c < 3; ++c)
        p.drawText(QRectF(kMargin + c * 160, y, 150, row), Qt::AlignRight | Qt::AlignVCenter, header[c]);
    for (std::size_t i = 0; i < stats.summary.layers.size(); ++i) {
        y += row;
        const QStringList cells{QString::number(stats.summary.layers[i] + 1),
                                QString::number(stats.summary.meanMaxInfNorm[i], 'f', 2),
                                QString::number(stats.summary.meanKurtosis[i], 'f', 2)};
        for (int c = 0; c < 3; ++c)
            p.drawText(QRectF(kMargin + c * 160, y, 150, row), Qt::AlignRight | Qt::AlignVCenter, cells[c]);
    }
}

void FigureIndexWriter::writeIndexJson(const QString& statisticsFile,
                                       const QVector<FigureInput>& inputs) const
{
    static const char* const kKinds[] = {"pair", "text", "image", "synthetic"};
    QJsonArray inputArray;
    for (const FigureInput& in : inputs)
        inputArray << QJsonObject{{QStringLiteral("kind"), QLatin1String(kKinds[int(in.kind)])},
                                  {QStringLiteral("first"), in.first},
                                  {QStringLiteral("second"), in.second},
                                  {QStringLiteral("seed"), QString::number(in.seed)},
                                  {QStringLiteral("label"), in.label}};
    QJsonArray figures;
    for (const FigureOutcome& f : m_figures) {
        QJsonObject entry{{QStringLiteral("id"), f.id},
                          {QStringLiteral("number"), f.number},
                          {QStringLiteral("title"), f.title},
                          {QStringLiteral("caption"), f.caption},
                          {QStringLiteral("reason"), f.reason},
                          {QStringLiteral("files"), QJsonArray::fromStringList(f.files)},
                          {QStringLiteral("page"), f.page},
                          {QStringLiteral("layer"), f.layer},
                          {QStringLiteral("head"), f.head},
                          {QStringLiteral("input"), f.input},
                          {QStringLiteral("statistics"), f.statistics}};
        // Figures of several layers, heads or inputs (Figures 2, 10-13, 16, 17) list them all, 0-based.
        for (const auto& [key, values] : {std::pair<const char*, const QVector<int>*>{"layers", &f.layers},
                                          {"heads", &f.heads},
                                          {"inputs", &f.inputs}}) {
            QJsonArray array;
            for (int v : *values)
                array << v;
            if (!array.isEmpty()) entry.insert(QLatin1String(key), array);
        }
        // The paper tables' numbers (paper_tables.h): columns, headers, rows and notes.
        if (const auto t = m_tableNumbers.constFind(f.id); t != m_tableNumbers.constEnd())
            entry.insert(QStringLiteral("table"), *t);
        figures << entry;
    }
    const QJsonObject index{
        {QStringLiteral("model"), m_model.dir},
        {QStringLiteral("checkpoint_sha256"), m_model.sha256},
        {QStringLiteral("data"), m_data},
        {QStringLiteral("rule"), m_rule},
        {QStringLiteral("precision"), m_precision},
        {QStringLiteral("statistics"),
         statisticsFile.isEmpty() ? QString() : QDir(m_outDir).relativeFilePath(statisticsFile)},
        {QStringLiteral("inputs"), inputArray},
        {QStringLiteral("figures"), figures}};
    writeTextFileAtomically(QDir(m_outDir).filePath(QStringLiteral("index.json")).toStdString(),
                            QJsonDocument(index).toJson().toStdString());
}

void FigureIndexWriter::finish(const QString& statisticsFile, bool statisticsReused,
                               const QVector<FigureInput>& inputs)
{
    // The PDF: a last page lists what could not be drawn, and why.
    QString missing;
    for (const FigureOutcome& f : m_figures)
        if (!f.reason.isEmpty()) missing += QStringLiteral("%1 — %2\n").arg(f.title, f.reason);
    if (!missing.isEmpty() || !m_pdf) {
        FigureOutcome notDrawn;
        notDrawn.title = QStringLiteral("Not drawn from these inputs");
        notDrawn.caption = missing.isEmpty() ? QStringLiteral("(nothing)") : missing;
        const double width = kMinPageWidth * 1.4;
        beginPage(QSizeF(width, headingHeight(notDrawn, width)));
        drawHeading(notDrawn, width);
    }
    if (!m_painter->end()) throw Error(m_pdfTemp.toStdString() + ": cannot write");
    m_painter.reset();
    m_pdf.reset();
    const QString pdf = QDir(m_outDir).filePath(QStringLiteral("index.pdf"));
    QFile::remove(pdf);
    if (!QFile::rename(m_pdfTemp, pdf)) throw Error(pdf.toStdString() + ": cannot write");

    writeIndexJson(statisticsFile, inputs);

    QString html =
        QStringLiteral("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Figures of %1</title>\n"
                       "<style>body{font-family:sans-serif;max-width:1400px;margin:2em auto;padding:0 1em}"
                       "img{max-width:100%;border:1px solid #ddd}.why{color:#a33}"
                       "td,th{padding:2px 12px;text-align:right}</style></head><body>\n")
            .arg(m_model.name.toHtmlEscaped());
    html +=
        QStringLiteral("<h1>Figures of %1</h1>\n<p>Model <code>%2</code> (checkpoint sha256 %3), %4. "
                       "Data: %5. Outlier rule: %6. Statistics: <code>%7</code>%8. %9 One PDF with every "
                       "figure: <a href=\"index.pdf\">index.pdf</a>.</p>\n")
            .arg(m_model.name.toHtmlEscaped(), m_model.dir.toHtmlEscaped(), m_model.sha256,
                 m_model.variant.toHtmlEscaped(), m_data.toHtmlEscaped(),
                 m_rule.toHtmlEscaped() + QStringLiteral("; computed in ") + m_precision,
                 statisticsFile.isEmpty() ? QStringLiteral("none")
                                          : QDir(m_outDir).relativeFilePath(statisticsFile).toHtmlEscaped(),
                 statisticsReused ? QStringLiteral(" (reused from an earlier run)") : QString(),
                 Provenance::indexingNote());
    for (const FigureOutcome& f : m_figures) {
        html += QStringLiteral("<h2 id=\"%1\">%2</h2>\n").arg(f.id, f.title.toHtmlEscaped());
        if (!f.reason.isEmpty()) {
            html += QStringLiteral("<p class=\"why\">Not drawn: %1.</p>\n").arg(f.reason.toHtmlEscaped());
            continue;
        }
        html += QStringLiteral("<p>%1</p>\n").arg(f.caption.toHtmlEscaped());
        const QString png = fileFor(f, QStringLiteral("png"));
        if (f.files.contains(png))
            html += QStringLiteral("<p><img src=\"%1\" alt=\"%2\"></p>\n").arg(png, f.title.toHtmlEscaped());
        QStringList links;
        for (const QString& file : f.files)
            links << QStringLiteral("<a href=\"%1\">%1</a>").arg(file.toHtmlEscaped());
        html += QStringLiteral("<p>Files: %1</p>\n").arg(links.join(QStringLiteral(", ")));
    }
    html += QStringLiteral("</body></html>\n");
    writeTextFileAtomically(QDir(m_outDir).filePath(QStringLiteral("index.html")).toStdString(),
                            html.toStdString());
}

} // namespace outlierlens
