#pragma once
// Pure functions (any thread): a snapshot or a statistics file in, the plain data of one view out.
// Indices are 0-based; the views display layers and heads 1-based.

#include "inspection_snapshot.h"
#include "view_data.h"

namespace outlierlens {

struct StatisticsFile;

/// The sink tokens of the model's kind in words (docs/metrics.md, "Sink tokens"); which tokens of an
/// input they are is InspectionSnapshot::sinkToken.
QString sinkTokensDescription(const ModelInfo& model);
/// The attention mass of one query's row `probabilities` (its first `keys` keys) on the sink tokens.
double sinkShare(const InspectionSnapshot& s, const float* probabilities, int keys);

HeadViewData buildHeadView(const InspectionSnapshot& s, int layer, int head);

/// Every head's attention, with its no-op score: the share of its attention on the sink tokens, averaged
/// over the queries.
OverviewData buildOverview(const InspectionSnapshot& s);

/// Outliers of one input: counts per hidden dimension and per token of `tensor` in `layer`
/// (s.outlierRule over the input's T x d values), and the max inf
/// norm and kurtosis of that tensor in every layer; the worker computed them (s.outliers).
/// `original`: the same input without the intervention `s` ran with (InspectionController::originalOf()),
/// whose per-layer numbers are drawn beside; null for none.
OutlierDashboardData buildDashboard(const InspectionSnapshot& s, int layer, const QString& tensor,
                                    const InspectionSnapshot* original = nullptr);
/// The same from a data-set statistics file (`tensor` of `layer` must have been analysed).
OutlierDashboardData buildDashboard(const StatisticsFile& stats, const QString& path, int layer,
                                    const QString& tensor, int headDim);

/// Tokens (indices, ascending) that carry at least one outlier in `dimension` of `tensor` in `layer`.
QVector<int> tokensWithOutliersIn(const InspectionSnapshot& s, int layer, const QString& tensor,
                                  int dimension);

/// The image view for a ViT snapshot: outlier patches of `layer`'s block output, and attention,
/// cumulative attention and |V| of `head` in the next layer (the same layer for the last one).
ImageViewData buildImageView(const InspectionSnapshot& s, int layer, int head);
/// Adds the data set's outlier counts per patch for `layer` (block outputs) from a statistics file.
void addDatasetPatches(ImageViewData& view, const StatisticsFile& stats, int layer);
/// Darcet et al.'s token norms of a ViT snapshot: the norms of `layer`'s block output, the high-norm
/// tokens (analysis/high_norm.h) and the class token's attention in the last layer per head.
TokenNormData buildTokenNorms(const InspectionSnapshot& s, int layer);
/// Adds the data set's norm histogram and high-norm counts per patch of `layer` from a statistics file
/// (files that have them: `stats` of this version on an image model).
void addDatasetNorms(TokenNormData& view, const StatisticsFile& stats, int layer);

/// The [T x d] tensor whose outliers a layer's heads read, as in the papers' figures: the FFN output
/// of BERT-style encoders, the block output of ViT and decoders (used for the previous layer).
QString outlierTensorRead(const ModelInfo& model);

/// The Outliers page's tensor choice `in`: a layer's input, the previous layer's `out`, which its heads
/// read. The other choices are per-layer tensors of the layer itself.
inline constexpr char kLayerInputChoice[] = "in";

/// A tensor of one layer, as the snapshot and statistics files name them.
struct OutlierTensorRef
{
    QString tensor;
    int layer = -1;                   ///< 0-based
    bool insteadOfEmbeddings = false; ///< `in` at layer 1, whose input (the embeddings) is not analysed:
                                      ///< layer 1's `out` is shown instead
};
/// What the Outliers page's `choice` shows when `layer` (0-based) is selected.
OutlierTensorRef resolveOutlierTensor(const QString& choice, int layer);
/// The choice the Outliers page opens a model on: `in` for a decoder that ships showcase.json (the app
/// opens it at its sink head, whose layer reads the outliers that make the sink), else
/// outlierTensorRead(model).
QString defaultOutlierTensor(const ModelInfo& model);

/// The teaching diagram's live numbers for query token `token` of `layer` and `head`.
TeachingData buildTeaching(const InspectionSnapshot& s, int token, int layer, int head);

/// An et al. 2025's systematic outliers of a snapshot (any family) for `layer`: their Figure 1 panels (|h|,
/// the largest |x_down| channels with their W_down columns, head-mean attention), per-layer
/// magnitudes, categories and heads, all from s.systematic.
SystematicViewData buildSystematic(const InspectionSnapshot& s, int layer);
/// The same over a data set from a statistics file's `systematic` group (no Figure 1 panels; the
/// W_down chart comes from `weights` when given: the open model's, independent of the data).
SystematicViewData buildSystematic(const StatisticsFile& stats, const QString& path, int layer,
                                   const SystematicSnapshot* weights);
/// The four token categories as a reader sees them ("initial token", ...), in TokenCategory order.
const QStringList& systematicCategoryNames();

/// The caption under each compared model, numbers that tell the story at a glance: the outliers in
/// what the chosen layer reads (the previous layer's output: the FFN output for BERT, the block output
/// for ViT and decoders, as in the papers' figures), and where the chosen head puts its attention.
QStringList compareCaptionLines(const InspectionSnapshot& s, int layer, int head);

/// Provenance of a snapshot with a selection text.
Provenance provenanceOf(const InspectionSnapshot& s, const QString& selection);

} // namespace outlierlens
