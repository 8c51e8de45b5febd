#pragma once
// Plain data the views display. app/ builds these from the backend's results; widgets never see a
// torch type. Values are copied in; any thread may build them, the GUI thread reads them.

#include <QImage>
#include <QString>
#include <QStringList>
#include <QVector>

#include <algorithm>

namespace outlierlens {

/// Where a figure's numbers come from; written into every export.
struct Provenance
{
    QString model;            ///< model folder or name
    QString checkpointSha256; ///< of the weights file
    QString input;            ///< the sentence pair, image file or data set
    QString selection;        ///< e.g. "layer 11, head 3" (1-based, as displayed)
    /// Said once in the UI and in every export.
    static QString indexingNote()
    {
        return QStringLiteral("Layers and heads are numbered from 1, hidden dimensions from 0.");
    }
};

/// A dense row-major matrix with labels, e.g. attention probabilities [T x T] (query x key).
struct MatrixData
{
    int rows = 0;
    int cols = 0;
    QVector<float> values; ///< rows * cols, row-major
    QStringList rowLabels; ///< rows entries (may be empty: rows are then numbered)
    QStringList colLabels; ///< cols entries (may be empty)
    QString rowTitle;      ///< e.g. "query token"
    QString colTitle;      ///< e.g. "key token", "dimension (0-based)"
    QString valueTitle;    ///< e.g. "attention probability"
    /// Causal attention: a cell whose column (key) comes after its row (query) is masked, i.e. not
    /// computed by the model. Such cells are drawn as masked, never as a value of the colour scale.
    bool causal = false;
    /// With causal: a sliding window (Mistral; Gemma 2's even layers): a query sees only its `window` most
    /// recent keys, itself included, and earlier keys are masked too. 0: every earlier key.
    int window = 0;

    bool isMasked(int row, int col) const
    {
        return causal && (col > row || (window > 0 && col <= row - window));
    }
    /// The first key (column) a query row sees, and one past the last.
    int firstSeen(int row) const { return causal && window > 0 ? std::max(0, row - window + 1) : 0; }
    int endSeen(int row) const { return causal ? std::min(cols, row + 1) : cols; }
    /// The legend's and tooltips' name of a masked cell.
    QString maskedName() const
    {
        return window > 0 ? QStringLiteral("masked (causal, window %1)").arg(window)
                          : QStringLiteral("masked (causal)");
    }

    float at(int row, int col) const { return values[row * cols + col]; }
    bool isEmpty() const { return rows == 0 || cols == 0; }
};

/// How a matrix is coloured.
enum class ColorScale {
    Sequential, ///< 0 .. max (probabilities, gates, counts): viridis-like
    Diverging,  ///< -m .. +m symmetric around 0 (values, products): blue-white-red
};

/// One attention head of one layer for one input: the paper's Figures 2, 10-15.
struct HeadViewData
{
    int layer = -1; ///< 0-based (displayed 1-based)
    int head = -1;  ///< 0-based (displayed 1-based)
    QStringList tokens;
    MatrixData probabilities;    ///< [T x T] query x key, after (clipped) softmax
    MatrixData values;           ///< [T x d_head] V of this head, token x dimension
    MatrixData product;          ///< [T x d_head] P.V before the gate
    QVector<float> gate;         ///< [T] gate probabilities pi per token; empty for ungated models
    bool clippedSoftmax = false; ///< exact zeros of the probabilities are marked
    bool causal = false;         ///< decoder: keys after the query are masked (drawn as such)
    Provenance provenance;
};

/// Every layer x head at a glance (like bertviz's model view), with a "no-op" score under each.
struct OverviewData
{
    int layers = 0;
    int heads = 0;
    QVector<MatrixData> probabilities; ///< layers * heads entries (index layer * heads + head), [T x T]
    QVector<float> noopScore;          ///< same indexing, in [0, 1]
    QString scoreDescription;          ///< what the score means, for the tooltip and the legend
    QStringList tokens;
    Provenance provenance;
};

/// Bars with labels (QtCharts), e.g. outlier counts per hidden dimension or per token.
struct BarData
{
    QString title;
    QString axisTitle;  ///< value axis
    QStringList labels; ///< one per bar (dimension numbers, token strings)
    QVector<double> values;
};

/// The outlier dashboard (Figures 1 and 9) for one layer and tensor, from the current input or
/// a data-set statistics file.
struct OutlierDashboardData
{
    QString sourceDescription;          ///< "current input: ..." or "statistics file ... (9,815 pairs)"
    int layer = -1;                     ///< 0-based
    QString tensor;                     ///< "ffn_out", "out", ...
    int headDim = 0;                    ///< for dimension -> head (dim / headDim) in the next layer
    BarData perDimension;               ///< labels "0".."d-1"
    BarData perToken;                   ///< the tokens (or patches) carrying the most outliers
    QVector<double> maxInfNormPerLayer; ///< index = layer (0-based)
    QVector<double> kurtosisPerLayer;
    QVector<double> outliersPerLayer; ///< outlier values of `tensor` per layer; empty if unknown
    /// The same input without an intervention (the model as it computes it), drawn beside the per-layer
    /// curves, lighter; empty: no intervention.
    QVector<double> originalMaxInfNormPerLayer, originalKurtosisPerLayer;
    QString criterion; ///< e.g. "|x - mean| > 6 std"
    Provenance provenance;
};

/// Magnitudes per layer (index = 0-based layer, displayed 1-based): one curve per series, NaN where a
/// layer has no value. Drawn on a log scale (An et al.'s Figs 3a, 4a, 5a, 6a).
struct LayerSeriesData
{
    QString title;                   ///< e.g. "Layer outputs h: top-3 and median |h|"
    QString axisTitle;               ///< value axis, e.g. "|h|"
    QStringList names;               ///< one per series, e.g. "top 1", "top 2", "top 3", "median"
    QVector<QVector<double>> series; ///< [series][layer]

