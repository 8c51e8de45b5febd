#pragma once
// Any thread; the functions are reentrant (each scan opens its own files).
//
// Weight outliers of An et al. 2025 ("Systematic Outliers in Large Language Models") from a
// checkpoint alone, without a forward pass. Definitions: docs/metrics.md, "Weight outliers".
// No torch here: the GUI side can include this header.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace at {
class Tensor;
}

namespace outlierlens {

/// The two rules, named as the source names them: "so-code" (An et al.'s code,
/// pos_weight_outliers.py: the extremal ratio of each input column) and "so-paper" (the paper's
/// text: |w_ij| > tau * mean_j |w_ij|, the mean over row i).
enum class WeightRule { SoCode, SoPaper };
std::string toString(WeightRule rule);
/// "so-code" or "so-paper"; throws Error naming the accepted values otherwise.
WeightRule weightRuleFromString(const std::string& text);

struct WeightOutlierOptions
{
    WeightRule rule = WeightRule::SoCode;
    double tau = 1000.0; ///< so-paper threshold (the paper's tau)
    /// so-paper: positions kept per matrix, the largest |w_ij| / mean_j |w_ij| first; the count is
    /// always exact.
    std::size_t maxPositions = 100000;
};

/// One entry w_ij of W in nn.Linear layout [out_features, in_features], 0-based.
struct WeightPosition
{
    std::int64_t row = 0;    ///< i: output unit
    std::int64_t column = 0; ///< j: input neuron
    double value = 0;        ///< w_ij as stored (signed)
    double ratio = 0;        ///< |w_ij| / mean_j |w_ij| (the mean over row i)
};

/// The statistics of one weight matrix W [O, I] (nn.Linear layout: row i = output unit, column
/// j = input neuron), computed in float64 from |W| whatever the storage dtype.
struct WeightMatrixStats
{
    std::int64_t outFeatures = 0; ///< O
    std::int64_t inFeatures = 0;  ///< I
    /// [I] max_i |W[i,j]| / (mean_i |W[i,j]| + 1e-8): analyze_weight_columns of An et al.'s code.
    std::vector<double> columnRatio;
    /// [O] max_j |W[i,j]| / (mean_j |W[i,j]| + 1e-8): the row half of their per-module plot.
    std::vector<double> rowRatio;
    /// so-paper only (-1 under so-code): the number of (i, j) with |w_ij| > tau * mean_j |w_ij|.
    std::int64_t paperCount = -1;
    /// so-paper only: those positions, the largest ratio first (ties: row-major order), at most
    /// WeightOutlierOptions::maxPositions.
    std::vector<WeightPosition> paperPositions;

    /// max_j columnRatio (their Fig 5a "Max Ratio"); 0 for an empty matrix.
    double maxColumnRatio() const;
    /// The lower median of columnRatio, as torch.median (their Fig 5a "Median Ratio").
    double medianColumnRatio() const;
    double maxRowRatio() const;
    /// max(maxRowRatio, maxColumnRatio): their per-module plot (get_max_mean_ratio).
    double moduleRatio() const;
    /// The `n` columns with the largest ratio, largest first (ties: lower index first).
    std::vector<std::int64_t> topColumns(std::size_t n) const;
};

/// Statistics of one 2-D weight. `weight` is float32, float16, bfloat16 or float64 in nn.Linear
/// layout [O, I], or, with `conv1d`, GPT-2's Conv1D layout [I, O] (transposed to [O, I] for every
/// number and position). Read in pieces of rows, never widened whole. Throws Error if not 2-D floating.
WeightMatrixStats analyzeWeightMatrix(const at::Tensor& weight, const WeightOutlierOptions& options,
                                      bool conv1d = false);

/// Which linears a checkpoint scan looks at.
enum class WeightModules {
    Down, ///< only each layer's down projection (W_down: their Fig 5a)
    All   ///< every 2-D linear weight
};

/// One scanned weight.
struct WeightModuleStats
{
    std::string tensor;  ///< checkpoint name, e.g. "model.layers.3.mlp.down_proj.weight"
    int layer = -1;      ///< 0-based; -1 outside the layers (lm_head, project_in, pooler, ...)
    std::string module;  ///< within the layer, e.g. "mlp.down_proj", "fc2", "attn.c_attn"
    std::string dtype;   ///< storage dtype: "float32", "float16", "bfloat16", "float64"
    bool down = false;   ///< a down projection (mlp.down_proj, fc2, mlp.c_proj, output.dense, ...)
    bool conv1d = false; ///< stored [I, O] (GPT-2); the stats are in [O, I] layout regardless
    WeightMatrixStats stats;
};

/// A whole checkpoint.
struct WeightScan
{
    std::string modelDir;
    std::string weightsFile; ///< the file read (model.safetensors, pytorch_model.bin or a shard index)
    std::string modelType;   ///< config.json "model_type" ("" if absent)
    WeightOutlierOptions options;
    WeightModules modules = WeightModules::Down;
    /// Layers first (by layer, then module name), then the weights outside the layers by name.
    std::vector<WeightModuleStats> results;
    /// 2-D floating tensors left out, each "name: reason" (embeddings, tied heads, --modules down).
    std::vector<std::string> skipped;
};

/// Called after each scanned tensor with (done, total).
using WeightScanProgress = std::function<void(int done, int total)>;

/// Scans every 2-D linear weight of <modelDir> (model.safetensors, memory-mapped, pytorch_model.bin,
/// or the shards of either), one tensor at a time: weights of 1-D tensors (LayerNorm/RMSNorm, biases),
/// embeddings (names with "embed", GPT-2's wte/wpe) and an output head tied to the token
/// embeddings (config.json tie_word_embeddings, or the same values) are not linears and are
/// skipped. A family whose registry row says conv1dWeights (GPT-2) stores [I, O]; they are transposed. The
/// memory-mapped pages of a tensor are released once it is done, so resident memory stays near
/// one tensor's piece, not the file. `cancel` is checked between tensors (throws Cancelled).
/// Throws Error naming the folder or file. Sharded checkpoints are read shard by shard, mapped.
WeightScan scanWeightOutliers(const std::string& modelDir, const WeightOutlierOptions& options,
                              WeightModules modules, const WeightScanProgress& progress = {},
                              const std::atomic<bool>* cancel = nullptr);

/// True for the down projection's name within a layer in the families we know: LLaMA/Mistral
/// "mlp.down_proj", OPT "fc2", GPT-2 "mlp.c_proj", BERT/HF ViT "output.dense", timm ViT "mlp.fc2",
/// GPT-NeoX/Falcon "mlp.dense_4h_to_h".
bool isDownProjection(const std::string& module);

/// "model.layers.3.mlp.down_proj.weight" -> layer 3, module "mlp.down_proj"; outside the layers
/// (no "layers.N.", "layer.N.", "h.N." or "blocks.N.") layer -1 and the name without ".weight".
std::pair<int, std::string> weightLayerAndModule(const std::string& name);

} // namespace outlierlens
