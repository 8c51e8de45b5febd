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

} // namespace

StateDict mapHuggingFaceVitKeys(StateDict tensors, int numLayers, const std::string& file, LoadReport& report)
{
    static const std::regex layerKey(R"(encoder\.layer\.(\d+)\.(.+))");
    static const std::vector<std::pair<std::string, std::string>> layerParts = {
        {"layernorm_before.", "norm1."},
        {"layernorm_after.", "norm2."},
        {"attention.attention.alpha", "attn.alpha"},
        {"attention.output.dense.", "attn.proj."},
        {"intermediate.dense.", "mlp.fc1."},
        {"output.dense.", "mlp.fc2."},
    };
    static const std::vector<std::pair<std::string, std::string>> topParts = {
        {"embeddings.cls_token", "cls_token"},
        {"embeddings.position_embeddings", "pos_embed"},
        {"embeddings.patch_embeddings.projection.", "patch_embed.proj."},
        {"layernorm.", "norm."},
        {"classifier.", "head."},
    };
    StateDict out;
    std::map<std::string, torch::Tensor> qkvParts; // "N.query.weight" -> tensor
    for (auto& [original, tensor] : tensors) {
        std::string name = startsWith(original, "vit.") ? original.substr(4) : original;
        std::string mapped;
        std::smatch m;
        if (startsWith(name, "pooler.")) {
            report.ignored.push_back(original + " (ViTModel pooler, not used for image classification)");
            continue;
        }
        if (std::regex_match(name, m, layerKey)) {
            const std::string layer = m[1], rest = m[2];
            for (const char* part : {"query", "key", "value"}) {
                const std::string prefix = std::string("attention.attention.") + part + ".";
                if (startsWith(rest, prefix)) {
                    qkvParts[layer + "." + part + "." + rest.substr(prefix.size())] = tensor;
                    mapped = "-";
                }
            }
            for (const auto& [from, to] : layerParts)
                if (mapped.empty() && startsWith(rest, from))
                    mapped = "blocks." + layer + "." + to + rest.substr(from.size());
        } else {
            for (const auto& [from, to] : topParts)
                if (mapped.empty() && startsWith(name, from)) mapped = to + name.substr(from.size());
        }
        if (mapped == "-") continue;
        // Unknown names pass through unchanged, so strict loading reports them as the file has them.
        out.emplace(mapped.empty() ? original : mapped, std::move(tensor));
    }
    for (int layer = 0; layer < numLayers; ++layer) {
        for (const char* kind : {"weight", "bias"}) {
            std::vector<torch::Tensor> parts;
            for (const char* part : {"query", "key", "value"}) {
                const auto it = qkvParts.find(std::to_string(layer) + "." + part + "." + kind);
                if (it != qkvParts.end()) parts.push_back(it->second);
            }
            if (parts.empty()) continue; // strict loading reports blocks.N.attn.qkv.* as missing
            if (parts.size() != 3)
                throw Error(file + ": layer " + std::to_string(layer) +
                            " has only some of query/key/value ." + kind);
            out.emplace("blocks." + std::to_string(layer) + ".attn.qkv." + kind, torch::cat(parts, 0));
        }
    }
    if (!qkvParts.empty())
        report.renamed.push_back("Hugging Face query/key/value -> timm attn.qkv (concatenated)");
    return out;
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
    if (config.naming == VitNaming::HuggingFace)
        tensors = mapHuggingFaceVitKeys(std::move(tensors), config.numLayers, weights, net.m_report);
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
        if (name == "cls_token")
            p.normal_(0.0, 1e-6);
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
