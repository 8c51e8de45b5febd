#pragma once
// Plain data read back from a statistics file (docs/stats-format.md), for the GUI: std types only, no
// torch. readStatisticsFile() may be called from any thread, but HDF5 is not thread-safe on Debian:
// one file operation at a time per process (call it from the worker that does file work).

#include "analysis/outlier_rule.h"
#include "analysis/systematic_data.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace outlierlens {

// Indices are as in the file: 0-based layers, heads, dimensions, patch rows and columns.

/// One [T, d] tensor of one layer ("layer10/ffn_out").
struct TensorStatisticsData
{
    std::vector<std::int64_t> outliersPerDim; ///< [d]
    std::int64_t valuesExamined = 0;
    std::int64_t outliers = 0;
    double meanMaxInfNorm = 0;
    double meanKurtosis = 0;
    // Text: aligned with StatisticsFile::tokens.
    std::vector<std::int64_t> tokenOutliers;
    std::vector<std::int64_t> tokenOutlierOccurrences;
    std::int64_t delimiterOutliers = 0;
    double delimiterShare = 0;           ///< of outlier values; NaN without outliers
    double delimiterOccurrenceShare = 0; ///< of token occurrences with >= 1 outlier; NaN without
    // Image: row-major [rows * cols]; the CLS token separately.
    std::vector<std::int64_t> patchOutliers;
    std::vector<std::int64_t> patchOutlierOccurrences;
    std::int64_t clsOutliers = 0;
    std::int64_t clsOutlierOccurrences = 0;
    std::vector<std::int64_t> registerOutliers; ///< [registers]; empty without registers
    std::vector<std::int64_t> registerOutlierOccurrences;
    // Image, `out` only: Darcet et al.'s token norms (analysis/high_norm.h), per token position (CLS,
    // registers, patches row-major) and as histograms over every token of every image.
    std::vector<double> meanTokenNorm;               ///< [1 + registers + rows * cols]
    std::vector<std::int64_t> highNormTokens;        ///< [same]: images where the token is high-norm
    std::vector<double> normBinEdges;                ///< [bins + 1], ascending
    std::vector<std::int64_t> normHistogram;         ///< [bins]
    std::vector<std::int64_t> normHistogramHighNorm; ///< [bins]: the high-norm tokens among them
};

/// The per-head statistics of one layer ("layer10/heads"); [H, n] arrays are row-major (head, key).
struct HeadStatisticsData
{
    std::string previousOutput; ///< capture whose outliers split the keys for mean |V|
    std::int64_t keysExamined = 0;
    std::vector<std::int64_t> attentionOutliers; ///< [H]
    // Text: [H * n], n = StatisticsFile::tokens.size(). Image: [H * rows * cols] patches.
    std::vector<double> meanCumulativeAttention;
    std::vector<std::int64_t> attentionOutliersByKey;
    std::vector<double> clsMeanCumulativeAttention;      ///< [H], image
    std::vector<std::int64_t> clsAttentionOutliers;      ///< [H], image
    std::vector<double> registerMeanCumulativeAttention; ///< [H * registers], image with registers
    std::vector<std::int64_t> registerAttentionOutliers; ///< [H * registers]
    std::int64_t outlierKeys = 0;
    std::int64_t otherKeys = 0;
    std::vector<double> meanAbsValueOutlierKeys; ///< [H]; NaN when outlierKeys == 0
    std::vector<double> meanAbsValueOtherKeys;   ///< [H]; NaN when otherKeys == 0
    std::vector<double> meanGate;                ///< [H]; empty for ungated models
    std::int64_t gateTokens = 0;
};

struct LayerStatisticsData
{
    int layer = 0;                                       ///< 0-based
    std::map<std::string, TensorStatisticsData> tensors; ///< by point name: attn_out, ffn_out, ...
    HeadStatisticsData heads;
};

struct StatisticsSummaryData
{
    std::string infNormTensor;                ///< "ffn_out" (text) or "out" (image)
    std::vector<std::string> kurtosisTensors; ///< {"ffn_out", "out"} (text) or {"out"} (image)
    std::vector<int> layers;                  ///< 0-based, as analysed
    std::vector<double> meanMaxInfNorm;       ///< per layer, of infNormTensor
    std::vector<double> meanKurtosis;         ///< per layer, mean over kurtosisTensors
    double maxInfNorm = 0;
    int maxInfNormLayer = 0;
    double avgKurtosis = 0;
    double maxKurtosis = 0;
};

struct StatisticsFile
{
    std::string kind; ///< "text" or "image"
    std::int64_t samples = 0;
    int numLayers = 0;
    int numHeads = 0;
    int hiddenSize = 0;
    int headDim = 0;
    int gridRows = 0;
    int gridCols = 0;
    int registers = 0;            ///< image: register tokens between CLS and the patches
    OutlierCriterion outlierRule; ///< the rule the file counted with (root attributes rule, k, tau, ...)
    std::string criterion;        ///< OutlierCriterion::describe()
    std::map<std::string, std::string>
        provenance; ///< model, model_name, checkpoint_sha256, data, app_version, precision if present
    std::vector<std::string> tokens;            ///< text: every token string seen
    std::vector<std::int64_t> tokenOccurrences; ///< aligned with tokens
    std::vector<std::string> delimiters;
    std::vector<LayerStatisticsData> layers; ///< ascending layer order
    StatisticsSummaryData summary;
    /// Group `systematic`, if the file has it (decoders always; BERT and ViT with `stats --systematic`).
    std::optional<SystematicData> systematic;
};

/// Loads a file written by DatasetStatistics::write(). Floating values come back with float32
/// precision (Hdf5Reader). Throws Error naming the file and dataset on anything missing or malformed.
StatisticsFile readStatisticsFile(const std::string& path);

} // namespace outlierlens
