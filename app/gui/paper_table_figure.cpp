#include "paper_table_figure.h"

#include "figure_style.h"

#include <QFontMetricsF>
#include <QJsonArray>

#include <algorithm>
#include <cmath>

namespace outlierlens {
namespace {

constexpr double kMargin = 16;
constexpr double kRow = 20;
constexpr double kCellPadding = 18;
constexpr double kMinWidth = 640;
constexpr double kFooter = 24; ///< the provenance line exportFigure() adds under the area

QString numberText(double v, int decimals)
{
    if (std::isnan(v)) return QStringLiteral("n/a");
    // Small values keep three significant digits (a tiny model's max inf norm of 0.038 is not "0.04").
    if (v != 0 && std::abs(v) < std::pow(10.0, 1 - decimals)) return QString::number(v, 'g', 3);
    return QString::number(v, 'f', decimals);
}

} // namespace

QJsonObject PaperTableData::toJson() const
{
    QJsonArray keys, headers, rowArray;
    for (const PaperTableColumn& c : columns) {
        keys << c.key;
        headers << QString(c.header).replace(QLatin1Char('\n'), QLatin1Char(' '));
    }
    for (const QVector<QVariant>& row : rows) {
        QJsonArray cells;
        for (const QVariant& cell : row) {
            if (cell.typeId() == QMetaType::Double)
                cells << (std::isfinite(cell.toDouble()) ? QJsonValue(cell.toDouble()) : QJsonValue());
            else
                cells << cell.toString();
        }
        rowArray << cells;
    }
    return {{QStringLiteral("columns"), keys},
            {QStringLiteral("headers"), headers},
            {QStringLiteral("rows"), rowArray},
            {QStringLiteral("notes"), QJsonArray::fromStringList(notes)}};
}

QString PaperTableFigure::cellText(int row, int column) const
{
    const QVariant& cell = m_data.rows[row][column];
    if (cell.typeId() == QMetaType::Double)
        return numberText(cell.toDouble(), m_data.columns[column].decimals);
    return cell.toString();
}

QVector<double> PaperTableFigure::columnWidths() const
{
    const QFontMetricsF header(FigureStyle::captionFont()), label(FigureStyle::labelFont());
    QVector<double> widths;
    for (int c = 0; c < m_data.columns.size(); ++c) {
        double w = 0;
        for (const QString& line : m_data.columns[c].header.split(QLatin1Char('\n')))
            w = std::max(w, header.horizontalAdvance(line));
        for (int r = 0; r < m_data.rows.size(); ++r)
            w = std::max(w, label.horizontalAdvance(cellText(r, c)));
        widths << std::ceil(w + kCellPadding);
    }
    return widths;
}

namespace {

int headerLines(const PaperTableData& d)
{
    int lines = 1;
    for (const PaperTableColumn& c : d.columns)
        lines = std::max<int>(lines, int(c.header.count(QLatin1Char('\n'))) + 1);
    return lines;
}

double notesHeight(const QStringList& notes, double width)
{
    const QFontMetricsF m(FigureStyle::smallFont());
    double h = 0;
    for (const QString& n : notes)
        h += m.boundingRect(QRectF(0, 0, width, 100000), Qt::TextWordWrap, n).height() + 4;
    return h;
}

} // namespace

QSize PaperTableFigure::preferredFigureSize() const
{
    double width = 2 * kMargin;
    for (double w : columnWidths())
        width += w;
    width = std::max(width, kMinWidth);
    const double title = QFontMetricsF(FigureStyle::titleFont()).height();
    const double header = QFontMetricsF(FigureStyle::captionFont()).height() * headerLines(m_data) + 6;
    const double height = kMargin + title + 10 + header + kRow * m_data.rows.size() + 12 +
                          notesHeight(m_data.notes, width - 2 * kMargin) + kMargin + kFooter;
    return QSize(int(std::ceil(width)), int(std::ceil(height)));
}

void PaperTableFigure::paintFigure(QPainter& p, const QRect& area) const
{
    p.save();
    p.translate(area.topLeft());
    const double width = area.width();
    p.setPen(FigureStyle::text());
    p.setFont(FigureStyle::titleFont());
    double y = kMargin;
    const double titleHeight = QFontMetricsF(p.font()).height();
    p.drawText(QRectF(kMargin, y, width - 2 * kMargin, titleHeight), Qt::AlignLeft | Qt::AlignVCenter,
               m_data.title);
    y += titleHeight + 10;

    const QVector<double> widths = columnWidths();
    // Text columns are left-aligned, numbers right-aligned.
    QVector<bool> numeric(m_data.columns.size(), true);
    for (int c = 0; c < m_data.columns.size(); ++c)
        for (const QVector<QVariant>& row : m_data.rows)
            if (row[c].typeId() != QMetaType::Double) numeric[c] = false;
    const auto align = [&](int c) {
        return (numeric[c] ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignVCenter;
    };
    p.setFont(FigureStyle::captionFont());
    const double headerHeight = QFontMetricsF(p.font()).height() * headerLines(m_data) + 6;
    double x = kMargin;
    for (int c = 0; c < m_data.columns.size(); ++c) {
        p.drawText(QRectF(x + kCellPadding / 2, y, widths[c] - kCellPadding, headerHeight),
                   (numeric[c] ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignBottom, m_data.columns[c].header);
        x += widths[c];
    }
    y += headerHeight;
    const double tableRight = x;
    p.setPen(QPen(FigureStyle::text(), 1));
    p.drawLine(QPointF(kMargin, y + 1), QPointF(tableRight, y + 1));
    p.setFont(FigureStyle::labelFont());
    for (int r = 0; r < m_data.rows.size(); ++r) {
        if (r % 2 == 1)
            p.fillRect(QRectF(kMargin, y + 2, tableRight - kMargin, kRow),
                       FigureStyle::background().darker(106));
        x = kMargin;
        p.setPen(FigureStyle::text());
        for (int c = 0; c < m_data.columns.size(); ++c) {
            p.drawText(QRectF(x + kCellPadding / 2, y + 2, widths[c] - kCellPadding, kRow), align(c),
                       cellText(r, c));
            x += widths[c];
        }
        y += kRow;
    }
    p.setPen(QPen(FigureStyle::text(), 1));
    p.drawLine(QPointF(kMargin, y + 3), QPointF(tableRight, y + 3));
    y += 12;
    p.setFont(FigureStyle::smallFont());
    p.setPen(FigureStyle::secondaryText());
    const QFontMetricsF small(p.font());
    for (const QString& note : m_data.notes) {
        const QRectF box(kMargin, y, width - 2 * kMargin, 100000);
        const double h = small.boundingRect(box, Qt::TextWordWrap, note).height();
        p.drawText(box, Qt::TextWordWrap, note);
        y += h + 4;
    }
    p.restore();
}

QString PaperTableFigure::figureCsv() const
{
    QStringList keys;
    for (const PaperTableColumn& c : m_data.columns)
        keys << c.key;
    QString csv = keys.join(QLatin1Char(',')) + QLatin1Char('\n');
    for (const QVector<QVariant>& row : m_data.rows) {
        QStringList cells;
        for (const QVariant& cell : row)
            cells << (cell.typeId() == QMetaType::Double
                          ? (std::isnan(cell.toDouble()) ? QString() : csvNumber(cell.toDouble()))
                          : csvField(cell.toString()));
        csv += cells.join(QLatin1Char(',')) + QLatin1Char('\n');
    }
    return csv;
}

} // namespace outlierlens
