#include "analysis/inspection_dump.h"

#include "common/error.h"
#include "io/hdf5_store.h"

#include <torch/torch.h>

namespace outlierlens {

void writeInspectionDump(const std::string& path, const RecordingSink& sink, std::int64_t index,
                         std::int64_t length, const std::vector<std::string>& tokens,
                         const DumpProvenance& provenance, const std::vector<std::string>& labels,
                         const std::vector<std::int64_t>& grid)
{
    if (std::int64_t(tokens.size()) != length)
        throw Error(path + ": " + std::to_string(tokens.size()) + " token labels for " +
                    std::to_string(length) + " positions");
    Hdf5Writer writer(path);
    for (const auto& [name, batched] : sink.tensors()) {
        const auto parsed = parseCaptureName(name);
        if (!parsed) continue;
        writer.writeTensor(name, sampleOf(parsed->first, batched, index, length));
    }
    writer.writeStrings("tokens", tokens);
    if (!grid.empty()) writer.setAttribute("tokens", "grid", grid);
    if (!labels.empty() && sink.contains("logits")) {
        std::string joined;
        for (std::size_t i = 0; i < labels.size(); ++i)
            joined += (i ? "," : "") + labels[i];
        writer.setAttribute("logits", "id2label", joined);
    }
    writer.setAttribute("/", "model", provenance.model);
    writer.setAttribute("/", "checkpoint_sha256", provenance.checkpointSha256);
    writer.setAttribute("/", "app_version", std::string(OUTLIERLENS_VERSION));
    writer.setAttribute("/", "input", provenance.input);
    writer.setAttribute("/", "indexing",
                        std::string("layers, heads and dimensions are 0-based in dataset names"));
    writer.commit();
}

} // namespace outlierlens
