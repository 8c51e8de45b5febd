// `outlierlens showcase`: where a demo model (decoder or BERT) shows its no-op head best (layer, head
// and sample input, from the model's own numbers), printed and, with --write, stored as showcase.json,
// which the app opens on. `train` writes it for Bigram-Backcopy and synthetic-task models itself.

#include "cli/command_line.h"

#include "analysis/showcase.h"

#include <cstdio>

namespace outlierlens::cli {

int runShowcase(const QStringList& args)
{
    Command cmd("showcase",
                "Run a decoder or BERT model folder on its sample_inputs.txt and print the layer, head and "
                "input where a head parks most attention on a sink: for decoders the attention of later "
                "queries on the first token, for BERT the attention of ordinary tokens on [CLS], [SEP] "
                "and punctuation (docs/metrics.md). --write stores it as showcase.json, where the app "
                "opens the model.");
    cmd.parser().addOptions({
        {"model", "Decoder or BERT model folder with sample_inputs.txt.", "dir"},
        {"write", "Store the choice as showcase.json in the model folder."},
    });
    if (auto code = cmd.parse(args)) return *code;
    return cmd.guarded([&]() -> int {
        const std::string modelDir = cmd.required("model");
        const Showcase s = computeShowcase(modelDir);
        std::printf("layer %d, head %d (1-based), sample input %d: %s %.4f on that input, %.4f over all "
                    "sample inputs\n",
                    s.layer + 1, s.head + 1, s.input + 1, s.measureName(), s.inputAttention, s.meanAttention);
        if (cmd.isSet("write")) {
            writeShowcase(modelDir, s);
            std::printf("wrote %s/showcase.json\n", modelDir.c_str());
        }
        return Ok;
    });
}

} // namespace outlierlens::cli
