#pragma once
// Any thread: plain values and pure functions (the tables are built once, thread-safely).

#include "analysis/figure_tensor.h"
#include "model/config.h"
#include "model/decoder_config.h"
#include "model/precision.h"
#include "model/vit_config.h"
#include "tasks/config/lr_schedule.h"

#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens {

/// What a run trains.
enum class TrainTask {
    MaskedLm,  ///< "mlm": BERT masked language model on a text corpus
    Nli,       ///< "nli": BERT sentence-pair classifier on MNLI
    Image,     ///< "image": ViT classifier on Fashion-MNIST or an image folder
    Synthetic, ///< "synthetic": BERT-style encoder on a generated toy task
    CausalLm,  ///< "clm": causal decoder LLM (GPT-2, OPT, LLaMA shapes) on a text file
};

/// "mlm", "nli", "image", "synthetic", "clm".
std::string toString(TrainTask task);

/// Where task clm's sequences come from.
enum class ClmData {
    Text,           ///< "text": blocks of the corpus file, as run_clm.py
    BigramBackcopy, ///< "bigram-backcopy": generated from the corpus' character bigrams (Guo et al. 2024;
                    ///< tasks/data/bigram_backcopy.h), fresh sequences every step
};
/// "text", "bigram-backcopy".
std::string toString(ClmData data);

/// How task clm draws a new decoder's weights.
enum class InitScheme {
    HuggingFace, ///< "hf": the family's _init_weights: normal(0, 0.02) matrices and embeddings, zero biases
    PyTorch,     ///< "pytorch": PyTorch's module defaults: nn.Linear uniform(+-1/sqrt(fan_in)) weights and
                 ///< biases, nn.Embedding normal(0, 1); what small-model studies (Guo et al. 2024) train from
};
/// "hf", "pytorch".
std::string toString(InitScheme scheme);
/// Parses the names of toString(); throws Error listing them otherwise.
TrainTask parseTrainTask(const std::string& text);
/// The tensor whose per-layer max inf norm is a run's (figureTensor() of the task's model family:
/// ffn_out for the BERT tasks, out for image and clm), and those averaged into its avg kurtosis.
CapturePoint figureTensorOf(TrainTask task);
std::vector<CapturePoint> kurtosisTensorsOf(TrainTask task);

/// Everything `outlierlens train` needs. Every field is a key of run.json and a command-line flag
/// (--name for key "name"); the names, types, help and defaults are in trainFields(). Defaults are
/// the initialisers below. Steps are optimizer steps, counted from 0 in the schedule.
struct TrainConfig
{
    // Task and data
    TrainTask task = TrainTask::MaskedLm; ///< "task"
    std::string output;                   ///< "output": run folder
    std::string corpus;                   ///< "corpus": mlm and clm training text
    std::string validCorpus;              ///< "valid_corpus": mlm and clm held-out text
    std::string data;      ///< "data": nli: MNLI file; image: "fashion-mnist" or an image folder
    std::string vocab;     ///< "vocab": BERT vocab.txt (empty: sample_data/bert/vocab.txt)
    std::string tokenizer; ///< "tokenizer": clm: decoder tokenizer folder (vocab.json + merges.txt or
                           ///< tokenizer.model)
    std::string
        init; ///< "init": nli: pre-trained model folder to start from (required); clm: decoder to continue
    std::int64_t nliTrainPairs = 8000; ///< "nli_train_pairs"
    ClmData clmData = ClmData::Text;   ///< "clm_data"

