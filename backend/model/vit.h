#pragma once
// A model instance is used by one thread at a time (the worker that owns it).

#include "model/attention.h"
#include "model/capture.h"
#include "model/norm_readers.h"
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

/// One pre-LN block: x + ls1 * attn(norm1(x)), then + ls2 * mlp(norm2(.)); ls1/ls2 (LayerScale) only when
/// the config has them (DINOv2), else 1.
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
    torch::Tensor ls1Gamma, ls2Gamma; ///< [d] LayerScale; undefined without it
    /// After a rotation of the stream (model/norm_readers.h): norm1's and norm2's mean is the component along
    /// this unit vector [d], and fc2 reads its input through fc2InputRotation [f, f]; undefined otherwise.
    torch::Tensor meanAxis, fc2InputRotation;
    AttentionSpec spec;
    std::string hiddenAct;
};
TORCH_MODULE(VitBlock);

struct VitOutputs
{
    torch::Tensor sequence; ///< [B, T, d] last block output, before the final LayerNorm
    torch::Tensor normed;   ///< [B, T, d] the final LayerNorm of every token (timm's forward_features)
    /// [B, T, d] the reference's last hidden state: `normed` (timm, DINOv2) or `sequence` (HF CLIP)
    torch::Tensor lastHiddenState;
    torch::Tensor pooled; ///< [B, d] the class token of `normed` (HF pooler_output of DINOv2 and CLIP)
    torch::Tensor
        logits; ///< [B, classes] from the class token after the final LayerNorm; undefined without a head
};

class VisionTransformerImpl : public torch::nn::Module
{
public:
    explicit VisionTransformerImpl(const VitConfig& config);
    /// pixels: [B, C, H, W] float32, preprocessed as the checkpoint expects. H and W are the config's
    /// image size, or (when the config interpolates positions) any multiples of the patch size:
    /// T = 1 + registers + (H / patch) * (W / patch) tokens, patches row-major.
    VitOutputs forward(const torch::Tensor& pixels, ActivationSink* sink = nullptr);
    /// The position rows of a rows x cols patch grid, [1, rows * cols, d]: the table's own grid, else
    /// resized by the config's PosInterpolation (an Error when it has none).
    torch::Tensor patchPositions(std::int64_t rows, std::int64_t cols) const;
    /// Each block's norm1 (read by qkv and the gates) and norm2 (read by fc1), for SmoothQuant.
    std::vector<NormReaders> preNorms();
    /// What a rotation of the stream touches (LayerScale folded into the writers first); refused for a
    /// norm before the blocks or after the patch projection (CLIP, patch_embed.norm).
    ResidualStream residualStream();

    VitConfig config;
    torch::nn::Conv2d patchProj{nullptr};
    torch::nn::LayerNorm patchNorm{nullptr};
    torch::Tensor clsToken, posEmbed;
    torch::Tensor regToken;                ///< [1, registers, d]; undefined without registers
    torch::nn::LayerNorm normPre{nullptr}; ///< CLIP's pre-encoder LayerNorm; null without it
    torch::nn::ModuleList blocks{nullptr};
    torch::nn::LayerNorm norm{nullptr};
    torch::nn::Linear head{nullptr};
    torch::Tensor finalInputRotation; ///< after a rotation: the final norm reads the stream through it
};
TORCH_MODULE(VisionTransformer);

} // namespace outlierlens
