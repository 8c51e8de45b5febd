#pragma once
// Plain data (std types, no torch) of An et al.'s systematic outliers: the means that
// SystematicStatistics computes over samples, as group `systematic` of a statistics file stores them
// (docs/stats-format.md). Both the file reader and the GUI's current-input path produce it.

#include <array>
#include <cstdint>
#include <vector>

namespace outlierlens {

/// An et al.'s token categories (their pos_*.py scripts), in file order, and a fifth of this app's:
/// the register tokens of a ViT with registers (Darcet et al. 2024), never a text token.
enum class TokenCategory { Initial, StrongDelimiter, WeakSemantic, Other, Register };
inline constexpr int kTokenCategories = 5;

/// Counts of the token categories, in TokenCategory order.
using CategoryCounts = std::array<std::int64_t, kTokenCategories>;

struct SystematicActivationData
{
    std::array<double, 3> meanTop{}; ///< mean over samples of the three largest |x|, largest first
    double meanMedian = 0;           ///< mean over samples of the lower median |x|
    CategoryCounts heavy{};          ///< heavy tokens (max_c |x_tc| > tau * mean |x|) by category
};

struct SystematicAttentionData
{
    std::array<double, 2> meanTop{}; ///< of the head-mean received attention A_j
    double meanMedian = 0;
    CategoryCounts outlierKeys{};              ///< keys with A_j >= fraction * T, by category
    std::vector<double> outlierKeyShare;       ///< [H] mean share of the head's attention on those keys
    std::vector<std::int64_t> headOutlierKeys; ///< [H] keys over the rule by the head's own attention
    std::vector<double> consistency;           ///< [H] Table 1; NaN when consistencySamples == 0
    std::int64_t consistencySamples = 0;       ///< samples with at least one heavy token of h
};

struct SystematicLayerData
{
    int layer = 0;                   ///< 0-based
    CategoryCounts tokens{};         ///< token positions seen, by category
    SystematicActivationData out;    ///< layer output h
    SystematicActivationData downIn; ///< the down projection's input x_down
    SystematicAttentionData attention;
};

struct SystematicData
{
    double tau = 0;
    double attentionFraction = 0;
    std::int64_t samples = 0;
    std::vector<SystematicLayerData> layers; ///< ascending layer order

    /// The entry of 0-based `layer`, or null when it was not analysed.
    const SystematicLayerData* layerData(int layer) const
    {
        for (const SystematicLayerData& l : layers)
            if (l.layer == layer) return &l;
        return nullptr;
    }
};

} // namespace outlierlens
