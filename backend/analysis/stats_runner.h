#pragma once
// runStatistics() runs on the calling thread (a worker or the command line's main thread); the
// cancel flag may be set from any thread; the progress callback is called on the running thread.

#include "analysis/metrics.h"
#include "model/config.h"
#include "model/model_family.h"
#include "model/precision.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace outlierlens {

/// A data set to stream: "mnli:FILE[:N]" (GLUE TSV or JSONL pairs), "images:DIR[:N]" (a flat
/// folder of images, or ImageNet's validation layout with one sub-folder per WordNet id) or
/// "text:FILE[:N]" (a UTF-8 text file cut into N chunks of seqLen tokens, for decoders).
struct DataSpec
{
    enum class Kind { Mnli, Images, Text };
    Kind kind = Kind::Mnli;
    std::string path;
    std::size_t limit = 0; ///< 0 = all
    /// Parses the command-line form; throws Error naming the problem.
    static DataSpec parse(const std::string& text);
    std::string describe() const;
    /// The kind of data a model family reads (its registry row's input).
    static Kind kindFor(const ModelFamily& family);
    /// "sentence pairs", "text", "images".
    static std::string describe(Kind kind);
    /// The command-line form: "mnli:FILE[:N]", "text:FILE[:N]", "images:DIR[:N]".
    static std::string usage(Kind kind);
};

/// One image of an image data set; label -1 when the folder layout gives none.
struct LabelledImage
{
    std::string path;
    int label = -1;
};

/// Lists an image data set: image files (by extension) sorted by file name, then path, so that an
/// ImageNet validation folder comes out in the official (class-mixed) order; class sub-folders
/// named by WordNet ids get labels through `wnidToIndex` (returns -1 for unknown ids). limit 0 = all.
std::vector<LabelledImage> listImageDataset(const std::string& dir, std::size_t limit,
                                            const std::function<int(const std::string&)>& wnidToIndex);

struct StatsRunOptions
{
    std::string modelDir;
    DataSpec data;
    std::vector<int> layers;    ///< 0-based; empty = all
    OutlierCriterion criterion; ///< with the attention-outlier fraction: a key receiving >= fraction * T
    int batchSize = 16;
    int tokenBudget = 2048; ///< text: at most this many (padded) tokens per batch, so memory stays flat
    int maxLength = 0;      ///< text: truncation (0 = the model's maximum)
    int seqLen = 0;         ///< decoders: tokens per chunk (0 = min(512, the model's maximum))
    bool bos = false;       ///< decoders: start each chunk with the tokenizer's BOS (An et al. do not)
    /// BERT and ViT: also An et al.'s systematic statistics (group `systematic`; decoders always get it).
    /// Off by default: a bert-base model's passes over 128 MNLI pairs ran 23.9 instead of 28.5 pairs/s.
    bool systematic = false;
    VariantOverride variant;
    /// Bf16: BERT and ViT run under bf16 autocast, decoders compute in bf16; the statistics are still
    /// accumulated in float64. Falls back to fp32 (said once through `warn`) on a CPU without bf16.
    Precision precision = Precision::Fp32;
    /// BERT on MNLI: forward passes run side by side on this many threads, sharing the calling thread's
    /// intra-op threads (0 or 1: one pass at a time with all of them; 2 helps on a busy machine). Results
    /// do not depend on it beyond float rounding.
    int workers = 0;
    std::string outPath;
    /// ImageNet class list and index (sample_data) for images:DIR with WordNet sub-folders.
    std::string imagenetNames, imagenetIndex;
};

struct StatsRunResult
{
    std::int64_t samples = 0;
    std::int64_t skipped = 0;       ///< unreadable images left out (each reported through `warn`)
    std::optional<double> accuracy; ///< MNLI with a classifier, or labelled images: top-1
    std::optional<double> top5;     ///< labelled images
    double seconds = 0;     ///< all of it: loading the model, tokenizing, the passes, writing the file
    double loopSeconds = 0; ///< the batches alone (what bench/stats_python.py times)
};

/// Streams the data set through the model and writes the statistics file (docs/stats-format.md)
/// atomically. Inputs are batched by similar length (text) so padding is small; padding is never
/// counted. `progress(done, total)` is called after each batch; `warn` for skipped inputs. Throws
/// Cancelled when `cancel` becomes true (no file is left behind), Error for bad input.
StatsRunResult runStatistics(const StatsRunOptions& options, const std::atomic<bool>& cancel,
                             const std::function<void(std::int64_t done, std::int64_t total)>& progress,
                             const std::function<void(const std::string&)>& warn);

} // namespace outlierlens
