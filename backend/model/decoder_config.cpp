#include "model/decoder_config.h"
#include "model/model_family_json.h"

#include "common/error.h"
#include "common/json_util.h"
#include "common/text_format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <sstream>

namespace outlierlens {
namespace {

using nlohmann::json;

bool isNull(const json& j, const char* key)
{
    return !j.contains(key) || j[key].is_null();
}

/// An integer field that may be null (HF writes null for "derive it"): fallback when null or absent.
int intOrNull(const json& j, const char* key, const std::string& where, int fallback)
{
    return isNull(j, key) ? fallback : jsonutil::getInt32(j, key, where);
}

int tokenId(const json& j, const char* key, const std::string& where)
{
    return isNull(j, key) ? -1 : jsonutil::getInt32(j, key, where);
}

/// The decoder layout of the config's family (model/model_family); an Error naming what the config says
/// when the family is unknown or not a decoder.
DecoderArch detectArch(const json& j, const std::string& path, std::vector<std::string>& architectures,
                       std::string& modelType)
{
    if (j.contains("architectures") && !j["architectures"].is_null()) {
        if (!j["architectures"].is_array()) throw Error(path + ": field 'architectures' must be an array");
        for (const auto& a : j["architectures"]) {
            if (!a.is_string()) throw Error(path + ": field 'architectures' must hold strings");
            architectures.push_back(a.get<std::string>());
        }
    }
    // The registry finds the family (model_type, else architectures); the decoder code says which of its
    // layouts computes it. A family's own fields are read below.
    const ModelFamily& family = modelFamilyOfConfig(j, path);
    modelType = family.id;
    static const std::pair<const char*, DecoderArch> kLayouts[] = {{"gpt2", DecoderArch::Gpt2},
                                                                   {"opt", DecoderArch::Opt},
                                                                   {"llama", DecoderArch::Llama},
                                                                   {"qwen2", DecoderArch::Llama},
                                                                   {"mistral", DecoderArch::Llama}};
    for (const auto& [type, layout] : kLayouts)
        if (modelType == type) return layout;
    throw Error(path + ": a " + family.name + " model, not a decoder this app runs (model_type '" +
                modelType + "'); decoders: gpt2, opt, llama, qwen2, mistral");
}

void readGpt2(const json& j, const std::string& path, DecoderConfig& c)
{
    using namespace jsonutil;
    c.vocabSize = getInt32(j, "vocab_size", path);
    c.hiddenSize = getInt32(j, "n_embd", path);
    c.numLayers = getInt32(j, "n_layer", path);
    c.numHeads = getInt32(j, "n_head", path);
    c.numKvHeads = c.numHeads;
    c.intermediateSize = intOrNull(j, "n_inner", path, 4 * c.hiddenSize);
    c.maxPositions = getInt32(j, "n_positions", path);
    c.normEps = getNumber(j, "layer_norm_epsilon", path, 1e-5);
    c.activation = getString(j, "activation_function", path, std::string("gelu_new"));
    c.scaleAttnWeights = getBool(j, "scale_attn_weights", path, true);
    c.scaleAttnByInverseLayerIdx = getBool(j, "scale_attn_by_inverse_layer_idx", path, false);
    c.tieWordEmbeddings = getBool(j, "tie_word_embeddings", path, true);
}

void readOpt(const json& j, const std::string& path, DecoderConfig& c)
{
    using namespace jsonutil;
    c.vocabSize = getInt32(j, "vocab_size", path);
    c.hiddenSize = getInt32(j, "hidden_size", path);
    c.numLayers = getInt32(j, "num_hidden_layers", path);
    c.numHeads = getInt32(j, "num_attention_heads", path);
    c.numKvHeads = c.numHeads;
    c.intermediateSize = getInt32(j, "ffn_dim", path);
    c.maxPositions = getInt32(j, "max_position_embeddings", path);
    c.normEps = 1e-5; // nn.LayerNorm's default: OPT has no config field for it
    c.activation = getString(j, "activation_function", path, std::string("relu"));
    c.doLayerNormBefore = getBool(j, "do_layer_norm_before", path, true);
    c.finalLayerNorm = c.doLayerNormBefore && !getBool(j, "_remove_final_layer_norm", path, false);
    c.wordEmbedProjDim = intOrNull(j, "word_embed_proj_dim", path, c.hiddenSize);
    c.enableBias = getBool(j, "enable_bias", path, true);
    if (!getBool(j, "layer_norm_elementwise_affine", path, true))
        throw Error(path + ": field 'layer_norm_elementwise_affine' false is not supported (expected true)");
    c.tieWordEmbeddings = getBool(j, "tie_word_embeddings", path, true);
}

void readLlama(const json& j, const std::string& path, DecoderConfig& c)
{
    using namespace jsonutil;
    c.vocabSize = getInt32(j, "vocab_size", path);
    c.hiddenSize = getInt32(j, "hidden_size", path);
    c.numLayers = getInt32(j, "num_hidden_layers", path);
    c.numHeads = getInt32(j, "num_attention_heads", path);
    c.numKvHeads = intOrNull(j, "num_key_value_heads", path, c.numHeads);
    c.intermediateSize = getInt32(j, "intermediate_size", path);
    c.maxPositions = getInt32(j, "max_position_embeddings", path, 2048);
    c.normEps = getNumber(j, "rms_norm_eps", path, 1e-6);
    c.activation = getString(j, "hidden_act", path, std::string("silu"));
    c.ropeTheta = isNull(j, "rope_theta") ? 10000.0 : getNumber(j, "rope_theta", path);
    if (!isNull(j, "rope_scaling")) {
        const json& s = j["rope_scaling"];
        const std::string where = path + ": rope_scaling";
        if (!s.is_object()) throw Error(path + ": field 'rope_scaling' must be null or an object");
        // transformers >= 4.43 writes "rope_type" (and reads "type" as well).
        c.ropeScalingType =
            s.contains("rope_type") ? getString(s, "rope_type", where) : getString(s, "type", where);
        c.ropeScalingFactor = getNumber(s, "factor", where);
        if (c.ropeScalingType == "llama3") {
            c.ropeLowFreqFactor = getNumber(s, "low_freq_factor", where);
            c.ropeHighFreqFactor = getNumber(s, "high_freq_factor", where);
            c.ropeOriginalMaxPositions = getInt32(s, "original_max_position_embeddings", where);
        }
    }
    c.tieWordEmbeddings = getBool(j, "tie_word_embeddings", path, false);
    if (!isNull(j, "head_dim")) c.headDimension = getInt32(j, "head_dim", path);
    if (c.modelType == "qwen2") {
        c.attentionBias = true; // Qwen2Attention: q/k/v with bias, o_proj without
        if (getBool(j, "use_sliding_window", path, false))
            throw Error(path + ": field 'use_sliding_window' true is not supported (released Qwen2 models "
                               "set it false)");
    } else if (getBool(j, "attention_bias", path, false)) {
        throw Error(path + ": field 'attention_bias' true is not supported (LLaMA has no biases)");
    }
    if (c.modelType == "mistral")
        c.slidingWindow = isNull(j, "sliding_window") ? 0 : getInt32(j, "sliding_window", path);
}

DecoderConfig base(DecoderArch arch, int vocab, int hidden, int layers, int heads, int ffn, int positions)
{
    DecoderConfig c;
    c.arch = arch;
    c.vocabSize = vocab;
    c.hiddenSize = hidden;
    c.numLayers = layers;
    c.numHeads = heads;
    c.numKvHeads = heads;
    c.intermediateSize = ffn;
    c.maxPositions = positions;
    switch (arch) {
    case DecoderArch::Gpt2:
        c.architectures = {"GPT2LMHeadModel"};
        c.activation = "gelu_new";
        c.normEps = 1e-5;
        c.bosTokenId = c.eosTokenId = vocab - 1;
        break;
    case DecoderArch::Opt:
        c.architectures = {"OPTForCausalLM"};
        c.activation = "relu";
        c.wordEmbedProjDim = hidden;
        c.bosTokenId = c.eosTokenId = 2;
        c.padTokenId = 1;
        break;
    case DecoderArch::Llama:
        c.architectures = {"LlamaForCausalLM"};
        c.activation = "silu";
        c.normEps = 1e-5;
        c.tieWordEmbeddings = false;
        c.bosTokenId = 1;
        c.eosTokenId = 2;
        break;
    }
    c.torchDtype = "float32";
    return c;
}

} // namespace

std::string toString(DecoderArch arch)
{
    switch (arch) {
    case DecoderArch::Gpt2:
        return "gpt2";
    case DecoderArch::Opt:
        return "opt";
    case DecoderArch::Llama:
        return "llama";
    }
    return "gpt2";
}

DecoderConfig DecoderConfig::fromFile(const std::string& path)
{
    const json j = jsonutil::parseFile(path);
    if (!j.is_object()) throw Error(path + ": expected a JSON object");
    DecoderConfig c;
    c.arch = detectArch(j, path, c.architectures, c.modelType);
    switch (c.arch) {
    case DecoderArch::Gpt2:
        readGpt2(j, path, c);
        break;
    case DecoderArch::Opt:
        readOpt(j, path, c);
        break;
    case DecoderArch::Llama:
        readLlama(j, path, c);
        break;
    }
    c.bosTokenId = tokenId(j, "bos_token_id", path);
    c.eosTokenId = tokenId(j, "eos_token_id", path);
    c.padTokenId = tokenId(j, "pad_token_id", path);
    c.torchDtype = isNull(j, "torch_dtype") ? std::string() : jsonutil::getString(j, "torch_dtype", path);
    c.variant = variantFromConfigJson(j, path);
    c.validate(path);
    return c;
}

void DecoderConfig::validate(const std::string& where) const
{
    auto positive = [&](int v, const char* field) {
        if (v <= 0)
            throw Error(where + ": field '" + field + "' must be positive, found " + std::to_string(v));
    };
    const bool gpt2 = arch == DecoderArch::Gpt2, opt = arch == DecoderArch::Opt;
    positive(vocabSize, "vocab_size");
    positive(hiddenSize, gpt2 ? "n_embd" : "hidden_size");
    positive(numLayers, gpt2 ? "n_layer" : "num_hidden_layers");
    positive(numHeads, gpt2 ? "n_head" : "num_attention_heads");
    positive(numKvHeads, "num_key_value_heads");
    positive(intermediateSize, gpt2 ? "n_inner" : opt ? "ffn_dim" : "intermediate_size");
    positive(maxPositions, gpt2 ? "n_positions" : "max_position_embeddings");
    if (headDimension > 0 && arch != DecoderArch::Llama)
        throw Error(where + ": field 'head_dim' is for the LLaMA layout (Mistral)");
    if (headDimension <= 0 && hiddenSize % numHeads != 0)
        throw Error(where + ": hidden size " + std::to_string(hiddenSize) + " is not a multiple of the " +
                    std::to_string(numHeads) + " attention heads");
    if (numHeads % numKvHeads != 0)
        throw Error(where + ": num_attention_heads " + std::to_string(numHeads) +
                    " is not a multiple of num_key_value_heads " + std::to_string(numKvHeads));
    if (arch != DecoderArch::Llama && numKvHeads != numHeads)
        throw Error(where + ": only LLaMA models have grouped-query attention");
    if (arch == DecoderArch::Llama && headDim() % 2 != 0)
        throw Error(where + ": rotary embeddings need an even head size, found " + std::to_string(headDim()));
    static const std::vector<std::string> activations = {"gelu_new", "gelu", "relu", "silu",
                                                         "gelu_pytorch_tanh"};
    if (std::find(activations.begin(), activations.end(), activation) == activations.end())
        throw Error(where + ": unsupported activation '" + activation +
                    "' (expected gelu_new, gelu, gelu_pytorch_tanh, relu or silu)");
    if (!(normEps > 0))
        throw Error(where + ": the norm epsilon must be positive, found " + std::to_string(normEps));
    if (opt) positive(wordEmbedProjDim, "word_embed_proj_dim");
    if (!ropeScalingType.empty()) {
        if (ropeScalingType != "linear" && ropeScalingType != "dynamic" && ropeScalingType != "llama3")
            throw Error(where + ": rope_scaling type '" + ropeScalingType +
                        "' is not supported (linear, dynamic or llama3)");
        if (ropeScalingType == "llama3" &&
            !(ropeLowFreqFactor > 0 && ropeHighFreqFactor > ropeLowFreqFactor &&
              ropeOriginalMaxPositions > 0))
            throw Error(where + ": rope_scaling llama3 needs 0 < low_freq_factor < high_freq_factor and "
                                "original_max_position_embeddings > 0");
        if (!(ropeScalingFactor > 1.0))
            throw Error(where + ": rope_scaling factor must be > 1, found " +
                        std::to_string(ropeScalingFactor));
    }
    if (!(ropeTheta > 0)) throw Error(where + ": rope_theta must be positive");
    if (slidingWindow < 0) throw Error(where + ": sliding_window must be positive or null");
    variant.validate(where);
}

std::vector<std::string> DecoderConfig::presetNames()
{
    return {"gpt2-tiny", "opt-tiny", "llama-tiny",     "gpt2",
            "opt-125m",  "opt-350m", "tinyllama-1.1b", "llama-7b"};
}

DecoderConfig DecoderConfig::preset(const std::string& name)
{
    if (name == "gpt2-tiny") return base(DecoderArch::Gpt2, 1000, 64, 2, 4, 256, 128);
    if (name == "opt-tiny") return base(DecoderArch::Opt, 1000, 64, 2, 4, 256, 128);
    if (name == "llama-tiny") {
        DecoderConfig c = base(DecoderArch::Llama, 1000, 64, 2, 4, 172, 128);
        c.numKvHeads = 2;
        return c;
    }
    if (name == "gpt2") return base(DecoderArch::Gpt2, 50257, 768, 12, 12, 3072, 1024);
    if (name == "opt-125m") return base(DecoderArch::Opt, 50272, 768, 12, 12, 3072, 2048);
    if (name == "opt-350m") {
        DecoderConfig c = base(DecoderArch::Opt, 50272, 1024, 24, 16, 4096, 2048);
        c.wordEmbedProjDim = 512;
        c.doLayerNormBefore = false;
        c.finalLayerNorm = false;
        return c;
    }
    if (name == "tinyllama-1.1b") {
        DecoderConfig c = base(DecoderArch::Llama, 32000, 2048, 22, 32, 5632, 2048);
        c.numKvHeads = 4;
        return c;
    }
    if (name == "llama-7b") return base(DecoderArch::Llama, 32000, 4096, 32, 32, 11008, 4096);
    throw Error("unknown decoder preset '" + name + "' (expected one of: " + joinedText(presetNames()) + ")");
}

std::string DecoderConfig::toJson() const
{
    json j;
    j["architectures"] = architectures.empty()
                             ? std::vector<std::string>{arch == DecoderArch::Gpt2  ? "GPT2LMHeadModel"
                                                        : arch == DecoderArch::Opt ? "OPTForCausalLM"
                                                                                   : "LlamaForCausalLM"}
                             : architectures;
    j["model_type"] = familyId();
    j["vocab_size"] = vocabSize;
    switch (arch) {
    case DecoderArch::Gpt2:
        j["n_embd"] = hiddenSize;
        j["n_layer"] = numLayers;
        j["n_head"] = numHeads;
        j["n_inner"] = intermediateSize;
        j["n_positions"] = maxPositions;
        j["layer_norm_epsilon"] = normEps;
        j["activation_function"] = activation;
        j["scale_attn_weights"] = scaleAttnWeights;
        j["scale_attn_by_inverse_layer_idx"] = scaleAttnByInverseLayerIdx;
        j["reorder_and_upcast_attn"] = false;
        break;
    case DecoderArch::Opt:
        j["hidden_size"] = hiddenSize;
        j["num_hidden_layers"] = numLayers;
        j["num_attention_heads"] = numHeads;
        j["ffn_dim"] = intermediateSize;
        j["max_position_embeddings"] = maxPositions;
        j["activation_function"] = activation;
        j["do_layer_norm_before"] = doLayerNormBefore;
        j["_remove_final_layer_norm"] = doLayerNormBefore && !finalLayerNorm;
        j["word_embed_proj_dim"] = embedDim();
        j["enable_bias"] = enableBias;
        j["layer_norm_elementwise_affine"] = true;
        break;
    case DecoderArch::Llama:
        j["hidden_size"] = hiddenSize;
        j["num_hidden_layers"] = numLayers;
        j["num_attention_heads"] = numHeads;
        j["num_key_value_heads"] = numKvHeads;
        j["intermediate_size"] = intermediateSize;
        j["max_position_embeddings"] = maxPositions;
        j["hidden_act"] = activation;
        j["rms_norm_eps"] = normEps;
        j["pretraining_tp"] = 1;
        if (ropeTheta != 10000.0) j["rope_theta"] = ropeTheta;
        if (ropeScalingType.empty())
            j["rope_scaling"] = nullptr;
        else if (ropeScalingType == "llama3")
            j["rope_scaling"] = {{"rope_type", ropeScalingType},
                                 {"factor", ropeScalingFactor},
                                 {"low_freq_factor", ropeLowFreqFactor},
                                 {"high_freq_factor", ropeHighFreqFactor},
                                 {"original_max_position_embeddings", ropeOriginalMaxPositions}};
        else
            j["rope_scaling"] = {{"type", ropeScalingType}, {"factor", ropeScalingFactor}};
        if (headDimension > 0) j["head_dim"] = headDimension;
        if (modelType == "mistral")
            j["sliding_window"] = slidingWindow > 0 ? json(slidingWindow) : json(nullptr);
        if (modelType == "qwen2") j["use_sliding_window"] = false;
        break;
    }
    j["tie_word_embeddings"] = tieWordEmbeddings;
    auto id = [](int v) { return v < 0 ? json(nullptr) : json(v); };
    j["bos_token_id"] = id(bosTokenId);
    j["eos_token_id"] = id(eosTokenId);
    if (padTokenId >= 0) j["pad_token_id"] = padTokenId;
    if (!torchDtype.empty()) j["torch_dtype"] = torchDtype;
    j["transformers_version"] = "4.31.0";
    addVariantToConfigJson(variant, j);
    return j.dump(2) + "\n";
}

} // namespace outlierlens
