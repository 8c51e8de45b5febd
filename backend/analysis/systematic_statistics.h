#pragma once
// SystematicStatistics: An et al. 2025's systematic outliers of a model over a data set (their code's
// rules; docs/metrics.md, "Systematic outliers"). One object per thread, not synchronised.

#include "analysis/outlier_rule.h"
#include "analysis/systematic_data.h"

#include <torch/types.h>

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace outlierlens {

class Hdf5Writer;

/// "initial_token", "strong_delimiter", "weak_semantic", "other", "register": their names.
std::string tokenCategoryName(TokenCategory category);

/// The category of the token at `position` whose decoded text is `decoded` (tokenizer.decode([id]) as
/// their code calls it): position 0 is the initial token; text that is, once stripped of white space,
/// one of their punctuation marks, or white space holding a line break (their "<0x0A>"), a strong
/// delimiter; one of their 35 stop words (lower-cased; "" included), a weak semantic token; else other.
TokenCategory tokenCategory(const std::string& decoded, std::int64_t position);

/// BERT's WordPiece tokens in the same categories: "##" continuations are looked up without their "##",
/// and the segment separator [SEP] counts as a strong delimiter (An et al.'s categories are for decoders,
/// which have none; Bondarenko et al. find BERT's no-op heads on [SEP], "." and ","). ViT's labels
/// ("[CLS]", "patch r,c") need no mapping: tokenCategory() makes [CLS] initial and the patches other.
TokenCategory wordPieceCategory(const std::string& token, std::int64_t position);
/// The categories of a sequence, position by position: tokenCategory() of decoded texts (decoders) or
/// labels (ViT), and wordPieceCategory() of WordPiece tokens (BERT).
std::vector<TokenCategory> tokenCategories(const std::vector<std::string>& decoded);
std::vector<TokenCategory> wordPieceCategories(const std::vector<std::string>& tokens);
/// An image model's tokens: the class token (initial), `registers` registers, then `patches` patches
/// (other).
std::vector<TokenCategory> imageTokenCategories(int registers, int patches);

/// Sink tokens, the one definition every view, figure and score uses (docs/metrics.md, "Sink tokens"):
/// where a head that does nothing parks its attention. The initial token and the strong delimiters of
/// `categories` (decoders: the first token and An et al.'s punctuation and newlines; BERT: [CLS], [SEP]
/// and punctuation), the register tokens (ViT with registers: Darcet et al.'s sinks that are not patches),
/// and the tokens `background` marks (ViT: backgroundPatchTokens(); empty: none).
std::vector<bool> sinkTokens(const std::vector<TokenCategory>& categories,
                             const std::vector<bool>& background = {});
/// The pixel standard deviation (0-255 scale) under which a patch is background.
inline constexpr double kBackgroundPatchStd = 6.0;
/// ViT, per token ([CLS] first, then `registers` register tokens, then the patches row by row): whether a
/// patch is background, i.e. the standard deviation of its pixel values (every pixel and channel of the
/// `patch` x `patch` square of the resized uint8 RGB image the model saw, rows `stride` bytes apart) is
/// below kBackgroundPatchStd: a uniform region with nothing to read. [CLS] and registers are not patches
/// (false).
std::vector<bool> backgroundPatchTokens(const std::uint8_t* rgb, int width, int height, int stride, int patch,
                                        int registers = 0);

struct SystematicOptions
{
    std::vector<int> layers; ///< 0-based layers, any order (stored sorted, no duplicates)
    int numHeads = 0;
    double tau = kDefaultTau; ///< a token is heavy when max_c |x_tc| > tau * mean |x| (per sample)
    double attentionFraction =
        kDefaultAttentionFraction; ///< an attention-outlier key receives >= fraction * T
};

/// Per layer, over samples: for the layer output h (`layer{l}/out`) and the down projection's input
/// x_down (`layer{l}/down_in`) the top-3 and median |x| (their Figs 3a, 4a) and the heavy tokens by
/// category (Fig 3b); for the attention the head-mean cumulative attention A_j = sum_i mean_h
/// A[h, i, j], its top-2 and median (Fig 6a), the outlier keys (A_j >= fraction * T) by category
/// (Fig 6b), each head's share of attention on those keys (Fig 6c), and per head the consistency of
/// their Table 1: |heavy tokens of h that are outlier keys of the head| / |heavy tokens of h|, averaged
/// over samples with a heavy token.
class SystematicStatistics
{
public:
    /// Throws Error for no layers, a negative layer, no heads or thresholds that are not positive.
    explicit SystematicStatistics(SystematicOptions options);

    /// Capture names addSampleLayer() reads: per layer `out`, `down_in` and `attn_probs`.
    std::set<std::string> requiredCaptures() const;

    /// One layer of one sample: h [T, d], xDown [T, d_ff], probs [H, T, T] (head, query, key), no
    /// padding, any floating dtype; categories [T]. Throws Error naming the tensor for a wrong shape or
    /// a layer that was not selected. Call endSample() after the sample's last layer.
    void addSampleLayer(int layer, const torch::Tensor& h, const torch::Tensor& xDown,
                        const torch::Tensor& probs, const std::vector<TokenCategory>& categories);
    void endSample() { ++m_samples; }
    /// Adds another accumulator's sums (same layers and heads; throws Error otherwise), for workers
    /// that each counted part of a data set.
    void merge(const SystematicStatistics& other);
    std::int64_t samples() const { return m_samples; }

    /// The means over the samples added so far (zero samples: zeros and NaN consistencies).
    SystematicData data() const;
    /// Writes group `systematic` (docs/stats-format.md): attributes and one subgroup per layer.
    void write(Hdf5Writer& writer) const;

    struct ActivationAccumulator
    {
        std::array<double, 3> sumTop{};                     ///< sum over samples of the 3 largest |x|
        double sumMedian = 0;                               ///< sum over samples of the (lower) median |x|
        std::array<std::int64_t, kTokenCategories> heavy{}; ///< heavy tokens by category
    };
    struct AttentionAccumulator
    {
        std::array<double, 2> sumTop{};
        double sumMedian = 0;
        std::array<std::int64_t, kTokenCategories> outlierKeys{}; ///< head-mean rule, by category
        std::vector<double> sumOutlierKeyShare;                   ///< [H] sum over samples (Fig 6c)
        std::vector<std::int64_t> headOutlierKeys;                ///< [H] keys over the head's own rule
        std::vector<double> sumConsistency;                       ///< [H] over samples with heavy tokens
        std::int64_t consistencySamples = 0;
    };
    struct LayerAccumulator
    {
        int layer = 0;
        ActivationAccumulator out, downIn;
        AttentionAccumulator attention;
        std::array<std::int64_t, kTokenCategories> tokens{}; ///< positions seen, by category
    };
    const std::vector<LayerAccumulator>& layers() const { return m_layers; }

    /// One layer of the sample added last: which tokens were heavy in h and in x_down, which keys were
    /// head-mean outlier keys, and the head-mean attention each key received (A_j), all [T].
    struct SampleLayer
    {
        std::vector<bool> heavyOut, heavyDown, outlierKey;
        std::vector<double> received;
    };
    /// Same order as layers(); empty entries before the first sample.
    const std::vector<SampleLayer>& lastSample() const { return m_last; }
    const SystematicOptions& options() const { return m_options; }

private:
    SystematicOptions m_options;
    std::vector<LayerAccumulator> m_layers;
    std::vector<SampleLayer> m_last;
    std::int64_t m_samples = 0;
    std::vector<float> m_scratch; ///< |x| of one tensor, reused from call to call
};

} // namespace outlierlens
