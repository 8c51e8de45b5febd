#pragma once
// Thread of the QApplication (figures paint with fonts). The files of the figure set (figure_set.h):
// each figure in the asked formats with its CSV, the per-layer table, and the index (HTML and one PDF).

#include "figure_export.h"
#include "figure_inputs.h"
#include "figure_set.h"

#include <QJsonObject>
#include <QMap>
#include <QString>
#include <QVector>

#include <memory>

QT_BEGIN_NAMESPACE
class QPainter;
class QPdfWriter;
QT_END_NAMESPACE

namespace outlierlens {

struct StatisticsFile;

/// Writes the figures as they come and the index at the end. The PDF index is written to a temp file
/// that finish() renames; a writer destroyed before finish() removes it.
class FigureIndexWriter
{
public:
    /// `precisionText`: "fp32" or "bf16", what the forward passes and statistics computed in.
    FigureIndexWriter(const QString& outDir, const ModelInfo& model, const QString& ruleText,
                      const QString& dataText, const QString& precisionText);
    ~FigureIndexWriter();
    FigureIndexWriter(const FigureIndexWriter&) = delete;
    FigureIndexWriter& operator=(const FigureIndexWriter&) = delete;

    /// Writes figure-<id>.<ext> for each format and figure-<id>.csv (outcome.files, outcome.size), and a
    /// page of the PDF index. Throws Error when a file cannot be written.
    void draw(const Figure& figure, FigureOutcome& outcome, const QVector<ExportFormat>& formats, int dpi);
    /// The per-layer max inf norm and kurtosis of the statistics (the table of the set): table.csv and a
    /// page of the PDF index.
    void drawTable(const StatisticsFile& stats, FigureOutcome& outcome);
    /// The numbers of a table drawn with draw() (paper_tables.h), written into its entry of index.json
    /// as "table".
    void addTableNumbers(const QString& id, const QJsonObject& numbers) { m_tableNumbers[id] = numbers; }
    /// Lists the figure in the index (drawn or with its reason).
    void add(const FigureOutcome& outcome) { m_figures << outcome; }
    /// Writes index.pdf, index.json and, last, index.html.
    void finish(const QString& statisticsFile, bool statisticsReused, const QVector<FigureInput>& inputs);

private:
    void beginPage(const QSizeF& size);
    void writeIndexJson(const QString& statisticsFile, const QVector<FigureInput>& inputs) const;
    static double headingHeight(const FigureOutcome& outcome, double width);
    void drawHeading(const FigureOutcome& outcome, double width);
    QString m_outDir;
    ModelInfo m_model;
    QString m_rule, m_data, m_precision;
    QVector<FigureOutcome> m_figures;
    QMap<QString, QJsonObject> m_tableNumbers;
    QString m_pdfTemp;
    std::unique_ptr<QPdfWriter> m_pdf;
    std::unique_ptr<QPainter> m_painter;
};

/// The table's outcome: id "table", its title, the page that shows it and, given the statistics, its caption.
FigureOutcome layerTableOutcome(const StatisticsFile* stats);

} // namespace outlierlens
