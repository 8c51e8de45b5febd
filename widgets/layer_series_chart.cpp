#include "layer_series_chart.h"

#include "chart_support.h"
#include "nice_numbers.h"

#include <QAreaSeries>
#include <QChart>
#include <QChartView>
#include <QLegend>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QVBoxLayout>
#include <QValueAxis>

#include <cmath>
#include <limits>
#include <memory>

namespace outlierlens {
namespace {

const QColor kBandColor(255, 127, 14, 60);

} // namespace

QChart* makeLayerSeriesChart(const LayerSeriesData& s, const QString& fallbackTitle, int layer,
                             double givenLow, double givenHigh)
{
    int layers = 0;
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const QVector<double>& values : s.series) {
        layers = std::max(layers, int(values.size()));
        for (double v : values)
            if (std::isfinite(v) && v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
    }
    const bool any = lo <= hi;
    const QString title = s.title.isEmpty() ? fallbackTitle : s.title;
    QChart* chart = charts::makeChart(any ? title : title + QStringLiteral(": no data"));
    auto* x = new QValueAxis;
    x->setLabelFormat(QStringLiteral("%d"));
    x->setTickType(QValueAxis::TicksDynamic);
    x->setTickAnchor(1);
    x->setTickInterval(niceStep(std::max(1.0, layers / 10.0)));
    x->setRange(0.5, std::max(layers, 1) + 0.5);
    charts::setAxisTitle(x, QStringLiteral("layer (1-based)"));
    auto* y = new QLogValueAxis;
    y->setLabelFormat(QStringLiteral("%g"));
    y->setMinorGridLineVisible(false);
    charts::setAxisTitle(y, (s.axisTitle.isEmpty() ? QStringLiteral("value") : s.axisTitle) +
                                QStringLiteral(" (log scale)"));
    const bool given = givenLow > 0 && givenHigh > givenLow;
    const double low = given ? givenLow : any ? std::pow(10.0, std::floor(std::log10(lo))) : 1.0;
    const double high =
        given ? givenHigh : std::max(any ? std::pow(10.0, std::ceil(std::log10(hi))) : 10.0, low * 10);
    y->setRange(low, high);
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    auto add = [&](QAbstractSeries* series) {
        chart->addSeries(series);
        series->attachAxis(x);
        series->attachAxis(y);
    };
    if (any && layer >= 0 && layer < layers) { // first, so that it lies behind the lines
        auto* upper = new QLineSeries;
        auto* lower = new QLineSeries;
        upper->append({QPointF(layer + 0.55, high), QPointF(layer + 1.45, high)});
        lower->append({QPointF(layer + 0.55, low), QPointF(layer + 1.45, low)});
        auto* band = new QAreaSeries(upper, lower);
        upper->setParent(band);
        lower->setParent(band);
        band->setName(QStringLiteral("layer %1").arg(layer + 1));
        band->setColor(kBandColor);
        band->setBorderColor(Qt::transparent);
        add(band);
    }
    const int count = int(s.series.size());
    for (int i = 0; i < count; ++i) {
        const QVector<double>& values = s.series[i];
        auto* line = new QLineSeries;
        QList<QPointF> points;
        for (int l = 0; l < values.size(); ++l) {
            if (!std::isfinite(values[l]) || values[l] <= 0) continue; // never on a log axis
            points << QPointF(l + 1, values[l]);
        }
        line->setName(s.names.value(i, QStringLiteral("series %1").arg(i + 1)));
        line->setPen(QPen(charts::orderedColor(i, count), 2));
        line->setPointsVisible(true);
        line->replace(points);
        add(line);
    }
    chart->legend()->setVisible(count > 0);
    return chart;
}

LayerSeriesChart::LayerSeriesChart(QWidget* parent)
    : QWidget(parent)
{
    m_view =
        charts::makeChartView(makeLayerSeriesChart({}, QString()), QStringLiteral("layerSeriesChart"), this);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_view);
}

void LayerSeriesChart::setData(const LayerSeriesData& data, int layer)
{
    m_data = data;
    m_layer = layer;
    QChart* old = m_view->chart();
    m_view->setChart(makeLayerSeriesChart(m_data, QString(), m_layer));
    delete old;
}

void LayerSeriesChart::paintFigure(QPainter& painter, const QRect& area) const
{
    charts::renderChart(std::unique_ptr<QChart>(makeLayerSeriesChart(m_data, QString(), m_layer)), painter,
                        area);
}

QString LayerSeriesChart::figureCsv() const
{
    QString csv = QStringLiteral("layer (1-based)");
    int layers = 0;
    for (int i = 0; i < m_data.series.size(); ++i) {
        csv += QLatin1Char(',') + charts::csvField(m_data.names.value(i));
        layers = std::max(layers, int(m_data.series[i].size()));
    }
    csv += QLatin1Char('\n');
    for (int l = 0; l < layers; ++l) {
        csv += QString::number(l + 1);
        for (const QVector<double>& values : m_data.series)
            csv += QLatin1Char(',') +
                   (l < values.size() && std::isfinite(values[l]) ? charts::csvNumber(values[l]) : QString());
        csv += QLatin1Char('\n');
    }
    return csv;
}

} // namespace outlierlens
