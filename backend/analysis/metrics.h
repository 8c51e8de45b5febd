#pragma once
// Any thread: pure functions of their arguments. docs/metrics.md defines every metric here.

#include "analysis/outlier_rule.h"

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace outlierlens {

/// Outlier mask of one sample: x [T, d] (any floating dtype, no padding) -> bool [T, d], same
/// indexing (token, hidden dimension; 0-based). Statistics are computed in float64. Fewer than two
/// values, or a constant tensor, give no outliers (never NaN).
torch::Tensor outlierMask(const torch::Tensor& x, const OutlierCriterion& criterion);

/// One sample's outliers, max inf norm and kurtosis: see summariseSample().
struct SampleSummary
{
    std::vector<std::int64_t> perDim;    ///< [d]: outliers in each hidden dimension
    std::vector<std::int64_t> perToken;  ///< [T]: outliers of each token
    std::vector<std::int64_t> positions; ///< flat indices t * d + j of the outliers, ascending
    double maxInfNorm = 0;               ///< as maxInfNorm()
    double kurtosis = 0;                 ///< as pearsonKurtosis()
};

/// x [T, d] (token, hidden dimension; 0-based; any floating dtype and strides, no padding) summarised
/// in three passes in float64, read where it lies: the numbers of outlierMask() (per dimension, per
/// token and where), maxInfNorm() and pearsonKurtosis(), without their float64 copy and temporaries.
/// `positions` false leaves SampleSummary::positions empty (data-set statistics need only counts).
/// Throws Error for a tensor that is not 2-D or is empty.
SampleSummary summariseSample(const torch::Tensor& x, const OutlierCriterion& criterion,
                              bool positions = true);

/// "" when every value of a model's output is finite; else one line such as "the model's output holds
/// 3 NaN and 0 infinite values (of 3): no prediction from it (are the weights finite?)". NaN or Inf
/// logits are never turned into a prediction: inspect and stats stop with it, the GUI shows it.
std::string nonFiniteOutputNotice(const torch::Tensor& output);

/// "" when every parameter and buffer of `module` is finite; else one line naming the first tensor that is
/// not (in the module's order, by its checkpoint name), e.g. "the model's tensor 'classifier.bias' holds 3
/// NaN and 0 infinite values (of 3): no score from it". Commands that score a model (quantize, sweep,
/// train's evaluation) refuse such a model with it instead of scoring argmaxes of NaN.
std::string nonFiniteWeightsNotice(const torch::nn::Module& module);

/// max |x| over every value of x (any shape, e.g. one sample's [T, d]); same units as x. Throws
/// Error for an empty tensor.
double maxInfNorm(const torch::Tensor& x);

/// Pearson kurtosis (not excess: a Gaussian gives ~3) over every value of x, as the paper's code:
/// mean((x - mu)^4) / (s^4 + 1e-6) with s the unbiased standard deviation; float64 throughout.
/// A constant tensor gives 0 (the eps keeps it finite); fewer than two values give NaN.
double pearsonKurtosis(const torch::Tensor& x);

/// First-token attention of one sample (docs/metrics.md): probs [H, T, T] (or [1, H, T, T]) -> [H]
/// float64, per head the mean over the queries of the second half (i >= T/2, which see at least half
/// the keys of a causal model) of the probability on key 0. Near 1: the head sinks on the first token.
torch::Tensor firstTokenAttention(const torch::Tensor& probs);

/// Attention outliers of one sample: probs [H, T, T] (head, query, key; no padding) -> bool [H, T]
/// (head, key): key j of head h qualifies when its cumulative attention sum_i A[h, i, j] >= fraction * T.
torch::Tensor attentionOutlierKeys(const torch::Tensor& probs, double fraction = 0.1);

} // namespace outlierlens
