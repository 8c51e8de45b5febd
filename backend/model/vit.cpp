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

/// quick_gelu (OpenAI CLIP, HF's QuickGELUActivation, timm's quick_gelu): x * sigmoid(1.702 x).
torch::Tensor activate(const torch::Tensor& x, const std::string& name)
{
    if (name == "quick_gelu") return x * torch::sigmoid(1.702 * x);
    return applyActivation(x, name);
}

const char* interpolationName(PosInterpolation mode)
{
    switch (mode) {
    case PosInterpolation::None:
        break;
    case PosInterpolation::Bicubic:
        return "bicubic";
    case PosInterpolation::BicubicAntialias:
        return "antialiased bicubic";
    }
    return "none";
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
    if (c.layerScale)
        ls1Gamma = addContainer(*this, "ls1")->register_parameter("gamma", torch::ones({c.hiddenSize}));
    norm2 = register_module("norm2", makeLayerNorm(c.hiddenSize, c.layerNormEps));
    auto mlp = addContainer(*this, "mlp");
    fc1 = mlp->register_module("fc1", torch::nn::Linear(c.hiddenSize, c.intermediateSize));
    fc2 = mlp->register_module("fc2", torch::nn::Linear(c.intermediateSize, c.hiddenSize));
    if (c.layerScale)
        ls2Gamma = addContainer(*this, "ls2")->register_parameter("gamma", torch::ones({c.hiddenSize}));
    spec = AttentionSpec{c.numHeads, c.headDim(), c.variant};
}

namespace {

/// The LayerNorm `ln`, or after a rotation of the stream the same LayerNorm in the rotated basis: the mean
/// is the component along the unit vector `meanAxis`.
torch::Tensor blockNorm(const torch::nn::LayerNorm& ln, const torch::Tensor& meanAxis, const torch::Tensor& x)
{
    if (!meanAxis.defined()) return layerNormOf(ln, x);
    const torch::Tensor u = meanAxis.to(x.scalar_type());
    const torch::Tensor y = x - torch::matmul(x, u).unsqueeze(-1) * u;
    const double eps = ln->options.eps();
    return y * torch::rsqrt(y.pow(2).mean(-1, /*keepdim=*/true) + eps) * ln->weight.to(x.scalar_type()) +
           ln->bias.to(x.scalar_type());
}

} // namespace

torch::Tensor VitBlockImpl::forward(const torch::Tensor& x, const CaptureScope& capture)
{
    const torch::Tensor h = capture.quant(QuantSite::AttnNorm, blockNorm(norm1, meanAxis, x));
    const std::vector<torch::Tensor> parts = linearLayer(qkv, h).chunk(3, -1); // timm's row order: q, k, v
    // The gates see the attention's input: the LayerNorm output of this pre-LN block.
    const torch::Tensor context = multiHeadAttention(
        spec, capture.quant(QuantSite::Query, parts[0]), capture.quant(QuantSite::Key, parts[1]),
        capture.quant(QuantSite::Value, parts[2]), h, {}, gates, attnDropout, capture);
    torch::Tensor attnOut = linearLayer(proj, context);
    capture.put(CapturePoint::AttnOut, attnOut);
    attnOut = capture.quant(QuantSite::AttnOut, attnOut);
    if (ls1Gamma.defined()) attnOut = attnOut * ls1Gamma; // the capture is before LayerScale (DESIGN.md)
    const torch::Tensor afterAttention = capture.quant(QuantSite::AttnResidual, x + attnOut);
    torch::Tensor inner = activate(
        linearLayer(fc1, capture.quant(QuantSite::FfnNorm, blockNorm(norm2, meanAxis, afterAttention))),
        hiddenAct);
    if (fc2InputRotation.defined()) inner = torch::matmul(inner, fc2InputRotation.to(inner.scalar_type()));
    inner = capture.quant(QuantSite::FfnIntermediate, inner);
    capture.put(CapturePoint::DownIn, inner);
    torch::Tensor ffnOut = linearLayer(fc2, inner);
    capture.put(CapturePoint::FfnOut, ffnOut);
    ffnOut = capture.quant(QuantSite::FfnOut, ffnOut);
    if (ls2Gamma.defined()) ffnOut = ffnOut * ls2Gamma;
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
        "proj", torch::nn::Conv2d(torch::nn::Conv2dOptions(c.numChannels, c.hiddenSize, c.patchSize)
                                      .stride(c.patchSize)
                                      .bias(c.patchBias)));
    if (c.patchEmbedNorm)
        patchNorm = patchEmbed->register_module("norm", makeLayerNorm(c.hiddenSize, c.layerNormEps));
    clsToken = register_parameter("cls_token", torch::zeros({1, 1, c.hiddenSize}));
    if (c.numRegisters > 0)
        regToken = register_parameter("reg_token", torch::zeros({1, c.numRegisters, c.hiddenSize}));
    posEmbed = register_parameter("pos_embed", torch::zeros({1, c.numPositions(), c.hiddenSize}));
    if (c.preNorm) normPre = register_module("norm_pre", makeLayerNorm(c.hiddenSize, c.layerNormEps));
    blocks = torch::nn::ModuleList();
    for (int i = 0; i < c.numLayers; ++i)
        blocks->push_back(VitBlock(c));
    register_module("blocks", blocks);
    norm = register_module("norm", makeLayerNorm(c.hiddenSize, c.layerNormEps));
    if (c.numClasses > 0) head = register_module("head", torch::nn::Linear(c.hiddenSize, c.numClasses));
}

