#pragma once
// A model instance is used by one thread at a time (the worker that owns it).

#include "model/attention.h"
#include "model/capture.h"
#include "model/vit_config.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

namespace outlierlens {

// Module and parameter names are timm's (VisionTransformer); Hugging Face checkpoints are mapped
// onto them when loading (VitNetwork).

/// One pre-LN block: x + attn(norm1(x)), then + mlp(norm2(.)).
class VitBlockImpl : public torch::nn::Module
{
public:
    explicit VitBlockImpl(const VitConfig& config);
    /// x: [B, T, d] -> [B, T, d]; capture.layer() is this block's 0-based index.
    torch::Tensor forward(const torch::Tensor& x, const CaptureScope& capture);

    torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
    torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
    AttentionGates gates;
    torch::nn::Dropout attnDropout{nullptr};
    AttentionSpec spec;
    std::string hiddenAct;
};
TORCH_MODULE(VitBlock);

struct VitOutputs
{
    torch::Tensor sequence; ///< [B, T, d] last block output, before the final LayerNorm
    torch::Tensor
        logits; ///< [B, classes] from the class token after the final LayerNorm; undefined without a head
};

class VisionTransformerImpl : public torch::nn::Module
{
public:
    explicit VisionTransformerImpl(const VitConfig& config);
    /// pixels: [B, C, H, W] float32, preprocessed as the checkpoint expects.
    VitOutputs forward(const torch::Tensor& pixels, ActivationSink* sink = nullptr);

    VitConfig config;
    torch::nn::Conv2d patchProj{nullptr};
    torch::nn::LayerNorm patchNorm{nullptr};
    torch::Tensor clsToken, posEmbed;
    torch::nn::ModuleList blocks{nullptr};
    torch::nn::LayerNorm norm{nullptr};
    torch::nn::Linear head{nullptr};
};
TORCH_MODULE(VisionTransformer);

} // namespace outlierlens
