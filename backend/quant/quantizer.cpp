#include "quant/quantizer.h"

#include "common/error.h"
#include "model/decoder_modules.h"

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace outlierlens {
namespace {

/// At most `limit` evenly strided values of x, flattened (estimators on huge tensors).
torch::Tensor subsample(const torch::Tensor& x, std::int64_t limit)
{
    const torch::Tensor flat = x.detach().reshape({-1}).to(torch::kFloat);
    if (flat.numel() <= limit) return flat;
    const std::int64_t step = (flat.numel() + limit - 1) / limit;
    return flat.slice(0, 0, flat.numel(), step);
}

double squaredError(const torch::Tensor& x, const QuantGrid& grid)
{
    return (grid.apply(x) - x).pow(2).mean().item<double>();
}

constexpr int kMseGrid = 100;                // candidate ranges: 1%, 2%, ..., 100% of min-max
constexpr std::int64_t kMseSample = 1 << 18; // values used by the MSE search
constexpr std::int64_t kPercentileSample = 1 << 23;
constexpr double kMomentum = 0.9;

} // namespace

torch::Tensor QuantGrid::apply(const torch::Tensor& x) const
{
    return (torch::clamp(torch::round(x / scale) + zeroPoint, qmin, qmax) - zeroPoint) * scale;
}

QuantGrid QuantGrid::asymmetric(double lo, double hi, int bits)
{
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
    QuantGrid g;
    g.qmin = 0;
    g.qmax = std::ldexp(1.0, bits) - 1;
    g.scale = (hi - lo) / g.qmax;
    if (!(g.scale > 0)) g.scale = 1e-8; // an all-zero tensor: any grid represents it exactly
    g.zeroPoint = std::round(-lo / g.scale);
    return g;
}

QuantGrid QuantGrid::symmetric(double maxAbs, int bits)
{
    QuantGrid g;
    g.qmax = std::ldexp(1.0, bits - 1) - 1;
    g.qmin = -g.qmax - 1;
    g.scale = maxAbs / g.qmax;
    if (!(g.scale > 0)) g.scale = 1e-8;
    g.zeroPoint = 0;
    return g;
}

std::string toString(RangeEstimator estimator)
{
    switch (estimator) {
    case RangeEstimator::CurrentMinMax:
        return "minmax";
    case RangeEstimator::RunningMinMax:
        return "running_minmax";
    case RangeEstimator::Mse:
        return "mse";
    case RangeEstimator::Percentile:
        return "percentile";
    }
    return "?";
}

RangeEstimator parseRangeEstimator(const std::string& text)
{
    for (RangeEstimator e : {RangeEstimator::CurrentMinMax, RangeEstimator::RunningMinMax,
                             RangeEstimator::Mse, RangeEstimator::Percentile})
        if (toString(e) == text) return e;
    throw Error("unknown range estimator '" + text + "' (minmax, running_minmax, mse or percentile)");
}

std::pair<double, double> batchRange(const torch::Tensor& x, RangeEstimator estimator, int bits,
                                     double percentile)
{
    torch::NoGradGuard noGrad;
    const torch::Tensor flat = x.detach().reshape({-1}).to(torch::kFloat);
    if (flat.numel() == 0) return {0.0, 0.0};
    switch (estimator) {
    case RangeEstimator::CurrentMinMax:
    case RangeEstimator::RunningMinMax:
        return {flat.min().item<double>(), flat.max().item<double>()};
    case RangeEstimator::Percentile: {
        if (!(percentile > 50 && percentile <= 100))
            throw Error("percentile must be in (50, 100], found " + std::to_string(percentile));
        const torch::Tensor sample = subsample(flat, kPercentileSample);
        const std::int64_t n = sample.numel();
        const auto rank = [&](double p) {
            return std::clamp<std::int64_t>(std::int64_t(std::llround(p / 100.0 * double(n - 1))) + 1, 1, n);
        };
        return {std::get<0>(torch::kthvalue(sample, rank(100.0 - percentile))).item<double>(),
                std::get<0>(torch::kthvalue(sample, rank(percentile))).item<double>()};
    }
    case RangeEstimator::Mse: {
        const torch::Tensor sample = subsample(flat, kMseSample);
        const double lo = std::min(0.0, flat.min().item<double>()),
                     hi = std::max(0.0, flat.max().item<double>());
        std::pair<double, double> best{lo, hi};
        double bestError = squaredError(sample, QuantGrid::asymmetric(lo, hi, bits));
        for (int i = 1; i < kMseGrid; ++i) {
            const double f = double(i) / kMseGrid;
            const double e = squaredError(sample, QuantGrid::asymmetric(lo * f, hi * f, bits));
            if (e < bestError) bestError = e, best = {lo * f, hi * f};
        }
        return best;
    }
    }
    return {0.0, 0.0};
}

double mseSymmetricMax(const torch::Tensor& w, int bits)
{
    torch::NoGradGuard noGrad;
    const torch::Tensor sample = subsample(w, kMseSample);
    const double maxAbs = w.detach().abs().max().item<double>();
    double best = maxAbs, bestError = squaredError(sample, QuantGrid::symmetric(maxAbs, bits));
    for (int i = 1; i < kMseGrid; ++i) {
        const double m = maxAbs * double(i) / kMseGrid;
        const double e = squaredError(sample, QuantGrid::symmetric(m, bits));
        if (e < bestError) bestError = e, best = m;
    }
    return best;
}

std::string toString(ActivationGranularity granularity)
{
    switch (granularity) {
    case ActivationGranularity::Tensor:
        return "tensor";
    case ActivationGranularity::Token:
        return "token";
    case ActivationGranularity::Channel:
        return "channel";
    }
    return "?";
}

ActivationGranularity parseActivationGranularity(const std::string& text)
{
    for (ActivationGranularity g :
         {ActivationGranularity::Tensor, ActivationGranularity::Token, ActivationGranularity::Channel})
        if (toString(g) == text) return g;
    throw Error("unknown activation granularity '" + text + "' (tensor, token or channel)");
}

ActivationQuantizer::ActivationQuantizer(RangeEstimator estimator, int bits, double percentile,
                                         ActivationGranularity granularity, int keepFpTokens)
    : m_estimator(estimator)
    , m_bits(bits)
    , m_percentile(percentile)
    , m_granularity(granularity)
    , m_keepFpTokens(keepFpTokens)
{
    if (keepFpTokens < 0) throw Error("keep-fp tokens must not be negative");
    if (granularity == ActivationGranularity::Channel && estimator != RangeEstimator::CurrentMinMax &&
        estimator != RangeEstimator::RunningMinMax)
        throw Error("per-channel activation ranges take the minmax or running_minmax estimator, not " +
                    toString(estimator));
}

int ActivationQuantizer::keptTokens(const torch::Tensor& x) const
{
    if (m_keepFpTokens == 0 || x.dim() < 3) return 0;
    return int(std::min<std::int64_t>(m_keepFpTokens, x.size(-2)));
}

torch::Tensor ActivationQuantizer::ranged(const torch::Tensor& x) const
{
    const int kept = keptTokens(x);
    return kept ? x.narrow(-2, kept, x.size(-2) - kept) : x;
}

torch::Tensor ActivationQuantizer::calibrate(const torch::Tensor& x)
{
    torch::NoGradGuard noGrad;
    const torch::Tensor r = ranged(x);
    if (m_granularity == ActivationGranularity::Token) {
        ++m_batches; // dynamic: nothing to calibrate
        return apply(x);
    }
    if (r.numel() == 0) return apply(x);
    if (m_granularity == ActivationGranularity::Channel) {
        const torch::Tensor flat = r.detach().reshape({-1, r.size(-1)}).to(torch::kDouble);
        const torch::Tensor lo = std::get<0>(flat.min(0)), hi = std::get<0>(flat.max(0));
        if (!m_channelLo.defined() || m_estimator == RangeEstimator::CurrentMinMax) {
            m_channelLo = lo, m_channelHi = hi;
        } else {
            m_channelLo = kMomentum * m_channelLo + (1 - kMomentum) * lo;
            m_channelHi = kMomentum * m_channelHi + (1 - kMomentum) * hi;
        }
        m_range = {m_channelLo.min().item<double>(), m_channelHi.max().item<double>()};
        ++m_batches;
        return apply(x);
    }
    const auto [lo, hi] = batchRange(r, m_estimator, m_bits, m_percentile);
    if (!m_range || m_estimator == RangeEstimator::CurrentMinMax) {
        m_range = {lo, hi};
    } else if (m_estimator == RangeEstimator::RunningMinMax) {
        m_range = {kMomentum * m_range->first + (1 - kMomentum) * lo,
                   kMomentum * m_range->second + (1 - kMomentum) * hi};
    } else { // MSE and percentile: the mean of the per-batch ranges
        const double n = double(m_batches);
        m_range = {(m_range->first * n + lo) / (n + 1), (m_range->second * n + hi) / (n + 1)};
    }
    ++m_batches;
    return apply(x);
}

torch::Tensor ActivationQuantizer::quantized(const torch::Tensor& x) const
{
    const double qmax = std::ldexp(1.0, m_bits) - 1;
    // An asymmetric grid per row or channel, as QuantGrid::asymmetric does per tensor: the range widened
    // to contain 0, the zero point rounded so that 0 is exact.
    const auto grid = [&](torch::Tensor lo, torch::Tensor hi) {
        lo = lo.clamp_max(0.0), hi = hi.clamp_min(0.0);
        torch::Tensor scale = (hi - lo) / qmax;
        scale = torch::where(scale > 0, scale, torch::full_like(scale, 1e-8));
        const torch::Tensor zero = torch::round(-lo / scale);
        const torch::Tensor xd = x.to(torch::kDouble);
        return ((torch::clamp(torch::round(xd / scale) + zero, 0.0, qmax) - zero) * scale)
            .to(x.scalar_type());
    };
    switch (m_granularity) {
    case ActivationGranularity::Tensor:
        return m_range ? QuantGrid::asymmetric(m_range->first, m_range->second, m_bits).apply(x) : x;
    case ActivationGranularity::Token:
        return grid(x.detach().amin(-1, true).to(torch::kDouble),
                    x.detach().amax(-1, true).to(torch::kDouble));
    case ActivationGranularity::Channel:
        if (!m_channelLo.defined()) return x;
        if (m_channelLo.size(0) != x.size(-1))
            throw Error("per-channel activation quantizer: calibrated on " +
                        std::to_string(m_channelLo.size(0)) + " channels, applied to " +
                        std::to_string(x.size(-1)));
        return grid(m_channelLo, m_channelHi);
    }
    return x;
}

torch::Tensor ActivationQuantizer::apply(const torch::Tensor& x) const
{
    torch::Tensor q = quantized(x);
    if (const int kept = keptTokens(x)) {
        q = q.clone();
        q.narrow(-2, 0, kept).copy_(x.narrow(-2, 0, kept));
    }
    return q;
}

std::map<std::string, std::pair<double, double>> QuantizationSink::ranges() const
{
    std::map<std::string, std::pair<double, double>> out;
    for (const auto& [key, quantizer] : m_quantizers) {
        if (!quantizer.range()) continue;
        const std::string site = quantSiteName(QuantSite(key.second));
        out[key.first < 0 ? site : "layer" + std::to_string(key.first) + "/" + site] = *quantizer.range();
    }
    return out;
}

std::string toString(ActivationPlacement placement)
{
    return placement == ActivationPlacement::Paper ? "paper" : "linear-inputs";
}

ActivationPlacement parseActivationPlacement(const std::string& text)
{
    if (text == "paper") return ActivationPlacement::Paper;
    if (text == "linear-inputs") return ActivationPlacement::LinearInputs;
    throw Error("unknown activation placement '" + text + "' (paper or linear-inputs)");
}

namespace {

/// The sites an integer matmul reads: linear layers' inputs, and the keys and values.
bool isLinearInput(QuantSite site)
{
    switch (site) {
    case QuantSite::EmbeddingNorm: // BERT: the first block's input
    case QuantSite::AttnNorm:
    case QuantSite::FfnNorm:
    case QuantSite::AttnContext:
    case QuantSite::FfnIntermediate:
    case QuantSite::Key:
    case QuantSite::Value:
        return true;
    default:
        return false;
    }
}

} // namespace

at::Tensor QuantizationSink::transform(QuantSite site, int layer, const at::Tensor& batched)
{
    if (m_options.onlyLayer && *m_options.onlyLayer != layer) return batched;
    if (m_options.placement == ActivationPlacement::LinearInputs && !isLinearInput(site)) return batched;
    if (site == QuantSite::Logits && !m_options.quantizeLogits) return batched;
    if (site == QuantSite::AttnGate) return batched; // the gates stay in floating point
    if (site == QuantSite::FfnGate || site == QuantSite::FfnUp || site == QuantSite::FfnAct)
        return batched; // recording sites inside the FFN: its input and down_in are the quantized ones
    const std::pair<int, int> key{layer, int(site)};
    auto it = m_quantizers.find(key);
    if (it == m_quantizers.end()) {
        // Attention scores and probabilities have no channel axis (their last axis is the keys): per tensor.
        const bool noChannels = site == QuantSite::AttnScores || site == QuantSite::AttnProbs;
        const ActivationGranularity granularity =
            noChannels && m_options.activationGranularity == ActivationGranularity::Channel
                ? ActivationGranularity::Tensor
                : m_options.activationGranularity;
        const bool kv = site == QuantSite::Key || site == QuantSite::Value;
        const int bits = kv && m_options.kvBits > 0 ? m_options.kvBits : m_options.activationBits;
        it = m_quantizers
                 .emplace(key, ActivationQuantizer(m_options.estimator, bits, m_options.percentile,
                                                   granularity, m_options.keepFpTokens))
                 .first;
    }
    return m_calibrating ? it->second.calibrate(batched) : it->second.apply(batched);
}

std::vector<std::string> quantizeWeights(torch::nn::Module& module, const QuantOptions& options,
                                         const std::vector<std::string>& keepFloat)
{
    torch::NoGradGuard noGrad;
    std::vector<std::string> done;
    for (const auto& item : module.named_modules("", false)) {
        torch::nn::Module& m = *item.value();
        torch::Tensor weight;
        if (auto* linear = dynamic_cast<torch::nn::LinearImpl*>(&m))
            weight = linear->weight;
        else if (auto* embedding = dynamic_cast<torch::nn::EmbeddingImpl*>(&m))
            weight = embedding->weight;
        else if (auto* conv = dynamic_cast<torch::nn::Conv2dImpl*>(&m))
            weight = conv->weight;
        else if (auto* own = dynamic_cast<decoder::LinearImpl*>(&m))
            weight = own->conv1d ? own->weight.t() : own->weight; // a view: copies write through
        else if (auto* table = dynamic_cast<decoder::EmbeddingImpl*>(&m))
            weight = table->weight;
        else
            continue;
        const std::string name = item.key() + ".weight";
        if (std::any_of(keepFloat.begin(), keepFloat.end(),
                        [&](const std::string& k) { return name.find(k) != std::string::npos; }))
            continue;
        const auto gridFor = [&](const torch::Tensor& w) {
            return QuantGrid::symmetric(options.mseWeights ? mseSymmetricMax(w, options.weightBits)
                                                           : w.abs().max().item<double>(),
                                        options.weightBits);
        };
        // Per channel: one scale per output channel (dim 0; for embedding tables, per token vector).
        if (options.perChannelWeights && !options.mseWeights) {
            const QuantGrid unit = QuantGrid::symmetric(1.0, options.weightBits); // integer bounds
            std::vector<std::int64_t> dims(std::size_t(weight.dim() - 1));
            std::iota(dims.begin(), dims.end(), 1);
            const torch::Tensor scale =
                (weight.abs().amax(dims, true) / unit.qmax).clamp_min(1e-8); // [C, 1, ...]
            weight.copy_(torch::clamp(torch::round(weight / scale), unit.qmin, unit.qmax) * scale);
        } else if (options.perChannelWeights) {
            for (std::int64_t c = 0; c < weight.size(0); ++c) {
                torch::Tensor row = weight.select(0, c);
                row.copy_(gridFor(row).apply(row));
            }
        } else {
            weight.copy_(gridFor(weight).apply(weight));
        }
        done.push_back(name);
    }
    return done;
}

} // namespace outlierlens
