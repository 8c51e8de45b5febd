#pragma once
// Any thread.

#include "io/image.h"

#include <string>

namespace outlierlens {

/// Writes `image` as a PNG file, atomically (temp file + rename). Throws Error naming the file and the
/// system's reason (a full disk included).
void writePngFile(const std::string& path, const RgbImage& image);

} // namespace outlierlens
