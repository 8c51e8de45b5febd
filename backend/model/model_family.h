#pragma once
// Any thread: plain values, no torch (the GUI and the command line read a model folder's family cheaply).
//
// The registry of model families (DESIGN.md "Model families"): one row per family says what it is, found
// from config.json's `model_type`, `architectures` or timm's `architecture`, as Hugging Face's
// CONFIG_MAPPING_NAMES and llama.cpp's arch table do. Inspection, statistics, figures, training, the
// command line and the GUI ask a row what they need (its input, whether it is causal, its default data,
// its sink tokens) and never compare family names. A family's config reader and forward pass live in
// its own files; `engine` says which network code runs it.

#include <string>
#include <vector>

namespace outlierlens {

/// What a model reads: token sequences (BERT, decoders) or images (ViT, cut into patches).
enum class InputKind { Text, Image };

/// The network code that runs a family: a family of decoders shares the decoder's layers and its
/// config reader (backend/model/decoder_config.h) selects the family's computation.
enum class FamilyEngine { Bert, Vit, Decoder };

struct ModelFamily
{
    std::string id;   ///< config.json model_type as Hugging Face writes it: "bert", "vit", "gpt2", ...
    std::string name; ///< for people: "BERT", "ViT", "GPT-2", "OPT", "LLaMA"
    FamilyEngine engine = FamilyEngine::Bert;
    InputKind input = InputKind::Text;
    bool sentencePairs = false; ///< reads "[CLS] premise [SEP] hypothesis [SEP]" (BERT over MNLI)
    bool causal = false;        ///< keys after the query are masked (decoders)
    /// Other model_type values of the family, and the `architectures` names that identify it when a
    /// config has no model_type (exact names, or prefixes ending in '*').
    std::vector<std::string> aliases, architectures;
    /// Its sink tokens (docs/metrics.md "Sink tokens"), as captions name them.
    std::string sinkTokens;
    /// The data `stats` and the app's statistics use when none is given: a data spec whose path is
    /// relative to sample_data/ ("mnli:mnli/mnli_dev_matched.jsonl:1000"; "images:images").
    std::string defaultData;
    /// The bundled demo trio a model of the family is compared with ("backcopy": models/backcopy-*).
    std::string demoTrio;
    /// Its checkpoints store linear weights as [in, out] (GPT-2's Conv1D), not nn.Linear's [out, in].
    bool conv1dWeights = false;

    bool takesText() const { return input == InputKind::Text; }
    bool takesImages() const { return input == InputKind::Image; }
};

/// Every family, in the order of the table (backend/model/model_family.cpp).
const std::vector<ModelFamily>& modelFamilies();

/// The family with this id; an Error naming the known ids otherwise.
const ModelFamily& modelFamily(const std::string& id);

/// The family of a model folder from <dir>/config.json: its model_type, else its `architectures`, else
/// timm's `architecture` (a ViT). An Error names the folder, what the config says, and the families known.
const ModelFamily& modelFamilyOfDir(const std::string& modelDir);

/// True when modelFamilyOfDir() would find a family of this engine (no error for other folders).
bool isModelDirOf(const std::string& modelDir, FamilyEngine engine);

} // namespace outlierlens