    bool isEmpty() const { return series.isEmpty(); }
};

/// One head's row of An et al.'s Table 1 for the chosen layer.
struct SystematicHeadRow
{
    /// Share of the head's received attention on the head-mean outlier keys (Fig 6c).
    double outlierKeyShare = 0;
    qint64 outlierKeys = 0; ///< keys over the rule by this head's own attention
    /// Heavy tokens of h that are this head's outlier keys / heavy tokens; NaN when there is none.
    double consistency = 0;
};

/// An et al. 2025's systematic outliers for one layer (their Figures 1, 3-6 and Table 1). The Figure 1
/// panels are of the current input (empty when the source is a statistics file); the rest comes from
/// the current input or from a statistics file over a text data set.
struct SystematicViewData
{
    QString sourceDescription; ///< "current input: ..." or "statistics file ... (100 samples)"
    QString rule;              ///< the rule in words, with its thresholds
    int layer = -1;            ///< 0-based
    int headDim = 0;           ///< channel c of h feeds head c / headDim of the next layer

    // Figure 1 for the current input, layer `layer`.
    MatrixData hidden;            ///< |h| [T x d] token x channel
    MatrixData downInput;         ///< |x_down| [T x K]: the K channels with the largest |x_down|
    MatrixData downWeight;        ///< |W_down[:, j]| [K x d] for those channels (one row each)
    MatrixData attention;         ///< head-mean attention [T x T] (query x key), causal
    QVector<int> heavyTokens;     ///< rows of `hidden` over the rule (heavy tokens)
    QVector<int> heavyDownTokens; ///< rows of `downInput` over the rule
    QVector<int> outlierChannels; ///< columns of `hidden` holding a heavy token's largest |h|
    QVector<int> outlierKeys;     ///< columns of `attention` over the rule (received >= fraction * T)

    // Per layer (Figs 3a, 4a, 5a, 6a).
    LayerSeriesData hiddenPerLayer;    ///< top 1-3 and median |h|
    LayerSeriesData downPerLayer;      ///< top 1-3 and median |x_down|
    LayerSeriesData weightPerLayer;    ///< max and median column extremal ratio of W_down
    LayerSeriesData attentionPerLayer; ///< top 1-2 and median received head-mean attention

    // Which tokens (Figs 3b, 6b), layer `layer`: labels are the four categories.
    BarData heavyByCategory;       ///< heavy tokens of h
    BarData downHeavyByCategory;   ///< heavy tokens of x_down
    BarData outlierKeysByCategory; ///< head-mean outlier keys
    BarData tokensByCategory;      ///< every token position seen, for scale

    // Which heads (Fig 6c) and Table 1, layer `layer`.
    QVector<SystematicHeadRow> heads;
    qint64 consistencySamples = 0; ///< samples with a heavy token (the consistency's denominator)

