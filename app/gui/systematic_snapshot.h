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

} // namespace outlierlens
