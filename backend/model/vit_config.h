#pragma once
// Any thread: plain values.

#include "model/config.h"

#include <string>
#include <vector>

namespace outlierlens {

/// How a ViT checkpoint names its tensors.
enum class VitNaming {
    Timm,        ///< blocks.N.attn.qkv ... (timm VisionTransformer, also its dinov2 and clip variants)
    HuggingFace, ///< vit.encoder.layer.N.attention.attention.query ... (ViTForImageClassification)
    Dinov2,      ///< encoder.layer.N.attention.attention.query, layer_scale1.lambda1 ...
                 ///< (Dinov2[WithRegisters]Model)
    Clip ///< vision_model.encoder.layers.N.self_attn.q_proj ... (CLIPVisionModel, CLIPModel's vision tower)
};

/// How the position table is resized when an input's patch grid differs from the checkpoint's: each
/// reference's own rule (torch's interpolate, align_corners=False, size = the new grid, in float32).
enum class PosInterpolation {
    None,            ///< the input must have the checkpoint's size (timm without dynamic_img_size, HF ViT)
    Bicubic,         ///< plain bicubic, a = -0.75 (HF Dinov2Model, HF CLIP's interpolate_pos_encoding)
    BicubicAntialias ///< antialiased bicubic (HF Dinov2WithRegistersModel, timm's dynamic_img_size)
};

/// A Vision Transformer of any size, from a Hugging Face config.json (model_type "vit") or a
/// timm-style one ({"architecture": "vit_small_patch16_224", "num_classes", "model_args",
/// "pretrained_cfg"}); both may carry the "outlierlens" variant block.
struct VitConfig
{
    int imageSize = 224;
    int patchSize = 16;
    int numChannels = 3;
    int hiddenSize = 384;
    int numLayers = 12;
    int numHeads = 6;
    int intermediateSize = 1536;
    int numClasses = 1000; ///< 0 = no classification head
    double layerNormEps = 1e-6;
    bool qkvBias = true;
    bool patchEmbedNorm = false; ///< LayerNorm right after the patch embedding (the paper's Table 6)
    bool patchBias = true;       ///< the patch Conv2d has a bias (CLIP's has none)
    int numRegisters = 0;        ///< register tokens between the class token and the patches (DINOv2-reg)
    bool layerScale = false; ///< per-channel LayerScale on both branches (DINOv2: ls1/ls2, layer_scale1/2)
    bool preNorm = false;    ///< LayerNorm on the embeddings before layer 0 (CLIP: norm_pre, pre_layrnorm)
    bool posClsRow = true;   ///< the position table has a row for the class token (timm's dinov2-reg: none)
    /// The reference's last hidden state is the final norm of every token (timm, DINOv2); false: the raw
    /// last block output (HF CLIP, whose post_layernorm only makes pooler_output from the class token).
    bool lastHiddenNormed = true;
    PosInterpolation posInterpolation = PosInterpolation::None;
    std::string hiddenAct = "gelu";    ///< gelu (erf), gelu_new, relu, quick_gelu (x * sigmoid(1.702 x))
    std::vector<std::string> id2label; ///< class names when the config has them
    std::string architecture;          ///< timm architecture or HF class name, for display
    VitNaming naming = VitNaming::Timm;
    AttentionVariant variant;

    int headDim() const { return hiddenSize / numHeads; }
    /// Patches per side of the checkpoint's (square) image.
    int gridSize() const { return imageSize / patchSize; }
    int numPatches() const { return gridSize() * gridSize(); }
    /// Tokens before the patches: the class token and the registers.
    int numPrefixTokens() const { return 1 + numRegisters; }
    /// Tokens per image at the checkpoint's size: the class token, the registers, the patches.
    int numTokens() const { return numPatches() + numPrefixTokens(); }
    /// Rows of the position table: the patch grid, plus the class token's row when it has one.
    int numPositions() const { return numPatches() + (posClsRow ? 1 : 0); }

    /// Token labels of a rows x cols patch grid: "[CLS]", "[REG1]".."[REGn]", then "patch r,c" (0-based
    /// row, column) row-major, as the tokens are ordered.
    std::vector<std::string> tokenLabels(int rows, int cols) const;
    /// The same at the checkpoint's own image size.
    std::vector<std::string> tokenLabels() const { return tokenLabels(gridSize(), gridSize()); }

    /// Reads <dir>/config.json; errors name the file and the field.
    static VitConfig fromModelDir(const std::string& modelDir);
    /// Named sizes: "vit-tiny" (192/12/3), "vit-small" (384/12/6), "vit-base" (768/12/12), all patch
    /// 16 at 224 pixels, "vit-fmnist" (28 px, patch 4, 128/6/4) for Fashion-MNIST and "vit-canvas" (56 px,
    /// patch 7, 128/4/4) for the canvas task.
    static VitConfig preset(const std::string& name);
    /// A timm-style config.json for checkpoints we write (timm names), with the variant block.
    /// `preprocessing` is the pretrained_cfg object as JSON text (may be empty).
    std::string toTimmJson(const std::string& pretrainedCfgJson) const;
    void validate(const std::string& where) const;
};

} // namespace outlierlens
