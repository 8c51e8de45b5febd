#pragma once
// Simulated (fake) integer quantization. Runs on the thread that runs the model.

#include "model/capture.h"

#include <torch/types.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}

namespace outlierlens {

/// Integer grid of b-bit uniform affine quantization (the paper's eq. 1):
/// x_q = s * (clamp(round(x / s) + z, qmin, qmax) - z), rounding to nearest (ties to even).
struct QuantGrid
{
    double scale = 1;
    double zeroPoint = 0;
    double qmin = 0, qmax = 255;

    torch::Tensor apply(const torch::Tensor& x) const;
    /// Asymmetric (activations): the range [lo, hi] widened to contain 0, qmin = 0, qmax = 2^b - 1,
    /// zero point round(-lo / s) so that 0 is exactly representable.
    static QuantGrid asymmetric(double lo, double hi, int bits);
    /// Symmetric (weights): s = max|x| / (2^(b-1) - 1), z = 0, integers in [-2^(b-1), 2^(b-1) - 1].
    static QuantGrid symmetric(double maxAbs, int bits);
};

/// How an activation quantizer picks its range from calibration batches.
enum class RangeEstimator {
    CurrentMinMax, ///< min and max of the last calibration batch
    RunningMinMax, ///< exponential moving average (momentum 0.9) of each batch's min and max
    Mse,           ///< per batch the range minimising the mean squared quantization error, averaged
    Percentile,    ///< per batch the (100 - p)-th and p-th percentiles, averaged
};
std::string toString(RangeEstimator estimator);
/// "minmax", "running_minmax", "mse", "percentile"; throws Error for anything else.
RangeEstimator parseRangeEstimator(const std::string& text);

/// The range [lo, hi] an estimator picks for one tensor (one batch).
std::pair<double, double> batchRange(const torch::Tensor& x, RangeEstimator estimator, int bits,
                                     double percentile = 99.999);
/// Symmetric range max|x| minimising the squared error of the weights' grid (weights, "mse").
double mseSymmetricMax(const torch::Tensor& w, int bits);

/// Which values share an activation scale (docs/quantization.md, "Granularity").
enum class ActivationGranularity {
    Tensor,  ///< one static range per site, calibrated (the paper's setup)
    Token,   ///< dynamic: each token's row (the last axis) gets its own min-max range at run time
    Channel, ///< one static range per channel of the last axis, calibrated (min-max or running min-max)
};
std::string toString(ActivationGranularity granularity);
/// "tensor", "token", "channel"; throws Error for anything else.
ActivationGranularity parseActivationGranularity(const std::string& text);

/// Which activations are quantized (docs/quantization.md, "Placement").
enum class ActivationPlacement {
    Paper, ///< every site of the paper's code: projections, scores, probabilities, residual sums, norms
    LinearInputs, ///< only what integer matmuls read, as SmoothQuant and QuaRot run LLMs: the inputs of the
                  ///< linear layers (normed activations, the attention context, the FFN's hidden layer) and
                  ///< the keys and values (the KV cache)
};
std::string toString(ActivationPlacement placement);
/// "paper", "linear-inputs"; throws Error for anything else.
ActivationPlacement parseActivationPlacement(const std::string& text);

/// One activation quantizer: collects its range while calibrating, then quantizes with it. With
/// `keepFpTokens` > 0, the first that many positions of the token axis (dim -2 of a tensor of at least 3
/// dims: [B, T, d], or the queries of [B, H, T, T]) stay in floating point and do not enter the range
/// (PrefixQuant's sink tokens).
class ActivationQuantizer
{
public:
    ActivationQuantizer(RangeEstimator estimator, int bits, double percentile,
                        ActivationGranularity granularity = ActivationGranularity::Tensor,
                        int keepFpTokens = 0);
    /// Updates the range with this batch, then quantizes the batch with the updated range (so the
    /// next quantizer calibrates on quantized inputs, as in the paper's code).
    torch::Tensor calibrate(const torch::Tensor& x);
    /// Quantizes with the calibrated range (the identity if calibration never saw data; per token, the
    /// rows' own ranges).
    torch::Tensor apply(const torch::Tensor& x) const;
    /// The per-tensor range, or the hull of the per-channel ranges; none per token.
    std::optional<std::pair<double, double>> range() const { return m_range; }

private:
    torch::Tensor quantized(const torch::Tensor& x) const;
    /// The part of x whose values set ranges: without the kept tokens.
    torch::Tensor ranged(const torch::Tensor& x) const;
    int keptTokens(const torch::Tensor& x) const;

