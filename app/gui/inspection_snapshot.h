#pragma once
// Plain data (no torch): built by the inspection worker thread, then read by the GUI thread. A
// snapshot is immutable once emitted and shared through std::shared_ptr<const ...>.

#include "analysis/outlier_rule.h"
#include "analysis/systematic_data.h"
#include "model/model_family.h"

#include <QImage>
#include <QString>
#include <QStringList>
#include <QVector>

#include <memory>
#include <utility>

namespace outlierlens {

/// What the app knows about the loaded model.
struct ModelInfo
{
    /// The model's family, a row of the registry (backend/model/model_family.h); null: no model open.
    const ModelFamily* family = nullptr;

    QString dir;
    QString name;    ///< folder name
    QString head;    ///< "BertForSequenceClassification", "vit_small_patch16_224", ...
    QString variant; ///< e.g. "clipped softmax (gamma -0.025, zeta 1)"
    QString sha256;
    int layers = 0, heads = 0, hidden = 0, headDim = 0;
    bool clipped = false, gated = false;
    bool synthetic = false;          ///< trained on the synthetic no-op task (inputs are generated)
    QStringList classNames;          ///< classifier labels
    QString card;                    ///< README.md model card, if any
    int imageSize = 0, gridSize = 0; ///< ViT
    int registers = 0;               ///< ViT: register tokens between [CLS] and the patches (DINOv2-reg)
    bool preLayerNorm = false;       ///< blocks normalise their input (ViT, GPT-2, pre-LN OPT, LLaMA)
    QString tokenizerKind;           ///< decoders: "byte-level BPE" or "SentencePiece"
    bool noTokenizer = false;        ///< decoders: the folder has no tokenizer files
    /// Decoders with sliding-window attention: a query sees its `slidingWindow` most recent keys, on
    /// every layer (Mistral) or on the even layers only (Gemma 2). 0: no window.
    int slidingWindow = 0;
    bool windowOnEvenLayersOnly = false;
    /// Why SmoothQuant, and why a rotation of the residual stream, do not apply to this model (the refusal
    /// `quantize` gives); empty where they do (quant/transforms.h).
    QString smoothQuantRefusal, rotationRefusal;
    /// Why SmoothQuant (`smoothQuant`) and/or a rotation (`rotate`) do not apply; empty where they do.
    QString transformRefusal(bool smoothQuant, bool rotate) const
    {
        if (smoothQuant && !smoothQuantRefusal.isEmpty()) return smoothQuantRefusal;
        return rotate ? rotationRefusal : QString();
    }

