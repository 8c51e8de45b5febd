#pragma once
// Any thread (pure functions).

#include "view_data.h"

#include <QColor>

namespace outlierlens {

/// Colour maps shared by every view, so a value looks the same everywhere. The palettes are a
/// process-wide choice (View > Colour maps in the app, remembered in its settings); views pick up a
/// change when they next rebuild their images.
class ColorMap
{
public:
    enum class Palette {
        Viridis,     ///< sequential, default
        Grayscale,   ///< sequential, white (0) to black (max): prints well
        BlueRed,     ///< diverging, default: blue - white - red
        PurpleGreen, ///< diverging: purple - white - green (readable with red-green colour blindness)
    };
    /// Sets the palette of sequential (Viridis, Grayscale) or diverging (BlueRed, PurpleGreen) scales.
    static void setPalette(Palette palette);
    static Palette sequentialPalette();
    static Palette divergingPalette();
    /// "viridis", "grayscale", "blue-red", "purple-green" (settings values and menu entries).
    static QString paletteName(Palette palette);
    static bool parsePalette(const QString& name, Palette* palette);

    /// Sequential (viridis): t in [0, 1] from dark purple to yellow; clamped.
    static QColor sequential(double t);
    /// Diverging (blue - white - red, like matplotlib's RdBu reversed): t in [-1, 1]; clamped.
    static QColor diverging(double t);
    /// The colour of `value` on `scale` with the given maximum magnitude (> 0).
    static QColor color(ColorScale scale, double value, double maxMagnitude);
    /// A colour for text drawn on `background` (black or white, whichever reads better).
    static QColor textOn(const QColor& background);
};

} // namespace outlierlens
