#pragma once
// Transforms that keep a model's function but change what its quantizers see (docs/quantization.md,
// "Transforms"): SmoothQuant's migration of activation ranges into the weights. Runs on the thread that
// runs the model.

#include "model/capture.h"
#include "model/norm_readers.h"
#include "quant/model_transform.h"

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}

namespace outlierlens {

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

/// Sylvester's Hadamard matrix of order n (a power of 2): entries +-1, H H^T = n I; float64.
torch::Tensor sylvesterHadamard(std::int64_t n);

/// A seeded orthogonal d x d matrix (float64) that spreads any one coordinate over all of them: random
/// signs times the Kronecker product of the normalised Hadamard matrix of the largest power of 2 dividing
/// d with a random orthogonal matrix (QR of a Gaussian) of the odd rest, which is 1 when d is a power of 2.
torch::Tensor randomizedHadamard(std::int64_t d, std::uint64_t seed);

/// QuaRot's rotation of the residual stream, x -> x Q with Q = randomizedHadamard(d, seed), folded into the
/// weights: each pre-norm's scale and bias move into the layers reading it (biases created where needed),
/// which then read the rotated stream (W Q); writers write into it (Q^T W, b Q); embedding and position
/// tables rotate (E Q); LayerNorms take their mean along the rotated ones vector; the final norm reads
/// through Q^T. The FFN's down projections also get QuaRot's online rotation of their input
/// (randomizedHadamard(f, seed + 1), folded into the weight). The floating-point function is unchanged.
/// Throws Error with the stream's refusal, or when a pre-norm has readers of slices (per-head gates).
void rotateResidualStream(const ResidualStream& stream, std::uint64_t seed);

/// Throws the Error applyTransform() would for a model `transform` does not apply to, before anything runs.
void checkTransformApplies(torch::nn::Module& module, const ModelTransform& transform);

/// What applyTransform() measured on the calibration batches.
struct TransformReport
{
    double normedMaxBefore = 0; ///< the largest |x| entering the pre-norms' readers, before
    double normedMaxAfter = 0;  ///< and after the transform
};

/// Applies `transform` to `module` in place (an Error for a model it does not apply to, preNormsOf()); a
/// float16 or bfloat16 model's tensors become float32 first, so the transform adds no rounding of its own.
/// `calibrate` runs the calibration batches through the sink it is given; it is called once to fit the
/// transform and once to measure its effect.
TransformReport applyTransform(torch::nn::Module& module, const ModelTransform& transform,
                               const std::function<void(ActivationSink&)>& calibrate);

} // namespace outlierlens
