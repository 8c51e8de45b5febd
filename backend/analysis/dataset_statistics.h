#pragma once
// DatasetStatistics: one object per worker thread; it is not synchronised, so only the thread that
// owns it may call it (merge() reads `other`, which must not be in use elsewhere). write() and
// reading a file back (statistics_file.h) touch HDF5, which is not thread-safe on Debian: one file at a
// time per process.

#include "analysis/figure_tensor.h"
#include "analysis/metrics.h"
#include "analysis/statistics_file.h"
#include "model/capture.h"

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace outlierlens {

class Hdf5Writer;

/// What a DatasetStatistics accumulates. Layer numbers are 0-based.
struct StatisticsOptions
{
    InputKind kind = InputKind::Text;
    std::vector<int> layers; ///< 0-based layers to analyse (any order; stored sorted, no duplicates)
    int numLayers = 0;
    int numHeads = 0;
    int hiddenSize = 0;
    int headDim = 0;
    int gridRows = 0;  ///< image models: patch grid; T = 1 + registers + gridRows * gridCols
    int gridCols = 0;  ///< (token 0 is CLS, then the registers, then the patches row by row)
    int registers = 0; ///< image models: register tokens between CLS and the patches (DINOv2-reg)
    OutlierCriterion
        criterion; ///< with the attention-outlier fraction (cumulative attention >= fraction * T)
    std::vector<std::string> delimiters = {"[SEP]", ".", ","}; ///< text models
    bool decoder = false; ///< text through a causal decoder: the figures use `out` (DESIGN.md)
};

/// The [T, d] tensors analysed in every selected layer, in file order: attn_out, ffn_out, residual, out.
const std::vector<CapturePoint>& statisticsTensorPoints();

/// Names of the captures (captureName()) that addSample() reads for these options, e.g. to build a
/// RecordingSink: per selected layer l its four [T, d] tensors, attn_probs, attn_values, attn_gate
/// (recorded only by gated models; optional) and the previous output ("embeddings" for l = 0, else
/// "layer{l-1}/out").
std::set<std::string> requiredCaptures(const StatisticsOptions& options);

/// Streaming statistics over a data set (docs/metrics.md, docs/stats-format.md). Memory depends on
/// the options and, for text, on the number of distinct token strings, never on the number of samples.
class DatasetStatistics
{
public:
    /// Throws Error if the options are inconsistent (no layers, a layer out of range, no grid for images).
    explicit DatasetStatistics(StatisticsOptions options);

    /// Adds one sample. `captures` maps capture names to that sample's unpadded tensors
    /// (sampleOf()): [T, d] for embeddings/attn_out/ffn_out/residual/out, [H, T, T] attn_probs
    /// (head, query, key), [H, T, d_head] attn_values, [H, T] attn_gate. `tokens` are the T token
    /// strings (text models; ignored for images). Throws Error naming the capture on a missing
    /// tensor or a wrong shape; the accumulators are then left unchanged.
    void addSample(const std::map<std::string, torch::Tensor>& captures,
                   const std::vector<std::string>& tokens = {});

    /// Streaming form of addSample(), for a runner that lets each layer's activations go before the next
    /// layer is computed: beginSample() takes the sample's T token strings (text; only T for images),
    /// interns them and returns its keys; addSampleLayer() adds one selected layer from captures holding
    /// that layer's tensors and its previous output (names and shapes as for addSample()); endSample()
    /// counts the sample. Add every selected layer once between begin and end: the results then equal
    /// addSample()'s. Unlike addSample(), an error can leave a sample partly counted.
    struct SampleKeys
    {
        std::vector<std::size_t> keys; ///< per token
    };
    SampleKeys beginSample(std::int64_t T, const std::vector<std::string>& tokens = {});
    void addSampleLayer(const SampleKeys& sample, int layer,
                        const std::map<std::string, torch::Tensor>& captures);
    void endSample() { ++m_samples; }

    /// Number of samples added so far (including merged ones).
    std::int64_t samples() const { return m_samples; }
    /// Number of distinct token strings seen (text); 1 + registers + rows * cols for images.
    std::size_t distinctKeys() const;
    /// The options as used: layers sorted without duplicates, delimiters without duplicates.
    const StatisticsOptions& options() const { return m_options; }

    /// Adds the counts of another accumulator built with the same options (parallel workers).
    /// Throws Error if the options differ.
    void merge(const DatasetStatistics& other);

    /// Writes every statistic, the derived means and the summary in the layout of
    /// docs/stats-format.md, plus root attributes describing the options and N. The caller adds
    /// provenance attributes (model, checkpoint_sha256, data, app_version) and commits. Throws
    /// Error if no sample was added.
    void write(Hdf5Writer& writer) const;

private:
    struct TensorAccumulator
    {
        std::vector<std::int64_t> outliersPerDim; ///< [d]
        std::int64_t valuesExamined = 0;
        std::int64_t outliers = 0;
        std::vector<std::int64_t> keyOutliers;      ///< [keys] outlier values on tokens of the key
        std::vector<std::int64_t> keyOutlierTokens; ///< [keys] occurrences with >= 1 outlier value
        double sumMaxInfNorm = 0;
        double sumKurtosis = 0;
    };
    struct HeadAccumulator
    {
        std::vector<double> cumulativeAttention;          ///< [keys * H], key-major
        std::vector<std::int64_t> attentionOutliersByKey; ///< [keys * H], key-major
        std::vector<std::int64_t> attentionOutliers;      ///< [H]
        std::int64_t keysExamined = 0;
        std::vector<double> absValueOutlierKeys; ///< [H] sum over keys of mean_dh |v|
        std::vector<double> absValueOtherKeys;   ///< [H]
        std::int64_t outlierKeys = 0;
        std::int64_t otherKeys = 0;
        std::vector<double> gateSum; ///< [H]
        std::int64_t gateTokens = 0;
    };
    /// Images: Darcet et al.'s token norms of the layer output `out` (analysis/high_norm.h).
    struct NormAccumulator
    {
        std::vector<double> sumNorm;             ///< [keys] sum over samples of the token's L2 norm
        std::vector<std::int64_t> highNorm;      ///< [keys] samples where the token is high-norm
        std::vector<std::int64_t> histogram;     ///< [kNormBins] every token's norm
        std::vector<std::int64_t> histogramHigh; ///< [kNormBins] the high-norm tokens' norms
    };
    struct LayerAccumulator
    {
        int layer = 0;
        std::vector<TensorAccumulator> tensors; ///< statisticsTensorPoints() order
        HeadAccumulator heads;
        NormAccumulator norms; ///< images only
    };

    struct LayerInputs;
    LayerInputs layerInputs(const std::map<std::string, torch::Tensor>& captures, int layer,
                            std::int64_t T) const;
    void checkTokens(std::int64_t T, const std::vector<std::string>& tokens, const std::string& what) const;
    SampleKeys internKeys(std::int64_t T, const std::vector<std::string>& tokens);
    static void accumulateLayer(const StatisticsOptions& o, LayerAccumulator& layer, const LayerInputs& in,
                                const std::vector<std::size_t>& keys);
    std::int64_t keyOf(const std::string& token);
    void growKeys();
    void writeNorms(Hdf5Writer& writer, const std::string& group, const NormAccumulator& acc) const;
    std::size_t keyCount() const;
    std::int64_t keyOccurrences(std::size_t key) const;
    void writeTensor(Hdf5Writer& writer, const std::string& group, const TensorAccumulator& acc,
                     const std::vector<std::size_t>& order) const;
    void writeHeads(Hdf5Writer& writer, const std::string& group, const HeadAccumulator& acc,
                    const std::vector<std::size_t>& order) const;
    void writeSummary(Hdf5Writer& writer) const;

    StatisticsOptions m_options;
    std::int64_t m_samples = 0;
    std::vector<LayerAccumulator> m_layers;
    // Text keys: token strings interned in first-seen order. Images use positions (0 = CLS).
    std::vector<std::string> m_keyNames;
    std::unordered_map<std::string, std::int64_t> m_keyIndex;
    std::vector<std::int64_t> m_keyOccurrences;
};

} // namespace outlierlens