    bool isOpen() const { return family != nullptr; }
    /// A decoder LLM: causal attention, keys after the query are masked.
    bool isDecoder() const { return family && family->causal; }
    /// Takes text as input (BERT: pairs; decoders: free text).
    bool takesText() const { return family && family->takesText(); }
    /// Takes sentence pairs (BERT over MNLI).
    bool takesPairs() const { return family && family->sentencePairs; }
    bool takesImages() const { return family && family->takesImages(); }
    /// A decoder whose folder has no tokenizer files: its input is token ids ("1, 5, 9").
    bool takesTokenIds() const { return isDecoder() && noTokenizer; }
    /// The sliding window of a layer (0-based), 0 where the layer has none.
    int windowOf(int layer) const { return windowOnEvenLayersOnly && layer % 2 != 0 ? 0 : slidingWindow; }
    /// ViT: the token of the first patch, after [CLS] and the registers.
    int firstPatchToken() const { return 1 + registers; }
};

/// Outliers of one [T x d] tensor of one layer and input, computed by the inspection worker with
/// analysis/metrics (docs/metrics.md), so that views read them instead of computing them again.
struct TensorOutliers
{
    QVector<int> perDimension; ///< [d]: outlier values in each hidden dimension (0-based)
    QVector<int> perToken;     ///< [T]: outlier values of each token
    QVector<int> positions;    ///< flat indices t * d + j of the outlier values, ascending
    double maxInfNorm = 0;     ///< max |x|, in the tensor's units
    double kurtosis = 0;       ///< Pearson kurtosis (not excess: a Gaussian gives about 3)
};

/// An et al.'s systematic outliers of this input by their code's rules (heavy token: max |h| of
/// the token > tau * mean |h|; outlier key: head-mean received attention >= fraction * T), computed by
/// analysis/systematic_statistics with this input as its one sample, and what their Figure 1 draws of
/// x_down and W_down (every family).
struct SystematicSnapshot
{
    SystematicData stats;                  ///< this input as one sample, every layer
    QVector<QVector<int>> heavyTokens;     ///< [L]: tokens heavy in h (ascending)
    QVector<QVector<int>> heavyDownTokens; ///< [L]: tokens heavy in x_down
    QVector<QVector<int>> outlierKeys;     ///< [L]: head-mean outlier keys
    int channels = 0;                      ///< K: x_down channels kept per layer
    QVector<int> downChannels; ///< [L][K]: the K channels with the largest max_t |x_down|, largest first
    QVector<float> downValues; ///< [L][T][K]: |x_down| of those channels
    int hidden = 0;            ///< rows of W_down (d)
    QVector<float> downWeight; ///< [L][K][d]: |W_down[:, j]| of those channels; empty if not found
    QVector<double> downColumnRatio; ///< [L][K]: their column extremal ratio max_i|W_ij| / mean_i|W_ij|
    QVector<double> weightRatioMax;  ///< [L]: over every column of W_down (their Fig 5a); empty if not found
    QVector<double> weightRatioMedian; ///< [L]: lower median

    bool isEmpty() const { return stats.layers.empty(); }
};

/// One layer of An et al.'s lifecycle of an outlier (their Figures 7-9), signed values of one decoder
/// layer, recorded only where the worker is asked to (InspectionWorker::setLifecycleLayers). An array is
/// empty where the layer has no such tensor (an FFN without gate has no `gate` and `act`; a parallel
/// block has no norm between its attention and FFN).
struct LifecycleLayer
{
    int layer = -1;            ///< 0-based
    int ffn = 0;               ///< d_ff: columns of gate, up, act and downIn
    int kvHeads = 0;           ///< key heads (grouped-query attention: fewer than the query heads)
    QVector<float> ffnNormIn;  ///< [T][d] what the FFN's norm reads (the residual after the attention)
    QVector<float> ffnNormOut; ///< [T][d] what the FFN reads
    QVector<float> gate;       ///< [T][ffn] the gate projection, before its activation
    QVector<float> up;         ///< [T][ffn] the up projection (the first linear, before its activation)
    QVector<float> act;        ///< [T][ffn] the gate's activation
    QVector<float> downIn;     ///< [T][ffn] x_down, what the down projection reads
    QVector<float> query;      ///< [T][H * dh] the query projection, before the rotary embedding
    QVector<float> key;        ///< [T][kvHeads * dh] the key projection, before the rotary embedding
    QVector<float> scores;     ///< [H][T][T] QK^T / sqrt(dh), before the mask
};

/// Every activation of one input, as flat float arrays with 0-based indices.
struct InspectionSnapshot
{
    quint64 generation = 0;
    ModelInfo model;
    QString input;           ///< "premise ||| hypothesis", image path, or generated example
    QStringList tokens;      ///< T labels ("[CLS]", "patch 3,7", ...)
    QVector<bool> sinkToken; ///< [T]: a sink token (docs/metrics.md, "Sink tokens"; sinkTokens())
    int T = 0;
    QImage image; ///< ViT: the model's input as a picture
    QString imageCredit;

