#pragma once
// Any thread: reads one file, shares nothing.

#include <torch/types.h>

#include <string>

namespace outlierlens {

/// Reads a NumPy .npy file (format 1.0, 2.0 or 3.0) holding little-endian float32 in C order
/// (`descr` '<f4', `fortran_order` False) as a float32 tensor of its shape. Anything else (another dtype
/// or byte order, Fortran order, a truncated or oversized data part, a malformed header) is an Error naming
/// the file, what it holds and what is expected; nothing is converted.
torch::Tensor readNpyFloat32(const std::string& path);

} // namespace outlierlens
