#include "model/config.h"

#include "common/error.h"
#include "common/json_util.h"
#include "common/text_format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

namespace outlierlens {

double AttentionVariant::effectiveGamma() const
{
    if (alpha && maxSeqLength > 0) return -*alpha / double(maxSeqLength);
    return gamma;
}

AttentionVariant AttentionVariant::withAlphaResolved(int trainingLength) const
{
    AttentionVariant v = *this;
    if (!v.alpha) return v;
    if (v.maxSeqLength <= 0 && trainingLength > 0) v.maxSeqLength = trainingLength;
    v.gamma = v.effectiveGamma();
    return v;
}

AttentionVariant AttentionVariant::clipFadedIn(double strength) const
{
    if (softmax != SoftmaxKind::Clipped || strength >= 1.0) return *this;
    AttentionVariant faded = *this;
    faded.gamma = effectiveGamma() * std::max(strength, 0.0);
    faded.alpha.reset();
    // Per query, gamma * T / (keys seen) needs the T that gamma was stated for.
    if (!clipPerQuery) faded.maxSeqLength = 0;
    faded.zeta = 1.0 + (zeta - 1.0) * std::max(strength, 0.0);
    return faded;
}

namespace {

constexpr int kMaxGateHidden = 1 << 16;
constexpr int kMaxAlphaLength = 1 << 20;

} // namespace

void AttentionVariant::validate(const std::string& where) const
{
    if (softmax == SoftmaxKind::Clipped) {
        if (alpha && maxSeqLength <= 0)
            throw Error(where + ": clipped softmax with alpha needs max_seq_length (the training length T)");
        // Written so that nan fails too; inf would turn every probability into inf or nan.
        if (alpha && !(*alpha >= 0 && std::isfinite(*alpha)))
            throw Error(where + ": clipped softmax alpha must be >= 0 and finite, found " +
                        numberText(*alpha));
        if (!(effectiveGamma() <= 0 && std::isfinite(effectiveGamma())))
            throw Error(where + ": clipped softmax gamma must be <= 0 and finite, found " +
                        numberText(effectiveGamma()));
        if (clipPerQuery && !alpha)
            throw Error(where + ": clip_per_query needs alpha (each query's gamma is -alpha / its keys)");
        if (!(zeta >= 1 && std::isfinite(zeta)))
            throw Error(where + ": clipped softmax zeta must be >= 1 and finite, found " + numberText(zeta));
    }
    if (gate == GateKind::Mlp && nHid <= 0) throw Error(where + ": the mlp gate needs n_hid > 0");
    if (gate == GateKind::Mlp && nHid > kMaxGateHidden)
        throw Error(where + ": n_hid " + std::to_string(nHid) + " is implausibly large (at most " +
                    std::to_string(kMaxGateHidden) + ")");
    if (maxSeqLength > kMaxAlphaLength)
        throw Error(where + ": max_seq_length " + std::to_string(maxSeqLength) +
                    " is implausibly large (at most " + std::to_string(kMaxAlphaLength) + ")");
    if (softmax == SoftmaxKind::Sigmoid && bias != BiasKind::None)
        throw Error(where + ": sigmoid attention cannot be combined with a bias variant");
    if (contextScale && gate != GateKind::None)
        throw Error(where + ": context-scale is a gate of its own; it cannot be combined with gate '" +
                    toString(gate) + "'");
    if (gate != GateKind::None && !(piInit > 0 && piInit < 1))
        throw Error(where + ": pi_init must be in (0, 1), found " + numberText(piInit));
}

std::string AttentionVariant::describe() const
{
    std::string text;
    if (softmax == SoftmaxKind::Clipped) {
        text = "clipped softmax (gamma " + numberText(effectiveGamma()) + ", zeta " + numberText(zeta);
        if (alpha && clipPerQuery)
            text = "clipped softmax (gamma -" + numberText(*alpha) + " / keys seen per query, zeta " +
                   numberText(zeta);
        else if (alpha)
            text += "; alpha " + numberText(*alpha) + ", T " + std::to_string(maxSeqLength);
        text += ")";
    }
    if (softmax == SoftmaxKind::Sigmoid) text = "sigmoid attention";
    if (bias != BiasKind::None) text += std::string(text.empty() ? "" : " + ") + toString(bias) + "-bias";
    if (contextScale) text += std::string(text.empty() ? "" : " + ") + "context-scale";
    if (gate != GateKind::None) {
        if (!text.empty()) text += " + ";
        text += "gated attention (" + toString(gate);
        if (gate == GateKind::Mlp) text += ", n_hid " + std::to_string(nHid);
        text += ")";
    }
    return text.empty() ? "vanilla softmax" : text;
}

std::string toString(SoftmaxKind kind)
{
    switch (kind) {
    case SoftmaxKind::Vanilla:
        return "vanilla";
    case SoftmaxKind::Clipped:
        return "clipped";
    case SoftmaxKind::Sigmoid:
        return "sigmoid";
    }
    return "vanilla";
}

std::string toString(BiasKind kind)
{
    switch (kind) {
    case BiasKind::None:
        return "none";
    case BiasKind::Fixed:
        return "fixed";
    case BiasKind::Context:
        return "context";
    case BiasKind::Attention:
        return "attention";
    }
    return "none";
}

std::string toString(GateKind kind)
{
    switch (kind) {
    case GateKind::None:
        return "none";
    case GateKind::Linear:
        return "linear";
    case GateKind::Mlp:
        return "mlp";
    case GateKind::AllHeadsLinear:
        return "all_heads_linear";
    }
    return "none";
}

SoftmaxKind parseSoftmaxKind(const std::string& text)
{
    if (text == "vanilla" || text == "softmax") return SoftmaxKind::Vanilla;
    if (text == "clipped" || text == "clipped_softmax") return SoftmaxKind::Clipped;
    if (text == "sigmoid") return SoftmaxKind::Sigmoid;
    throw Error("unknown softmax '" + text + "' (expected vanilla, clipped or sigmoid)");
}

BiasKind parseBiasKind(const std::string& text)
{
    for (BiasKind kind : {BiasKind::None, BiasKind::Fixed, BiasKind::Context, BiasKind::Attention})
        if (text == toString(kind)) return kind;
    throw Error("unknown bias '" + text + "' (expected none, fixed, context or attention)");
}

GateKind parseGateKind(const std::string& text)
{
    if (text == "none" || text.empty()) return GateKind::None;
    if (text == "linear") return GateKind::Linear;
    if (text == "mlp") return GateKind::Mlp;
    if (text == "all_heads_linear") return GateKind::AllHeadsLinear;
    throw Error("unknown gate '" + text + "' (expected none, linear, mlp or all_heads_linear)");
}

BertConfig BertConfig::fromFile(const std::string& path)
{
    using namespace jsonutil;
    const nlohmann::json j = parseFile(path);
    if (!j.is_object()) throw Error(path + ": expected a JSON object");
    BertConfig c;
    c.vocabSize = getInt32(j, "vocab_size", path);
    c.hiddenSize = getInt32(j, "hidden_size", path);
    c.numLayers = getInt32(j, "num_hidden_layers", path);
    c.numHeads = getInt32(j, "num_attention_heads", path);
    c.intermediateSize = getInt32(j, "intermediate_size", path);
    c.maxPositions = getInt32(j, "max_position_embeddings", path, 512);
    c.typeVocabSize = getInt32(j, "type_vocab_size", path, 2);
    c.padTokenId = getInt32(j, "pad_token_id", path, 0);
    c.layerNormEps = getNumber(j, "layer_norm_eps", path, 1e-12);
    c.hiddenAct = getString(j, "hidden_act", path, std::string("gelu"));
    c.hiddenDropout = getNumber(j, "hidden_dropout_prob", path, 0.1);
    c.attentionDropout = getNumber(j, "attention_probs_dropout_prob", path, 0.1);
    const std::string positionType = getString(j, "position_embedding_type", path, std::string("absolute"));
    if (positionType != "absolute")
        throw Error(path + ": position_embedding_type '" + positionType +
                    "' is not supported (only absolute)");
    if (j.contains("architectures") && j["architectures"].is_array())
        for (const auto& a : j["architectures"])
            if (a.is_string()) c.architectures.push_back(a.get<std::string>());
    if (j.contains("id2label") && j["id2label"].is_object()) {
        const auto& map = j["id2label"];
        c.id2label.assign(map.size(), std::string());
        for (auto it = map.begin(); it != map.end(); ++it) {
            std::size_t pos = 0;
            long index = -1;
            try {
                index = std::stol(it.key(), &pos);
            } catch (const std::exception&) {
            }
            if (pos != it.key().size() || index < 0 || std::size_t(index) >= map.size() || !it->is_string())
                throw Error(path + ": id2label must map 0..N-1 to strings, found key '" + it.key() + "'");
            c.id2label[std::size_t(index)] = it->get<std::string>();
        }
    }
    c.variant = variantFromConfigJson(j, path);
    c.validate(path);
    return c;
}

void BertConfig::validate(const std::string& where) const
{
    auto positive = [&](int value, const char* name) {
        if (value <= 0)
            throw Error(where + ": " + name + " must be positive, found " + std::to_string(value));
    };
    if (variant.isDecoderOnly())
        throw Error(where + ": attention variant '" + variant.describe() +
                    "' is implemented for decoders only");
    positive(vocabSize, "vocab_size");
    positive(hiddenSize, "hidden_size");
    positive(numLayers, "num_hidden_layers");
    positive(numHeads, "num_attention_heads");
    positive(intermediateSize, "intermediate_size");
    positive(maxPositions, "max_position_embeddings");
    positive(typeVocabSize, "type_vocab_size");
    if (hiddenSize % numHeads != 0)
        throw Error(where + ": hidden_size " + std::to_string(hiddenSize) +
                    " is not a multiple of num_attention_heads " + std::to_string(numHeads));
    if (hiddenAct != "gelu" && hiddenAct != "gelu_new" && hiddenAct != "gelu_pytorch_tanh" &&
        hiddenAct != "relu")
        throw Error(where + ": hidden_act '" + hiddenAct + "' is not supported (gelu, gelu_new, relu)");
    if (!(layerNormEps > 0) || !std::isfinite(layerNormEps))
        throw Error(where + ": layer_norm_eps must be positive");
    for (const auto& [p, name] : {std::pair{hiddenDropout, "hidden_dropout_prob"},
                                  std::pair{attentionDropout, "attention_probs_dropout_prob"}})
        if (!(p >= 0 && p <= 1))
            throw Error(where + ": " + name + " must be a probability in [0, 1], found " + numberText(p));
    if (padTokenId < 0 || padTokenId >= vocabSize)
        throw Error(where + ": pad_token_id " + std::to_string(padTokenId) +
                    " is not a token of the vocabulary (0 to " + std::to_string(vocabSize - 1) + ")");
    if (variant.gate == GateKind::Mlp && variant.nHid <= 0) throw Error(where + ": the mlp gate needs n_hid");
    // Generous sanity limits so that a hostile config cannot request terabytes.
    if ((double(vocabSize) + maxPositions + typeVocabSize) * hiddenSize > 4e9 ||
        double(numLayers) * hiddenSize * intermediateSize > 1e12 || numLayers > 1000 ||
        maxPositions > 1 << 20)
        throw Error(where + ": model dimensions are implausibly large");
    variant.validate(where);
}

std::vector<std::string> BertConfig::presetNames()
{
    return {"bert-base", "bert-large", "bert-6l", "bert-small", "bert-mini", "bert-tiny"};
}

BertConfig BertConfig::preset(const std::string& name)
{
    BertConfig c; // defaults are bert-base-uncased
    if (name == "bert-base") return c;
    if (name == "bert-large") {
        c.hiddenSize = 1024, c.numLayers = 24, c.numHeads = 16, c.intermediateSize = 4096;
    } else if (name == "bert-6l") { // the paper's BERT-6L: bert-base width, 6 layers
        c.numLayers = 6;
    } else if (name == "bert-small") {
        c.hiddenSize = 512, c.numLayers = 4, c.numHeads = 8, c.intermediateSize = 2048;
    } else if (name == "bert-mini") {
        c.hiddenSize = 256, c.numLayers = 4, c.numHeads = 4, c.intermediateSize = 1024;
    } else if (name == "bert-tiny") {
        c.hiddenSize = 128, c.numLayers = 2, c.numHeads = 2, c.intermediateSize = 512;
    } else {
        std::string names;
        for (const auto& n : presetNames())
            names += (names.empty() ? "" : ", ") + n;
        throw Error("unknown model preset '" + name + "' (known: " + names + ")");
    }
    return c;
}

std::string BertConfig::toJson(const std::string& architecture) const
{
    nlohmann::json j;
    j["architectures"] = nlohmann::json::array({architecture});
    j["model_type"] = "bert";
    j["vocab_size"] = vocabSize;
    j["hidden_size"] = hiddenSize;
    j["num_hidden_layers"] = numLayers;
    j["num_attention_heads"] = numHeads;
    j["intermediate_size"] = intermediateSize;
    j["max_position_embeddings"] = maxPositions;
    j["type_vocab_size"] = typeVocabSize;
    j["pad_token_id"] = padTokenId;
    j["layer_norm_eps"] = layerNormEps;
    j["hidden_act"] = hiddenAct;
    j["position_embedding_type"] = "absolute";
    j["hidden_dropout_prob"] = hiddenDropout;
    j["attention_probs_dropout_prob"] = attentionDropout;
    j["initializer_range"] = 0.02;
    if (!id2label.empty()) {
        nlohmann::json id2, label2;
        for (std::size_t i = 0; i < id2label.size(); ++i) {
            id2[std::to_string(i)] = id2label[i];
            label2[id2label[i]] = i;
        }
        j["id2label"] = id2;
        j["label2id"] = label2;
    }
    addVariantToConfigJson(variant, j);
    return j.dump(2) + "\n";
}

} // namespace outlierlens
