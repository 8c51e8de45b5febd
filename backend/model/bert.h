#pragma once
// A model instance is used by one thread at a time (the worker that owns it).

#include "model/attention.h"
#include "model/capture.h"
#include "model/config.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

namespace outlierlens {

// Module and parameter names are exactly those of Hugging Face's modeling_bert.py, so that a
// checkpoint's keys map one to one onto named_parameters().

class BertEmbeddingsImpl : public torch::nn::Module
{
public:
    explicit BertEmbeddingsImpl(const BertConfig& config);
    /// inputIds, tokenTypeIds: [B, T] int64 -> [B, T, d] after LayerNorm and dropout.
    torch::Tensor forward(const torch::Tensor& inputIds, const torch::Tensor& tokenTypeIds,
                          const CaptureScope& capture = CaptureScope(nullptr, -1));

    torch::nn::Embedding wordEmbeddings{nullptr}, positionEmbeddings{nullptr}, tokenTypeEmbeddings{nullptr};
    torch::nn::LayerNorm layerNorm{nullptr};
    torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(BertEmbeddings);

class BertSelfAttentionImpl : public torch::nn::Module
{
public:
    explicit BertSelfAttentionImpl(const BertConfig& config);
    /// x: [B, T, d]; additiveMask [B, 1, 1, T] or undefined -> merged context [B, T, d].
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& additiveMask,
                          const CaptureScope& capture);

    torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
    AttentionGates gates;
    torch::nn::Dropout dropout{nullptr};
    AttentionSpec spec;
};
TORCH_MODULE(BertSelfAttention);

/// dense -> dropout -> LayerNorm(x + residual); used for both the attention output and the FFN output.
class BertAddNormImpl : public torch::nn::Module
{
public:
    BertAddNormImpl(int inFeatures, const BertConfig& config);
    torch::nn::Linear dense{nullptr};
    torch::nn::LayerNorm layerNorm{nullptr};
    torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(BertAddNorm);

class BertLayerImpl : public torch::nn::Module
{
public:
    BertLayerImpl(const BertConfig& config);
    /// One post-LN encoder block; capture.layer() is this block's 0-based index.
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& additiveMask,
                          const CaptureScope& capture);

    BertSelfAttention selfAttention{nullptr};
    BertAddNorm attentionOutput{nullptr};
    torch::nn::Linear intermediate{nullptr};
    BertAddNorm output{nullptr};
    std::string hiddenAct;
};
TORCH_MODULE(BertLayer);

/// What a BERT network with a head returns.
struct BertForward
{
    torch::Tensor sequence; ///< [B, T, d] last layer output
    torch::Tensor logits;   ///< [B, C] (classifier), [B, T, V] (masked LM), undefined for a bare encoder
};

struct BertOutputs
{
    torch::Tensor sequence; ///< [B, T, d] last layer output
    torch::Tensor pooled;   ///< [B, d] tanh(pooler(h[:, 0])), undefined without a pooler
};

/// Hugging Face BertModel: embeddings, post-LN encoder, optional pooler.
class BertModelImpl : public torch::nn::Module
{
public:
    BertModelImpl(const BertConfig& config, bool addPooler);
    /// inputIds, tokenTypeIds, attentionMask: [B, T] int64 (mask 1 = real token, 0 = padding).
    BertOutputs forward(const torch::Tensor& inputIds, const torch::Tensor& tokenTypeIds,
                        const torch::Tensor& attentionMask, ActivationSink* sink = nullptr);

    BertConfig config;
    BertEmbeddings embeddings{nullptr};
    torch::nn::ModuleList layers{nullptr};
    torch::nn::Linear pooler{nullptr};
};
TORCH_MODULE(BertModel);

/// BertForSequenceClassification: bert (with pooler) -> dropout -> classifier.
class BertForSequenceClassificationImpl : public torch::nn::Module
{
public:
    explicit BertForSequenceClassificationImpl(const BertConfig& config);
    /// Returns logits [B, num_labels] and the sequence output; the sink also receives the logits.
    BertForward forward(const torch::Tensor& inputIds, const torch::Tensor& tokenTypeIds,
                        const torch::Tensor& attentionMask, ActivationSink* sink = nullptr);

    BertModel bert{nullptr};
    torch::nn::Dropout dropout{nullptr};
    torch::nn::Linear classifier{nullptr};
};
TORCH_MODULE(BertForSequenceClassification);

/// BertForMaskedLM: bert (no pooler) -> cls.predictions.transform (dense, act, LayerNorm) ->
/// decoder tied to the word embeddings + cls.predictions.bias.
class BertLMPredictionHeadImpl : public torch::nn::Module
{
public:
    explicit BertLMPredictionHeadImpl(const BertConfig& config);
    torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& wordEmbeddings);

    torch::nn::Linear transformDense{nullptr};
    torch::nn::LayerNorm transformLayerNorm{nullptr};
    torch::Tensor bias;
    std::string hiddenAct;
};
TORCH_MODULE(BertLMPredictionHead);

class BertForMaskedLMImpl : public torch::nn::Module
{
public:
    explicit BertForMaskedLMImpl(const BertConfig& config);
    /// Returns vocabulary logits [B, T, V] and the sequence output; the sink gets the logits if it asks.
    BertForward forward(const torch::Tensor& inputIds, const torch::Tensor& tokenTypeIds,
                        const torch::Tensor& attentionMask, ActivationSink* sink = nullptr);

    /// The decoder's weight: the word embeddings (tied), or a floating-point copy of them kept while
    /// the embeddings are fake-quantized (the MLM head stays in floating point, docs/quantization.md).
    torch::Tensor decoderWeight() const
    {
        return decoderWeightOverride.defined() ? decoderWeightOverride
                                               : bert->embeddings->wordEmbeddings->weight;
    }

    BertModel bert{nullptr};
    BertLMPredictionHead predictions{nullptr};
    torch::Tensor decoderWeightOverride;
};
TORCH_MODULE(BertForMaskedLM);

/// An empty module used only to give children the nested names of the checkpoint
/// (e.g. "encoder" holding "layer", "attention" holding "self" and "output").
std::shared_ptr<torch::nn::Module> addContainer(torch::nn::Module& parent, const std::string& name);

/// Applies the configured activation (gelu = exact erf GELU, as Hugging Face's "gelu").
torch::Tensor applyActivation(const torch::Tensor& x, const std::string& name);

/// ln(x) with x in the precision of ln's weights: under bf16 autocast an input straight from a matrix
/// product is bf16, and LayerNorm runs in float32 (as PyTorch's autocast policy intends for it).
torch::Tensor layerNormOf(torch::nn::LayerNorm ln, const torch::Tensor& x);

} // namespace outlierlens
