#pragma once
// Thread of the QApplication (paints with fonts). A paper table as data and as a Figure: the title, the
// table and the notes under it, exported like every figure (PNG, SVG, PDF) with its CSV.

#include "figure.h"

#include <QJsonObject>
#include <QString>
#include <QStringList>
#include <QVariant>
#include <QVector>

namespace outlierlens {

/// One column of a paper table: `key` names it in the CSV and index.json, `header` on the page.
struct PaperTableColumn
{
    QString key;
    QString header;
    int decimals = 2; ///< for numbers on the page (the CSV and JSON keep every digit)
};

/// A table as drawn: cells are doubles (NaN: not available, drawn "n/a", empty in the CSV, null in
/// JSON) or text.
struct PaperTableData
{
    QString title;
    QVector<PaperTableColumn> columns;
    QVector<QVector<QVariant>> rows;
    QStringList notes; ///< under the table: where each column comes from, and what is missing and why
    Provenance provenance;
    QString name; ///< figureName(): "table1", "table2"

    /// {"columns": [keys], "headers": [...], "rows": [[cells]], "notes": [...]}.
    QJsonObject toJson() const;
};

/// Paints a PaperTableData (title, the table, its notes); the CSV is the table with `key` headers.
class PaperTableFigure : public Figure
{
public:
    explicit PaperTableFigure(PaperTableData data)
        : m_data(std::move(data))
    {}
    const PaperTableData& data() const { return m_data; }

    QSize preferredFigureSize() const override;
    void paintFigure(QPainter& painter, const QRect& area) const override;
    QString figureCsv() const override;
    Provenance figureProvenance() const override { return m_data.provenance; }
    QString figureName() const override { return m_data.name; }

private:
    QVector<double> columnWidths() const;
    QString cellText(int row, int column) const;
    PaperTableData m_data;
};

} // namespace outlierlens