    // Model
    std::string
        preset; ///< "preset": model size (bert-mini, ..., vit-fmnist, ...); empty: defaultModelPreset()
    int hiddenSize = 0;       ///< "hidden_size"; 0 = from the preset (also the next three)
    int numLayers = 0;        ///< "num_layers"
    int numHeads = 0;         ///< "num_heads"
    int intermediateSize = 0; ///< "intermediate_size"
    int seqLength = 128;      ///< "seq_length": tokens per sequence (BERT tasks) or block (clm)
    int imageSize = 0;        ///< "image_size": pixels; 0 = from the preset (image task)
    int patchSize = 0;        ///< "patch_size": pixels; 0 = from the preset (image task)
    InitScheme initScheme = InitScheme::HuggingFace; ///< "init_scheme": clm: how new weights are drawn
    bool tieWordEmbeddings = true; ///< "tie_word_embeddings": clm: LM head shares the token embeddings
    /// Keys and flags "softmax", "gamma", "zeta", "alpha", "max_seq_length", "gate", "n_hid",
    /// "pi_init". As given: gamma is not derived from alpha here (see trainBertConfig()).
    AttentionVariant variant;
    std::int64_t clipWarmupSteps =
        0; ///< "clip_warmup_steps": clm, image, synthetic: clipped softmax faded in over these steps

    // Optimization
    std::int64_t steps = 1000;             ///< "steps"
    int batchSize = 32;                    ///< "batch_size"
    double lr = 1e-3;                      ///< "lr": peak learning rate
    double weightDecay = 0.01;             ///< "weight_decay" (AdamW, decoupled)
    double beta1 = 0.9;                    ///< "beta1"
    double beta2 = 0.999;                  ///< "beta2"
    double adamEps = 1e-8;                 ///< "adam_eps"
    std::int64_t warmupSteps = 100;        ///< "warmup_steps"
    DecayKind decay = DecayKind::Linear;   ///< "decay"
    double gradClip = 1.0;                 ///< "grad_clip": max total L2 norm; 0 = no clipping
    double maskProbability = 0.15;         ///< "mask_probability" (mlm)
    double dropout = 0.1;                  ///< "dropout"
    bool augment = true;                   ///< "augment" (image)
    bool layerNormDecay = false;           ///< "layer_norm_decay": weight decay on LayerNorm weights too
    Precision precision = Precision::Fp32; ///< "precision": fp32, or bf16 autocast mixed precision

    // Logging, evaluation, checkpoints, reproducibility
    std::int64_t logEvery = 10;         ///< "log_every"
    std::int64_t evalEvery = 200;       ///< "eval_every"
    std::int64_t checkpointEvery = 500; ///< "checkpoint_every"
    int evalBatches = 8;                ///< "eval_batches"
    int keepCheckpoints = 2;            ///< "keep_checkpoints"
    std::uint64_t seed = 0;             ///< "seed"
    int threads = 0;                    ///< "threads": LibTorch intra-op threads; 0 = all cores (/ processes)
    int worldSize = 1;                  ///< "world_size": processes training together; batch_size is global

    // Synthetic task options (task "synthetic"; tasks/data/synthetic_data.h explains the task)
    int syntheticVocab = 64;      ///< "synthetic_vocab": vocabulary size
    int syntheticMinLength = 0;   ///< "synthetic_min_length": shortest sequence (0 = seq_length, no padding)
    int syntheticDelimiters = 2;  ///< "synthetic_delimiters": delimiter token types
    double delimiterRate = 0.1;   ///< "delimiter_rate"
    double operatorRate = 0.08;   ///< "operator_rate"
    int topicSize = 8;            ///< "topic_size": content tokens per sequence's topic
    bool sentencePairs = false;   ///< "sentence_pairs": [CLS] A [SEP] B [SEP] layout
    bool wordTokens = false;      ///< "word_tokens": content tokens named by English words
    bool successorLabels = false; ///< "successor_labels": content tokens predict the next content token
};

/// One field of TrainConfig as the user sees it: JSON key, flag, --help line.
struct TrainFieldInfo
{
    std::string name;                 ///< JSON key; the flag is "--" + name ('-' and '_' both accepted)
    std::string type;                 ///< "text", "integer", "number", "bool", "choice", "number or none"
    std::vector<std::string> choices; ///< the values of a "choice"
    std::string group;                ///< --help section: "task and data", "model", "attention", ...
    std::string help;                 ///< one line
    std::string defaultText;          ///< the default, written as the flag would take it ("" for empty text)
};

/// All fields, in run.json and --help order. Built from the one field table that also drives
/// parsing, flags and printing.
const std::vector<TrainFieldInfo>& trainFields();

