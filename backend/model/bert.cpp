#include "model/bert.h"

#include "common/error.h"
#include "model/linear.h"

#include <torch/torch.h>

#include <cmath>

namespace outlierlens {

std::shared_ptr<torch::nn::Module> addContainer(torch::nn::Module& parent, const std::string& name)
{
    return parent.register_module(name, std::make_shared<torch::nn::Module>(name));
}

torch::Tensor applyActivation(const torch::Tensor& x, const std::string& name)
{
    if (name == "gelu") return torch::gelu(x); // exact erf form, as HF's "gelu"
    if (name == "gelu_new" || name == "gelu_pytorch_tanh") return torch::gelu(x, "tanh");
    if (name == "relu") return torch::relu(x);
    throw Error("unsupported activation '" + name + "'");
}

torch::Tensor layerNormOf(torch::nn::LayerNorm ln, const torch::Tensor& x)
{
    const auto dtype = ln->weight.defined() ? ln->weight.scalar_type() : x.scalar_type();
    return ln->forward(x.scalar_type() == dtype ? x : x.to(dtype));
}

namespace {

torch::nn::LayerNorm makeLayerNorm(int size, double eps)
{
    return torch::nn::LayerNorm(torch::nn::LayerNormOptions({size}).eps(eps));
}

} // namespace

BertEmbeddingsImpl::BertEmbeddingsImpl(const BertConfig& c)
{
    wordEmbeddings = register_module("word_embeddings", torch::nn::Embedding(c.vocabSize, c.hiddenSize));
    positionEmbeddings =
        register_module("position_embeddings", torch::nn::Embedding(c.maxPositions, c.hiddenSize));
    tokenTypeEmbeddings =
        register_module("token_type_embeddings", torch::nn::Embedding(c.typeVocabSize, c.hiddenSize));
    layerNorm = register_module("LayerNorm", makeLayerNorm(c.hiddenSize, c.layerNormEps));
    dropout = register_module("dropout", torch::nn::Dropout(c.hiddenDropout));
}

torch::Tensor BertEmbeddingsImpl::forward(const torch::Tensor& inputIds, const torch::Tensor& tokenTypeIds,
                                          const CaptureScope& capture)
{
    const auto T = inputIds.size(1);
    if (T > positionEmbeddings->weight.size(0))
        throw Error("input of " + std::to_string(T) + " tokens is longer than the model's " +
                    std::to_string(positionEmbeddings->weight.size(0)) + " positions");
    const torch::Tensor positions = torch::arange(T, torch::dtype(torch::kLong).device(inputIds.device()));
    torch::Tensor x = wordEmbeddings->forward(inputIds) + tokenTypeEmbeddings->forward(tokenTypeIds) +
                      positionEmbeddings->forward(positions).unsqueeze(0);
    x = capture.quant(QuantSite::EmbeddingSum, x);
    return dropout->forward(capture.quant(QuantSite::EmbeddingNorm, layerNormOf(layerNorm, x)));
}

BertSelfAttentionImpl::BertSelfAttentionImpl(const BertConfig& c)
{
    query = register_module("query", torch::nn::Linear(c.hiddenSize, c.hiddenSize));
    key = register_module("key", torch::nn::Linear(c.hiddenSize, c.hiddenSize));
    value = register_module("value", torch::nn::Linear(c.hiddenSize, c.hiddenSize));
    dropout = register_module("dropout", torch::nn::Dropout(c.attentionDropout));
    spec = AttentionSpec{c.numHeads, c.headDim(), c.variant};
    gates.create(*this, c.variant, c.numHeads, c.headDim());
}

torch::Tensor BertSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& additiveMask,
                                             const CaptureScope& capture)
{
    return multiHeadAttention(spec, capture.quant(QuantSite::Query, linearLayer(query, x)),
                              capture.quant(QuantSite::Key, linearLayer(key, x)),
                              capture.quant(QuantSite::Value, linearLayer(value, x)), x, additiveMask, gates,
                              dropout, capture);
}

BertAddNormImpl::BertAddNormImpl(int inFeatures, const BertConfig& c)
{
    dense = register_module("dense", torch::nn::Linear(inFeatures, c.hiddenSize));
    layerNorm = register_module("LayerNorm", makeLayerNorm(c.hiddenSize, c.layerNormEps));
    dropout = register_module("dropout", torch::nn::Dropout(c.hiddenDropout));
}

BertLayerImpl::BertLayerImpl(const BertConfig& c)
    : hiddenAct(c.hiddenAct)
{
    auto attention = addContainer(*this, "attention");
    selfAttention = attention->register_module("self", BertSelfAttention(c));
    attentionOutput = attention->register_module("output", BertAddNorm(c.hiddenSize, c));
    intermediate = addContainer(*this, "intermediate")
                       ->register_module("dense", torch::nn::Linear(c.hiddenSize, c.intermediateSize));
    output = register_module("output", BertAddNorm(c.intermediateSize, c));
}

