#pragma once
// Transforms that keep a model's function but change what its quantizers see (docs/quantization.md,
// "Transforms"): SmoothQuant's migration of activation ranges into the weights. Runs on the thread that
// runs the model.

#include "model/capture.h"
#include "model/norm_readers.h"

#include <torch/types.h>

#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}

namespace outlierlens {

/// The transforms `quantize` applies before it quantizes, in this order.
struct ModelTransform
{
    std::optional<double> smoothQuantAlpha; ///< SmoothQuant's migration strength in [0, 1]; none: off

    bool any() const { return smoothQuantAlpha.has_value(); }
    /// "smoothquant 0.5"; "" when nothing is applied.
    std::string describe() const;
};

/// Collects each pre-norm's output maximum |x| per channel over the forward passes it sees (the AttnNorm
/// and FfnNorm sites, every token); changes nothing.
class ChannelMaxSink : public ActivationSink
{
public:
    bool wants(CapturePoint, int) const override { return false; }
    void put(CapturePoint, int, const at::Tensor&) override {}
    bool transformsActivations() const override { return true; }
    at::Tensor transform(QuantSite site, int layer, const at::Tensor& batched) override;
    /// [d] float32 per (layer, site); empty before any pass.
    const std::map<std::pair<int, QuantSite>, torch::Tensor>& maxima() const { return m_maxima; }
    /// The largest |x| over every collected site (0 before any pass).
    double overallMax() const;

private:
    std::map<std::pair<int, QuantSite>, torch::Tensor> m_maxima;
};

/// SmoothQuant (Xiao et al. 2023, eq. 4): per channel j of each norm's output,
/// s_j = max|X_j|^alpha / max|W_j|^(1 - alpha) (W: every weight reading the norm, over its outputs; both
/// clamped at 1e-5, as the reference code does); the norm's scale and bias are divided by s and the
/// readers' input columns multiplied by s, so X W^T is unchanged while X's channel ranges even out.
/// `maxima` comes from a ChannelMaxSink over calibration data of the same model. Throws Error for an
/// alpha outside [0, 1] or a norm the calibration never reached.
void smoothQuant(const std::vector<NormReaders>& norms,
                 const std::map<std::pair<int, QuantSite>, torch::Tensor>& maxima, double alpha);

/// What applyTransform() measured on the calibration batches.
struct TransformReport
{
    double normedMaxBefore = 0; ///< the largest |x| entering the pre-norms' readers, before
    double normedMaxAfter = 0;  ///< and after the transform
};

/// Applies `transform` to `module` in place (an Error for a model it does not apply to, preNormsOf()).
/// `calibrate` runs the calibration batches through the sink it is given; it is called once to fit the
/// transform and once to measure its effect.
TransformReport applyTransform(torch::nn::Module& module, const ModelTransform& transform,
                               const std::function<void(ActivationSink&)>& calibrate);

} // namespace outlierlens
