#pragma once
// GUI thread only (fonts and painters).
// Drawing pieces shared by the views that paint their figures by hand (ImageView, TeachingView).
// Every size is in pixels derived from the requested figure size (`base`, a text pixel size), never
// from the window, so an export depends only on data, style and size.

#include <QColor>
#include <QFont>
#include <QPainter>
#include <QPolygonF>
#include <QRectF>
#include <QString>
#include <QVector>

namespace outlierlens::painting {

QColor textColor();
QColor mutedColor(); ///< captions, credits, footers
QColor frameColor(); ///< outlines of heatmaps and axes

/// Three significant digits (%.3g) and a real minus sign; integers from 1000 on in full
/// ("1284", not "1.28e+03").
QString displayNumber(double value);
QFont pixelFont(double px, bool bold = false, bool italic = false);

/// The largest rect of aspect `aspect` (width / height) inside `box`, centred horizontally, at the
/// top; empty if none fits.
QRectF fitAspect(const QRectF& box, double aspect);
/// Cell (row, col), 0-based, of a rows x cols grid over `rect`; neighbouring cells share edges.
QRectF cellRect(const QRectF& rect, int rows, int cols, int row, int col);

/// One line, elided at the right when too long.
void drawElided(QPainter& painter, const QRectF& line, int flags, const QString& text);
/// Up to two lines of `line`'s height (credits, descriptions), elided beyond that; returns the
/// number of lines used (0 for empty text).
int drawTwoLines(QPainter& painter, const QRectF& line, int flags, const QString& text);
/// `font` shrunk (down to 55 %) until `text` fits `width` with the painter's metrics.
QFont fitFont(QPainter& painter, QFont font, const QString& text, double width);
/// One line in `font` shrunk to fit, elided if it still does not.
void drawFitted(QPainter& painter, const QRectF& line, int flags, const QString& text, const QFont& font);

/// A rows x cols grid of `values` (row-major, rows * cols entries) on the sequential scale 0..maxValue.
void drawHeatGrid(QPainter& painter, const QRectF& rect, const QVector<float>& values, int rows, int cols,
                  double maxValue);
/// A grey box with a short explanation where a panel has nothing valid to show.
void drawNoData(QPainter& painter, const QRectF& rect, const QString& text, double base);
/// A horizontal sequential colour bar with "0", the maximum and `label` in one line underneath.
void drawColorBar(QPainter& painter, const QRectF& bar, double maxValue, const QString& label, double base);

/// Grid lines and tick labels every `step` from 0 to `top` over the height of `plot` (labels left of it),
/// and `title` rotated left of the labels (3.6 * base left of `plot`).
void drawValueAxis(QPainter& painter, const QRectF& plot, double top, double step, const QString& title,
                   double base);

struct Bar
{
    QString label;
    double value = 0;
    QColor color;
};
/// Vertical bars from 0 in `plot` with round ticks, values above the bars, labels underneath
/// (one line) and `axisTitle` rotated left of the tick labels (3.6 * base left of `plot`).
void drawBarPlot(QPainter& painter, const QRectF& plot, const QVector<Bar>& bars, const QString& axisTitle,
                 double base);

/// A polyline with an arrowhead at its last point.
void drawArrow(QPainter& painter, QPolygonF path, const QColor& color, double base);

} // namespace outlierlens::painting
