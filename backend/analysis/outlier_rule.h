#pragma once
// Any thread: plain values. The outlier rule (docs/metrics.md) as one value from the command line or
// View > Outlier rule through every job, file, figure and page. No torch here: the GUI includes it.

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
/// Inverse of outlierRuleName() (An et al.'s names so-paper and so-code mean tau); throws Error for
/// anything else.
OutlierRule parseOutlierRule(const std::string& name);

/// The sigma rule's default k, the paper's |x - mean| > 6 std (DESIGN.md): every default of k is this one.
inline constexpr double kDefaultSigmaK = 6.0;
/// The tau rule's default (An et al. 2025).
inline constexpr double kDefaultTau = 1000.0;
/// An et al.'s attention outlier keys receive at least this fraction of T (their code's 0.1).
inline constexpr double kDefaultAttentionFraction = 0.1;

/// An outlier rule with its thresholds: the one value every command, job, file, figure and page uses.
/// Statistics are always over one sample's whole [T, d] tensor with padding left out.
struct OutlierCriterion
{
    OutlierRule rule = OutlierRule::Sigma;
    double k = kDefaultSigmaK; ///< sigma rule: |x - mean(X)| > k * std(X), std unbiased (torch default)
    double tau = kDefaultTau;  ///< tau rule: |x| > tau * mean(|X|); also An et al.'s heavy-token threshold
    /// An et al.'s attention outlier keys: cumulative head-mean attention >= fraction * T.
    double attentionFraction = kDefaultAttentionFraction;

    /// One line for files and figure captions, e.g. "|x - mean| > 6 std (unbiased), per sample over T x d".
    std::string describe() const;
    /// Short, for captions and labels ("values over 6σ"): "6σ" or "1000 × mean|X|" (UTF-8).
    std::string shortText() const;
    /// The command-line options that select exactly this rule: --rule, --k, --tau, --attention-fraction
    /// (what a job started by the app passes to `stats` and `figures`).
    std::vector<std::string> arguments() const;
    /// Throws Error naming the value unless k and tau are finite and positive and attentionFraction is
    /// in (0, 1] (a key receives at most T).
    void validate() const;
    /// Same rule and thresholds (exact comparison), e.g. to check that two runs can be merged.
    bool operator==(const OutlierCriterion& other) const;
    bool operator!=(const OutlierCriterion& other) const { return !(*this == other); }
};

} // namespace outlierlens
