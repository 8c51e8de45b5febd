#pragma once
// Any thread; the function is reentrant (each call opens its own file).

#include "io/state_dict.h"

#include <string>

namespace outlierlens {

/// Reads a state dict written by torch.save() in the zip format (torch >= 1.6): an OrderedDict
/// (or dict) of name -> tensor, as Hugging Face's pytorch_model.bin. Tensors come out contiguous
/// with their stored shapes; fp16/bf16/fp64 become float32, integer types int64, bool stays bool.
/// Only the pickle subset torch.save uses is interpreted and nothing is ever executed: a global
/// other than OrderedDict, the tensor rebuild functions and storage types is an Error. Legacy
/// (pre-1.6) files, nested dicts and non-tensor values are Errors naming the file.
/// keepFloatDtype: float32/float16/bfloat16 tensors keep their stored dtype (float64 still becomes
/// float32), for large decoder checkpoints that must not be widened in memory.
StateDict readTorchBin(const std::string& path, bool keepFloatDtype = false);

} // namespace outlierlens
