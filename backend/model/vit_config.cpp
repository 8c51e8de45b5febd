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
    // vit_<size>_patch<P>[_<img>][_...]: the defaults timm's registered constructor would use. Its
    // dinov2 constructors add LayerScale (init_values) at 518 px, the reg<N> ones N register tokens and a
    // position table without a class row (no_embed_class); the clip ones pre_norm (whose patch conv has no
    // bias), torch's LayerNorm (eps 1e-5) and, for *_quickgelu_*, quick_gelu.
    static const std::regex pattern(R"(vit_(tiny|small|base|large|huge)_patch(\d+)(?:_(\d+))?(_.*)?)");
    static const std::regex registers(R"(_reg(\d+)_)");
    std::smatch m;
    double eps = 1e-6;
    if (std::regex_match(c.architecture, m, pattern)) {
        for (const auto& s : kTimmSizes)
            if (m[1] == s.name) c.hiddenSize = s.dim, c.numLayers = s.depth, c.numHeads = s.heads;
        c.patchSize = std::stoi(m[2]);
        const std::string suffix = m[4].str() + "_";
        if (m[3].matched) c.imageSize = std::stoi(m[3]);
        if (suffix.find("_dinov2_") != std::string::npos) {
            c.imageSize = 518;
            c.layerScale = true;
            std::smatch r;
            if (std::regex_search(suffix, r, registers)) {
                c.numRegisters = std::stoi(r[1]);
                c.posClsRow = false;
            }
        }
        if (suffix.find("_clip_") != std::string::npos) {
            c.preNorm = true;
            eps = 1e-5;
            if (suffix.find("_quickgelu_") != std::string::npos) c.hiddenAct = "quick_gelu";
        }
    } else if (!j.contains("model_args")) {
        throw Error(where + ": unknown timm architecture '" + c.architecture +
                    "' and no model_args (expected vit_<tiny|small|base|large>_patch<P>_<size>)");
    }
    double mlpRatio = 4.0;
    bool dynamicSize = false;
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
        if (getBool(a, "fc_norm", where, false)) throw Error(where + ": fc_norm is not supported");
        c.preNorm = getBool(a, "pre_norm", where, c.preNorm);
        c.posClsRow = !getBool(a, "no_embed_class", where, !c.posClsRow);
        c.numRegisters = getInt32(a, "reg_tokens", where, c.numRegisters);
        if (a.contains("init_values")) c.layerScale = !a["init_values"].is_null();
        c.hiddenAct = getString(a, "act_layer", where, c.hiddenAct);
        dynamicSize = getBool(a, "dynamic_img_size", where, false);
        c.patchEmbedNorm = getBool(a, "patch_embed_norm", where, false);
    }
    // timm 0.9.16: the patch conv has a bias unless pre_norm; with a class row and registers the table
    // would have rows for every prefix token, which no released checkpoint uses.
    c.patchBias = !c.preNorm;
    if (c.numRegisters > 0 && c.posClsRow)
        throw Error(where + ": reg_tokens without no_embed_class (a position row per register) is not "
                            "supported");
    if (dynamicSize) c.posInterpolation = PosInterpolation::BicubicAntialias;
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
    c.layerNormEps = getNumber(j, "layer_norm_eps", where, eps);
    return c;
}

std::string firstArchitecture(const nlohmann::json& j, const std::string& fallback)
{
    if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
        j["architectures"][0].is_string())
        return j["architectures"][0].get<std::string>();
    return fallback;
}

