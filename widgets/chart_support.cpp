#include "chart_support.h"

#include "colormap.h"
#include "nice_numbers.h"

#include <QAbstractAxis>
#include <QChart>
#include <QChartView>
#include <QFont>
#include <QFontMetrics>
#include <QGraphicsScene>
#include <QLegend>
#include <QLocale>
#include <QValueAxis>

#include <cmath>

namespace outlierlens::charts {

namespace {

// Pixel sizes (at 96 DPI), never the window's font: an export depends only on data, style and size.
QFont styledFont(int pixelSize, bool bold = false)
{
    QFont font;
    font.setPixelSize(pixelSize);
    font.setBold(bold);
    return font;
}

} // namespace

QChart* makeChart(const QString& title)
{
    auto* chart = new QChart;
    chart->setTheme(QChart::ChartThemeLight);
    chart->setAnimationOptions(QChart::NoAnimation);
    chart->setTitle(title);
    chart->setTitleFont(styledFont(13, true));
    chart->setMargins(QMargins(4, 4, 4, 4));
    chart->setBackgroundRoundness(0);
    chart->legend()->setAlignment(Qt::AlignBottom);
    chart->legend()->setFont(styledFont(11));
    return chart;
}

QChartView* makeChartView(QChart* chart, const QString& objectName, QWidget* parent)
{
    auto* view = new QChartView(chart, parent);
    view->setObjectName(objectName);
    view->setRenderHint(QPainter::Antialiasing);
    view->setMinimumSize(240, 180);
    return view;
}

void setAxisTitle(QAbstractAxis* axis, const QString& title)
{
    axis->setTitleText(title);
    axis->setTitleFont(styledFont(11));
    axis->setLabelsFont(styledFont(11));
}

void setNiceRange(QValueAxis* axis, double min, double max)
{
    if (!std::isfinite(min) || !std::isfinite(max) || min > max) {
        min = 0;
        max = 1;
    }
    if (max - min < 1e-12) {
        const double pad = std::abs(max) > 0 ? std::abs(max) * 0.1 : 1.0;
        min -= pad;
        max += pad;
    }
    // About five intervals of 1, 2, 2.5 or 5 times a power of ten (QValueAxis::applyNiceNumbers()
    // often doubles the range: 4,240 became 0..6,000).
    const double raw = (max - min) / 5;
    const double power = std::pow(10.0, std::floor(std::log10(raw)));
    double step = 10 * power;
    for (double m : {1.0, 2.0, 2.5, 5.0})
        if (m * power >= raw) {
            step = m * power;
            break;
        }
    const double low = std::floor(min / step + 1e-9) * step;
    const double high = std::ceil(max / step - 1e-9) * step;
    axis->setRange(low, high);
    axis->setTickCount(int(std::lround((high - low) / step)) + 1);
}

void setCountRange(QValueAxis* axis, double max)
{
    if (!std::isfinite(max) || max < 1) max = 1;
    const double step = std::max(1.0, niceStep(max / 5)); // 1, 2 or 5 times a power of ten
    const double high = std::ceil(max / step - 1e-9) * step;
    axis->setRange(0, high);
    axis->setTickCount(int(std::lround(high / step)) + 1);
    axis->setLabelFormat(QStringLiteral("%.0f"));
}

void renderChart(std::unique_ptr<QChart> chart, QPainter& painter, const QRectF& target)
{
    if (target.width() < 1 || target.height() < 1) return;
    QGraphicsScene scene;
    const QRectF source(QPointF(0, 0), target.size());
    QChart* item = chart.release();
    scene.addItem(item); // the scene owns and deletes the chart
    item->setGeometry(source);
    scene.setSceneRect(source);
    scene.render(&painter, target, source, Qt::IgnoreAspectRatio);
}

int paintFigureHeader(QPainter& painter, const QRect& area, const QString& title, const QString& subtitle)
{
    painter.save();
    const QFont titleFont = styledFont(16, true);
    const QFont subtitleFont = styledFont(12);
    const int titleHeight = QFontMetrics(titleFont, painter.device()).height();
    const int subtitleHeight = subtitle.isEmpty() ? 0 : QFontMetrics(subtitleFont, painter.device()).height();
    int y = area.top() + 6;
    painter.setPen(QColor(20, 20, 20));
    painter.setFont(titleFont);
    painter.drawText(QRect(area.left() + 8, y, area.width() - 16, titleHeight),
                     Qt::AlignLeft | Qt::AlignVCenter, title);
    y += titleHeight + 2;
    if (!subtitle.isEmpty()) {
        painter.setFont(subtitleFont);
        painter.setPen(QColor(70, 70, 70));
        const QRect line(area.left() + 8, y, area.width() - 16, subtitleHeight);
        painter.drawText(
            line, Qt::AlignLeft | Qt::AlignVCenter,
            QFontMetrics(subtitleFont, painter.device()).elidedText(subtitle, Qt::ElideRight, line.width()));
        y += subtitleHeight;
    }
    painter.restore();
    return y + 4 - area.top();
}

int paintFigureFooter(QPainter& painter, const QRect& area, const QStringList& lines)
{
    painter.save();
    const QFont font = styledFont(10);
    const QFontMetrics metrics(font, painter.device());
    const int height = metrics.height() * int(lines.size()) + 8;
    painter.setFont(font);
    painter.setPen(QColor(110, 110, 110));
    int y = area.bottom() - height + 4;
    for (const QString& text : lines) {
        const QRect line(area.left() + 8, y, area.width() - 16, metrics.height());
        painter.drawText(line, Qt::AlignLeft | Qt::AlignVCenter,
                         metrics.elidedText(text, Qt::ElideMiddle, line.width()));
        y += metrics.height();
    }
    painter.restore();
    return height;
}

QColor orderedColor(int index, int count)
{
    const double t = count > 1 ? 0.85 * double(index) / double(count - 1) : 0.0;
    return ColorMap::sequential(t);
}

QString csvField(const QString& text)
{
    const bool quote = text.contains(QLatin1Char(',')) || text.contains(QLatin1Char('"')) ||
                       text.contains(QLatin1Char('\n')) || text.contains(QLatin1Char('\r')) ||
                       text.startsWith(QLatin1Char(' ')) || text.endsWith(QLatin1Char(' '));
    if (!quote) return text;
    QString escaped = text;
    escaped.replace(QLatin1String("\""), QLatin1String("\"\""));
    return QLatin1Char('"') + escaped + QLatin1Char('"');
}

QString csvNumber(double value)
{
    if (std::isnan(value)) return QStringLiteral("nan");
    if (std::isinf(value)) return value > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
    return QString::number(value, 'g', QLocale::FloatingPointShortest); // reads back exactly
}

QString displayNumber(double value)
{
    if (!std::isfinite(value)) return csvNumber(value);
    if (value == std::round(value) && std::abs(value) < 1e12) return QString::number(qint64(value));
    return QString::number(value, 'g', 4);
}

QString prefixedCsvRows(const QString& csv, const QString& prefix)
{
    QString rows;
    for (qsizetype start = csv.indexOf(QLatin1Char('\n')) + 1; start > 0 && start < csv.size();) {
        qsizetype end = csv.indexOf(QLatin1Char('\n'), start);
        if (end < 0) end = csv.size() - 1;
        rows += prefix;
        rows += QStringView(csv).mid(start, end - start + 1);
        start = end + 1;
    }
    return rows;
}

QString provenanceLine(const Provenance& p)
{
    QStringList origin;
    if (!p.model.isEmpty()) origin << QStringLiteral("model: %1").arg(p.model);
    if (!p.checkpointSha256.isEmpty())
        origin << QStringLiteral("sha256: %1").arg(p.checkpointSha256.left(12));
    if (!p.input.isEmpty()) origin << QStringLiteral("input: %1").arg(p.input);
    return origin.join(QStringLiteral("  \u00b7  "));
}

QRectF paintFigureFrame(QPainter& painter, const QRect& area, const QString& title, const QString& subtitle,
                        const QStringList& footer)
{
    painter.setRenderHint(QPainter::Antialiasing);
    painter.setRenderHint(QPainter::TextAntialiasing);
    painter.fillRect(area, Qt::white);
    const int top = paintFigureHeader(painter, area, title, subtitle);
    const int bottom = paintFigureFooter(painter, area, footer);
    return QRectF(area.left(), area.top() + top, area.width(), area.height() - top - bottom);
}

} // namespace outlierlens::charts
