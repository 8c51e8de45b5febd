// `outlierlens stats`: outlier statistics over a whole data set, streamed, written to one HDF5 file.

#include "cli/command_line.h"
#include "cli/progress_printer.h"

#include "common/atomic_file.h"

#include "analysis/stats_runner.h"
#include "common/error.h"
#include "model/runtime.h"
#include "paths.h"
#include "train/job_progress.h"

#include <QStringList>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <unistd.h>

namespace outlierlens::cli {
namespace {

std::vector<int> parseLayers(const QString& text)
{
    std::vector<int> layers;
    for (const QString& part : text.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        bool ok = false;
        const int layer = part.trimmed().toInt(&ok);
        if (!ok || layer < 0)
            throw UsageException{"--layers must be comma-separated 0-based layer numbers, found '" +
                                 text.toStdString() + "'"};
        layers.push_back(layer);
    }
    return layers;
}

} // namespace

int runStats(const QStringList& args)
{
    Command cmd(
        "stats",
        "Stream a data set through a BERT, ViT or decoder model and write the outlier statistics behind the "
        "paper's figures and tables to one HDF5 file (docs/stats-format.md, docs/metrics.md).");
    cmd.parser().addOptions({
        {"model", "Model folder.", "dir"},
        {"data",
         "mnli:FILE[:N] (GLUE TSV or JSONL pairs), images:DIR[:N] (a folder of images, or ImageNet's "
         "validation layout with one sub-folder per WordNet id) or, for decoders, text:FILE[:N] (the "
         "file's start cut into N chunks of --seq-len tokens; default N 100).",
         "spec"},
        {"layers", "Comma-separated 0-based layers (default: all).", "list"},
        {"batch", "Inputs per forward pass (default 16).", "B"},
        {"max-length", "Truncate text inputs to N tokens (default: the model's maximum).", "N"},
        {"seq-len", "Decoders: tokens per chunk (default: 512 or the model's maximum if smaller).", "T"},
        {"bos", "Decoders: start every chunk with the tokenizer's BOS token (An et al. take chunks "
                "without it)."},
        {"systematic",
         "BERT and ViT: also write An et al.'s systematic outliers (group \"systematic\", read by the app's "
         "Systematic outliers page; the passes of a bert-base model over MNLI ran about 15% slower). "
         "Decoders always get it."},
        {"threads", "LibTorch threads (default: all cores).", "N"},
        {"workers",
         "BERT: forward passes run side by side, sharing the threads (default 1: one pass at a time with "
         "every thread; 2 is faster when other programs keep the cores busy).",
         "N"},
        {"out", "Output HDF5 file (written atomically).", "stats.h5"},
        {"json-progress",
         "Report progress as JSON lines on stdout, as `outlierlens train` does ({\"type\": \"progress\", "
         "\"step\": .., \"total\": .., \"elapsed\": .., \"eta\": ..}), instead of the line on stderr; the "
         "app's job list reads them (docs/file-formats.md)."},
    });
    cmd.addOutlierRuleOptions(
        "Outlier rule: sigma (|x - mean| > k std, default) or tau (|x| > tau mean|x|; An et al.'s "
        "so-paper, and so-code, whose heavy tokens, max_c |h_tc| > tau mean|h|, are those carrying one; "
        "the file's \"systematic\" group uses this tau). The file records the rule.");
    cmd.addVariantOptions();
    cmd.addPrecisionOption(
        "fp32 (default) or bf16, a fast mode on CPUs with bf16 instructions: in BERT and ViT each linear "
        "layer multiplies bf16 operands into a float32 result, corrected so that each input's mean token "
        "row is float32's; the attention products, softmax and LayerNorm stay float32; decoders compute in "
        "bf16; the statistics are still accumulated in float64. Measured on the demo models and a "
        "bert-base-sized one: the max inf norm stays within 0.3% of fp32, outlier counts agree on "
        "98.3-100% of counted values (values within bf16's rounding of the threshold change sides; "
        "bench/compare_stats_precision.sh). The file records the precision used.");
    if (auto code = cmd.parse(args)) return *code;
    return cmd.guarded([&]() -> int {
        configureTorchThreads(cmd.intValue("threads", 0, 1, 1024));
        StatsRunOptions o;
        o.modelDir = cmd.required("model");
        o.data = DataSpec::parse(cmd.required("data"));
        o.outPath = cmd.required("out");
        checkCanWrite(o.outPath); // before the passes, not after them
        if (cmd.isSet("layers")) o.layers = parseLayers(cmd.parser().value("layers"));
        o.criterion = cmd.outlierRule();
        o.batchSize = cmd.intValue("batch", 16, 1, 4096);
        o.maxLength = cmd.intValue("max-length", 0, 2, 1 << 20);
        o.seqLen = cmd.intValue("seq-len", 0, 2, 1 << 20);
        o.bos = cmd.isSet("bos");
        o.systematic = cmd.isSet("systematic");
        o.workers = cmd.intValue("workers", 0, 1, 64);
        o.variant = cmd.variantOverride();
        o.precision = cmd.precision(); // says once on stderr when bf16 falls back to fp32
        if (o.data.kind == DataSpec::Kind::Images) {
            o.imagenetNames = sampleDataFile("imagenet/imagenet_classes_ILSVRC2012.txt");
            o.imagenetIndex = sampleDataFile("imagenet/imagenet_class_index.json");
        }
        ProgressPrinter printer("stats",
                                o.data.kind == DataSpec::Kind::Mnli     ? "pairs"
                                : o.data.kind == DataSpec::Kind::Images ? "images"
                                                                        : "chunks",
                                cmd.isSet("json-progress"));
        const StatsRunResult r = runStatistics(
            o, interruptFlag(), [&](std::int64_t done, std::int64_t total) { printer.update(done, total); },
            [](const std::string& message) { std::fprintf(stderr, "\nstats: %s\n", message.c_str()); });
        std::printf("wrote %s: %lld inputs in %.1f s (%.1f per second; %.1f per second in the forward passes "
                    "and statistics alone)",
                    o.outPath.c_str(), static_cast<long long>(r.samples), r.seconds,
                    double(r.samples) / r.seconds,
                    r.loopSeconds > 0 ? double(r.samples) / r.loopSeconds : 0.0);
        if (r.skipped) std::printf(", %lld unreadable skipped", static_cast<long long>(r.skipped));
        if (r.accuracy) std::printf(", accuracy %.4f", *r.accuracy);
        if (r.top5) std::printf(", top-5 %.4f", *r.top5);
        std::printf("\n");
        return Ok;
    });
}

} // namespace outlierlens::cli
