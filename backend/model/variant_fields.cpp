#include "model/variant_fields.h"

#include "common/error.h"
#include "common/json_util.h"
#include "common/text_format.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <type_traits>

namespace outlierlens {
namespace {

#define OL_VARIANT_MEMBER(member) [](AttentionVariant& v) -> VariantRef { return &v.member; }

bool always(const AttentionVariant&)
{
    return true;
}
bool clipped(const AttentionVariant& v)
{
    return v.softmax == SoftmaxKind::Clipped;
}
bool alphaRule(const AttentionVariant& v)
{
    return v.softmax == SoftmaxKind::Clipped && v.alpha.has_value();
}
bool perQuery(const AttentionVariant& v)
{
    return v.softmax == SoftmaxKind::Clipped && v.clipPerQuery;
}
bool gated(const AttentionVariant& v)
{
    return v.gate != GateKind::None;
}
bool mlpGate(const AttentionVariant& v)
{
    return v.gate == GateKind::Mlp;
}
bool biased(const AttentionVariant& v)
{
    return v.bias != BiasKind::None;
}
bool scaled(const AttentionVariant& v)
{
    return v.contextScale;
}

template<class E>
E enumFromText(const std::string& text)
{
    if constexpr (std::is_same_v<E, SoftmaxKind>)
        return parseSoftmaxKind(text);
    else if constexpr (std::is_same_v<E, GateKind>)
        return parseGateKind(text);
    else
        return parseBiasKind(text);
}

template<class T>
void readJson(T* p, const nlohmann::json& block, const char* key, const std::string& where)
{
    using namespace jsonutil;
    if constexpr (std::is_same_v<T, double>) {
        *p = getNumber(block, key, where);
    } else if constexpr (std::is_same_v<T, int>) {
        *p = getInt32(block, key, where);
    } else if constexpr (std::is_same_v<T, std::optional<double>>) {
        if (block[key].is_null())
            p->reset();
        else
            *p = getNumber(block, key, where);
    } else if constexpr (std::is_same_v<T, bool>) {
        *p = getBool(block, key, where);
    } else {
        const std::string text = getString(block, key, where);
        try {
            *p = enumFromText<T>(text);
        } catch (const Error& e) {
            throw Error(where + ": \"outlierlens\": " + e.what());
        }
    }
}

template<class T>
nlohmann::json toJson(const T& v)
{
    if constexpr (std::is_same_v<T, std::optional<double>>)
        return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
    else if constexpr (std::is_enum_v<T>)
        return toString(v);
    else
        return v;
}

} // namespace

const std::vector<VariantField>& variantFields()
{
    static const std::vector<VariantField> table = {
        {"softmax", "attention softmax: vanilla, clipped, or sigmoid (An et al.'s, decoders only)",
         OL_VARIANT_MEMBER(softmax), always},
        {"gamma", "clipped softmax: lower stretch gamma <= 0 (or give alpha)", OL_VARIANT_MEMBER(gamma),
         clipped},
        {"zeta", "clipped softmax: upper stretch zeta >= 1", OL_VARIANT_MEMBER(zeta), clipped},
        {"alpha", "clipped softmax: gamma = -alpha / T instead of gamma (none: use gamma)",
         OL_VARIANT_MEMBER(alpha), alphaRule},
        {"max_seq_length",
         "T of the alpha rule, the training sequence length (0 in train: seq_length for BERT and clm, "
         "patches + 1 for ViT)",
         OL_VARIANT_MEMBER(maxSeqLength), alphaRule},
        {"clip_per_query",
         "clipped softmax with alpha, decoders only: gamma = -alpha / (keys the query sees), t + 1 at "
         "position t, not -alpha / T (not the papers' rule)",
         OL_VARIANT_MEMBER(clipPerQuery), perQuery},
        {"gate", "gated attention: none, linear or mlp (per head), all_heads_linear", OL_VARIANT_MEMBER(gate),
         gated},
        {"n_hid", "mlp gate: hidden units", OL_VARIANT_MEMBER(nHid), mlpGate},
        {"pi_init", "gated attention: initial gate probability, in (0, 1)", OL_VARIANT_MEMBER(piInit), gated},
        {"bias", "An et al.'s bias variant, decoders only: none, fixed, context or attention",
         OL_VARIANT_MEMBER(bias), biased},
        {"context_scale", "An et al.'s context-scale gate, decoders only: true or false",
         OL_VARIANT_MEMBER(contextScale), scaled},
    };
    return table;
}

#undef OL_VARIANT_MEMBER

const std::vector<std::string>& namedVariants()
{
    static const std::vector<std::string> names = {"softmax",        "fixed-bias",    "context-bias",
                                                   "attention-bias", "context-scale", "sigmoid"};
    return names;
}

void applyNamedVariant(AttentionVariant& v, const std::string& name)
{
    if (name == "softmax" || name == "default")
        return;
    else if (name == "fixed-bias")
        v.bias = BiasKind::Fixed;
    else if (name == "context-bias")
        v.bias = BiasKind::Context;
    else if (name == "attention-bias")
        v.bias = BiasKind::Attention;
    else if (name == "context-scale")
        v.contextScale = true;
    else if (name == "sigmoid")
        v.softmax = SoftmaxKind::Sigmoid;
    else
        throw Error("unknown variant '" + name + "' (expected one of " + joinedText(namedVariants()) + ")");
}

const VariantField* findVariantField(const std::string& key)
{
    for (const VariantField& f : variantFields())
        if (key == f.key) return &f;
    return nullptr;
}

void setVariantField(AttentionVariant& v, const VariantField& field, const std::string& text)
{
    std::visit(
        [&](auto* p) {
            using T = std::remove_pointer_t<decltype(p)>;
            if constexpr (std::is_same_v<T, double> || std::is_same_v<T, std::optional<double>>) {
                if constexpr (std::is_same_v<T, std::optional<double>>) {
                    if (text == "none") {
                        p->reset();
                        return;
                    }
                }
                const std::optional<double> x = numberFromText(text);
                if (!x) throw Error("expected a finite number, found '" + text + "'");
                *p = *x;
            } else if constexpr (std::is_same_v<T, int>) {
                const std::optional<int> n = integerFromText<int>(text);
                if (!n) throw Error("expected an integer, found '" + text + "'");
                *p = *n;
            } else if constexpr (std::is_same_v<T, bool>) {
                const std::optional<bool> b = switchFromText(text);
                if (!b) throw Error("expected true or false, found '" + text + "'");
                *p = *b;
            } else {
                *p = enumFromText<T>(text);
            }
        },
        field.ref(v));
}

AttentionVariant variantFromConfigJson(const nlohmann::json& config, const std::string& where)
{
    if (!config.contains("outlierlens") || config["outlierlens"].is_null()) return {};
    const nlohmann::json& block = config["outlierlens"];
    if (!block.is_object()) throw Error(where + ": \"outlierlens\" must be an object");
    AttentionVariant v;
    for (const VariantField& f : variantFields())
        if (block.contains(f.key)) std::visit([&](auto* p) { readJson(p, block, f.key, where); }, f.ref(v));
    // An et al.'s Table-2 names as one field, as their scripts call them.
    const std::string named = jsonutil::getString(block, "variant", where, std::string());
    try {
        if (!named.empty()) applyNamedVariant(v, named);
    } catch (const Error& e) {
        throw Error(where + ": \"outlierlens\": " + e.what());
    }
    if (v.alpha && block.contains("gamma") && std::abs(v.effectiveGamma() - v.gamma) > 1e-9)
        throw Error(where + ": \"outlierlens\" gives both alpha " + numberText(*v.alpha) +
                    " (gamma = -alpha/" + std::to_string(v.maxSeqLength) + " = " +
                    numberText(v.effectiveGamma()) + ") and a different gamma " + numberText(v.gamma));
    v = v.withAlphaResolved();
    v.validate(where);
    return v;
}

void addVariantToConfigJson(const AttentionVariant& variant, nlohmann::json& config)
{
    if (variant.isVanilla()) return;
    AttentionVariant v = variant.withAlphaResolved(); // gamma as used: -alpha / T
    nlohmann::json block = nlohmann::json::object();
    for (const VariantField& f : variantFields())
        if (f.recorded(v)) std::visit([&](auto* p) { block[f.key] = toJson(*p); }, f.ref(v));
    config["outlierlens"] = block;
}

bool VariantOverride::empty() const
{
    return fields.empty();
}

void VariantOverride::set(const std::string& key, const std::string& text)
{
    const VariantField* field = findVariantField(key);
    if (!field) throw Error("unknown attention-variant field '" + key + "'");
    AttentionVariant scratch;
    setVariantField(scratch, *field, text); // refuses text that is not a value now, not at load time
    for (auto& [k, t] : fields)
        if (k == key) {
            t = text;
            return;
        }
    fields.emplace_back(key, text);
}

AttentionVariant VariantOverride::applyTo(AttentionVariant v) const
{
    // In the table's order, so that --gamma after --softmax makes the softmax clipped either way.
    for (const VariantField& f : variantFields())
        for (const auto& [key, text] : fields) {
            if (key != f.key) continue;
            setVariantField(v, f, text);
            if (key == "gamma") v.alpha.reset();
            if (key == "gamma" || key == "zeta" || key == "alpha") v.softmax = SoftmaxKind::Clipped;
        }
    v = v.withAlphaResolved();
    v.validate("command-line variant");
    return v;
}

} // namespace outlierlens
