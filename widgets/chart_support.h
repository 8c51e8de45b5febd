#pragma once
// GUI thread (QtCharts objects). Helpers shared by the chart views (OutlierDashboard, TrainingCharts,
// SweepView): one chart style for the window and for exports, fresh-chart rendering and CSV text.

#include "view_data.h"

#include <QColor>
#include <QPainter>
#include <QRectF>
#include <QString>
#include <QStringList>

#include <memory>

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
class QValueAxis;
class QAbstractAxis;
class QWidget;
QT_END_NAMESPACE

namespace outlierlens::charts {

/// A chart in the house style: light theme, no animation, legend at the bottom, tight margins.
QChart* makeChart(const QString& title);
/// A view for `chart` (takes ownership) with antialiasing, as the window shows it.
QChartView* makeChartView(QChart* chart, const QString& objectName, QWidget* parent);
/// Titles an axis in the house font.
void setAxisTitle(QAbstractAxis* axis, const QString& title);
/// Sets [min, max] widened to round numbers; a degenerate or empty range becomes a small one
/// around the value (or [0, 1]).
void setNiceRange(QValueAxis* axis, double min, double max);
/// A count axis: [0, max] widened to a whole number, with ticks at whole numbers only (steps of 1, 2 or 5
/// times a power of ten), labelled without decimals.
void setCountRange(QValueAxis* axis, double max);
/// Draws `chart` into `target` of `painter` through a private QGraphicsScene, so the result
/// depends only on the chart and the target size, never on a window. Deletes the chart.
void renderChart(std::unique_ptr<QChart> chart, QPainter& painter, const QRectF& target);
/// Draws a figure's title and an optional second line at the top of `area`; returns the height used.
int paintFigureHeader(QPainter& painter, const QRect& area, const QString& title, const QString& subtitle);
/// The frame of a chart figure in `area`: antialiasing on, a white background, the title with its
/// subtitle on top and the footer lines at the bottom (paintFigureHeader/Footer). Returns the rectangle
/// left for the charts. The caller saves and restores the painter.
QRectF paintFigureFrame(QPainter& painter, const QRect& area, const QString& title, const QString& subtitle,
                        const QStringList& footer);
/// "model: … · sha256: <12 hex> · input: …" of what is known, for a figure's footer; empty if nothing.
QString provenanceLine(const Provenance& provenance);
/// Draws small grey text lines at the bottom of `area`; returns the height used.
int paintFigureFooter(QPainter& painter, const QRect& area, const QStringList& lines);
/// The colour of item `index` of `count` ordered items (layers, sweep values): viridis without
/// its pale yellow end, so every line reads on white.
QColor orderedColor(int index, int count);
/// One CSV field, quoted when it holds a comma, a quote, a line break or edge spaces.
QString csvField(const QString& text);
/// The data rows of `csv` (its header line dropped), each with `prefix` in front: for long-format CSV
/// that stacks several tables under one header.
QString prefixedCsvRows(const QString& csv, const QString& prefix);
/// A number for CSV: the shortest text that reads back exactly; "nan"/"inf" spelled out.
QString csvNumber(double value);
/// A number for labels and tool tips: integers without decimals, others with 4 significant digits.
QString displayNumber(double value);

} // namespace outlierlens::charts
