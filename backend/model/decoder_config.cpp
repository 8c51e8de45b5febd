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

std::string architectureOf(DecoderArch arch); // the class name Hugging Face saves for the layout

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
    // The families each layout computes; a family sharing a layout differs in the fields its reader sets.
    static const std::pair<const char*, DecoderArch> kLayouts[] = {
        {"gpt2", DecoderArch::Gpt2},     {"opt", DecoderArch::Opt},     {"llama", DecoderArch::Llama},
        {"qwen2", DecoderArch::Llama},   {"qwen3", DecoderArch::Llama}, {"mistral", DecoderArch::Llama},
        {"gemma2", DecoderArch::Gemma2}, {"phi", DecoderArch::Phi},     {"gpt_neox", DecoderArch::GptNeox},
        {"falcon", DecoderArch::Falcon}};
    std::string known;
    for (const auto& [type, layout] : kLayouts) {
        if (modelType == type) return layout;
        known += (known.empty() ? "" : ", ") + std::string(type);
    }
    throw Error(path + ": a " + family.name + " model, not a decoder this app runs (model_type '" +
                modelType + "'); decoders: " + known);
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

/// rope_theta and rope_scaling, as every rotary family writes them.
void readRope(const json& j, const std::string& path, DecoderConfig& c)
{
    using namespace jsonutil;
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
    readRope(j, path, c);
    c.tieWordEmbeddings = getBool(j, "tie_word_embeddings", path, false);
    if (!isNull(j, "head_dim")) c.headDimension = getInt32(j, "head_dim", path);
    if (c.modelType == "qwen2" || c.modelType == "qwen3") {
        c.attentionBias = c.modelType == "qwen2"; // Qwen2Attention: q/k/v with bias, o_proj without
        c.qkNorm = c.modelType == "qwen3";        // Qwen3Attention: q_norm, k_norm per head
        if (getBool(j, "use_sliding_window", path, false))
            throw Error(path + ": field 'use_sliding_window' true is not supported (released Qwen2 and Qwen3 "
                               "models set it false)");
    } else if (getBool(j, "attention_bias", path, false)) {
        throw Error(path + ": field 'attention_bias' true is not supported (LLaMA has no biases)");
    }
    if (c.modelType == "mistral")
        c.slidingWindow = isNull(j, "sliding_window") ? 0 : getInt32(j, "sliding_window", path);
}

void readGemma2(const json& j, const std::string& path, DecoderConfig& c)
{
    using namespace jsonutil;
    readLlama(j, path, c); // the same names for sizes, rope and head_dim
    c.activation = getString(j, "hidden_activation", path, std::string("gelu_pytorch_tanh"));
    c.tieWordEmbeddings = true; // Gemma2ForCausalLM ties its head whatever the config says
    // Gemma2Config's defaults where a field is absent; null switches a window or a cap off.
    const auto numberOr = [&](const char* key, double fallback) {
        if (!j.contains(key)) return fallback;
        return j[key].is_null() ? 0.0 : getNumber(j, key, path);
    };
    c.slidingWindow = !j.contains("sliding_window")   ? 4096
                      : j["sliding_window"].is_null() ? 0
                                                      : getInt32(j, "sliding_window", path);
    c.slidingWindowAlternates = true;
    c.queryPreAttnScalar = getNumber(j, "query_pre_attn_scalar", path, 256.0);
    c.attnLogitSoftcap = numberOr("attn_logit_softcapping", 50.0);
    c.finalLogitSoftcap = numberOr("final_logit_softcapping", 30.0);
}

