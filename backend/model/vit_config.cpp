#include "model/vit_config.h"

#include "common/error.h"
#include "common/json_util.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <regex>

namespace outlierlens {
namespace {

struct TimmSize
{
    const char* name;
    int dim, depth, heads;
};
constexpr TimmSize kTimmSizes[] = {
    {"tiny", 192, 12, 3},    {"small", 384, 12, 6},  {"base", 768, 12, 12},
    {"large", 1024, 24, 16}, {"huge", 1280, 32, 16},
};

std::vector<std::string> readId2Label(const nlohmann::json& j, const std::string& where)
{
    std::vector<std::string> labels;
    if (!j.contains("id2label") || !j["id2label"].is_object()) return labels;
    const auto& map = j["id2label"];
    labels.assign(map.size(), std::string());
    for (auto it = map.begin(); it != map.end(); ++it) {
        std::size_t pos = 0;
        long index = -1;
        try {
            index = std::stol(it.key(), &pos);
        } catch (const std::exception&) {
        }
        if (pos != it.key().size() || index < 0 || std::size_t(index) >= map.size() || !it->is_string())
            throw Error(where + ": id2label must map 0..N-1 to strings, found key '" + it.key() + "'");
        labels[std::size_t(index)] = it->get<std::string>();
    }
    return labels;
}

VitConfig fromTimm(const nlohmann::json& j, const std::string& where)
{
    using namespace jsonutil;
    VitConfig c;
    c.naming = VitNaming::Timm;
    c.architecture = getString(j, "architecture", where);
    // vit_<size>_patch<P>_<img>[...]: the defaults timm's constructor would use.
    static const std::regex pattern(R"(vit_(tiny|small|base|large|huge)_patch(\d+)_(\d+).*)");
    std::smatch m;
    if (std::regex_match(c.architecture, m, pattern)) {
        for (const auto& s : kTimmSizes)
            if (m[1] == s.name) c.hiddenSize = s.dim, c.numLayers = s.depth, c.numHeads = s.heads;
        c.patchSize = std::stoi(m[2]);
        c.imageSize = std::stoi(m[3]);
    } else if (!j.contains("model_args")) {
        throw Error(where + ": unknown timm architecture '" + c.architecture +
                    "' and no model_args (expected vit_<tiny|small|base|large>_patch<P>_<size>)");
    }
    double mlpRatio = 4.0;
    if (j.contains("model_args")) {
        const auto& a = j["model_args"];
        c.hiddenSize = getInt32(a, "embed_dim", where, c.hiddenSize);
        c.numLayers = getInt32(a, "depth", where, c.numLayers);
        c.numHeads = getInt32(a, "num_heads", where, c.numHeads);
        c.patchSize = getInt32(a, "patch_size", where, c.patchSize);
        c.imageSize = getInt32(a, "img_size", where, c.imageSize);
        c.numChannels = getInt32(a, "in_chans", where, c.numChannels);
        mlpRatio = getNumber(a, "mlp_ratio", where, mlpRatio);
        c.qkvBias = getBool(a, "qkv_bias", where, true);
        if (!getBool(a, "class_token", where, true))
            throw Error(where + ": models without a class token are not supported");
        const std::string pool = getString(a, "global_pool", where, std::string("token"));
        if (pool != "token")
            throw Error(where + ": global_pool '" + pool + "' is not supported (only token)");
        if (getBool(a, "pre_norm", where, false) || getBool(a, "no_embed_class", where, false) ||
            a.contains("init_values") || getBool(a, "fc_norm", where, false))
            throw Error(
                where +
                ": pre_norm, no_embed_class, layer scale (init_values) and fc_norm are not supported");
        c.patchEmbedNorm = getBool(a, "patch_embed_norm", where, false);
    }
    c.intermediateSize = int(mlpRatio * c.hiddenSize + 0.5);
    c.numClasses = getInt32(j, "num_classes", where, 1000);
    if (j.contains("pretrained_cfg") && j["pretrained_cfg"].is_object()) {
        const auto& p = j["pretrained_cfg"];
        if (p.contains("input_size") && p["input_size"].is_array() && p["input_size"].size() == 3) {
            const int size = p["input_size"][1].get<int>();
            if (size != c.imageSize)
                throw Error(where + ": pretrained_cfg input_size " + std::to_string(size) +
                            " differs from img_size " + std::to_string(c.imageSize));
        }
        if (p.contains("label_names") && p["label_names"].is_array())
            for (const auto& n : p["label_names"])
                c.id2label.push_back(n.is_string() ? n.get<std::string>() : n.dump());
    }
    c.layerNormEps = getNumber(j, "layer_norm_eps", where, 1e-6);
    return c;
}

VitConfig fromHuggingFace(const nlohmann::json& j, const std::string& where)
{
    using namespace jsonutil;
    VitConfig c;
    c.naming = VitNaming::HuggingFace;
    c.architecture = "ViTForImageClassification";
    if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty())
        c.architecture = j["architectures"][0].get<std::string>();
    c.imageSize = getInt32(j, "image_size", where, 224);
    c.patchSize = getInt32(j, "patch_size", where, 16);
    c.numChannels = getInt32(j, "num_channels", where, 3);
    c.hiddenSize = getInt32(j, "hidden_size", where, 768);
    c.numLayers = getInt32(j, "num_hidden_layers", where, 12);
    c.numHeads = getInt32(j, "num_attention_heads", where, 12);
    c.intermediateSize = getInt32(j, "intermediate_size", where, 3072);
    c.layerNormEps = getNumber(j, "layer_norm_eps", where, 1e-12);
    c.qkvBias = getBool(j, "qkv_bias", where, true);
    c.hiddenAct = getString(j, "hidden_act", where, std::string("gelu"));
    c.id2label = readId2Label(j, where);
    c.numClasses = c.architecture == "ViTModel" ? 0 : int(c.id2label.empty() ? 1000 : c.id2label.size());
    return c;
}

} // namespace

