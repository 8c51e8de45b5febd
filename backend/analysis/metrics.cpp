#include "analysis/metrics.h"

#include "common/error.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace outlierlens {
namespace {

std::string number(double value)
{
    std::ostringstream out;
    out << value;
    return out.str();
}

std::string shapeText(const torch::Tensor& t)
{
    std::string s = "[";
    for (int64_t i = 0; i < t.dim(); ++i)
        s += (i ? ", " : "") + std::to_string(t.size(i));
    return s + "]";
}

/// Calls f(const S* first, strides) with S the tensor's element type (float, double, bfloat16 or half;
/// any other type is converted to float first), so values are read where they are: a sample's slice of
/// a padded batch is not copied.
template<typename F>
void withElements(const torch::Tensor& tensor, F&& f)
{
    torch::Tensor t = tensor.device().is_cpu() ? tensor : tensor.to(torch::kCPU);
    if (!t.is_floating_point()) t = t.to(torch::kFloat);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, t.scalar_type(), "summariseSample",
                                    [&] { f(t.data_ptr<scalar_t>(), t.strides()); });
}

/// Calls f(index, value as double) for the `n` values row[0], row[stride], ...; the unit stride
/// (the common case) gets its own loop so that the compiler can vectorise it.
template<typename S, typename F>
inline void forRow(const S* row, std::int64_t n, std::int64_t stride, F&& f)
{
    if (stride == 1) {
        for (std::int64_t j = 0; j < n; ++j)
            f(j, double(row[j]));
    } else {
        for (std::int64_t j = 0; j < n; ++j)
            f(j, double(row[j * stride]));
    }
}

torch::Tensor asDouble(const torch::Tensor& x)
{
    return x.detach().to(torch::kCPU, torch::kDouble);
}

bool isConstant(const torch::Tensor& v)
{
    return (v.max() == v.min()).item<bool>();
}

} // namespace

std::string outlierRuleName(OutlierRule rule)
{
    return rule == OutlierRule::Tau ? "tau" : "sigma";
}

OutlierRule parseOutlierRule(const std::string& name)
{
    if (name == "sigma") return OutlierRule::Sigma;
    if (name == "tau") return OutlierRule::Tau;
    throw Error("outlier rule: expected 'sigma' or 'tau', found '" + name + "'");
}

std::string OutlierCriterion::describe() const
{
    if (rule == OutlierRule::Tau) return "|x| > " + number(tau) + " mean|x|, per sample over T x d";
    return "|x - mean| > " + number(k) + " std (unbiased), per sample over T x d";
}

bool OutlierCriterion::operator==(const OutlierCriterion& other) const
{
    return rule == other.rule && k == other.k && tau == other.tau;
}

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

SampleSummary summariseSample(const torch::Tensor& x, const OutlierCriterion& criterion)
{
    if (x.dim() != 2 || x.numel() == 0)
        throw Error("sample summary: expected a non-empty [T, d] tensor, found " + shapeText(x));
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
        for (std::int64_t t = 0; t < T; ++t) {
            std::int64_t count = 0;
            forRow(p + t * sT, d, sD, [&](std::int64_t j, double v) {
                if (std::abs(v - centre) > threshold) {
                    ++out.perDim[std::size_t(j)];
                    ++count;
                    out.positions.push_back(t * d + j);
                }
            });
            out.perToken[std::size_t(t)] = count;
        }
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

double maxInfNorm(const torch::Tensor& x)
{
    if (x.numel() == 0) throw Error("max inf norm of an empty tensor " + shapeText(x));
    return asDouble(x).abs().max().item<double>();
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
        throw Error("attention outliers: expected probabilities [H, T, T], found " + shapeText(probs));
    const torch::Tensor cumulative = asDouble(probs).sum(1); // [H, T]: sum over queries
    return cumulative >= fraction * double(probs.size(2));
}

} // namespace outlierlens