/// The size fields of the parallel-block families (Phi, GPT-NeoX).
void readSizes(const json& j, const std::string& path, DecoderConfig& c)
{
    using namespace jsonutil;
    c.vocabSize = getInt32(j, "vocab_size", path);
    c.hiddenSize = getInt32(j, "hidden_size", path);
    c.numLayers = getInt32(j, "num_hidden_layers", path);
    c.numHeads = getInt32(j, "num_attention_heads", path);
    c.numKvHeads = intOrNull(j, "num_key_value_heads", path, c.numHeads);
    c.maxPositions = getInt32(j, "max_position_embeddings", path, 2048);
    c.normEps = getNumber(j, "layer_norm_eps", path, 1e-5);
    readRope(j, path, c);
}

void readPhi(const json& j, const std::string& path, DecoderConfig& c)
{
    using namespace jsonutil;
    readSizes(j, path, c);
    c.intermediateSize = getInt32(j, "intermediate_size", path);
    c.activation = getString(j, "hidden_act", path, std::string("gelu_new"));
    c.partialRotaryFactor = getNumber(j, "partial_rotary_factor", path, 0.5);
    c.parallelResidual = true;
    c.headBias = true;
    c.tieWordEmbeddings = getBool(j, "tie_word_embeddings", path, false);
    if (getBool(j, "qk_layernorm", path, false))
        throw Error(path +
                    ": field 'qk_layernorm' true is not supported (phi-1, phi-1.5 and phi-2 set it false)");
}

void readGptNeox(const json& j, const std::string& path, DecoderConfig& c)
{
    using namespace jsonutil;
    readSizes(j, path, c);
    c.intermediateSize = getInt32(j, "intermediate_size", path);
    c.activation = getString(j, "hidden_act", path, std::string("gelu"));
    c.partialRotaryFactor = getNumber(j, "rotary_pct", path, 0.25);
    if (!isNull(j, "rotary_emb_base")) c.ropeTheta = getNumber(j, "rotary_emb_base", path);
    c.parallelResidual = getBool(j, "use_parallel_residual", path, true);
    c.mlpNorm = true;
    c.linearBias = getBool(j, "attention_bias", path, true);
    c.tieWordEmbeddings = getBool(j, "tie_word_embeddings", path, false);
}

