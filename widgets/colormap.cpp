#include "colormap.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>

namespace outlierlens {
namespace {

struct Rgb
{
    double r, g, b;
};

// Anchor points of matplotlib's viridis (every 1/8), linearly interpolated.
constexpr std::array<Rgb, 9> kViridis = {{{0.267, 0.005, 0.329},
                                          {0.283, 0.141, 0.458},
                                          {0.254, 0.265, 0.530},
                                          {0.207, 0.372, 0.553},
                                          {0.164, 0.471, 0.558},
                                          {0.128, 0.567, 0.551},
                                          {0.135, 0.659, 0.518},
                                          {0.267, 0.749, 0.441},
                                          {0.993, 0.906, 0.144}}};

// Blue (negative) - white (zero) - red (positive).
constexpr std::array<Rgb, 5> kDiverging = {{{0.020, 0.188, 0.380},
                                            {0.263, 0.576, 0.765},
                                            {0.969, 0.969, 0.969},
                                            {0.839, 0.376, 0.302},
                                            {0.404, 0.000, 0.122}}};

// Purple (negative) - white (zero) - green (positive).
constexpr std::array<Rgb, 5> kPurpleGreen = {{{0.251, 0.000, 0.294},
                                              {0.600, 0.439, 0.671},
                                              {0.969, 0.969, 0.969},
                                              {0.353, 0.682, 0.380},
                                              {0.000, 0.267, 0.106}}};

constexpr std::array<Rgb, 2> kGrayscale = {{{1.0, 1.0, 1.0}, {0.0, 0.0, 0.0}}};

std::atomic<int> g_sequential{int(ColorMap::Palette::Viridis)};
std::atomic<int> g_diverging{int(ColorMap::Palette::BlueRed)};

template<std::size_t N>
QColor interpolate(const std::array<Rgb, N>& anchors, double t)
{
    t = std::clamp(t, 0.0, 1.0) * double(N - 1);
    const std::size_t i = std::min<std::size_t>(std::size_t(t), N - 2);
    const double f = t - double(i);
    const Rgb& a = anchors[i];
    const Rgb& b = anchors[i + 1];
    return QColor::fromRgbF(float(a.r + f * (b.r - a.r)), float(a.g + f * (b.g - a.g)),
                            float(a.b + f * (b.b - a.b)));
}

} // namespace

QColor ColorMap::sequential(double t)
{
    // Viridis is perceptually uniform but its last anchors are far apart; a tiny gamma keeps
    // small probabilities distinguishable from zero.
    t = std::isfinite(t) ? t : 0.0;
    return g_sequential == int(Palette::Grayscale) ? interpolate(kGrayscale, t) : interpolate(kViridis, t);
}

QColor ColorMap::diverging(double t)
{
    t = 0.5 * ((std::isfinite(t) ? t : 0.0) + 1.0);
    return g_diverging == int(Palette::PurpleGreen) ? interpolate(kPurpleGreen, t)
                                                    : interpolate(kDiverging, t);
}

void ColorMap::setPalette(Palette palette)
{
    if (palette == Palette::Viridis || palette == Palette::Grayscale)
        g_sequential = int(palette);
    else
        g_diverging = int(palette);
}

ColorMap::Palette ColorMap::sequentialPalette()
{
    return Palette(g_sequential.load());
}
ColorMap::Palette ColorMap::divergingPalette()
{
    return Palette(g_diverging.load());
}

QString ColorMap::paletteName(Palette palette)
{
    switch (palette) {
    case Palette::Viridis:
        return QStringLiteral("viridis");
    case Palette::Grayscale:
        return QStringLiteral("grayscale");
    case Palette::BlueRed:
        return QStringLiteral("blue-red");
    case Palette::PurpleGreen:
        return QStringLiteral("purple-green");
    }
    return QString();
}

bool ColorMap::parsePalette(const QString& name, Palette* palette)
{
    for (Palette p : {Palette::Viridis, Palette::Grayscale, Palette::BlueRed, Palette::PurpleGreen})
        if (paletteName(p) == name) {
            *palette = p;
            return true;
        }
    return false;
}

QColor ColorMap::color(ColorScale scale, double value, double maxMagnitude)
{
    const double m = maxMagnitude > 0 ? maxMagnitude : 1.0;
    return scale == ColorScale::Sequential ? sequential(value / m) : diverging(value / m);
}

QColor ColorMap::textOn(const QColor& background)
{
    const double luminance =
        0.2126 * background.redF() + 0.7152 * background.greenF() + 0.0722 * background.blueF();
    return luminance > 0.5 ? Qt::black : Qt::white;
}

} // namespace outlierlens
