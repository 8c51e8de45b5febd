#pragma once
// Any thread; functions are reentrant.

#include <torch/types.h>

#include <map>
#include <string>

namespace outlierlens {

/// A checkpoint's tensors by name, as stored in the file (no renaming). Floating tensors are
/// float32 after reading (fp16/bf16/fp64 converted); integer tensors are int64; bool stays bool.
using StateDict = std::map<std::string, torch::Tensor>;

/// The weights of a model folder, in order of preference: model.safetensors,
/// model.safetensors.index.json, pytorch_model.bin, pytorch_model.bin.index.json (the index of a
/// sharded checkpoint, as Hugging Face's save_pretrained writes it). Throws Error naming the folder if
/// there are none.
std::string findWeightsFile(const std::string& modelDir);

/// Reads a .safetensors or PyTorch .bin file, chosen by its content (zip magic vs. header), or the
/// shards of a *.index.json: each shard once, every tensor from the shard its weight_map names (a
/// shard outside the model folder, a tensor the map does not give the shard, or one it lacks is an
/// Error naming the file). Floating tensors become float32.
StateDict readStateDict(const std::string& path);

/// Like readStateDict(), for checkpoints too large to copy: float32/float16/bfloat16 tensors keep
/// their stored dtype, and safetensors files are memory-mapped (mapSafetensors()).
StateDict mapStateDict(const std::string& path);

/// Whether mapStateDict(path) reads memory-mapped safetensors: a .safetensors file or the index of
/// safetensors shards.
bool isSafetensorsCheckpoint(const std::string& path);

/// Human-readable shape such as [2, 128] for error messages.
std::string shapeString(const torch::Tensor& t);
std::string shapeString(c10::IntArrayRef sizes);

} // namespace outlierlens
