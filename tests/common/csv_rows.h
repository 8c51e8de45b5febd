#pragma once
// Test helper: the rows of a CSV the app writes (figures, quantize), fields split by RFC 4180.

#include <QFile>
#include <QString>
#include <QStringList>
#include <QVector>

namespace outlierlens::test {

/// CSV lines after the "# key: value" provenance, split into fields (RFC 4180 quotes).
inline QVector<QStringList> readCsvRows(const QString& path)
{
    QFile file(path);
    QVector<QStringList> rows;
    if (!file.open(QIODevice::ReadOnly)) return rows;
    for (const QString& line : QString::fromUtf8(file.readAll()).split(QLatin1Char('\n'))) {
        if (line.isEmpty() || line.startsWith(QLatin1String("# "))) continue;
        QStringList fields{QString()};
        bool quoted = false;
        for (int i = 0; i < line.size(); ++i) {
            const QChar c = line[i];
            if (c == QLatin1Char('"')) {
                if (quoted && i + 1 < line.size() && line[i + 1] == QLatin1Char('"'))
                    fields.last() += c, ++i;
                else
                    quoted = !quoted;
            } else if (c == QLatin1Char(',') && !quoted) {
                fields << QString();
            } else {
                fields.last() += c;
            }
        }
        rows << fields;
    }
    return rows;
}

} // namespace outlierlens::test
