#pragma once
// A network is used by one thread at a time (the worker that owns it).

#include "model/loading.h"
#include "model/vit.h"

#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens {

/// A ViT checkpoint under timm names or Hugging Face names (ViTForImageClassification, or a bare
/// ViTModel), in either weight format, loaded strictly into one timm-named VisionTransformer.
class VitNetwork
{
public:
    /// Loads <dir>/config.json and its weights; `override` replaces the attention variant.
    static VitNetwork load(const std::string& modelDir, const VariantOverride& override = {});
    /// A new model with timm's initialisation (normal(0, 0.02) weights and position embedding,
    /// class token normal(0, 1e-6), zero biases, LayerNorm 1/0), seeded.
    static VitNetwork create(const VitConfig& config, std::uint64_t seed);
    /// Writes config.json (timm style, with `pretrainedCfgJson` as pretrained_cfg) and
    /// model.safetensors under timm names, each atomically.
    void save(const std::string& dir, const std::string& pretrainedCfgJson, bool float16 = false) const;

    /// pixels [B, C, H, W] -> outputs; runs under the caller's grad mode.
    VitOutputs forward(const torch::Tensor& pixels, ActivationSink* sink = nullptr);
    /// Clipped softmax faded in (training's clip_warmup_steps): every block computes with the config's
    /// variant at `strength` in [0, 1] (AttentionVariant::clipFadedIn); 1, the default, is the config's.
    void setClipStrength(double strength);

    const VitConfig& config() const { return m_config; }
    VisionTransformer module() const { return m_module; }
    const std::string& weightsFile() const { return m_weightsFile; }
    const std::string& checkpointSha256() const { return m_sha256; }
    const LoadReport& loadReport() const { return m_report; }

private:
    explicit VitNetwork(const VitConfig& config);

    VitConfig m_config;
    VisionTransformer m_module{nullptr};
    std::string m_weightsFile;
    std::string m_sha256;
    LoadReport m_report;
};

/// Maps Hugging Face ViT names onto timm's (query/key/value concatenated into qkv). Exposed for tests.
StateDict mapHuggingFaceVitKeys(StateDict tensors, int numLayers, const std::string& file,
                                LoadReport& report);
/// The same for any Hugging Face naming (ViT, DINOv2, CLIP's vision tower): q/k/v concatenated into qkv,
/// LayerScale lambda1 -> ls1/ls2.gamma, CLIP's [d] class embedding and [N, d] position table reshaped to
/// timm's [1, 1, d] and [1, N, d]; tensors the tower does not use (DINOv2's mask token, CLIP's text tower
/// and projections) are left out and listed in `report`.
StateDict mapHuggingFaceVisionKeys(StateDict tensors, VitNaming naming, int numLayers,
                                   const std::string& file, LoadReport& report);
/// The checkpoint tensors whose shapes the config fixes, under the checkpoint's own names (for
/// checkConfigAgainstCheckpoint): the patch conv (patch size), the registers, the position table.
std::vector<ImpliedShape> vitImpliedShapes(const VitConfig& config);

} // namespace outlierlens
