#pragma once
// tokenizeLines() runs on the calling thread and uses worker threads of its own; `encodeLine` is called
// from several threads at once and must be safe for that (the tokenizers are immutable: they are).

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace outlierlens {

/// The whole file as bytes. Throws Error naming it if it cannot be read.
std::string readTextFile(const std::string& path);

/// Appends the token ids of one line (no line break, no trailing CR) to `out`; throws Error on bad input.
using LineEncoder = std::function<void(const std::string& line, std::vector<std::int64_t>& out)>;

/// The token stream of a text file's contents: every non-blank line encoded on its own, in parallel
/// chunks of whole lines, concatenated in file order (so the stream does not depend on the number of
/// threads). With wanted >= 0 encoding may stop once the leading lines give at least `wanted` ids (the
/// stream is then that prefix, possibly a little longer). Errors name `path` and the 1-based line:
/// "path:12: ..."; a text of blank lines only is an Error.
std::vector<std::int64_t> tokenizeLines(const std::string& text, const std::string& path,
                                        const LineEncoder& encodeLine, std::int64_t wanted = -1);

/// Rows `indices` of a [N, L] int64 tensor, copied; an index outside [0, N) is an Error naming `file`
/// and `what` ("block", "sequence").
torch::Tensor gatherRows(const torch::Tensor& rows, const std::vector<std::int64_t>& indices,
                         const std::string& file, const char* what);

} // namespace outlierlens