    RangeEstimator m_estimator;
    int m_bits;
    double m_percentile;
    ActivationGranularity m_granularity;
    int m_keepFpTokens;
    int m_batches = 0;
    std::optional<std::pair<double, double>> m_range;
    torch::Tensor m_channelLo, m_channelHi; ///< [C], Channel granularity
};

struct QuantOptions
{
    int weightBits = 8;
    int activationBits = 8;
    bool quantizeWeights = true;
    bool quantizeActivations = true;
    bool perChannelWeights = false;
    bool mseWeights = false; ///< weights' range by MSE search instead of min-max
    RangeEstimator estimator = RangeEstimator::RunningMinMax;
    double percentile = 99.999;
    /// Only sites of this layer (0-based; -1 = embeddings and head) quantize activations; nullopt = all.
    std::optional<int> onlyLayer;
    /// Quantize the Logits site. Off for causal LMs, whose head stays in floating point (the "fp32_head"
    /// setup of the paper's OPT code).
    bool quantizeLogits = true;
    ActivationGranularity activationGranularity = ActivationGranularity::Tensor;
    /// Bits of the attention's keys and values (the Key and Value sites: the KV cache); 0: activationBits.
    int kvBits = 0;
    /// The first this many token positions of every activation stay in floating point (0: none).
    int keepFpTokens = 0;
    ActivationPlacement placement = ActivationPlacement::Paper;
};

/// An ActivationSink that fake-quantizes every QuantSite: calibrate with setCalibrating(true) and a few
/// forward passes, then evaluate with setCalibrating(false). Captures can be forwarded to `inner`.
class QuantizationSink : public ActivationSink
{
public:
    explicit QuantizationSink(QuantOptions options, ActivationSink* inner = nullptr)
        : m_options(std::move(options))
        , m_inner(inner)
    {}
    void setCalibrating(bool calibrating) { m_calibrating = calibrating; }
    /// Quantizer name ("layer2/attn_scores", "embedding_sum") -> calibrated range.
    std::map<std::string, std::pair<double, double>> ranges() const;

    bool wants(CapturePoint point, int layer) const override
    {
        return m_inner && m_inner->wants(point, layer);
    }
    void put(CapturePoint point, int layer, const at::Tensor& batched) override
    {
        if (m_inner) m_inner->put(point, layer, batched);
    }
    bool transformsActivations() const override { return m_options.quantizeActivations; }
    at::Tensor transform(QuantSite site, int layer, const at::Tensor& batched) override;

private:
    QuantOptions m_options;
    ActivationSink* m_inner;
    bool m_calibrating = true;
    std::map<std::pair<int, int>, ActivationQuantizer> m_quantizers; // (layer, site)
};

/// Fake-quantizes the weights of `module` in place (symmetric, per tensor or per output channel):
/// every Linear, Embedding and Conv2d weight (also the decoders' own linear and embedding modules;
/// GPT-2's Conv1D [in, out] per output channel too) whose name contains none of `keepFloat` (e.g.
/// "cls." for the MLM head and ".alpha." for the gates, which stay in floating point). Biases and
/// LayerNorms stay in floating point. Weights must be float32. Returns the names of the quantized
/// weights.
std::vector<std::string> quantizeWeights(torch::nn::Module& module, const QuantOptions& options,
                                         const std::vector<std::string>& keepFloat);

} // namespace outlierlens
