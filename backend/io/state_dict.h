#pragma once
// Any thread; functions are reentrant.

#include <torch/types.h>

#include <map>
#include <string>

namespace outlierlens {

/// A checkpoint's tensors by name, as stored in the file (no renaming). Floating tensors are
/// float32 after reading (fp16/bf16/fp64 converted); integer tensors are int64; bool stays bool.
using StateDict = std::map<std::string, torch::Tensor>;

/// The weight file of a model folder: model.safetensors if present, else pytorch_model.bin.
/// Throws Error naming the folder if neither exists (sharded checkpoints are named as unsupported).
std::string findWeightsFile(const std::string& modelDir);

/// Reads a .safetensors or PyTorch .bin file, chosen by its content (zip magic vs. header).
StateDict readStateDict(const std::string& path);

/// Human-readable shape such as [2, 128] for error messages.
std::string shapeString(const torch::Tensor& t);
std::string shapeString(c10::IntArrayRef sizes);

} // namespace outlierlens
