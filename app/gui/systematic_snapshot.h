#pragma once
// Worker thread (the one that owns the network). Torch stays in the .cpp.

#include "inspection_snapshot.h"

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace outlierlens {

class RecordingSink;
class SiteRecorder;
enum class TokenCategory;

/// The x_down channels a snapshot keeps per layer for An et al.'s Figure 1 (the largest first).
inline constexpr int kSystematicChannels = 16;

/// Per-model numbers of W_down (their Fig 5a) that do not depend on the input: computed on the first
/// decoder input of a model, then reused.
struct SystematicWeights;
struct SystematicWeightsDeleter
{
    void operator()(SystematicWeights* p) const;
};
using SystematicWeightsPtr = std::unique_ptr<SystematicWeights, SystematicWeightsDeleter>;

/// The captures fillSystematic() reads beyond the snapshot's own: every layer's `down_in`.
std::set<std::string> systematicCaptureNames(int layers);

/// Fills s.systematic from the recorded captures (`out`, `down_in`, `attn_probs` of every layer, B = 1)
/// and the network's down projections (found by name among `network`'s parameters; `conv1d`: GPT-2's
/// [I, O] layout). `categories` are the input's token categories. `weights` is created on the first call
/// for a model.
void fillSystematic(InspectionSnapshot& s, const RecordingSink& sink, torch::nn::Module& network, bool conv1d,
                    const std::vector<TokenCategory>& categories, SystematicWeightsPtr& weights);

/// An et al.'s lifecycle tensors (their Figures 7-9) of `layers` (0-based; sample 0, signed): the FFN's
/// sites and the query and key projections as `sites` recorded them (AttnResidual, FfnNorm, FfnGate, FfnUp,
/// FfnAct, Query, Key), and `down_in` and `attn_scores` from the captures where recorded.
QVector<LifecycleLayer> lifecycleOf(const RecordingSink& sink, const SiteRecorder& sites,
                                    const QVector<int>& layers, int totalLayers, int headDim);

} // namespace outlierlens