    QVector<float> embeddings; ///< [T][d]
    /// Per query, the smallest and largest attention score over the keys it sees: [L][H][T][2]. The
    /// [T x T] scores themselves are not kept (only the teaching diagram reads them, one row at a
    /// time): at 2,048 tokens they would double the snapshot.
    QVector<float> scoreRanges;
    /// [L * H] entries of [T][T], one per head, so that a view shares a head's matrix instead of
    /// copying it (a 2,048-token head is 16 MB).
    QVector<QVector<float>> probs;
    QVector<float> values;   ///< [L][H][T][dh]
    QVector<float> context;  ///< [L][H][T][dh]
    QVector<float> gates;    ///< [L][H][T]; empty for ungated models
    QVector<float> attnOut;  ///< [L][T][d]
    QVector<float> ffnOut;   ///< [L][T][d]
    QVector<float> residual; ///< [L][T][d]
    QVector<float> out;      ///< [L][T][d]
    /// [L][T][d]: the pre-norm's output that the Q/K/V projections read (pre-LN models; empty for BERT and
    /// post-LN OPT): what SmoothQuant rescales and a quantizer of linear inputs reads.
    QVector<float> attnIn;
    /// The transform the model was seen through (ModelTransform::describe(): "hadamard rotation"); empty:
    /// the model as trained. Its function is the same; the activations are those of the transformed model.
    QString transform;
    /// The intervention applied to this input's forward pass (Intervention::describe()); empty: none.
    QString intervention;

    /// The rule `outliers` were counted by.
    OutlierCriterion outlierRule;
    /// [5][L]: outliers of attn_out, ffn_out, residual, out and attn_in (perLayerNames() order) in every
    /// layer, so that switching layer or tensor in a view needs no worker. Empty for a tensor not captured.
    QVector<QVector<TensorOutliers>> outliers;

    SystematicSnapshot systematic;
    /// The layers asked for with InspectionWorker::setLifecycleLayers (decoders), in that order.
    QVector<LifecycleLayer> lifecycle;

    QString precision = QStringLiteral("fp32"); ///< what the forward pass computed in: "fp32" or "bf16"
    QString precisionNotice; ///< fast mode asked for but not possible here: the one sentence why
    QString inputNotice;     ///< the input was cut to the model's limit: truncationNotice()
    QString outputNotice;    ///< NaN or Inf in the model's output (no prediction): nonFiniteOutputNotice()

    QVector<double> probabilities; ///< class probabilities (classifier) or empty
    QStringList prediction;        ///< human-readable top predictions, best first

    int L() const { return model.layers; }
    int H() const { return model.heads; }
    int d() const { return model.hidden; }
    int dh() const { return model.headDim; }
    const QVector<float>& probsVector(int layer, int head) const { return probs[layer * H() + head]; }
    const float* probsOf(int layer, int head) const { return probsVector(layer, head).constData(); }
    /// Lowest and highest score of query `token` over its keys.
    std::pair<float, float> scoreRange(int layer, int head, int token) const
    {
        const float* r = scoreRanges.constData() + ((std::size_t(layer) * H() + head) * T + token) * 2;
        return {r[0], r[1]};
    }
    const float* valuesOf(int layer, int head) const
    {
        return values.constData() + (std::size_t(layer) * H() + head) * T * dh();
    }
    const float* contextOf(int layer, int head) const
    {
        return context.constData() + (std::size_t(layer) * H() + head) * T * dh();
    }
    const float* gatesOf(int layer, int head) const
    {
        return gates.isEmpty() ? nullptr : gates.constData() + (std::size_t(layer) * H() + head) * T;
    }
    /// The [T][d] tensors kept per layer, in the order of `outliers`.
    static const QStringList& perLayerNames();
    /// The [L][T][d] tensor `name`: attn_out, ffn_out, residual, out or attn_in (anything else: ffn_out).
    const QVector<float>& perLayer(const QString& name) const;
    /// Outliers of tensor `name` (as perLayer) in `layer`; an empty entry when that tensor was not captured.
    const TensorOutliers& outliersOf(const QString& name, int layer) const;
};

using SnapshotPtr = std::shared_ptr<const InspectionSnapshot>;

} // namespace outlierlens
