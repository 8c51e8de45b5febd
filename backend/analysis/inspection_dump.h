#pragma once
// Any thread (the HDF5 library is not thread-safe: one dump at a time per process).

#include "analysis/recording_sink.h"

#include <string>
#include <vector>

namespace outlierlens {

/// Root attributes of an inspection dump (DESIGN.md).
struct DumpProvenance
{
    std::string model;            ///< model folder
    std::string checkpointSha256; ///< of the weights file
    std::string input;            ///< the text pair or image path
};

/// Writes sample `index` (its first `length` tokens, i.e. without padding) of every tensor in
/// `sink` to `path` under DESIGN.md's dataset names, plus /tokens and the root attributes.
/// `labels` (id2label) is stored as an attribute of /logits when given; `grid` ([rows, cols], ViT)
/// as an attribute of /tokens. Atomic: a failure leaves no file.
void writeInspectionDump(const std::string& path, const RecordingSink& sink, std::int64_t index,
                         std::int64_t length, const std::vector<std::string>& tokens,
                         const DumpProvenance& provenance, const std::vector<std::string>& labels = {},
                         const std::vector<std::int64_t>& grid = {});

} // namespace outlierlens
