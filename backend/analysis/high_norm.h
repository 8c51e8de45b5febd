#pragma once
// Any thread: plain values, no torch (the GUI includes it). Darcet et al. 2024 ("Vision Transformers
// Need Registers"): the L2 norm of each token of a layer's output and the high-norm tokens, the one
// definition the Token norms page, `stats` and `figures` use (docs/metrics.md, "High-norm tokens").

#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens {

/// A token is high-norm when its norm exceeds this many times the median norm of the image's patch
/// tokens. Darcet et al. mark the tokens of DINOv2 ViT-g's output with a norm above 150, where normal
/// tokens stay below about 100 and the high-norm mode is near ten times the normal one; 150 belongs to
/// that model's scale, so the rule here is relative to each image's own patches.
inline constexpr double kHighNormFactor = 3.0;

/// The rule in words, for captions: "norm > 3 × the median patch norm of the image" (UTF-8).
std::string highNormRuleText();

/// L2 norm of each of the T rows of a row-major [T][d] array.
std::vector<double> tokenNorms(const float* x, std::int64_t T, std::int64_t d);

/// kHighNormFactor × the lower median of norms[firstPatch..]: the patch tokens (after the class token and
/// the registers). NaN when there is no patch.
double highNormCutoff(const std::vector<double>& norms, std::int64_t firstPatch);

/// Per token, whether its norm is above highNormCutoff() (the class token and the registers are judged by
/// the patches' cutoff too).
std::vector<bool> highNormTokens(const std::vector<double>& norms, std::int64_t firstPatch);

/// The bins of the norm histograms that `stats` writes: kNormBinsPerDecade bins per decade from
/// 10^kNormLowDecade to 10^kNormHighDecade; norms below go into the first bin, above into the last.
inline constexpr int kNormBinsPerDecade = 20;
inline constexpr int kNormLowDecade = -3;
inline constexpr int kNormHighDecade = 6;
inline constexpr int kNormBins = kNormBinsPerDecade * (kNormHighDecade - kNormLowDecade);
/// The kNormBins + 1 bin edges, ascending.
std::vector<double> normBinEdges();
/// The bin of `norm` (clamped to the first and last bin; 0 for a norm that is 0 or not finite).
int normBin(double norm);

} // namespace outlierlens
