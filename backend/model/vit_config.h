#pragma once
// Any thread: plain values.

#include "model/config.h"

#include <string>
#include <vector>

namespace outlierlens {

/// How a ViT checkpoint names its tensors.
enum class VitNaming {
    Timm,       ///< blocks.N.attn.qkv ... (timm VisionTransformer)
    HuggingFace ///< vit.encoder.layer.N.attention.attention.query ... (ViTForImageClassification)
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
    std::string hiddenAct = "gelu";
    std::vector<std::string> id2label; ///< class names when the config has them
    std::string architecture;          ///< timm architecture or HF class name, for display
    VitNaming naming = VitNaming::Timm;
    AttentionVariant variant;

    int headDim() const { return hiddenSize / numHeads; }
    int gridSize() const { return imageSize / patchSize; }
    int numPatches() const { return gridSize() * gridSize(); }
    /// Tokens per image: the class token plus the patches.
    int numTokens() const { return numPatches() + 1; }

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
