#pragma once
// Any thread; the functions are reentrant (each call opens its own file).

#include "io/state_dict.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace outlierlens {

/// Reads every tensor of a .safetensors file (u64 little-endian header length, JSON header, data).
/// F32/F16/BF16/F64 become float32, I64/I32/I16/I8/U8 int64, BOOL bool; shapes as stored.
/// If `metadata` is given it receives the header's "__metadata__" strings (cleared first).
/// Throws Error naming the file (and tensor) for any malformed or truncated input.
StateDict readSafetensors(const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

/// Like readSafetensors(), with the same checks, for checkpoints too large to copy: the file is
/// memory-mapped (MAP_PRIVATE, so nothing is ever written back) and F32/F16/BF16 tensors keep their
/// dtype and are views of the mapping (copied only if their offset is not aligned to their element
/// size); the mapping stays alive while any of them does. F64 becomes float32, integers int64,
/// BOOL bool, as in readSafetensors(). The file must not be truncated while tensors are in use.
StateDict mapSafetensors(const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

/// Storage type of floating tensors written by writeSafetensors().
enum class SafetensorsDtype { Float32, Float16, BFloat16 };

/// Writes a .safetensors file atomically (temp file + rename): floating tensors as `dtype`
/// (F32, F16 or BF16, rounded to nearest even), integer tensors as I64, bool as BOOL; tensors in name order.
/// The header is padded with spaces to a multiple of 8 bytes as Hugging Face does. Throws Error
/// naming the file and tensor for unsupported dtypes or I/O failures; then no file is left.
void writeSafetensors(const std::string& path, const StateDict& tensors,
                      SafetensorsDtype dtype = SafetensorsDtype::Float32,
                      const std::map<std::string, std::string>& metadata = {});

/// One tensor of a file written piece by piece: its name, shape and dtype (floating tensors are stored
/// as the file's dtype).
struct TensorSpec
{
    std::string name;
    std::vector<std::int64_t> sizes;
    torch::ScalarType type = torch::kFloat;
};

/// The same file as writeSafetensors() (tensors in name order, same header), but with one tensor in
/// memory at a time: `produce(i)` returns tensor `specs[i]` (of its shape; any dtype of its kind) and is
/// called once for each i in the order of `specs`; each is written at its place and released before the
/// next. For files larger than the memory a whole state dict would take (a 7B model made tensor by
/// tensor). Errors as writeSafetensors(), also for a produced tensor of the wrong shape.
void writeSafetensorsStreamed(const std::string& path, const std::vector<TensorSpec>& specs,
                              const std::function<torch::Tensor(std::size_t)>& produce,
                              SafetensorsDtype dtype = SafetensorsDtype::Float32,
                              const std::map<std::string, std::string>& metadata = {});

} // namespace outlierlens