/// Parses a run.json-style object; absent keys keep their defaults. `where` (the file name) starts
/// every message. Unknown keys are errors naming them and the closest known key; wrong types are
/// errors naming the key, the expected type and the value found. Does not validate (see below).
TrainConfig parseTrainConfig(const std::string& jsonText, const std::string& where);

/// The resolved config as pretty JSON with every field, in trainFields() order, ending in a
/// newline: written to <run>/run.json. parseTrainConfig(trainConfigToJson(c)) gives c back exactly.
std::string trainConfigToJson(const TrainConfig& config);

/// Sets one field from a command-line flag, e.g. ("--lr", "3e-4") or ("lr", "3e-4"); '-' and '_'
/// are interchangeable in the name. Integers also accept integral scientific notation ("1e6"),
/// bools true/false/1/0/yes/no/on/off, "alpha" also "none". "attention" is a shorthand, not a field:
/// An et al.'s variant names (fixed-bias, context-scale, sigmoid, ...) set softmax, bias or context_scale.
/// Errors name the flag, the expected type and the value (or the closest known flag for an unknown one).
void applyTrainFlag(TrainConfig& config, const std::string& name, const std::string& value);

/// Checks the whole config and throws one Error for the first inconsistency, naming the field (its
/// key/flag) and what was expected: a missing run folder or data for the task, data given that the
/// task does not use, an unknown or wrong-family preset (or any size for nli, whose model is
/// "init"), sizes that do not fit, attention-variant
/// values without the variant they belong to, steps < 1, batch < 1, warm-up > steps, out-of-range
/// optimizer values, logging intervals < 1, ... Does not touch the file system.
void validateTrainConfig(const TrainConfig& config);

/// The model size a task uses when "preset" is empty: bert-mini (mlm), bert-tiny (synthetic),
/// vit-fmnist (image), gpt2-tiny (clm); "" for nli, whose model comes from "init".
std::string defaultModelPreset(TrainTask task);

/// The BERT shape of task mlm or synthetic: the preset (or the task's default) with the non-zero
/// size overrides, max_position_embeddings raised to seq_length if needed, and the variant with
/// T = seq_length for the alpha rule when max_seq_length is 0 (gamma = -alpha / T filled in).
/// vocab_size, dropout and labels are left to the task. Throws Error for task image or nli (its
/// model is the "init" folder's) and for an unknown or non-BERT preset.
BertConfig trainBertConfig(const TrainConfig& config);
/// The ViT shape of task image: the preset (or vit-fmnist) with the non-zero size, image_size and
/// patch_size overrides, and the variant with T = patches + 1 for the alpha rule when
/// max_seq_length is 0. Channels and classes (and, for Fashion-MNIST, the image size) are left to
/// the task. Throws Error for the other tasks and for an unknown or non-ViT preset.
VitConfig trainVitConfig(const TrainConfig& config);
/// The decoder shape of task clm without "init": the decoder preset (or gpt2-tiny) with the non-zero
/// size overrides, max positions raised to seq_length if needed, and the variant with T = seq_length
/// for the alpha rule when max_seq_length is 0. vocab_size and the special-token ids are left to the
/// task (they come from the tokenizer). Throws Error for the other tasks and for an unknown or
/// non-decoder preset.
DecoderConfig trainDecoderConfig(const TrainConfig& config);

/// A named starting point for a run.
struct TrainPreset
{
    std::string name;
    std::string description; ///< one or two sentences: what it trains and where the numbers come from
    TrainConfig config;      ///< data paths the user must fill in are empty
};

/// "demo-vit-fmnist", "demo-bert-mlm", "demo-bert-nli", "demo-synthetic", "demo-clm", "demo-backcopy",
/// "paper-bert-base-mlm", "paper-bert-6l", "paper-vit-s16", "paper-opt-125m" (see train_presets.cpp
/// for their values and sources).
const std::vector<TrainPreset>& trainPresets();
/// The config of a named preset; throws Error naming the known presets otherwise.
TrainConfig presetConfig(const std::string& name);

} // namespace outlierlens
