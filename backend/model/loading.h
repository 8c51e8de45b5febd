#pragma once
// Any thread (works on the module passed in, which the caller owns).

#include "io/state_dict.h"

#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace outlierlens {

/// What strict loading did besides copying: tensors it left out on purpose and names it mapped.
struct LoadReport
{
    std::vector<std::string> ignored; ///< checkpoint tensors the model does not use, each with the reason
    std::vector<std::string> renamed; ///< legacy names mapped, e.g. "LayerNorm.gamma -> LayerNorm.weight"
};

/// Shape and kind of every parameter and buffer of a module, by name.
struct ExpectedTensor
{
    std::vector<std::int64_t> sizes;
    bool floating = true;
};
using ExpectedTensors = std::map<std::string, ExpectedTensor>;

/// Records the module's tensor shapes and frees their memory, so that a checkpoint can be read
/// without holding two copies of the model (peak memory = one model). The module is unusable
/// until adoptStrict() gives it tensors again.
ExpectedTensors releaseModuleTensors(torch::nn::Module& module);

/// Gives every parameter and buffer of `module` the tensor of the same name from `tensors`
/// (already mapped to the module's names), without copying. Strict: a missing tensor, an
/// unexpected one, a wrong shape or a non-float tensor for a float parameter is an Error naming the
/// file (`file`), the tensor, the expected and the found shape; when several are wrong the message
/// names the first and counts the rest. keepFloatDtype: floating tensors keep the dtype they come
/// with (float16/bfloat16 checkpoints stay as stored, memory-mapped ones stay mapped) instead of
/// being converted to the parameter's dtype.
void adoptStrict(torch::nn::Module& module, const ExpectedTensors& expected, StateDict tensors,
                 const std::string& file, bool keepFloatDtype = false);

/// A tensor whose shape a config fixes, found in a checkpoint by the end of its name.
struct ImpliedShape
{
    std::string nameSuffix;          ///< e.g. "embeddings.word_embeddings.weight"
    std::vector<std::int64_t> sizes; ///< what the config implies
    std::string fields;              ///< the config fields behind it, e.g. "vocab_size x hidden_size"
};

/// Before a model is built from its config, which allocates and fills every tensor the config asks
/// for: each `implied` tensor the checkpoint holds must have that shape, and its highest layer index
/// ("layer.N.", "layers.N.", "h.N.", "blocks.N.") must be numLayers - 1. Otherwise an Error names
/// the config, the field, the tensor and both shapes (a config asking for 2^20 positions or 10^9
/// token types fails here in microseconds instead of after gigabytes). Tensors the checkpoint lacks
/// are left to adoptStrict().
void checkConfigAgainstCheckpoint(const StateDict& tensors, const std::vector<ImpliedShape>& implied,
                                  int numLayers, const std::string& configPath,
                                  const std::string& weightsFile);

/// The tensors of `module` (parameters and buffers) by name, detached: what a checkpoint writer saves.
StateDict moduleStateDict(const torch::nn::Module& module);

/// Maps legacy TensorFlow-era names (LayerNorm.gamma/beta) to weight/bias, as Hugging Face does
/// when loading; records each rename in `report`.
StateDict renameLegacyLayerNorm(StateDict tensors, LoadReport& report);

} // namespace outlierlens