torch::Tensor BertLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& additiveMask,
                                     const CaptureScope& capture)
{
    const torch::Tensor context = selfAttention->forward(x, additiveMask, capture);
    torch::Tensor attnOut = linearLayer(attentionOutput->dense, context);
    capture.put(CapturePoint::AttnOut, attnOut);
    attnOut = capture.quant(QuantSite::AttnOut, attnOut);
    const torch::Tensor attnResidual =
        capture.quant(QuantSite::AttnResidual, attentionOutput->dropout->forward(attnOut) + x);
    const torch::Tensor h =
        capture.quant(QuantSite::AttnNorm, layerNormOf(attentionOutput->layerNorm, attnResidual));

    const torch::Tensor inner =
        capture.quant(QuantSite::FfnIntermediate, applyActivation(linearLayer(intermediate, h), hiddenAct));
    capture.put(CapturePoint::DownIn, inner);
    torch::Tensor ffnOut = linearLayer(output->dense, inner);
    capture.put(CapturePoint::FfnOut, ffnOut);
    ffnOut = capture.quant(QuantSite::FfnOut, ffnOut);
    torch::Tensor residual = output->dropout->forward(ffnOut) + h;
    capture.put(CapturePoint::Residual, residual);
    residual = capture.quant(QuantSite::FfnResidual, residual);
    torch::Tensor out = layerNormOf(output->layerNorm, residual);
    capture.put(CapturePoint::Out, out);
    return capture.quant(QuantSite::FfnNorm, out);
}

BertModelImpl::BertModelImpl(const BertConfig& c, bool addPooler)
    : config(c)
{
    embeddings = register_module("embeddings", BertEmbeddings(c));
    layers = torch::nn::ModuleList();
    for (int i = 0; i < c.numLayers; ++i)
        layers->push_back(BertLayer(c));
    addContainer(*this, "encoder")->register_module("layer", layers);
    if (addPooler)
        pooler = addContainer(*this, "pooler")
                     ->register_module("dense", torch::nn::Linear(c.hiddenSize, c.hiddenSize));
}

BertOutputs BertModelImpl::forward(const torch::Tensor& inputIds, const torch::Tensor& tokenTypeIds,
                                   const torch::Tensor& attentionMask, ActivationSink* sink)
{
    const torch::Tensor types = tokenTypeIds.defined() ? tokenTypeIds : torch::zeros_like(inputIds);
    torch::Tensor h = embeddings->forward(inputIds, types, CaptureScope(sink, -1));
    CaptureScope(sink, -1).put(CapturePoint::Embeddings, h);
    const torch::Tensor mask = additiveAttentionMask(attentionMask, h.scalar_type());
    for (std::size_t i = 0; i < layers->size(); ++i)
        h = layers[i]->as<BertLayer>()->forward(h, mask, CaptureScope(sink, int(i)));
    BertOutputs out;
    out.sequence = h;
    if (pooler)
        out.pooled =
            CaptureScope(sink, -1).quant(QuantSite::Pooler, torch::tanh(linearLayer(pooler, h.select(1, 0))));
    return out;
}

BertForSequenceClassificationImpl::BertForSequenceClassificationImpl(const BertConfig& c)
{
    if (c.id2label.empty())
        throw Error("a sequence classifier needs id2label (the number of labels) in config.json");
    bert = register_module("bert", BertModel(c, true));
    dropout = register_module("dropout", torch::nn::Dropout(c.hiddenDropout));
    classifier = register_module("classifier", torch::nn::Linear(c.hiddenSize, int(c.id2label.size())));
}

BertForward BertForSequenceClassificationImpl::forward(const torch::Tensor& inputIds,
                                                       const torch::Tensor& tokenTypeIds,
                                                       const torch::Tensor& attentionMask,
                                                       ActivationSink* sink)
{
    const BertOutputs out = bert->forward(inputIds, tokenTypeIds, attentionMask, sink);
    BertForward result{out.sequence, linearLayer(classifier, dropout->forward(out.pooled))};
    CaptureScope(sink, -1).put(CapturePoint::Logits, result.logits);
    result.logits = CaptureScope(sink, -1).quant(QuantSite::Logits, result.logits);
    return result;
}

BertLMPredictionHeadImpl::BertLMPredictionHeadImpl(const BertConfig& c)
    : hiddenAct(c.hiddenAct)
{
    auto transform = addContainer(*this, "transform");
    transformDense = transform->register_module("dense", torch::nn::Linear(c.hiddenSize, c.hiddenSize));
    transformLayerNorm = transform->register_module("LayerNorm", makeLayerNorm(c.hiddenSize, c.layerNormEps));
    bias = register_parameter("bias", torch::zeros({c.vocabSize}));
}

torch::Tensor BertLMPredictionHeadImpl::forward(const torch::Tensor& hidden,
                                                const torch::Tensor& wordEmbeddings)
{
    const torch::Tensor t =
        layerNormOf(transformLayerNorm, applyActivation(linearLayer(transformDense, hidden), hiddenAct));
    return linearLayer(t, wordEmbeddings, bias);
}

BertForMaskedLMImpl::BertForMaskedLMImpl(const BertConfig& c)
{
    bert = register_module("bert", BertModel(c, false));
    predictions = addContainer(*this, "cls")->register_module("predictions", BertLMPredictionHead(c));
}

BertForward BertForMaskedLMImpl::forward(const torch::Tensor& inputIds, const torch::Tensor& tokenTypeIds,
                                         const torch::Tensor& attentionMask, ActivationSink* sink)
{
    const BertOutputs out = bert->forward(inputIds, tokenTypeIds, attentionMask, sink);
    BertForward result{out.sequence, predictions->forward(out.sequence, decoderWeight())};
    CaptureScope(sink, -1).put(CapturePoint::Logits, result.logits);
    return result;
}

} // namespace outlierlens
