#include "cli/task_data_options.h"

#include "model/runtime.h"

namespace outlierlens::cli {

void addTaskDataOptions(Command& cmd, const QString& calibration)
{
    cmd.parser().addOptions({
        {"model", "Model folder.", "dir"},
        {"data",
         "mnli:FILE (MNLI classifier: pairs before --nli-train-pairs calibrate, the rest evaluate), "
         "text:FILE (masked LM or, for decoders, causal LM: held-out perplexity), backcopy:FILE (decoders "
         "trained on Bigram-Backcopy sequences of FILE's characters), fashion-mnist or images:DIR (ViT), "
         "synthetic (the synthetic task).",
         "spec"},
        {"calib-batches", calibration + QStringLiteral(" (default 16)."), "n"},
        {"batch-size", "Batch size of calibration and evaluation (default 32).", "n"},
        {"eval-batches",
         "Evaluation batches for text, images and synthetic (default 32; MNLI uses every held-out pair).",
         "n"},
        {"seq-length", "Tokens per sequence for mnli, text and backcopy (default 128).", "n"},
        {"nli-train-pairs",
         "mnli: pairs [0, N) calibrate, the rest evaluate (default 8000, as the demo models).", "n"},
        {"out", "Write the results to files named PREFIX.* (default: print only).", "prefix"},
        {"threads", "Intra-op threads (default: the number of cores).", "n"},
    });
}

QuantExperiment readTaskDataOptions(const Command& cmd)
{
    QuantExperiment e;
    e.modelDir = cmd.required("model");
    e.data = cmd.required("data");
    e.calibBatches = cmd.intValue("calib-batches", 16, 1, 100000);
    e.batchSize = cmd.intValue("batch-size", 32, 1, 4096);
    e.evalBatches = cmd.intValue("eval-batches", 0, 0, 1000000);
    e.seqLength = cmd.intValue("seq-length", 128, 8, 512);
    e.nliTrainPairs = cmd.intValue("nli-train-pairs", 8000, 0, 100000000);
    configureTorchThreads(cmd.intValue("threads", 0, 0, 1024));
    return e;
}

} // namespace outlierlens::cli
