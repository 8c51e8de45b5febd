#include "analysis/metrics.h"

#include "analysis/element_access.h"
#include "common/error.h"
#include "common/text_format.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <type_traits>

namespace outlierlens {
namespace {

using elements::forRow;
using elements::withElements;

torch::Tensor asDouble(const torch::Tensor& x)
{
    return x.detach().to(torch::kCPU, torch::kDouble);
}

bool isConstant(const torch::Tensor& v)
{
    return (v.max() == v.min()).item<bool>();
}

} // namespace

torch::Tensor outlierMask(const torch::Tensor& x, const OutlierCriterion& criterion)
{
    const torch::Tensor v = asDouble(x);
    const int64_t n = v.numel();
    // Fewer than two values or a constant tensor: no outliers by definition (rounding in the mean
    // would otherwise make every value of a constant tensor "deviate" by an ulp).
    if (n < 2 || isConstant(v)) return torch::zeros(x.sizes(), torch::kBool);
    if (criterion.rule == OutlierRule::Tau) {
        const torch::Tensor a = v.abs();
        // Strict '>' so that an all-zero tensor (mean|x| = 0) has no outliers.
        return a > a.mean() * criterion.tau;
    }
    const torch::Tensor dev = v - v.mean();
    const double std = std::sqrt(dev.square().sum().item<double>() / double(n - 1));
    return dev.abs() > criterion.k * std;
}

SampleSummary summariseSample(const torch::Tensor& x, const OutlierCriterion& criterion, bool positions)
{
    if (x.dim() != 2 || x.numel() == 0)
        throw Error("sample summary: expected a non-empty [T, d] tensor, found " +
                    shapeText(x.sizes().vec()));
    const std::int64_t T = x.size(0), d = x.size(1), n = T * d;
    SampleSummary out;
    out.perDim.assign(std::size_t(d), 0);
    out.perToken.assign(std::size_t(T), 0);
    withElements(x, [&](const auto* p, c10::IntArrayRef strides) {
        const std::int64_t sT = strides[0], sD = strides[1];
        double sum = 0, sumAbs = 0, lo = std::numeric_limits<double>::infinity(), hi = -lo;
        for (std::int64_t t = 0; t < T; ++t)
            forRow(p + t * sT, d, sD, [&](std::int64_t, double v) {
                sum += v;
                sumAbs += std::abs(v);
                lo = std::min(lo, v);
                hi = std::max(hi, v);
            });
        out.maxInfNorm = std::max(std::abs(lo), std::abs(hi));
        if (n < 2) {
            out.kurtosis = std::numeric_limits<double>::quiet_NaN();
            return;
        }
        // A constant tensor: no outliers and kurtosis 0 / (0 + eps), without the ulp noise of the mean.
        if (lo == hi) return;
        const double mean = sum / double(n);
        double sq = 0, fourth = 0;
        for (std::int64_t t = 0; t < T; ++t)
            forRow(p + t * sT, d, sD, [&](std::int64_t, double v) {
                const double dev2 = (v - mean) * (v - mean);
                sq += dev2;
                fourth += dev2 * dev2;
            });
        const double variance = sq / double(n - 1); // unbiased
        out.kurtosis = (fourth / double(n)) / (variance * variance + 1e-6);
        const bool tau = criterion.rule == OutlierRule::Tau;
        const double centre = tau ? 0.0 : mean;
        const double threshold =
            tau ? (sumAbs / double(n)) * criterion.tau : criterion.k * std::sqrt(variance);
        // Counting without positions stays branch-free (vectorised); positions are rare (Chebyshev:
        // at most 1/k^2 of the values) and only the GUI asks for them.
        const auto count = [&](auto keepPositions) {
            for (std::int64_t t = 0; t < T; ++t) {
                std::int64_t inRow = 0;
                forRow(p + t * sT, d, sD, [&](std::int64_t j, double v) {
                    const bool outlier = std::abs(v - centre) > threshold;
                    out.perDim[std::size_t(j)] += outlier;
                    inRow += outlier;
                    if constexpr (decltype(keepPositions)::value)
                        if (outlier) out.positions.push_back(t * d + j);
                });
                out.perToken[std::size_t(t)] = inRow;
            }
        };
        if (positions)
            count(std::true_type{});
        else
            count(std::false_type{});
    });
    return out;
}

std::string nonFiniteOutputNotice(const torch::Tensor& output)
{
    const torch::Tensor x = output.detach();
    if (!x.is_floating_point() || x.isfinite().all().item<bool>()) return {};
    const std::int64_t nan = x.isnan().sum().item<std::int64_t>();
    return "the model's output holds " + std::to_string(nan) + " NaN and " +
           std::to_string(x.isinf().sum().item<std::int64_t>()) + " infinite values (of " +
           std::to_string(x.numel()) + "): no prediction from it (are the weights finite?)";
}

std::string nonFiniteWeightsNotice(const torch::nn::Module& module)
{
    torch::NoGradGuard noGrad;
    const auto check = [](const std::string& name, const torch::Tensor& t) -> std::string {
        if (!t.defined() || !t.is_floating_point() || t.isfinite().all().item<bool>()) return {};
        return "the model's tensor '" + name + "' holds " +
               std::to_string(t.isnan().sum().item<std::int64_t>()) + " NaN and " +
               std::to_string(t.isinf().sum().item<std::int64_t>()) + " infinite values (of " +
               std::to_string(t.numel()) + "): no score from it";
    };
    for (const auto& p : module.named_parameters())
        if (std::string notice = check(p.key(), p.value()); !notice.empty()) return notice;
    for (const auto& b : module.named_buffers())
        if (std::string notice = check(b.key(), b.value()); !notice.empty()) return notice;
    return {};
}

double maxInfNorm(const torch::Tensor& x)
{
    if (x.numel() == 0) throw Error("max inf norm of an empty tensor " + shapeText(x.sizes().vec()));
    return asDouble(x).abs().max().item<double>();
}

torch::Tensor firstTokenAttention(const torch::Tensor& probs)
{
    const torch::Tensor p = probs.dim() == 4 ? probs[0] : probs; // [H, T, T]
    const std::int64_t T = p.size(1);
    using torch::indexing::Slice;
    return p.index({Slice(), Slice(T / 2, T), 0}).to(torch::kDouble).mean(1);
}

double pearsonKurtosis(const torch::Tensor& x)
{
    const torch::Tensor v = asDouble(x);
    const int64_t n = v.numel();
    if (n < 2) return std::numeric_limits<double>::quiet_NaN();
    if (isConstant(v)) return 0.0; // 0 / (0 + eps), without the ulp noise of the mean
    const torch::Tensor dev = v - v.mean();
    const torch::Tensor sq = dev.square();
    const double s2 = sq.sum().item<double>() / double(n - 1); // unbiased variance
    const double m4 = sq.square().mean().item<double>();
    return m4 / (s2 * s2 + 1e-6); // the official code's kurtosis(x, eps=1e-6)
}

torch::Tensor attentionOutlierKeys(const torch::Tensor& probs, double fraction)
{
    if (probs.dim() != 3 || probs.size(1) != probs.size(2))
        throw Error("attention outliers: expected probabilities [H, T, T], found " +
                    shapeText(probs.sizes().vec()));
    const torch::Tensor cumulative = asDouble(probs).sum(1); // [H, T]: sum over queries
    return cumulative >= fraction * double(probs.size(2));
}

} // namespace outlierlens