torch::Tensor VisionTransformerImpl::patchPositions(std::int64_t rows, std::int64_t cols) const
{
    const std::int64_t grid = config.gridSize(), d = config.hiddenSize;
    const torch::Tensor table = config.posClsRow ? posEmbed.narrow(1, 1, grid * grid) : posEmbed;
    if (rows == grid && cols == grid) return table;
    // HF Dinov2/CLIP's interpolate_pos_encoding and timm's resample_abs_pos_embed: the grid as an image
    // [1, d, grid, grid], resized in float32 to the new grid, back to rows.
    namespace F = torch::nn::functional;
    const torch::Tensor image = table.reshape({1, grid, grid, d}).permute({0, 3, 1, 2}).to(torch::kFloat);
    const torch::Tensor resized =
        F::interpolate(image, F::InterpolateFuncOptions()
                                  .size(std::vector<std::int64_t>{rows, cols})
                                  .mode(torch::kBicubic)
                                  .align_corners(false)
                                  .antialias(config.posInterpolation == PosInterpolation::BicubicAntialias));
    return resized.permute({0, 2, 3, 1}).reshape({1, rows * cols, d}).to(table.dtype());
}

VitOutputs VisionTransformerImpl::forward(const torch::Tensor& pixels, ActivationSink* sink)
{
    const int p = config.patchSize;
    const bool anySize = config.posInterpolation != PosInterpolation::None;
    if (pixels.dim() != 4 || pixels.size(1) != config.numChannels ||
        (!anySize && (pixels.size(2) != config.imageSize || pixels.size(3) != config.imageSize)) ||
        (anySize && (pixels.size(2) < p || pixels.size(3) < p || pixels.size(2) % p || pixels.size(3) % p)))
        throw Error(anySize ? "ViT input must be [B, " + std::to_string(config.numChannels) +
                                  ", H, W] with H and W multiples of the patch size " + std::to_string(p) +
                                  " (positions are resized by " + interpolationName(config.posInterpolation) +
                                  " interpolation), found " + shapeString(pixels)
                            : "ViT input must be [B, " + std::to_string(config.numChannels) + ", " +
                                  std::to_string(config.imageSize) + ", " + std::to_string(config.imageSize) +
                                  "], found " + shapeString(pixels));
    const auto B = pixels.size(0);
    torch::Tensor patches = float32InInference([&] { return patchProj->forward(pixels); })
                                .flatten(2)
                                .transpose(1, 2); // [B, N, d], row-major patches
    if (patchNorm) patches = layerNormOf(patchNorm, patches);
    // Positions go to the class token (when the table has its row) and the patches; registers are inserted
    // after, without positions (HF Dinov2WithRegisters, timm's no_embed_class).
    patches = patches + patchPositions(pixels.size(2) / p, pixels.size(3) / p);
    torch::Tensor cls = clsToken.expand({B, -1, -1});
    if (config.posClsRow) cls = cls + posEmbed.narrow(1, 0, 1);
    std::vector<torch::Tensor> parts{cls};
    if (regToken.defined()) parts.push_back(regToken.expand({B, -1, -1}));
    parts.push_back(patches);
    torch::Tensor x = torch::cat(parts, 1);
    if (normPre) x = layerNormOf(normPre, x); // CLIP: layer 0's input is after pre_layrnorm
    CaptureScope(sink, -1).put(CapturePoint::Embeddings, x);
    x = CaptureScope(sink, -1).quant(QuantSite::EmbeddingSum, x);
    for (std::size_t i = 0; i < blocks->size(); ++i)
        x = blocks[i]->as<VitBlock>()->forward(x, CaptureScope(sink, int(i)));
    VitOutputs out;
    out.sequence = x;
    out.normed = layerNormOf(
        norm, finalInputRotation.defined() ? torch::matmul(x, finalInputRotation.to(x.scalar_type())) : x);
    out.lastHiddenState = config.lastHiddenNormed ? out.normed : x;
    out.pooled = out.normed.select(1, 0);
    if (head) {
        const CaptureScope outside(sink, -1);
        out.logits = linearLayer(head, outside.quant(QuantSite::FinalNorm, out.normed).select(1, 0));
        outside.put(CapturePoint::Logits, out.logits);
        out.logits = outside.quant(QuantSite::Logits, out.logits);
    }
    return out;
}