    Provenance provenance;
};

/// The image view (Figures 3, 16, 17 and 9c).
struct ImageViewData
{
    QImage image;     ///< the model's input as a picture (resized and cropped), RGB
    QString credit;   ///< photo credit to show (CC BY images)
    int gridRows = 0; ///< patch grid
    int gridCols = 0;
    int layer = -1;               ///< 0-based layer whose outliers are overlaid
    int head = -1;                ///< 0-based head of the next layer
    QVector<float> patchOutliers; ///< gridRows * gridCols: outlier values per patch (this input)
    QVector<float>
        cumulativeAttention; ///< gridRows * gridCols: sum over queries of the head's attention per key patch
    float clsCumulativeAttention = 0;           ///< the same for the CLS key
    QVector<float> registerCumulativeAttention; ///< the same per register token (DINOv2-reg); empty without
    MatrixData attention;                       ///< [T x T] of that head
    double meanAbsValueOutlierPatches = 0;      ///< Figure 3e: mean |V| of keys carrying outliers
    double meanAbsValueOtherPatches = 0;
    QVector<float> datasetPatchOutliers; ///< gridRows * gridCols from a statistics file; empty if none
    QString datasetDescription;
    Provenance provenance;
};

/// Darcet et al. 2024's view of one image ("Vision Transformers Need Registers"): the L2 norm of every
/// token of a layer's block output, the high-norm tokens by the rule of analysis/high_norm.h, and the
/// attention of the class token of the last layer per head; with a statistics file, the data set's norm
/// histogram and high-norm counts per patch.
struct TokenNormData
{
    QString model;    ///< the model's name, for a row of a comparison
    QImage image;     ///< the model's input as a picture, RGB
    int gridRows = 0; ///< patch grid
    int gridCols = 0;
    int layer = -1;                             ///< 0-based layer whose block output's norms are shown
    QStringList prefixLabels;                   ///< the tokens before the patches: "[CLS]", "[REG1]", ...
    QVector<float> prefixNorms;                 ///< their norms
    QVector<float> patchNorms;                  ///< gridRows * gridCols, row-major
    double cutoff = 0;                          ///< a token above it is high-norm (NaN: no patches)
    QString rule;                               ///< the rule in words
    int attentionLayer = -1;                    ///< 0-based layer of the class token's attention (the last)
    QVector<QVector<float>> clsAttention;       ///< [H][gridRows * gridCols]: [CLS]'s attention on each patch
    QVector<QVector<float>> clsPrefixAttention; ///< [H][prefix tokens]: on [CLS] itself and the registers
    // Data set (a statistics file of this model), empty without one.
    QVector<double> datasetBinEdges;          ///< bins + 1
    QVector<double> datasetHistogram;         ///< bins: every token of every image
    QVector<double> datasetHistogramHighNorm; ///< bins: the high-norm ones
    QVector<float> datasetHighNormPatches;    ///< gridRows * gridCols: images where the patch is high-norm
    QString datasetDescription;
    Provenance provenance;

    int highNormPatches() const
    {
        return int(
            std::count_if(patchNorms.begin(), patchNorms.end(), [this](float n) { return n > cutoff; }));
    }
};

/// Live numbers of the teaching diagram (Figures 4 and 5) for one token, layer and head.
struct TeachingData
{
    QString modelDescription;   ///< "vanilla softmax", "clipped softmax (gamma ...)", "gated attention"
    QString token;              ///< the chosen query token
    int layer = -1;             ///< 0-based
    int head = -1;              ///< 0-based
    double ffnOutputMax = 0;    ///< max |FFN output| of the previous layer at this token
    double layerNormMin = 0;    ///< post-LN: LayerNorm output range at this token; pre-LN: the
    double layerNormMax = 0;    ///< range of the residual stream entering the block
    bool preLayerNorm = false;  ///< pre-LN block (ViT, GPT-2, LLaMA, pre-LN OPT): LayerNorm feeds Q, K, V
    double softmaxInputMin = 0; ///< attention scores of this query (unmasked keys)
    double softmaxInputMax = 0;
    double largestProbability = 0; ///< and the key that receives it
    QString largestProbabilityKey;
    bool largestKeyIsSink = false; ///< that key is a sink token (docs/metrics.md, "Sink tokens")
    double sinkProbability = 0;    ///< this query's attention on all the sink tokens
    QString sinkTokens;            ///< which tokens are sinks for this model, in words
    double contextNorm = 0;        ///< |P.V| of this head at this token (L2)
    double gate = -1;              ///< pi at this token; < 0 for ungated models
    /// What the head reads from the previous layer (`outlierTensor` of layer `layer`, 1-based: the
    /// layer before this one), judged by `outlierRule`: outlier values at the key that receives the
    /// largest probability and at this token; -1 when the layer reads the embeddings.
    QString outlierTensor;  ///< "out" (decoders, ViT) or "ffn_out" (BERT)
    QString outlierRule;    ///< e.g. "6σ"
    int keyOutliers = -1;   ///< outlier values at the key with the largest probability
    double keyInputMax = 0; ///< max |x| of that key's row
    int tokenOutliers = -1; ///< outlier values at this token
    int exactZeros = 0;     ///< this query's probabilities over its visible keys that are exactly 0
    int visibleKeys = 0;    ///< keys this query sees (all, or up to itself when causal)
    bool clipped = false;
    bool gated = false;
    Provenance provenance;
};

/// A training run's curves, from its metrics.jsonl.
struct TrainingCurveData
{
    QString name;
    QVector<double> steps, loss;          ///< progress lines
    QVector<double> evalSteps, evalValue; ///< evaluations
    QString evalName;                     ///< "perplexity" or "accuracy"
    QVector<QVector<double>>
        maxInfNorm; ///< [evaluation][layer] of the run's figure tensor (BERT ffn_out, else out)
    QVector<QVector<double>> kurtosis; ///< [evaluation][layer]
    /// [evaluation][layer]: the largest first-token attention of the layer's heads (docs/metrics.md) on
    /// the probe batch: how much the layer's most sinking head sinks. Empty for runs that did not record it.
    QVector<QVector<double>> firstTokenAttention;
};

/// One point of a finished sweep (summary.json).
struct SweepPointData
{
    QString name;
    QVector<QPair<QString, QString>> settings; ///< grid key -> value
    QString metricName;
    double metric = 0, relativeMetric = 0, maxInfNorm = 0, avgKurtosis = 0;
};

} // namespace outlierlens
