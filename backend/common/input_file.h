#pragma once
// Any thread. Opening files that come from the user: refuse what is not a regular file before
// opening it, and read whole files with one wording of errors.

#include <cstdint>
#include <fstream>
#include <string>

namespace outlierlens {

/// Throws Error("<path>: not a regular file (a FIFO)") when `path` exists but is a FIFO, socket,
/// device or directory: opening a FIFO blocks until a writer comes, a device may never end, a
/// directory reads nothing. A missing path passes (the caller's open reports it).
void refuseSpecialFile(const std::string& path);

/// std::ifstream in binary mode after refuseSpecialFile; check the stream as usual.
std::ifstream openInputFile(const std::string& path);

/// The whole file. Errors: "<path>: cannot open <what>: <reason>", "<path>: cannot read <what>",
/// and "<path>: <what> of N bytes is larger than the limit of M bytes".
std::string readWholeFile(const std::string& path, const std::string& what,
                          std::uint64_t maxBytes = std::uint64_t(2) << 30);

} // namespace outlierlens
