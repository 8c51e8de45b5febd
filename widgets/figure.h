#pragma once
// GUI thread.

#include "view_data.h"

#include <QPainter>
#include <QRect>
#include <QSize>
#include <QString>

namespace outlierlens {

/// A view that can draw itself as a figure from its data alone, at any size, so that exports
/// depend only on data, style and requested size, never on the window (STYLE.md).
class Figure
{
public:
    virtual ~Figure() = default;
    /// A good default export size in pixels at 96 DPI.
    virtual QSize preferredFigureSize() const = 0;
    /// Draws the figure into `area` of `painter` (any paint device: image, SVG, PDF).
    virtual void paintFigure(QPainter& painter, const QRect& area) const = 0;
    /// The numbers behind the figure as CSV (header row first; no provenance lines).
    virtual QString figureCsv() const = 0;
    virtual Provenance figureProvenance() const = 0;
    /// A short title for file names and the export dialog, e.g. "head-L11-H3".
    virtual QString figureName() const = 0;
};

} // namespace outlierlens
