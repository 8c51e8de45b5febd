#include "tasks/config/train_config.h"

#include "common/error.h"
#include "common/json_util.h"
#include "common/text_format.h"
#include "model/variant_fields.h"
#include "tasks/config/closest_name.h"
#include "tasks/config/train_fields.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>
#include <variant>

namespace outlierlens {
namespace {

using train_fields::FieldDef;
using train_fields::FieldRef;
using train_fields::fieldTable;

// ---- Enumerations as text -------------------------------------------------------------------

template<class E>
constexpr int enumCount();
template<>
constexpr int enumCount<TrainTask>()
{
    return 5;
}
template<>
constexpr int enumCount<ClmData>()
{
    return 2;
}
template<>
constexpr int enumCount<InitScheme>()
{
    return 2;
}
template<>
constexpr int enumCount<DecayKind>()
{
    return 3;
}
template<>
constexpr int enumCount<SoftmaxKind>()
{
    return 3;
}
template<>
constexpr int enumCount<GateKind>()
{
    return 4;
}
template<>
constexpr int enumCount<BiasKind>()
{
    return 4;
}
template<>
constexpr int enumCount<Precision>()
{
    return 2;
}

template<class E>
std::vector<std::string> enumNames()
{
    std::vector<std::string> names;
    for (int i = 0; i < enumCount<E>(); ++i)
        names.push_back(toString(E(i)));
    return names;
}

template<class E>
std::optional<E> enumFromName(const std::string& text)
{
    for (int i = 0; i < enumCount<E>(); ++i)
        if (toString(E(i)) == text) return E(i);
    return std::nullopt;
}

// ---- The field table ---------------------------------------------------------------------------

template<class T>
constexpr bool isEnum = std::is_enum_v<T>;

template<class T>
std::string typeName(T*)
{
    if constexpr (std::is_same_v<T, std::string>)
        return "text";
    else if constexpr (std::is_same_v<T, bool>)
        return "bool";
    else if constexpr (std::is_same_v<T, double>)
        return "number";
    else if constexpr (std::is_same_v<T, std::optional<double>>)
        return "number or none";
    else if constexpr (isEnum<T>)
        return "choice";
    else
        return "integer";
}

template<class T>
std::vector<std::string> choicesOf(T*)
{
    if constexpr (isEnum<T>)
        return enumNames<T>();
    else
        return {};
}

/// "an integer", "one of mlm, nli, image or synthetic", ... for messages.
template<class T>
std::string expectation(T* p)
{
    if constexpr (std::is_same_v<T, std::string>)
        return "a string";
    else if constexpr (std::is_same_v<T, bool>)
        return "true or false";
    else if constexpr (std::is_same_v<T, double>)
        return "a finite number";
    else if constexpr (std::is_same_v<T, std::optional<double>>)
        return "a finite number or none";
    else if constexpr (isEnum<T>)
        return "one of " + joinedText(choicesOf(p), ", ");
    else if constexpr (std::is_same_v<T, std::uint64_t>)
        return "a non-negative integer";
    else
        return "an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
               std::to_string(std::numeric_limits<T>::max()) + "]";
}

/// The value as a flag would take it.
template<class T>
std::string formatValue(const T& v)
{
    if constexpr (std::is_same_v<T, std::string>)
        return v;
    else if constexpr (std::is_same_v<T, bool>)
        return v ? "true" : "false";
    else if constexpr (std::is_same_v<T, double>)
        return numberText(v);
    else if constexpr (std::is_same_v<T, std::optional<double>>)
        return v ? numberText(*v) : "none";
    else if constexpr (isEnum<T>)
        return toString(v);
    else
        return std::to_string(v);
}

/// Parses flag text into *p; false if the text is not a value of the type.
template<class T>
bool setFromText(T* p, const std::string& text)
{
    if constexpr (std::is_same_v<T, std::string>) {
        *p = text;
        return true;
    } else if constexpr (std::is_same_v<T, bool>) {
        const auto v = switchFromText(text);
        if (v) *p = *v;
        return v.has_value();
    } else if constexpr (std::is_same_v<T, double>) {
        const auto v = numberFromText(text);
        if (v) *p = *v;
        return v.has_value();
    } else if constexpr (std::is_same_v<T, std::optional<double>>) {
        if (text == "none" || text == "null") {
            p->reset();
            return true;
        }
        const auto v = numberFromText(text);
        if (v) *p = *v;
        return v.has_value();
    } else if constexpr (isEnum<T>) {
        const auto v = enumFromName<T>(text);
        if (v) *p = *v;
        return v.has_value();
    } else {
        const auto v = integerFromText<T>(text);
        if (v) *p = *v;
        return v.has_value();
    }
}

/// Reads a JSON value into *p; false if it is not a value of the type.
template<class T>
bool setFromJson(T* p, const nlohmann::json& j)
{
    if constexpr (std::is_same_v<T, std::string>) {
        if (!j.is_string()) return false;
        *p = j.get<std::string>();
        return true;
    } else if constexpr (std::is_same_v<T, bool>) {
        if (!j.is_boolean()) return false;
        *p = j.get<bool>();
        return true;
    } else if constexpr (std::is_same_v<T, double>) {
        if (!j.is_number()) return false;
        *p = j.get<double>();
        return std::isfinite(*p);
    } else if constexpr (std::is_same_v<T, std::optional<double>>) {
        if (j.is_null()) {
            p->reset();
            return true;
        }
        if (!j.is_number() || !std::isfinite(j.get<double>())) return false;
        *p = j.get<double>();
        return true;
    } else if constexpr (isEnum<T>) {
        if (!j.is_string()) return false;
        const auto v = enumFromName<T>(j.get<std::string>());
        if (v) *p = *v;
        return v.has_value();
    } else {
        if (j.is_number_unsigned()) {
            const auto u = j.get<std::uint64_t>();
            if (u > std::uint64_t(std::numeric_limits<T>::max())) return false;
            *p = T(u);
            return true;
        }
        if (j.is_number_integer()) {
            const auto i = j.get<std::int64_t>();
            if (i < std::int64_t(std::numeric_limits<T>::min()) ||
                (i > 0 && std::uint64_t(i) > std::uint64_t(std::numeric_limits<T>::max())))
                return false;
            *p = T(i);
            return true;
        }
        if (j.is_number_float()) { // 1e6 written by hand
            const auto v = integerFromText<T>(numberText(j.get<double>()));
            if (v) *p = *v;
            return v.has_value();
        }
        return false;
    }
}

template<class T>
nlohmann::ordered_json toJson(const T& v)
{
    if constexpr (std::is_same_v<T, std::optional<double>>)
        return v ? nlohmann::ordered_json(*v) : nullptr;
    else if constexpr (isEnum<T>)
        return toString(v);
    else
        return v;
}

std::string normalizedFlag(std::string name)
{
    if (name.rfind("--", 0) == 0) name.erase(0, 2);
    std::replace(name.begin(), name.end(), '-', '_');
    return name;
}

/// Names users bring from Hugging Face's run_mlm.py and the paper's scripts, for suggestions only:
/// run.json stays strict.
std::string familiarFieldName(const std::string& key)
{
    static const std::vector<std::pair<std::string, std::string>> names = {
        {"learning_rate", "lr"},
        {"max_train_steps", "steps"},
        {"max_steps", "steps"},
        {"num_train_steps", "steps"},
        {"num_warmup_steps", "warmup_steps"},
        {"per_device_train_batch_size", "batch_size"},
        {"train_batch_size", "batch_size"},
        {"max_grad_norm", "grad_clip"},
        {"adam_epsilon", "adam_eps"},
        {"adam_beta1", "beta1"},
        {"adam_beta2", "beta2"},
        {"mlm_probability", "mask_probability"},
        {"lr_scheduler_type", "decay"},
        {"output_dir", "output"},
        {"train_file", "corpus"},
        {"tokenizer_name", "tokenizer"},
        {"block_size", "seq_length"},
        {"validation_file", "valid_corpus"},
        {"model_name_or_path", "init"},
        {"config_name", "preset"},
        {"num_hidden_layers", "num_layers"},
        {"num_attention_heads", "num_heads"},
        {"attn_softmax", "softmax"},
        {"attn_gate_type", "gate"},
        {"attn_gate_init", "pi_init"},
        {"hidden_dropout_prob", "dropout"},
        {"wd_ln_gamma", "layer_norm_decay"},
    };
    for (const auto& [familiar, ours] : names)
        if (key == familiar) return ours;
    return "";
}

std::vector<std::string> fieldNames()
{
    std::vector<std::string> names;
    for (const FieldDef& f : fieldTable())
        names.push_back(f.name);
    return names;
}

/// The known field to suggest for an unknown key or flag.
std::string suggestedField(const std::string& typed)
{
    std::string key = normalizedFlag(typed);
    std::transform(key.begin(), key.end(), key.begin(),
                   [](unsigned char ch) { return char(std::tolower(ch)); });
    const std::string familiar = familiarFieldName(key);
    return familiar.empty() ? closestName(key, fieldNames()) : familiar;
}

const FieldDef* findField(const std::string& name)
{
    for (const FieldDef& f : fieldTable())
        if (name == f.name) return &f;
    return nullptr;
}

} // namespace

std::string toString(TrainTask task)
{
    switch (task) {
    case TrainTask::MaskedLm:
        return "mlm";
    case TrainTask::Nli:
        return "nli";
    case TrainTask::Image:
        return "image";
    case TrainTask::Synthetic:
        return "synthetic";
    case TrainTask::CausalLm:
        return "clm";
    }
    return "mlm";
}

std::string toString(ClmData data)
{
    return data == ClmData::BigramBackcopy ? "bigram-backcopy" : "text";
}

std::string toString(InitScheme scheme)
{
    return scheme == InitScheme::PyTorch ? "pytorch" : "hf";
}

CapturePoint figureTensorOf(TrainTask task)
{
    return figureTensor(task == TrainTask::Image ? InputKind::Image : InputKind::Text,
                        task == TrainTask::CausalLm);
}

std::vector<CapturePoint> kurtosisTensorsOf(TrainTask task)
{
    return kurtosisTensors(task == TrainTask::Image ? InputKind::Image : InputKind::Text,
                           task == TrainTask::CausalLm);
}

TrainTask parseTrainTask(const std::string& text)
{
    if (const auto task = enumFromName<TrainTask>(text)) return *task;
    throw Error("unknown task '" + text + "' (expected " + joinedText(enumNames<TrainTask>(), ", ") + ")");
}

const std::vector<TrainFieldInfo>& trainFields()
{
    static const std::vector<TrainFieldInfo> fields = [] {
        std::vector<TrainFieldInfo> out;
        TrainConfig defaults;
        for (const FieldDef& f : fieldTable()) {
            TrainFieldInfo info;
            info.name = f.name;
            info.group = f.group;
            info.help = f.help;
            std::visit(
                [&](auto* p) {
                    info.type = typeName(p);
                    info.choices = choicesOf(p);
                    info.defaultText = formatValue(*p);
                },
                f.ref(defaults));
            out.push_back(std::move(info));
        }
        return out;
    }();
    return fields;
}

TrainConfig parseTrainConfig(const std::string& jsonText, const std::string& where)
{
    const nlohmann::json j = jsonutil::parseText(jsonText, where);
    if (!j.is_object())
        throw Error(where + ": expected a JSON object of training settings, found " + j.type_name());
    TrainConfig config;
    for (auto it = j.begin(); it != j.end(); ++it) {
        const FieldDef* field = findField(it.key());
        if (!field)
            throw Error(where + ": unknown field '" + it.key() + "' (did you mean '" +
                        suggestedField(it.key()) + "'?)");
        std::visit(
            [&](auto* p) {
                if (!setFromJson(p, *it))
                    throw Error(where + ": field '" + it.key() + "' must be " + expectation(p) + ", found " +
                                it->dump());
            },
            field->ref(config));
    }
    return config;
}

std::string trainConfigToJson(const TrainConfig& config)
{
    TrainConfig copy = config; // the table hands out mutable pointers
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const FieldDef& f : fieldTable())
        std::visit([&](auto* p) { j[f.name] = toJson(*p); }, f.ref(copy));
    return j.dump(2) + "\n";
}

void applyTrainFlag(TrainConfig& config, const std::string& name, const std::string& value)
{
    const std::string key = normalizedFlag(name);
    const std::string shown = "--" + (name.rfind("--", 0) == 0 ? name.substr(2) : name);
    if (key == "attention") { // An et al.'s names, a shorthand for softmax, bias or context_scale
        try {
            applyNamedVariant(config.variant, value);
        } catch (const Error& e) {
            throw Error(shown + ": " + e.what());
        }
        return;
    }
    const FieldDef* field = findField(key);
    if (!field) throw Error("unknown option " + shown + " (did you mean --" + suggestedField(key) + "?)");
    std::visit(
        [&](auto* p) {
            if (!setFromText(p, value))
                throw Error(shown + ": expected " + expectation(p) + ", found '" + value + "'");
        },
        field->ref(config));
}

} // namespace outlierlens
