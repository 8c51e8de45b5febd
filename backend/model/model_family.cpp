#include "model/model_family.h"
#include "model/model_family_json.h"

#include "common/error.h"
#include "common/json_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

namespace outlierlens {

namespace {

// The table. A new family: its config reader and layers in its own files, and one row here.
// Fields in ModelFamily's order: id, name, engine, input, sentence pairs, causal, model_type aliases,
// architectures, sink tokens, default data, demo trio, Conv1D weights.
// clang-format off
const std::vector<ModelFamily> kFamilies = {
    {"bert", "BERT", FamilyEngine::Bert, InputKind::Text, true, false, {}, {"Bert*"},
     "[CLS], [SEP] and punctuation", "mnli:mnli/mnli_dev_matched.jsonl:1000", "bert-mnli", false},
    {"vit", "ViT", FamilyEngine::Vit, InputKind::Image, false, false, {}, {"ViT*"},
     "[CLS] and background patches", "images:images", "vit-fmnist", false},
    {"dinov2", "DINOv2", FamilyEngine::Vit, InputKind::Image, false, false, {"dinov2_with_registers"},
     {"Dinov2Model", "Dinov2WithRegistersModel"},
     "[CLS], registers and high-norm background patches", "images:images", "vit-fmnist", false},
    {"clip_vision", "CLIP vision", FamilyEngine::Vit, InputKind::Image, false, false,
     {"clip_vision_model", "clip"}, {"CLIPVisionModel*", "CLIPModel"},
     "[CLS] and high-norm background patches", "images:images", "vit-fmnist", false},
    {"gpt2", "GPT-2", FamilyEngine::Decoder, InputKind::Text, false, true, {}, {"GPT2LMHeadModel", "GPT2Model"},
     "the first token, punctuation and newlines", "text:text/wiki_en_valid.txt:100", "backcopy", true},
    {"opt", "OPT", FamilyEngine::Decoder, InputKind::Text, false, true, {}, {"OPTForCausalLM", "OPTModel"},
     "the first token, punctuation and newlines", "text:text/wiki_en_valid.txt:100", "backcopy", false},
    {"llama", "LLaMA", FamilyEngine::Decoder, InputKind::Text, false, true, {}, {"LlamaForCausalLM", "LlamaModel"},
     "the first token, punctuation and newlines", "text:text/wiki_en_valid.txt:100", "backcopy", false},
    {"qwen2", "Qwen2", FamilyEngine::Decoder, InputKind::Text, false, true, {}, {"Qwen2ForCausalLM", "Qwen2Model"},
     "the first token, punctuation and newlines", "text:text/wiki_en_valid.txt:100", "backcopy", false},
    {"qwen3", "Qwen3", FamilyEngine::Decoder, InputKind::Text, false, true, {}, {"Qwen3ForCausalLM", "Qwen3Model"},
     "the first token, punctuation and newlines", "text:text/wiki_en_valid.txt:100", "backcopy", false},
    {"mistral", "Mistral", FamilyEngine::Decoder, InputKind::Text, false, true, {},
     {"MistralForCausalLM", "MistralModel"},
     "the first token, punctuation and newlines", "text:text/wiki_en_valid.txt:100", "backcopy", false},
    {"gemma2", "Gemma 2", FamilyEngine::Decoder, InputKind::Text, false, true, {}, {"Gemma2ForCausalLM", "Gemma2Model"},
     "the first token, punctuation and newlines", "text:text/wiki_en_valid.txt:100", "backcopy", false},
    {"phi", "Phi", FamilyEngine::Decoder, InputKind::Text, false, true, {}, {"PhiForCausalLM", "PhiModel"},
     "the first token, punctuation and newlines", "text:text/wiki_en_valid.txt:100", "backcopy", false},
    {"gpt_neox", "GPT-NeoX (Pythia)", FamilyEngine::Decoder, InputKind::Text, false, true, {},
     {"GPTNeoXForCausalLM", "GPTNeoXModel"},
     "the first token, punctuation and newlines", "text:text/wiki_en_valid.txt:100", "backcopy", false},
    {"falcon", "Falcon", FamilyEngine::Decoder, InputKind::Text, false, true, {}, {"FalconForCausalLM", "FalconModel"},
     "the first token, punctuation and newlines", "text:text/wiki_en_valid.txt:100", "backcopy", false},
};
// clang-format on

bool matches(const std::string& pattern, const std::string& name)
{
    if (!pattern.empty() && pattern.back() == '*')
        return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
    return name == pattern;
}

std::string knownFamilies()
{
    std::string text;
    for (const ModelFamily& f : kFamilies)
        text += (text.empty() ? "" : ", ") + f.id;
    return text;
}

} // namespace

const ModelFamily& modelFamilyOfConfig(const nlohmann::json& j, const std::string& path)
{
    if (!j.is_object()) throw Error(path + ": expected a JSON object");
    const std::string type = jsonutil::getString(j, "model_type", path, std::string());
    std::vector<std::string> architectures;
    if (j.contains("architectures") && j["architectures"].is_array())
        for (const auto& a : j["architectures"])
            if (a.is_string()) architectures.push_back(a.get<std::string>());
    for (const ModelFamily& f : kFamilies)
        if (!type.empty() &&
            (f.id == type || std::find(f.aliases.begin(), f.aliases.end(), type) != f.aliases.end()))
            return f;
    for (const std::string& a : architectures)
        for (const ModelFamily& f : kFamilies)
            for (const std::string& pattern : f.architectures)
                if (matches(pattern, a)) return f;
    if (type.empty() && j.contains("architecture")) return modelFamily("vit"); // timm's config.json
    std::string archText;
    for (const std::string& a : architectures)
        archText += (archText.empty() ? "" : ", ") + a;
    throw Error(path + ": unknown model family (model_type '" + type + "', architectures [" + archText +
                "]); OutlierLens knows " + knownFamilies());
}

const std::vector<ModelFamily>& modelFamilies()
{
    return kFamilies;
}

const ModelFamily& modelFamily(const std::string& id)
{
    for (const ModelFamily& f : kFamilies)
        if (f.id == id) return f;
    throw Error("unknown model family '" + id + "'; OutlierLens knows " + knownFamilies());
}

const ModelFamily& modelFamilyOfDir(const std::string& modelDir)
{
    const std::string path = (std::filesystem::path(modelDir) / "config.json").string();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        throw Error(modelDir +
                    ": no config.json in this folder (expected a Hugging Face or timm model folder)");
    return modelFamilyOfConfig(jsonutil::parseFile(path), path);
}

bool isModelDirOf(const std::string& modelDir, FamilyEngine engine)
{
    try {
        return modelFamilyOfDir(modelDir).engine == engine;
    } catch (const Error&) {
        return false;
    }
}

} // namespace outlierlens
