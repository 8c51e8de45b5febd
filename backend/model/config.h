#pragma once
// Any thread: plain values.

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace outlierlens {

/// Sigmoid: An et al.'s sigmoid attention, sigmoid(QK^T/sqrt(d) - log T) (decoders only).
enum class SoftmaxKind { Vanilla, Clipped, Sigmoid };
enum class GateKind { None, Linear, Mlp, AllHeadsLinear };
/// An et al. 2025's bias variants (their Table 2; decoders only): Fixed adds a learnt v' to P.V,
/// Context adds softmax(Q[K^T k'])[0; v'^T], Attention prepends a learnt key k' and value v' slot.
enum class BiasKind { None, Fixed, Context, Attention };

/// The attention variant of DESIGN.md, as recorded under "outlierlens" in config.json.
struct AttentionVariant
{
    SoftmaxKind softmax = SoftmaxKind::Vanilla;
    double gamma = 0.0;          ///< clipped softmax lower stretch, <= 0
    double zeta = 1.0;           ///< clipped softmax upper stretch, >= 1
    std::optional<double> alpha; ///< if set, gamma = -alpha / maxSeqLength
    int maxSeqLength = 0;        ///< T of the alpha rule: the training sequence length, not the batch's
    /// Clipped softmax with alpha, decoders only (not the papers' rule): each query's gamma is
    /// -alpha / (the keys it sees), t + 1 at position t, instead of -alpha / T for every query.
    bool clipPerQuery = false;
    GateKind gate = GateKind::None;
    int nHid = 0;                   ///< hidden units of the "mlp" gate
    double piInit = 0.25;           ///< initial gate probability (bias = logit(pi_init)) for new models
    BiasKind bias = BiasKind::None; ///< An et al.'s fixed-/context-/attention-bias (decoders only)
    bool contextScale = false;      ///< An et al.'s context-scale: 2 sigmoid(Linear(x)) per head times P.V

    bool isVanilla() const
    {
        return softmax == SoftmaxKind::Vanilla && gate == GateKind::None && bias == BiasKind::None &&
               !contextScale;
    }
    /// True for the variants only the decoders implement (sigmoid attention, bias variants, context scale).
    bool isDecoderOnly() const
    {
        return softmax == SoftmaxKind::Sigmoid || bias != BiasKind::None || contextScale ||
               (softmax == SoftmaxKind::Clipped && clipPerQuery);
    }
    /// The gamma actually used: -alpha / maxSeqLength when alpha is set, else gamma.
    double effectiveGamma() const;
    /// The alpha rule resolved, the one place it is: with alpha set, T = maxSeqLength, or
    /// `trainingLength` when maxSeqLength is not given (<= 0), and gamma = -alpha / T. Without alpha,
    /// the variant unchanged.
    AttentionVariant withAlphaResolved(int trainingLength = 0) const;
    /// Clipped softmax faded in: gamma and zeta - 1 times `strength` in [0, 1] (0: the plain softmax),
    /// for the warm-up of training's clip_warmup_steps. Other variants are returned unchanged.
    AttentionVariant clipFadedIn(double strength) const;
    /// Throws Error (prefixed by `where`) for gamma > 0, zeta < 1, alpha without max_seq_length, ...
    void validate(const std::string& where) const;
    /// Short human description, e.g. "clipped softmax (gamma -0.025, zeta 1)" or "gated attention (linear)".
    std::string describe() const;
};

std::string toString(SoftmaxKind kind);
std::string toString(GateKind kind);
std::string toString(BiasKind kind);
/// Parses "vanilla"/"clipped"/"sigmoid", "none"/"linear"/"mlp"/"all_heads_linear" and
/// "none"/"fixed"/"context"/"attention"; throws Error otherwise.
SoftmaxKind parseSoftmaxKind(const std::string& text);
GateKind parseGateKind(const std::string& text);
BiasKind parseBiasKind(const std::string& text);

/// The "outlierlens" block of a config.json object (vanilla when absent); errors name `where`.
/// Both are written with the table of model/variant_fields.h (variant_fields.cpp).
AttentionVariant variantFromConfigJson(const nlohmann::json& config, const std::string& where);
/// Adds the "outlierlens" block to a config.json object unless the variant is vanilla.
void addVariantToConfigJson(const AttentionVariant& variant, nlohmann::json& config);

/// Command-line overrides of a checkpoint's variant (for checkpoints trained elsewhere): fields of
/// model/variant_fields.h as text, e.g. {"softmax", "clipped"}, {"gamma", "-0.025"}.
struct VariantOverride
{
    std::vector<std::pair<std::string, std::string>> fields;

    bool empty() const;
    /// Records `key` = `text`; throws Error for an unknown key or text that is not a value of the field.
    void set(const std::string& key, const std::string& text);
    /// Returns `base` with the given fields replaced (gamma, zeta or alpha also make the softmax
    /// clipped; gamma drops alpha); the result is validated.
    AttentionVariant applyTo(AttentionVariant base) const;
};

/// Hugging Face BertConfig fields we use (config.json), plus the "outlierlens" variant block.
struct BertConfig
{
    int vocabSize = 30522;
    int hiddenSize = 768;
    int numLayers = 12;
    int numHeads = 12;
    int intermediateSize = 3072;
    int maxPositions = 512;
    int typeVocabSize = 2;
    int padTokenId = 0;
    double layerNormEps = 1e-12;
    double hiddenDropout = 0.1;    ///< hidden_dropout_prob (training only)
    double attentionDropout = 0.1; ///< attention_probs_dropout_prob (training only)
    std::string hiddenAct = "gelu";
    std::vector<std::string> id2label; ///< index = class id; empty for models without a classifier
    std::vector<std::string> architectures;
    AttentionVariant variant;

    int headDim() const { return hiddenSize / numHeads; }
    /// Reads and validates a Hugging Face config.json. Errors name the file and the field.
    static BertConfig fromFile(const std::string& path);
    /// Named sizes for benchmarks and new models: "bert-base", "bert-large", "bert-6l", "bert-small",
    /// "bert-mini", "bert-tiny" (the Google BERT miniatures' shapes). Throws Error for unknown names.
    static BertConfig preset(const std::string& name);
    static std::vector<std::string> presetNames();
    /// A config.json that Hugging Face's BertConfig reads back, with the variant block when not vanilla.
    std::string toJson(const std::string& architecture) const;
    void validate(const std::string& where) const;
};

} // namespace outlierlens