VitConfig VitConfig::fromModelDir(const std::string& modelDir)
{
    const std::string path = (std::filesystem::path(modelDir) / "config.json").string();
    if (!std::filesystem::exists(path))
        throw Error(modelDir + ": no config.json (expected a Hugging Face or timm model folder)");
    const nlohmann::json j = jsonutil::parseFile(path);
    if (!j.is_object()) throw Error(path + ": expected a JSON object");
    VitConfig c = j.contains("architecture") ? fromTimm(j, path) : fromHuggingFace(j, path);
    c.variant = variantFromConfigJson(j, path);
    if (c.id2label.empty() && c.naming == VitNaming::Timm && j.contains("id2label"))
        c.id2label = readId2Label(j, path);
    c.validate(path);
    return c;
}

void VitConfig::validate(const std::string& where) const
{
    auto positive = [&](int value, const char* name) {
        if (value <= 0)
            throw Error(where + ": " + name + " must be positive, found " + std::to_string(value));
    };
    positive(imageSize, "image size");
    positive(patchSize, "patch size");
    positive(numChannels, "channels");
    positive(hiddenSize, "hidden size");
    positive(numLayers, "depth");
    positive(numHeads, "heads");
    positive(intermediateSize, "MLP size");
    if (numClasses < 0) throw Error(where + ": number of classes must not be negative");
    if (imageSize % patchSize != 0)
        throw Error(where + ": image size " + std::to_string(imageSize) +
                    " is not a multiple of the patch size " + std::to_string(patchSize));
    if (hiddenSize % numHeads != 0)
        throw Error(where + ": hidden size " + std::to_string(hiddenSize) + " is not a multiple of " +
                    std::to_string(numHeads) + " heads");
    if (hiddenAct != "gelu" && hiddenAct != "gelu_new" && hiddenAct != "relu")
        throw Error(where + ": hidden_act '" + hiddenAct + "' is not supported");
    if (double(numLayers) * hiddenSize * intermediateSize > 1e12 || imageSize > 8192 || numClasses > 1000000)
        throw Error(where + ": model dimensions are implausibly large");
    if (!id2label.empty() && int(id2label.size()) != numClasses)
        throw Error(where + ": " + std::to_string(id2label.size()) + " class names for " +
                    std::to_string(numClasses) + " classes");
    variant.validate(where);
}

VitConfig VitConfig::preset(const std::string& name)
{
    VitConfig c;
    c.architecture = name;
    if (name == "vit-tiny") {
        c.hiddenSize = 192, c.numHeads = 3, c.intermediateSize = 768;
    } else if (name == "vit-small") {
        c.hiddenSize = 384, c.numHeads = 6, c.intermediateSize = 1536;
    } else if (name == "vit-base") {
        c.hiddenSize = 768, c.numHeads = 12, c.intermediateSize = 3072;
    } else if (name == "vit-fmnist") {
        c.imageSize = 28, c.patchSize = 4, c.hiddenSize = 128, c.numLayers = 6, c.numHeads = 4;
        c.intermediateSize = 512, c.numClasses = 10;
    } else if (name ==
               "vit-canvas") { // the canvas task (tasks/data/canvas_data.h): 56 px, 8 x 8 patches of 7
        c.imageSize = 56, c.patchSize = 7, c.hiddenSize = 128, c.numLayers = 4, c.numHeads = 4;
        c.intermediateSize = 512, c.numClasses = 10;
    } else {
        throw Error("unknown ViT preset '" + name +
                    "' (known: vit-tiny, vit-small, vit-base, vit-fmnist, vit-canvas)");
    }
    return c;
}

std::string VitConfig::toTimmJson(const std::string& pretrainedCfgJson) const
{
    nlohmann::json j;
    j["architecture"] = architecture.rfind("vit_", 0) == 0 ? architecture : "vit_custom";
    j["num_classes"] = numClasses;
    j["num_features"] = hiddenSize;
    j["model_args"] = {{"img_size", imageSize},
                       {"patch_size", patchSize},
                       {"in_chans", numChannels},
                       {"embed_dim", hiddenSize},
                       {"depth", numLayers},
                       {"num_heads", numHeads},
                       {"mlp_ratio", double(intermediateSize) / hiddenSize},
                       {"qkv_bias", qkvBias}};
    if (patchEmbedNorm) j["model_args"]["patch_embed_norm"] = true;
    j["layer_norm_eps"] = layerNormEps;
    if (!pretrainedCfgJson.empty()) j["pretrained_cfg"] = nlohmann::json::parse(pretrainedCfgJson);
    if (!id2label.empty()) {
        if (!j.contains("pretrained_cfg")) j["pretrained_cfg"] = nlohmann::json::object();
        j["pretrained_cfg"]["label_names"] = id2label;
    }
    addVariantToConfigJson(variant, j);
    return j.dump(2) + "\n";
}

} // namespace outlierlens