std::vector<NormReaders> VisionTransformerImpl::preNorms()
{
    const auto reader = [](torch::nn::Linear linear) {
        NormReader r;
        r.weight = linear->weight;
        torch::nn::LinearImpl* l = linear.get();
        r.ensureBias = [l]() -> torch::Tensor {
            if (!l->bias.defined()) // a layer built without one (timm's qkv_bias=False): used, not saved
                l->bias = torch::zeros({l->weight.size(0)}, l->weight.options());
            return l->bias;
        };
        return r;
    };
    const auto norm = [](const std::string& name, int layer, QuantSite site, const torch::nn::LayerNorm& n) {
        NormReaders r;
        r.name = name;
        r.layer = layer;
        r.site = site;
        r.weight = n->weight;
        r.bias = n->bias;
        return r;
    };
    std::vector<NormReaders> out;
    for (std::size_t i = 0; i < blocks->size(); ++i) {
        VitBlockImpl& b = *blocks[i]->as<VitBlockImpl>();
        const std::string at = "blocks." + std::to_string(i) + ".";
        NormReaders attn = norm(at + "norm1", int(i), QuantSite::AttnNorm, b.norm1);
        attn.readers.push_back(reader(b.qkv));
        b.gates.appendReaders(attn.readers);
        attn.rotateNorm = [&b](const torch::Tensor& axis) { b.meanAxis = axis; };
        out.push_back(std::move(attn));
        NormReaders ffn = norm(at + "norm2", int(i), QuantSite::FfnNorm, b.norm2);
        ffn.readers.push_back(reader(b.fc1));
        ffn.rotateNorm = [&b](const torch::Tensor& axis) { b.meanAxis = axis; };
        out.push_back(std::move(ffn));
    }
    return out;
}

ResidualStream VisionTransformerImpl::residualStream()
{
    if (normPre)
        return ResidualStream::refused("CLIP's vision tower normalises the embeddings before the first block "
                                       "(pre_layrnorm), so the stream starts after a norm a rotation cannot "
                                       "pass");
    if (patchNorm)
        return ResidualStream::refused(
            "the patch embedding ends in a LayerNorm, which a rotation cannot pass");
    if (!config.lastHiddenNormed)
        return ResidualStream::refused("the model's output is the stream itself, which a rotation changes");
    torch::NoGradGuard noGrad;
    const std::int64_t d = config.hiddenSize;
    ResidualStream s;
    // Tables added into the stream: the class token, registers and positions.
    s.tables = {clsToken.view({-1, d}), posEmbed.view({-1, d})};
    if (regToken.defined()) s.tables.push_back(regToken.view({-1, d}));
    // The patch projection writes the patches' d channels: its kernel as [d, C p p].
    s.writers.push_back({patchProj->weight.view({d, -1}), false, patchProj->bias, {}});
    // The writers' weights are the ones the rotation sees after LayerScale is folded into them (in place,
    // the same tensors): the same function, then LayerScale 1.
    s.prepare = [this] {
        torch::NoGradGuard noGrad;
        for (std::size_t i = 0; i < blocks->size(); ++i) {
            VitBlockImpl& b = *blocks[i]->as<VitBlockImpl>();
            for (auto [gamma, linear] :
                 {std::pair{b.ls1Gamma, b.proj.get()}, std::pair{b.ls2Gamma, b.fc2.get()}}) {
                if (!gamma.defined()) continue;
                linear->weight.mul_(gamma.unsqueeze(1));
                if (linear->bias.defined()) linear->bias.mul_(gamma);
                gamma.fill_(1.0);
            }
        }
    };
    for (std::size_t i = 0; i < blocks->size(); ++i) {
        VitBlockImpl& b = *blocks[i]->as<VitBlockImpl>();
        s.writers.push_back({b.proj->weight, false, b.proj->bias, {}});
        VitBlockImpl* block = &b;
        s.writers.push_back({b.fc2->weight, false, b.fc2->bias,
                             [block](const torch::Tensor& rotation) { block->fc2InputRotation = rotation; }});
    }
    s.norms = preNorms();
    s.rotateFinalNorm = [this](const torch::Tensor& q) { finalInputRotation = q.t().contiguous(); };
    return s;
}

} // namespace outlierlens
