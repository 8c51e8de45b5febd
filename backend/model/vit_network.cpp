#include "model/vit_network.h"

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/sha256.h"
#include "io/safetensors.h"
#include "model/runtime.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

namespace outlierlens {
namespace fs = std::filesystem;

namespace {

bool startsWith(const std::string& s, const std::string& prefix)
{
    return s.rfind(prefix, 0) == 0;
}

/// The config's sizes against the checkpoint before anything is adopted: each tensor a config field fixes
/// (patch size, registers, position table) must have that shape, and registers the config asks for must
/// be there; an Error names the config, the field and the tensor. CLIP's text tower is left out.
void checkAgainstConfig(const VitConfig& config, const StateDict& tensors, const std::string& modelDir,
                        const std::string& weights)
{
    const std::string configPath = (fs::path(modelDir) / "config.json").string();
    StateDict vision;
    for (const auto& [name, tensor] : tensors)
        if (!startsWith(name, "text_model.")) vision.emplace(name, tensor);
    checkConfigAgainstCheckpoint(vision, vitImpliedShapes(config), config.numLayers, configPath, weights);
    if (config.numRegisters > 0) {
        const std::string name =
            config.naming == VitNaming::Dinov2 ? "embeddings.register_tokens" : "reg_token";
        bool found = false;
        for (const auto& item : vision)
            found =
                found || item.first == name ||
                (item.first.size() > name.size() &&
                 item.first.compare(item.first.size() - name.size() - 1, name.size() + 1, "." + name) == 0);
        if (!found)
            throw Error(configPath + ": " +
                        (config.naming == VitNaming::Dinov2 ? "num_register_tokens " : "reg_tokens ") +
                        std::to_string(config.numRegisters) + " implies " + name + " of shape [1, " +
                        std::to_string(config.numRegisters) + ", " + std::to_string(config.hiddenSize) +
                        "] but " + weights + " holds no " + name +
                        " (do the config and the weights belong together?)");
    }
}

} // namespace

namespace {

/// One Hugging Face naming: its prefix, its layer pattern, what its parts are called in timm's names.
struct VisionNaming
{
    std::vector<std::string> stripPrefixes; ///< dropped first ("vit.", "vision_model.")
    std::regex layerKey;                    ///< (layer, rest) of a per-layer name
    std::vector<std::string> qkvParts;      ///< the q, k, v module names inside a layer, in that order
    std::vector<std::pair<std::string, std::string>> layerParts, topParts;
    std::vector<std::pair<std::string, std::string>> ignoredPrefixes; ///< name prefix -> why
};

const VisionNaming& visionNaming(VitNaming naming)
{
    static const VisionNaming vit{
        {"vit."},
        std::regex(R"(encoder\.layer\.(\d+)\.(.+))"),
        {"attention.attention.query.", "attention.attention.key.", "attention.attention.value."},
        {{"layernorm_before.", "norm1."},
         {"layernorm_after.", "norm2."},
         {"attention.attention.alpha", "attn.alpha"},
         {"attention.output.dense.", "attn.proj."},
         {"intermediate.dense.", "mlp.fc1."},
         {"output.dense.", "mlp.fc2."}},
        {{"embeddings.cls_token", "cls_token"},
         {"embeddings.position_embeddings", "pos_embed"},
         {"embeddings.patch_embeddings.projection.", "patch_embed.proj."},
         {"layernorm.", "norm."},
         {"classifier.", "head."}},
        {{"pooler.", "ViTModel pooler, not used for image classification"}}};
    static const VisionNaming dinov2{
        {},
        std::regex(R"(encoder\.layer\.(\d+)\.(.+))"),
        {"attention.attention.query.", "attention.attention.key.", "attention.attention.value."},
        {{"norm1.", "norm1."},
         {"norm2.", "norm2."},
         {"attention.output.dense.", "attn.proj."},
         {"layer_scale1.lambda1", "ls1.gamma"},
         {"layer_scale2.lambda1", "ls2.gamma"},
         {"mlp.fc1.", "mlp.fc1."},
         {"mlp.fc2.", "mlp.fc2."}},
        {{"embeddings.cls_token", "cls_token"},
         {"embeddings.register_tokens", "reg_token"},
         {"embeddings.position_embeddings", "pos_embed"},
         {"embeddings.patch_embeddings.projection.", "patch_embed.proj."},
         {"layernorm.", "norm."}},
        {{"embeddings.mask_token", "DINOv2's mask token, used only for masked-image training"}}};
    static const VisionNaming clip{
        {"vision_model."},
        std::regex(R"(encoder\.layers\.(\d+)\.(.+))"),
        {"self_attn.q_proj.", "self_attn.k_proj.", "self_attn.v_proj."},
        {{"layer_norm1.", "norm1."},
         {"layer_norm2.", "norm2."},
         {"self_attn.out_proj.", "attn.proj."},
         {"mlp.fc1.", "mlp.fc1."},
         {"mlp.fc2.", "mlp.fc2."}},
        {{"embeddings.class_embedding", "cls_token"},
         {"embeddings.position_embedding.weight", "pos_embed"},
         {"embeddings.patch_embedding.", "patch_embed.proj."},
         {"pre_layrnorm.", "norm_pre."},
         {"post_layernorm.", "norm."}},
        {{"embeddings.position_ids", "CLIP's position ids buffer (0..N-1, recomputed)"},
         {"text_model.", "CLIP's text tower (only the vision tower is run)"},
         {"text_projection.", "CLIP's text projection (only the vision tower is run)"},
         {"visual_projection.", "CLIP's image projection into the joint space (not part of the tower)"},
         {"logit_scale", "CLIP's contrastive temperature"}}};
    switch (naming) {
    case VitNaming::Dinov2:
        return dinov2;
    case VitNaming::Clip:
        return clip;
    case VitNaming::Timm:
    case VitNaming::HuggingFace:
        break;
    }
    return vit;
}

} // namespace

StateDict mapHuggingFaceVisionKeys(StateDict tensors, VitNaming naming, int numLayers,
                                   const std::string& file, LoadReport& report)
{
    const VisionNaming& names = visionNaming(naming);
    StateDict out;
    std::map<std::string, torch::Tensor> qkvParts; // "N.0.weight" -> tensor (0, 1, 2 = q, k, v)
    for (auto& [original, tensor] : tensors) {
        std::string name = original;
        for (const std::string& prefix : names.stripPrefixes)
            if (startsWith(name, prefix)) name = name.substr(prefix.size());
        bool ignored = false;
        for (const auto& [prefix, why] : names.ignoredPrefixes)
            if (startsWith(original, prefix) || startsWith(name, prefix)) {
                if (startsWith(original, "text_model.")) {
                    if (report.ignored.empty() || report.ignored.back().rfind("text_model.*", 0) != 0)
                        report.ignored.push_back("text_model.* (" + why + ")");
                } else {
                    report.ignored.push_back(original + " (" + why + ")");
                }
                ignored = true;
                break;
            }
        if (ignored) continue;
        std::string mapped;
        std::smatch m;
        if (std::regex_match(name, m, names.layerKey)) {
            const std::string layer = m[1], rest = m[2];
            for (std::size_t part = 0; part < names.qkvParts.size(); ++part)
                if (startsWith(rest, names.qkvParts[part])) {
                    qkvParts[layer + "." + std::to_string(part) + "." +
                             rest.substr(names.qkvParts[part].size())] = tensor;
                    mapped = "-";
                }
            for (const auto& [from, to] : names.layerParts)
                if (mapped.empty() && startsWith(rest, from))
                    mapped = "blocks." + layer + "." + to + rest.substr(from.size());
        } else {
            for (const auto& [from, to] : names.topParts)
                if (mapped.empty() && startsWith(name, from)) mapped = to + name.substr(from.size());
        }
        if (mapped == "-") continue;
        // CLIP keeps the class token as [d] and the position table as an Embedding's [N, d]: timm's
        // shapes are [1, 1, d] and [1, N, d] (other ranks pass through for strict loading to report).
        if (naming == VitNaming::Clip && mapped == "cls_token" && tensor.dim() == 1)
            tensor = tensor.reshape({1, 1, -1});
        if (naming == VitNaming::Clip && mapped == "pos_embed" && tensor.dim() == 2)
            tensor = tensor.unsqueeze(0);
        // Unknown names pass through unchanged, so strict loading reports them as the file has them.
        out.emplace(mapped.empty() ? original : mapped, std::move(tensor));
    }
    for (int layer = 0; layer < numLayers; ++layer) {
        for (const char* kind : {"weight", "bias"}) {
            std::vector<torch::Tensor> parts;
            for (int part = 0; part < 3; ++part) {
                const auto it =
                    qkvParts.find(std::to_string(layer) + "." + std::to_string(part) + "." + kind);
                if (it != qkvParts.end()) parts.push_back(it->second);
            }
            if (parts.empty()) continue; // strict loading reports blocks.N.attn.qkv.* as missing
            if (parts.size() != 3)
                throw Error(file + ": layer " + std::to_string(layer) + " has only some of " +
                            names.qkvParts[0] + "/" + names.qkvParts[1] + "/" + names.qkvParts[2] + kind);
            out.emplace("blocks." + std::to_string(layer) + ".attn.qkv." + kind, torch::cat(parts, 0));
        }
    }
    if (!qkvParts.empty())
        report.renamed.push_back("Hugging Face query/key/value -> timm attn.qkv (concatenated)");
    return out;
}

StateDict mapHuggingFaceVitKeys(StateDict tensors, int numLayers, const std::string& file, LoadReport& report)
{
    return mapHuggingFaceVisionKeys(std::move(tensors), VitNaming::HuggingFace, numLayers, file, report);
}

std::vector<ImpliedShape> vitImpliedShapes(const VitConfig& c)
{
    const std::int64_t d = c.hiddenSize, p = c.patchSize, R = c.numRegisters, N = c.numPositions();
    const std::string patch = "hidden_size x num_channels x patch_size x patch_size";
    const std::string positions = c.posClsRow ? "(image_size / patch_size)^2 + 1 x hidden_size"
                                              : "(image_size / patch_size)^2 x hidden_size";
    switch (c.naming) {
    case VitNaming::Timm:
        return {
            {"patch_embed.proj.weight", {d, c.numChannels, p, p}, "embed_dim x in_chans x patch_size^2"},
            {"reg_token", {1, R, d}, "reg_tokens x embed_dim"},
            {"pos_embed",
             {1, N, d},
             (c.posClsRow ? "(img_size / patch_size)^2 + 1" : "(img_size / patch_size)^2 (no_embed_class)") +
                 std::string(" x embed_dim")},
            {"cls_token", {1, 1, d}, "embed_dim"}};
    case VitNaming::HuggingFace:
        return {{"embeddings.patch_embeddings.projection.weight", {d, c.numChannels, p, p}, patch},
                {"embeddings.position_embeddings", {1, N, d}, positions},
                {"embeddings.cls_token", {1, 1, d}, "hidden_size"}};
    case VitNaming::Dinov2:
        return {{"embeddings.patch_embeddings.projection.weight", {d, c.numChannels, p, p}, patch},
                {"embeddings.register_tokens", {1, R, d}, "num_register_tokens x hidden_size"},
                {"embeddings.position_embeddings", {1, N, d}, positions},
                {"embeddings.cls_token", {1, 1, d}, "hidden_size"}};
    case VitNaming::Clip:
        return {{"embeddings.patch_embedding.weight", {d, c.numChannels, p, p}, patch},
                {"embeddings.position_embedding.weight", {N, d}, positions},
                {"embeddings.class_embedding", {d}, "hidden_size"}};
    }
    return {};
}

VitNetwork::VitNetwork(const VitConfig& config)
    : m_config(config)
    , m_module(config)
{
    m_module->eval();
}

VitNetwork VitNetwork::load(const std::string& modelDir, const VariantOverride& override)
{
    VitConfig config = VitConfig::fromModelDir(modelDir);
    if (!override.empty()) config.variant = override.applyTo(config.variant);
    const std::string weights = findWeightsFile(modelDir);
    VitNetwork net(config);
    net.m_weightsFile = weights;
    // Free the initial weights before reading, so only one copy of the model is ever in memory.
    const ExpectedTensors expected = releaseModuleTensors(*net.m_module);
    StateDict tensors = readStateDict(weights);
    checkAgainstConfig(config, tensors, modelDir, weights);
    if (config.naming != VitNaming::Timm)
        tensors = mapHuggingFaceVisionKeys(std::move(tensors), config.naming, config.numLayers, weights,
                                           net.m_report);
    adoptStrict(*net.m_module, expected, std::move(tensors), weights);
    net.m_sha256 = sha256File(weights);
    releaseFreedMemory();
    return net;
}

VitNetwork VitNetwork::create(const VitConfig& config, std::uint64_t seed)
{
    torch::manual_seed(seed);
    VitNetwork net(config);
    torch::NoGradGuard noGrad;
    for (auto& item : net.m_module->named_parameters(true)) {
        const std::string& name = item.key();
        torch::Tensor& p = item.value();
        if (name.find("alpha") != std::string::npos) continue; // gates keep their init (bias logit(pi_init))
        if (name == "cls_token" || name == "reg_token")
            p.normal_(0.0, 1e-6);
        else if (name.size() > 6 && name.compare(name.size() - 6, 6, ".gamma") == 0)
            p.fill_(1.0); // LayerScale: Hugging Face DINOv2's layerscale_value
        else if (name == "pos_embed" || p.dim() >= 2)
            p.normal_(0.0, 0.02); // timm: trunc_normal_(std=.02) with bounds +-2, which never bind
        else if (name.find("norm") != std::string::npos && name.size() > 6 &&
                 name.compare(name.size() - 6, 6, "weight") == 0)
            p.fill_(1.0);
        else
            p.zero_();
    }
    return net;
}

void VitNetwork::save(const std::string& dir, const std::string& pretrainedCfgJson, bool float16) const
{
    fs::create_directories(dir);
    VitConfig config = m_config;
    config.naming = VitNaming::Timm;
    writeSafetensors((fs::path(dir) / "model.safetensors").string(), moduleStateDict(*m_module),
                     float16 ? SafetensorsDtype::Float16 : SafetensorsDtype::Float32,
                     {{"format", "pt"}, {"producer", "outlierlens " OUTLIERLENS_VERSION}});
    AtomicFile configFile((fs::path(dir) / "config.json").string());
    {
        std::ofstream out(configFile.tempPath(), std::ios::binary);
        out << config.toTimmJson(pretrainedCfgJson);
        if (!out) throw Error(configFile.finalPath() + ": cannot write");
    }
    configFile.commit();
}

VitOutputs VitNetwork::forward(const torch::Tensor& pixels, ActivationSink* sink)
{
    return m_module->forward(pixels, sink);
}

void VitNetwork::setClipStrength(double strength)
{
    const AttentionVariant faded = m_config.variant.clipFadedIn(std::clamp(strength, 0.0, 1.0));
    for (const auto& block : *m_module->blocks)
        block->as<VitBlockImpl>()->spec.variant = faded;
}

} // namespace outlierlens