VitConfig fromHuggingFaceVit(const nlohmann::json& j, const std::string& where)
{
    using namespace jsonutil;
    VitConfig c;
    c.naming = VitNaming::HuggingFace;
    c.architecture = firstArchitecture(j, "ViTForImageClassification");
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

/// Dinov2Model / Dinov2WithRegistersModel (transformers 4.47-4.55): [CLS, registers, patches], positions
/// added before the registers are inserted, LayerScale, final LayerNorm on every token; no classifier.
VitConfig fromDinov2(const nlohmann::json& j, const std::string& where, bool withRegisters)
{
    using namespace jsonutil;
    VitConfig c;
    c.naming = VitNaming::Dinov2;
    c.architecture = firstArchitecture(j, withRegisters ? "Dinov2WithRegistersModel" : "Dinov2Model");
    if (c.architecture != "Dinov2Model" && c.architecture != "Dinov2WithRegistersModel")
        throw Error(where + ": " + c.architecture +
                    " is not supported (DINOv2 backbones only: Dinov2Model, Dinov2WithRegistersModel)");
    c.imageSize = getInt32(j, "image_size", where, 518);
    c.patchSize = getInt32(j, "patch_size", where, 14);
    c.numChannels = getInt32(j, "num_channels", where, 3);
    c.hiddenSize = getInt32(j, "hidden_size", where, 768);
    c.numLayers = getInt32(j, "num_hidden_layers", where, 12);
    c.numHeads = getInt32(j, "num_attention_heads", where, 12);
    c.intermediateSize = int(getNumber(j, "mlp_ratio", where, 4.0) * c.hiddenSize);
    c.layerNormEps = getNumber(j, "layer_norm_eps", where, 1e-6);
    c.qkvBias = getBool(j, "qkv_bias", where, true);
    c.hiddenAct = getString(j, "hidden_act", where, std::string("gelu"));
    if (getBool(j, "use_swiglu_ffn", where, false))
        throw Error(where + ": use_swiglu_ffn (DINOv2 giant's SwiGLU MLP) is not supported");
    if (!getBool(j, "apply_layernorm", where, true))
        throw Error(where + ": apply_layernorm false is not supported");
    c.numRegisters = withRegisters ? getInt32(j, "num_register_tokens", where, 4) : 0;
    if (c.numRegisters < 0)
        throw Error(where + ": num_register_tokens must not be negative, found " +
                    std::to_string(c.numRegisters));
    c.layerScale = true;
    c.numClasses = 0;
    // Dinov2WithRegisters interpolates with antialias=True; Dinov2Model (4.45 on) without it.
    c.posInterpolation = withRegisters ? PosInterpolation::BicubicAntialias : PosInterpolation::Bicubic;
    return c;
}

/// CLIPVisionModel (model_type clip_vision_model), or the vision_config of a whole CLIPModel: pre_layrnorm,
/// patch conv without bias, quick_gelu; last_hidden_state without a final norm, post_layernorm(CLS) pooled.
VitConfig fromClip(const nlohmann::json& top, const std::string& where, bool wholeModel)
{
    using namespace jsonutil;
    const std::string architecture = firstArchitecture(top, wholeModel ? "CLIPModel" : "CLIPVisionModel");
    if (wholeModel && (!top.contains("vision_config") || !top["vision_config"].is_object()))
        throw Error(where + ": a CLIP config without vision_config");
    const nlohmann::json& j = wholeModel ? top["vision_config"] : top;
    const std::string w = wholeModel ? where + " (vision_config)" : where;
    VitConfig c;
    c.naming = VitNaming::Clip;
    c.architecture = architecture;
    c.imageSize = getInt32(j, "image_size", w, 224);
    c.patchSize = getInt32(j, "patch_size", w, 32);
    c.numChannels = getInt32(j, "num_channels", w, 3);
    c.hiddenSize = getInt32(j, "hidden_size", w, 768);
    c.numLayers = getInt32(j, "num_hidden_layers", w, 12);
    c.numHeads = getInt32(j, "num_attention_heads", w, 12);
    c.intermediateSize = getInt32(j, "intermediate_size", w, 3072);
    c.layerNormEps = getNumber(j, "layer_norm_eps", w, 1e-5);
    c.hiddenAct = getString(j, "hidden_act", w, std::string("quick_gelu"));
    c.preNorm = true;
    c.patchBias = false;
    c.lastHiddenNormed = false;
    c.numClasses = 0;
    c.posInterpolation = PosInterpolation::Bicubic; // what interpolate_pos_encoding=True computes
    return c;
}

VitConfig fromHuggingFace(const nlohmann::json& j, const std::string& where)
{
    const std::string type = jsonutil::getString(j, "model_type", where, std::string());
    const std::string architecture = firstArchitecture(j, std::string());
    const auto startsWith = [](const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; };
    if (type == "dinov2_with_registers" || (type.empty() && startsWith(architecture, "Dinov2WithRegisters")))
        return fromDinov2(j, where, true);
    if (type == "dinov2" || (type.empty() && startsWith(architecture, "Dinov2")))
        return fromDinov2(j, where, false);
    if (type == "clip_vision_model" || (type.empty() && startsWith(architecture, "CLIPVision")))
        return fromClip(j, where, false);
    if (type == "clip" || (type.empty() && startsWith(architecture, "CLIP"))) return fromClip(j, where, true);
    return fromHuggingFaceVit(j, where);
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

std::vector<std::string> VitConfig::tokenLabels(int rows, int cols) const
{
    std::vector<std::string> labels{"[CLS]"};
    for (int r = 1; r <= numRegisters; ++r)
        labels.push_back("[REG" + std::to_string(r) + "]");
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c)
            labels.push_back("patch " + std::to_string(r) + "," + std::to_string(c));
    return labels;
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
    if (numRegisters < 0 || numRegisters > 1024)
        throw Error(where + ": register count " + std::to_string(numRegisters) + " is out of range");
    if (hiddenAct != "gelu" && hiddenAct != "gelu_new" && hiddenAct != "relu" && hiddenAct != "quick_gelu")
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
    // Our checkpoints keep every layout field explicit, so they read back whatever the architecture name.
    if (numRegisters > 0 && posClsRow)
        throw Error("a ViT with registers and a class row in its position table (Hugging Face DINOv2) has no "
                    "timm layout to be saved in");
    if (numRegisters > 0) j["model_args"]["reg_tokens"] = numRegisters;
    if (!posClsRow) j["model_args"]["no_embed_class"] = true;
    if (layerScale) j["model_args"]["init_values"] = 1.0;
    if (preNorm) j["model_args"]["pre_norm"] = true;
    if (hiddenAct != "gelu") j["model_args"]["act_layer"] = hiddenAct;
    if (posInterpolation == PosInterpolation::BicubicAntialias) j["model_args"]["dynamic_img_size"] = true;
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
