#pragma once
// Test helpers (test thread only): what `outlierlens figures` writes, as a test reads it.

#include <QFile>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>

#include <algorithm>
#include <cmath>

namespace outlierlens::test {

/// A figure worth looking at: it loads, is at least 100 px wide and `minHeight` tall, and is not one flat
/// colour.
inline bool notBlank(const QString& path, int minHeight = 100)
{
    const QImage image(path);
    if (image.isNull() || image.width() < 100 || image.height() < minHeight) return false;
    const QRgb first = image.pixel(0, 0);
    int other = 0;
    for (int y = 0; y < image.height(); y += 7)
        for (int x = 0; x < image.width(); x += 7)
            other += image.pixel(x, y) != first ? 1 : 0;
    return other > 100;
}

/// The folder's index.json (empty when missing).
inline QJsonObject readIndex(const QString& dir)
{
    QFile json(dir + QStringLiteral("/index.json"));
    if (!json.open(QIODevice::ReadOnly)) return {};
    return QJsonDocument::fromJson(json.readAll()).object();
}

/// The index's entry of figure `id` ("2", "an10", "table2"); empty when it has none.
inline QJsonObject figureEntry(const QJsonObject& index, const QString& id)
{
    for (const auto& value : index[QStringLiteral("figures")].toArray())
        if (value.toObject()[QStringLiteral("id")].toString() == id) return value.toObject();
    return {};
}

/// a and b agree to `relative` of the larger magnitude (or absolutely, below 1).
inline bool near(double a, double b, double relative)
{
    return std::abs(a - b) <= relative * std::max(1.0, std::max(std::abs(a), std::abs(b)));
}

} // namespace outlierlens::test
