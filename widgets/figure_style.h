#pragma once
// GUI thread (fonts); csvField() and csvNumber() from any thread.

#include <QColor>
#include <QFont>
#include <QString>

class QLabel;
class QWidget;

namespace outlierlens {

/// The fixed look of figures drawn by paintFigure(). Sizes are pixels at 96 DPI, never the window's
/// font, so an export depends only on data, style and requested size (STYLE.md).
namespace FigureStyle {
QFont titleFont();   ///< figure titles ("Layer 11, head 3"), 16 px bold
QFont captionFont(); ///< panel captions, 13 px bold
QFont labelFont();   ///< token and dimension labels, tick labels, 11 px
QFont smallFont();   ///< legends, subtitles, the provenance footer, 10 px
QColor text();
QColor secondaryText();
QColor background();
QColor highlight(); ///< selected tokens and rows (orange)
QColor gridLine();
} // namespace FigureStyle

/// The title label views show above their content on screen: the widget font, bold, 1.2 times as
/// large (figures use FigureStyle::titleFont() instead).
QLabel* makeViewTitle(QWidget* parent);

/// One CSV field, quoted when it contains a comma, a quote or a line break (RFC 4180).
QString csvField(const QString& text);
/// A number written so that a float reads back exactly (%.9g); "nan"/"inf" as printf writes them.
QString csvNumber(double value);

} // namespace outlierlens
