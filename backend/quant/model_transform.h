#pragma once
// Plain data (no torch): what a transform that keeps a model's function does (backend/quant/transforms.h
// applies it), so that the GUI thread can hold the choice.

#include <cstdint>
#include <optional>
#include <string>

namespace outlierlens {

/// The transforms `quantize` (and the app's "Seen by" choice) applies, in this order.
struct ModelTransform
{
    std::optional<double> smoothQuantAlpha; ///< SmoothQuant's migration strength in [0, 1]; none: off
    bool rotate = false;                    ///< rotateResidualStream() after any smoothing
    std::uint64_t rotationSeed = 0;

    bool any() const { return smoothQuantAlpha.has_value() || rotate; }
    /// "smoothquant 0.5, hadamard rotation"; "" when nothing is applied.
    std::string describe() const;
    bool operator==(const ModelTransform& o) const
    {
        return smoothQuantAlpha == o.smoothQuantAlpha && rotate == o.rotate && rotationSeed == o.rotationSeed;
    }
    bool operator!=(const ModelTransform& o) const { return !(*this == o); }
};

} // namespace outlierlens
