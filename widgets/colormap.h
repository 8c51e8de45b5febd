#pragma once
// Any thread (pure functions).

#include "view_data.h"

#include <QColor>

namespace outlierlens {

/// Colour maps shared by every view, so a value looks the same everywhere.
class ColorMap
{
public:
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