void readFalcon(const json& j, const std::string& path, DecoderConfig& c)
{
    using namespace jsonutil;
    c.vocabSize = getInt32(j, "vocab_size", path);
    c.hiddenSize = getInt32(j, "hidden_size", path);
    c.numLayers = getInt32(j, "num_hidden_layers", path);
    c.numHeads = getInt32(j, "num_attention_heads", path);
    c.maxPositions = getInt32(j, "max_position_embeddings", path, 2048);
    c.normEps = getNumber(j, "layer_norm_epsilon", path, 1e-5);
    c.intermediateSize = intOrNull(j, "ffn_hidden_size", path, 4 * c.hiddenSize);
    c.activation = getString(j, "activation", path, std::string("gelu"));
    readRope(j, path, c);
    if (getBool(j, "alibi", path, false))
        throw Error(path +
                    ": field 'alibi' true is not supported (ALiBi positions; Falcon-7B/40B use rotary)");
    c.newDecoderArchitecture = getBool(j, "new_decoder_architecture", path, false);
    c.linearBias = getBool(j, "bias", path, false);
    if (c.newDecoderArchitecture) {
        c.numKvHeads = intOrNull(j, "num_kv_heads", path, c.numHeads); // FalconConfig: null = every head
        c.parallelResidual = true;
        // num_ln_in_parallel_attn: null means 2 for the new architecture (ln_attn and ln_mlp).
        c.mlpNorm = intOrNull(j, "num_ln_in_parallel_attn", path, 2) == 2;
    } else {
        c.numKvHeads = getBool(j, "multi_query", path, true) ? 1 : c.numHeads;
        c.parallelResidual = getBool(j, "parallel_attn", path, true);
        if (!c.parallelResidual)
            throw Error(path + ": field 'parallel_attn' false is not supported (Falcon-7B/40B are parallel)");
    }
    c.tieWordEmbeddings = getBool(j, "tie_word_embeddings", path, true);
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
    default: // the rotary layouts: LLaMA's defaults; presets of other layouts set their fields
        c.architectures = {architectureOf(arch)};
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

std::string architectureOf(DecoderArch arch)
{
    switch (arch) {
    case DecoderArch::Gpt2:
        return "GPT2LMHeadModel";
    case DecoderArch::Opt:
        return "OPTForCausalLM";
    case DecoderArch::Llama:
        return "LlamaForCausalLM";
    case DecoderArch::Gemma2:
        return "Gemma2ForCausalLM";
    case DecoderArch::Phi:
        return "PhiForCausalLM";
    case DecoderArch::GptNeox:
        return "GPTNeoXForCausalLM";
    case DecoderArch::Falcon:
        return "FalconForCausalLM";
    }
    return "GPT2LMHeadModel";
}

/// The fields every rotary layout writes under the same names.
void writeRotarySizes(const DecoderConfig& c, json& j)
{
    j["hidden_size"] = c.hiddenSize;
    j["num_hidden_layers"] = c.numLayers;
    j["num_attention_heads"] = c.numHeads;
    j["max_position_embeddings"] = c.maxPositions;
    j["rope_theta"] = c.ropeTheta;
    if (c.ropeScalingType.empty())
        j["rope_scaling"] = nullptr;
    else if (c.ropeScalingType == "llama3")
        j["rope_scaling"] = {{"rope_type", c.ropeScalingType},
                             {"factor", c.ropeScalingFactor},
                             {"low_freq_factor", c.ropeLowFreqFactor},
                             {"high_freq_factor", c.ropeHighFreqFactor},
                             {"original_max_position_embeddings", c.ropeOriginalMaxPositions}};
    else
        j["rope_scaling"] = {{"type", c.ropeScalingType}, {"factor", c.ropeScalingFactor}};
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
    case DecoderArch::Gemma2:
        return "gemma2";
    case DecoderArch::Phi:
        return "phi";
    case DecoderArch::GptNeox:
        return "gpt_neox";
    case DecoderArch::Falcon:
        return "falcon";
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
    case DecoderArch::Gemma2:
        readGemma2(j, path, c);
        break;
    case DecoderArch::Phi:
        readPhi(j, path, c);
        break;
    case DecoderArch::GptNeox:
        readGptNeox(j, path, c);
        break;
    case DecoderArch::Falcon:
        readFalcon(j, path, c);
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
    if (headDimension > 0 && arch != DecoderArch::Llama && arch != DecoderArch::Gemma2)
        throw Error(where + ": field 'head_dim' is for the LLaMA and Gemma 2 layouts");
    if (headDimension <= 0 && hiddenSize % numHeads != 0)
        throw Error(where + ": hidden size " + std::to_string(hiddenSize) + " is not a multiple of the " +
                    std::to_string(numHeads) + " attention heads");
    if (numHeads % numKvHeads != 0)
        throw Error(where + ": num_attention_heads " + std::to_string(numHeads) +
                    " is not a multiple of num_key_value_heads " + std::to_string(numKvHeads));
    if (!rotary() && numKvHeads != numHeads)
        throw Error(where + ": GPT-2 and OPT have no grouped-query attention");
    if (rotary() && (rotaryDim() % 2 != 0 || rotaryDim() <= 0))
        throw Error(where + ": rotary embeddings need an even, positive number of rotated dims, found " +
                    std::to_string(rotaryDim()) + " (head size " + std::to_string(headDim()) + ")");
    if (!(partialRotaryFactor > 0 && partialRotaryFactor <= 1))
        throw Error(where + ": the rotary fraction must be in (0, 1], found " +
                    std::to_string(partialRotaryFactor));
    if (attnLogitSoftcap < 0 || finalLogitSoftcap < 0)
        throw Error(where + ": soft-caps must not be negative (null switches one off)");
    if (arch == DecoderArch::Gemma2 && !(queryPreAttnScalar > 0))
        throw Error(where + ": field 'query_pre_attn_scalar' must be positive (the scores are scaled by its "
                            "-1/2 power)");
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
    return {"gpt2-tiny", "opt-tiny",       "llama-tiny",  "qwen3-tiny",     "mistral-tiny", "gemma2-tiny",
            "phi-tiny",  "pythia-tiny",    "falcon-tiny", "falcon40b-tiny", "gpt2",         "opt-125m",
            "opt-350m",  "tinyllama-1.1b", "llama-7b",    "llama3-8b",      "qwen2.5-7b",   "mistral-7b"};
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
    // Tiny shapes of the other layouts (tests, trying the tools): 2 layers, hidden 64, 4 heads.
    if (name == "qwen3-tiny") {
        DecoderConfig c = base(DecoderArch::Llama, 1000, 64, 2, 4, 172, 128);
        c.modelType = "qwen3";
        c.architectures = {"Qwen3ForCausalLM"};
        c.numKvHeads = 2;
        c.headDimension = 24;
        c.qkNorm = true;
        c.ropeTheta = 1000000.0;
        c.normEps = 1e-6;
        return c;
    }
    if (name == "mistral-tiny") {
        DecoderConfig c = base(DecoderArch::Llama, 1000, 64, 2, 4, 172, 128);
        c.modelType = "mistral";
        c.architectures = {"MistralForCausalLM"};
        c.numKvHeads = 2;
        c.slidingWindow = 8;
        return c;
    }
    if (name == "gemma2-tiny") {
        DecoderConfig c = base(DecoderArch::Gemma2, 1000, 64, 2, 4, 172, 128);
        c.numKvHeads = 2;
        c.headDimension = 24;
        c.activation = "gelu_pytorch_tanh";
        c.normEps = 1e-6;
        c.tieWordEmbeddings = true;
        c.slidingWindow = 8;
        c.slidingWindowAlternates = true;
        c.queryPreAttnScalar = 24;
        c.attnLogitSoftcap = 50.0;
        c.finalLogitSoftcap = 30.0;
        return c;
    }
    if (name == "phi-tiny") {
        DecoderConfig c = base(DecoderArch::Phi, 1000, 64, 2, 4, 256, 128);
        c.activation = "gelu_new";
        c.partialRotaryFactor = 0.5;
        c.parallelResidual = true;
        c.headBias = true;
        return c;
    }
    if (name == "pythia-tiny") {
        DecoderConfig c = base(DecoderArch::GptNeox, 1000, 64, 2, 4, 256, 128);
        c.activation = "gelu";
        c.partialRotaryFactor = 0.25;
        c.parallelResidual = true;
        c.mlpNorm = true;
        return c;
    }
    if (name == "falcon-tiny" || name == "falcon40b-tiny") {
        const bool grouped = name == "falcon40b-tiny";
        DecoderConfig c = base(DecoderArch::Falcon, 1000, 64, 2, grouped ? 8 : 4, 256, 128);
        c.activation = "gelu";
        c.numKvHeads = grouped ? 2 : 1;
        c.newDecoderArchitecture = grouped;
        c.mlpNorm = grouped;
        c.parallelResidual = true;
        c.linearBias = false;
        c.tieWordEmbeddings = true;
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
    if (name == "llama3-8b") { // Meta-Llama-3.1-8B's config.json
        DecoderConfig c = base(DecoderArch::Llama, 128256, 4096, 32, 32, 14336, 131072);
        c.numKvHeads = 8;
        c.ropeTheta = 500000.0;
        c.ropeScalingType = "llama3";
        c.ropeScalingFactor = 8.0;
        c.normEps = 1e-5;
        c.bosTokenId = 128000;
        c.eosTokenId = 128001;
        return c;
    }
    if (name == "qwen2.5-7b") { // Qwen2.5-7B's config.json
        DecoderConfig c = base(DecoderArch::Llama, 152064, 3584, 28, 28, 18944, 131072);
        c.modelType = "qwen2";
        c.architectures = {"Qwen2ForCausalLM"};
        c.numKvHeads = 4;
        c.ropeTheta = 1000000.0;
        c.normEps = 1e-6;
        c.attentionBias = true;
        c.bosTokenId = 151643;
        c.eosTokenId = 151643;
        return c;
    }
    if (name == "mistral-7b") { // Mistral-7B-v0.1's config.json
        DecoderConfig c = base(DecoderArch::Llama, 32000, 4096, 32, 32, 14336, 32768);
        c.modelType = "mistral";
        c.architectures = {"MistralForCausalLM"};
        c.numKvHeads = 8;
        c.slidingWindow = 4096;
        return c;
    }
    throw Error("unknown decoder preset '" + name + "' (expected one of: " + joinedText(presetNames()) + ")");
}

std::string DecoderConfig::toJson() const
{
    json j;
    j["architectures"] =
        architectures.empty() ? std::vector<std::string>{architectureOf(arch)} : architectures;
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
        writeRotarySizes(*this, j);
        j["num_key_value_heads"] = numKvHeads;
        j["intermediate_size"] = intermediateSize;
        j["hidden_act"] = activation;
        j["rms_norm_eps"] = normEps;
        j["pretraining_tp"] = 1;
        if (headDimension > 0) j["head_dim"] = headDimension;
        if (modelType == "mistral")
            j["sliding_window"] = slidingWindow > 0 ? json(slidingWindow) : json(nullptr);
        if (modelType == "qwen2" || modelType == "qwen3") j["use_sliding_window"] = false;
        break;
    case DecoderArch::Gemma2:
        writeRotarySizes(*this, j);
        j["num_key_value_heads"] = numKvHeads;
        j["intermediate_size"] = intermediateSize;
        j["hidden_activation"] = activation;
        j["rms_norm_eps"] = normEps;
        j["head_dim"] = headDim();
        j["sliding_window"] = slidingWindow > 0 ? json(slidingWindow) : json(nullptr);
        j["query_pre_attn_scalar"] = queryPreAttnScalar;
        j["attn_logit_softcapping"] = attnLogitSoftcap > 0 ? json(attnLogitSoftcap) : json(nullptr);
        j["final_logit_softcapping"] = finalLogitSoftcap > 0 ? json(finalLogitSoftcap) : json(nullptr);
        break;
    case DecoderArch::Phi:
        writeRotarySizes(*this, j);
        j["num_key_value_heads"] = numKvHeads;
        j["intermediate_size"] = intermediateSize;
        j["hidden_act"] = activation;
        j["layer_norm_eps"] = normEps;
        j["partial_rotary_factor"] = partialRotaryFactor;
        j["qk_layernorm"] = false;
        break;
    case DecoderArch::GptNeox:
        writeRotarySizes(*this, j);
        j["intermediate_size"] = intermediateSize;
        j["hidden_act"] = activation;
        j["layer_norm_eps"] = normEps;
        j["rotary_pct"] = partialRotaryFactor;
        j["rotary_emb_base"] = ropeTheta;
        j["use_parallel_residual"] = parallelResidual;
        j["attention_bias"] = linearBias;
        break;
    case DecoderArch::Falcon:
        writeRotarySizes(*this, j);
        j["ffn_hidden_size"] = intermediateSize;
        j["activation"] = activation;
        j["layer_norm_epsilon"] = normEps;
        j["alibi"] = false;
        j["bias"] = linearBias;
        j["new_decoder_architecture"] = newDecoderArchitecture;
        j["multi_query"] = numKvHeads == 1;
        j["num_kv_heads"] = numKvHeads;
        j["parallel_attn"] = parallelResidual;
        j["num_ln_in_parallel_attn"] = newDecoderArchitecture ? json(mlpNorm ? 2 : 1) : json(nullptr);
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
