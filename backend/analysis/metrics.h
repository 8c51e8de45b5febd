#pragma once
// Any thread: pure functions of their arguments. docs/metrics.md defines every metric here.

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens {

/// Which rule decides that an activation value is an outlier.
enum class OutlierRule {
    Sigma, ///< |x - mean(X)| > k * std(X) (Bondarenko et al. 2023 and its official code)
    Tau,   ///< |x| > tau * mean(|X|) (An et al. 2025, systematic outliers)
};

/// "sigma" or "tau": the names used in files and on the command line.
std::string outlierRuleName(OutlierRule rule);
/// Inverse of outlierRuleName(); throws Error for anything else.
OutlierRule parseOutlierRule(const std::string& name);

/// The sigma rule's default k, the paper's |x - mean| > 6 std (DESIGN.md): every default of k is this one.
inline constexpr double kDefaultSigmaK = 6.0;
/// The tau rule's default (An et al. 2025).
inline constexpr double kDefaultTau = 1000.0;

/// An outlier rule with its threshold. Statistics are always over one sample's whole [T, d]
/// tensor with padding left out.
struct OutlierCriterion
{
    OutlierRule rule = OutlierRule::Sigma;
    double k = kDefaultSigmaK; ///< sigma rule: |x - mean(X)| > k * std(X), std unbiased (torch default)
    double tau = kDefaultTau;  ///< tau rule: |x| > tau * mean(|X|)

    /// One line for files and figure captions, e.g. "|x - mean| > 6 std (unbiased), per sample over T x d".
    std::string describe() const;
    /// Same rule and same k and tau (exact comparison), e.g. to check that two runs can be merged.
    bool operator==(const OutlierCriterion& other) const;
    bool operator!=(const OutlierCriterion& other) const { return !(*this == other); }
};

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
