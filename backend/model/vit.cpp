#include "model/vit.h"

#include "common/error.h"
#include "io/state_dict.h"
#include "model/bert.h" // applyActivation, layerNormOf, addContainer
#include "model/linear.h"

#include <torch/torch.h>

namespace outlierlens {
namespace {

torch::nn::LayerNorm makeLayerNorm(int size, double eps)
{
    return torch::nn::LayerNorm(torch::nn::LayerNormOptions({size}).eps(eps));
}

} // namespace

VitBlockImpl::VitBlockImpl(const VitConfig& c)
    : hiddenAct(c.hiddenAct)
{
    norm1 = register_module("norm1", makeLayerNorm(c.hiddenSize, c.layerNormEps));
    auto attn = addContainer(*this, "attn");
    qkv = attn->register_module(
        "qkv", torch::nn::Linear(torch::nn::LinearOptions(c.hiddenSize, 3 * c.hiddenSize).bias(c.qkvBias)));
    proj = attn->register_module("proj", torch::nn::Linear(c.hiddenSize, c.hiddenSize));
    gates.create(*attn, c.variant, c.numHeads, c.headDim());
    attnDropout = register_module("attn_drop", torch::nn::Dropout(0.0));
    norm2 = register_module("norm2", makeLayerNorm(c.hiddenSize, c.layerNormEps));
    auto mlp = addContainer(*this, "mlp");
    fc1 = mlp->register_module("fc1", torch::nn::Linear(c.hiddenSize, c.intermediateSize));
    fc2 = mlp->register_module("fc2", torch::nn::Linear(c.intermediateSize, c.hiddenSize));
    spec = AttentionSpec{c.numHeads, c.headDim(), c.variant};
}

torch::Tensor VitBlockImpl::forward(const torch::Tensor& x, const CaptureScope& capture)
{
    const torch::Tensor h = capture.quant(QuantSite::AttnNorm, layerNormOf(norm1, x));
    const std::vector<torch::Tensor> parts = linearLayer(qkv, h).chunk(3, -1); // timm's row order: q, k, v
    // The gates see the attention's input: the LayerNorm output of this pre-LN block.
    const torch::Tensor context = multiHeadAttention(
        spec, capture.quant(QuantSite::Query, parts[0]), capture.quant(QuantSite::Key, parts[1]),
        capture.quant(QuantSite::Value, parts[2]), h, {}, gates, attnDropout, capture);
    torch::Tensor attnOut = linearLayer(proj, context);
    capture.put(CapturePoint::AttnOut, attnOut);
    attnOut = capture.quant(QuantSite::AttnOut, attnOut);
    const torch::Tensor afterAttention = capture.quant(QuantSite::AttnResidual, x + attnOut);
    const torch::Tensor inner =
        capture.quant(QuantSite::FfnIntermediate,
                      applyActivation(linearLayer(fc1, capture.quant(QuantSite::FfnNorm,
                                                                     layerNormOf(norm2, afterAttention))),
                                      hiddenAct));
    capture.put(CapturePoint::DownIn, inner);
    torch::Tensor ffnOut = linearLayer(fc2, inner);
    capture.put(CapturePoint::FfnOut, ffnOut);
    ffnOut = capture.quant(QuantSite::FfnOut, ffnOut);
    torch::Tensor out = afterAttention + ffnOut;
    capture.put(CapturePoint::Residual, out); // pre-LN: the block output is the residual stream
    capture.put(CapturePoint::Out, out);
    return capture.quant(QuantSite::FfnResidual, out);
}

VisionTransformerImpl::VisionTransformerImpl(const VitConfig& c)
    : config(c)
{
    auto patchEmbed = addContainer(*this, "patch_embed");
    patchProj = patchEmbed->register_module(
        "proj", torch::nn::Conv2d(
                    torch::nn::Conv2dOptions(c.numChannels, c.hiddenSize, c.patchSize).stride(c.patchSize)));
    if (c.patchEmbedNorm)
        patchNorm = patchEmbed->register_module("norm", makeLayerNorm(c.hiddenSize, c.layerNormEps));
    clsToken = register_parameter("cls_token", torch::zeros({1, 1, c.hiddenSize}));
    posEmbed = register_parameter("pos_embed", torch::zeros({1, c.numTokens(), c.hiddenSize}));
    blocks = torch::nn::ModuleList();
    for (int i = 0; i < c.numLayers; ++i)
        blocks->push_back(VitBlock(c));
    register_module("blocks", blocks);
    norm = register_module("norm", makeLayerNorm(c.hiddenSize, c.layerNormEps));
    if (c.numClasses > 0) head = register_module("head", torch::nn::Linear(c.hiddenSize, c.numClasses));
}

VitOutputs VisionTransformerImpl::forward(const torch::Tensor& pixels, ActivationSink* sink)
{
    if (pixels.dim() != 4 || pixels.size(1) != config.numChannels || pixels.size(2) != config.imageSize ||
        pixels.size(3) != config.imageSize)
        throw Error("ViT input must be [B, " + std::to_string(config.numChannels) + ", " +
                    std::to_string(config.imageSize) + ", " + std::to_string(config.imageSize) + "], found " +
                    shapeString(pixels));
    const auto B = pixels.size(0);
    torch::Tensor patches = float32InInference([&] { return patchProj->forward(pixels); })
                                .flatten(2)
                                .transpose(1, 2); // [B, N, d], row-major patches
    if (patchNorm) patches = layerNormOf(patchNorm, patches);
    torch::Tensor x = torch::cat({clsToken.expand({B, -1, -1}), patches}, 1) + posEmbed;
    CaptureScope(sink, -1).put(CapturePoint::Embeddings, x);
    x = CaptureScope(sink, -1).quant(QuantSite::EmbeddingSum, x);
    for (std::size_t i = 0; i < blocks->size(); ++i)
        x = blocks[i]->as<VitBlock>()->forward(x, CaptureScope(sink, int(i)));
    VitOutputs out;
    out.sequence = x;
    if (head) {
        const CaptureScope outside(sink, -1);
        out.logits =
            linearLayer(head, outside.quant(QuantSite::FinalNorm, layerNormOf(norm, x)).select(1, 0));
        outside.put(CapturePoint::Logits, out.logits);
        out.logits = outside.quant(QuantSite::Logits, out.logits);
    }
    return out;
}

} // namespace outlierlens
