// `outlierlens showcase`: where a decoder demo model shows its no-op head best (layer, head and
// sample input, from the model's own numbers), printed and, with --write, stored as showcase.json,
// which the app opens on. `train` writes it for Bigram-Backcopy models itself.

#include "cli/command_line.h"

#include "analysis/showcase.h"

#include <cstdio>

namespace outlierlens::cli {

int runShowcase(const QStringList& args)
{
    Command cmd("showcase",
                "Run a decoder model folder on its sample_inputs.txt and print the layer, head and input "
                "where the attention of later queries on the first token (a sink) is largest "
                "(docs/metrics.md). --write stores it as showcase.json, where the app opens the model.");
    cmd.parser().addOptions({
        {"model", "Decoder model folder with sample_inputs.txt.", "dir"},
        {"write", "Store the choice as showcase.json in the model folder."},
    });
    if (auto code = cmd.parse(args)) return *code;
    return cmd.guarded([&]() -> int {
        const std::string modelDir = cmd.required("model");
        const Showcase s = computeShowcase(modelDir);
        std::printf("layer %d, head %d (1-based), sample input %d: first-token attention %.4f on that "
                    "input, %.4f over all sample inputs\n",
                    s.layer + 1, s.head + 1, s.input + 1, s.inputFirstTokenAttention,
                    s.meanFirstTokenAttention);
        if (cmd.isSet("write")) {
            writeShowcase(modelDir, s);
            std::printf("wrote %s/showcase.json\n", modelDir.c_str());
        }
        return Ok;
    });
}

} // namespace outlierlens::cli
