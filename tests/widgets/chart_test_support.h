#pragma once
// Shared by the chart-view tests (tst_charts, tst_outlier_dashboard): deterministic data and the helpers
// that find a view's charts, click where a value is drawn and look at rendered figures.

#include "figure.h"
#include "view_data.h"

#include <QAbstractSeries>
#include <QChart>
#include <QChartView>
#include <QDir>
#include <QImage>
#include <QLineSeries>
#include <QPainter>
#include <QTest>

#include <cmath>

namespace outlierlens::testcharts {

/// A small deterministic generator so the data look noisy but never change.
struct Noise
{
    quint32 state = 12345;
    double next()
    {
        state = state * 1664525u + 1013904223u;
        return double(state >> 8) / double(1u << 24);
    }
};

/// BERT-base-like statistics of layer 11's FFN output (0-based layer 10): two huge dimensions
/// and delimiter tokens carrying most outliers.
inline OutlierDashboardData dashboardData(int d = 768, int layers = 12)
{
    OutlierDashboardData data;
    data.sourceDescription = QStringLiteral("statistics file mnli_dev.h5 (9,815 pairs)");
    data.layer = 10;
    data.tensor = QStringLiteral("ffn_out");
    data.headDim = 64;
    data.criterion = QStringLiteral("|x - mean| > 6 std");
    data.perDimension.axisTitle = QStringLiteral("outliers (count)");
    Noise noise;
    for (int k = 0; k < d; ++k) {
        data.perDimension.labels << QString::number(k);
        data.perDimension.values << std::floor(noise.next() * noise.next() * 40);
    }
    data.perDimension.values[308] = 4000;
    data.perDimension.values[381] = 2500;
    data.perDimension.values[0] = 2;
    data.perDimension.values[d - 1] = 3;
    const QStringList tokens{
        QStringLiteral("[SEP]"), QStringLiteral("."),    QStringLiteral(","),    QStringLiteral("the"),
        QStringLiteral("[CLS]"), QStringLiteral("and"),  QStringLiteral("of"),   QStringLiteral("a"),
        QStringLiteral("to"),    QStringLiteral("'"),    QStringLiteral("in"),   QStringLiteral("is"),
        QStringLiteral("?"),     QStringLiteral("that"), QStringLiteral("-"),    QStringLiteral("was"),
        QStringLiteral("for"),   QStringLiteral("it"),   QStringLiteral("with"), QStringLiteral("he"),
        QStringLiteral("as"),    QStringLiteral("on"),   QStringLiteral("be"),   QStringLiteral("at")};
    const QVector<double> counts{3000, 1800, 900, 60, 55, 41, 40, 33, 30, 28, 25, 22,
                                 21,   20,   19,  18, 15, 14, 12, 11, 10, 9,  8,  7};
    // Shuffled order: the dashboard sorts.
    for (int i : {2, 0, 5, 1, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}) {
        data.perToken.labels << tokens[i];
        data.perToken.values << counts[i];
    }
    const double norms[] = {5.1, 6.3, 7.0, 8.2, 9.9, 12.5, 15.0, 21.0, 42.0, 150.0, 560.0, 290.0};
    const double kurt[] = {3.2, 3.9, 4.5, 5.8, 8.0, 12.0, 19.0, 35.0, 120.0, 640.0, 1830.0, 900.0};
    for (int l = 0; l < layers; ++l) {
        data.maxInfNormPerLayer << norms[l % 12];
        data.kurtosisPerLayer << kurt[l % 12];
    }
    data.provenance.model = QStringLiteral("bert-base-uncased");
    data.provenance.checkpointSha256 =
        QStringLiteral("68d45e234eb4a928074dfd868cead0219ab85354cc53d20e772753c6bb9169d3");
    data.provenance.input = QStringLiteral("MNLI validation");
    data.provenance.selection = QStringLiteral("layer 11, ffn_out");
    return data;
}

inline QChartView* chartView(QWidget* parent, const char* name)
{
    auto* view = parent->findChild<QChartView*>(QString::fromLatin1(name));
    if (!view) qFatal("no chart view named %s", name);
    return view;
}

template<typename T>
QList<T*> seriesOf(QChart* chart)
{
    QList<T*> result;
    for (QAbstractSeries* s : chart->series())
        if (auto* t = qobject_cast<T*>(s)) result << t;
    return result;
}

inline QLineSeries* lineNamed(QChart* chart, const QString& name)
{
    for (QLineSeries* s : seriesOf<QLineSeries>(chart))
        if (s->name() == name) return s;
    return nullptr;
}

/// Where a point of chart value space appears in the view's viewport (what a user would click).
inline QPoint viewportPos(QChartView* view, const QPointF& value, QAbstractSeries* series)
{
    QChart* chart = view->chart();
    return view->mapFromScene(chart->mapToScene(chart->mapToPosition(value, series)));
}

inline QImage renderFigure(const Figure& figure, const QSize& size)
{
    QImage image(size, QImage::Format_ARGB32);
    image.fill(Qt::transparent);
    QPainter painter(&image);
    figure.paintFigure(painter, QRect(QPoint(0, 0), size));
    painter.end();
    return image;
}

/// Share of pixels that are neither white nor transparent.
inline double inkedShare(const QImage& image)
{
    qint64 inked = 0;
    for (int y = 0; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x) {
            const QRgb px = image.pixel(x, y);
            if (qAlpha(px) > 0 && (qRed(px) < 245 || qGreen(px) < 245 || qBlue(px) < 245)) ++inked;
        }
    return double(inked) / double(image.width() * image.height());
}

inline void maybeSave(const QImage& image, const QString& name)
{
    const QString dir = qEnvironmentVariable("OUTLIERLENS_SAVE_FIGURES");
    if (dir.isEmpty()) return;
    QDir().mkpath(dir);
    QVERIFY(image.save(dir + QLatin1Char('/') + name + QStringLiteral(".png")));
}

} // namespace outlierlens::testcharts
