#pragma once
// Private to the heatmap renderer (heatmap_renderer.cpp, heatmap_color_bar.cpp): the sizes and colours
// that its cells, labels and colour bar share.

#include <QCoreApplication>
#include <QRgb>
#include <QString>

namespace outlierlens::heatmap_parts {

inline QString tr(const char* text)
{
    return QCoreApplication::translate("HeatmapView", text);
}

constexpr double kGap = 4.0;
constexpr double kBarWidth = 12.0;
constexpr double kTickLength = 3.0;
constexpr double kSwatch = 10.0;
constexpr double kCrossMinCell = 6.0; // smaller zero cells are filled grey instead of crossed
const QRgb kZeroFill = qRgb(150, 150, 150);
const QRgb kMaskedFill = qRgb(228, 228, 228); // causal mask: lighter than any exact-zero marker

} // namespace outlierlens::heatmap_parts
