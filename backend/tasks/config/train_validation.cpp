// validateTrainConfig() and the model shapes a TrainConfig describes (declared in train_config.h).

#include "tasks/config/train_config.h"

#include "common/error.h"
#include "common/text_format.h"
#include "model/decoder_config.h"
#include "tasks/config/closest_name.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace outlierlens {
namespace {

const std::vector<std::string> kVitPresetNames = {"vit-fmnist", "vit-tiny", "vit-small", "vit-base"};

/// Errors name the field by its JSON key / flag.
[[noreturn]] void fail(const std::string& field, const std::string& message)
{
    throw Error(field + ": " + message);
}

bool isBertPreset(const std::string& name)
{
    for (const std::string& n : BertConfig::presetNames())
        if (n == name) return true;
    return false;
}

bool isDecoderPreset(const std::string& name)
{
    for (const std::string& n : DecoderConfig::presetNames())
        if (n == name) return true;
    return false;
}

bool isVitPreset(const std::string& name)
{
    try {
        VitConfig::preset(name);
        return true;
    } catch (const Error&) {
        return false;
    }
}

/// The model sizes a task can use, for messages.
std::vector<std::string> presetNamesFor(bool vit)
{
    return vit ? kVitPresetNames : BertConfig::presetNames();
}

void checkPreset(const TrainConfig& c, bool vit)
{
    if (c.preset.empty()) return;
    const bool bert = isBertPreset(c.preset);
    const bool isVit = isVitPreset(c.preset);
    const std::vector<std::string> known = presetNamesFor(vit);
    std::string list;
    for (const std::string& n : known)
        list += (list.empty() ? "" : ", ") + n;
    if (isDecoderPreset(c.preset))
        fail("preset", "task " + toString(c.task) + " trains a " + (vit ? "ViT" : "BERT model") + ", but '" +
                           c.preset + "' is a decoder size (task clm; use " + list + ")");
    if (!bert && !isVit) {
        std::vector<std::string> all = BertConfig::presetNames();
        all.insert(all.end(), kVitPresetNames.begin(), kVitPresetNames.end());
        const std::string best = closestName(c.preset, all);
        fail("preset", "unknown model size '" + c.preset + "' (did you mean '" + best + "'? task " +
                           toString(c.task) + " takes " + list + ")");
    }
    if (vit && !isVit)
        fail("preset", "task image trains a ViT, but '" + c.preset + "' is a BERT size (use " + list + ")");
    if (!vit && !bert)
        fail("preset", "task " + toString(c.task) + " trains a BERT model, but '" + c.preset +
                           "' is a ViT size (use " + list + ")");
}

/// The first model-size field that is set (preset, hidden_size, ...), or null: tasks that take their
/// model from "init" refuse them.
const char* firstSizeField(const TrainConfig& c)
{
    return !c.preset.empty()         ? "preset"
           : c.hiddenSize != 0       ? "hidden_size"
           : c.numLayers != 0        ? "num_layers"
           : c.numHeads != 0         ? "num_heads"
           : c.intermediateSize != 0 ? "intermediate_size"
                                     : nullptr;
}

/// The field that switches on a non-vanilla variant, for messages.
const char* variantFieldSet(const AttentionVariant& v)
{
    return v.softmax != SoftmaxKind::Vanilla ? "softmax"
           : v.bias != BiasKind::None        ? "bias"
           : v.contextScale                  ? "context_scale"
                                             : "gate";
}

/// Values of a variant that is not switched on are mistakes (a forgotten --softmax clipped), not
/// settings to ignore silently.
void checkVariantFields(const AttentionVariant& v, TrainTask task)
{
    if (task != TrainTask::CausalLm && v.isDecoderOnly())
        fail(variantFieldSet(v),
             "An et al.'s " + v.describe() + " is implemented for the decoders of task clm only");
    const AttentionVariant defaults;
    if (v.softmax == SoftmaxKind::Vanilla) {
        const char* stray = v.gamma != defaults.gamma                 ? "gamma"
                            : v.zeta != defaults.zeta                 ? "zeta"
                            : v.alpha                                 ? "alpha"
                            : v.maxSeqLength != defaults.maxSeqLength ? "max_seq_length"
                                                                      : nullptr;
        if (stray) fail(stray, "only used by clipped softmax: add --softmax clipped (or remove it)");
    }
    if (v.alpha && v.gamma != 0)
        fail("alpha", "give gamma or alpha (gamma = -alpha / T), not both (found gamma " +
                          numberText(v.gamma) + ", alpha " + numberText(*v.alpha) + ")");
    if (v.maxSeqLength < 0) fail("max_seq_length", "must be >= 0, found " + std::to_string(v.maxSeqLength));
    if (v.maxSeqLength > 0 && !v.alpha) fail("max_seq_length", "only used with alpha (gamma = -alpha / T)");
    if (v.gate == GateKind::None && v.piInit != defaults.piInit)
        fail("pi_init", "only used by gated attention: add --gate linear (or mlp, all_heads_linear)");
    if (v.gate != GateKind::Mlp && v.nHid != 0) fail("n_hid", "only used by the mlp gate (--gate mlp)");
    if (v.gate == GateKind::Mlp && v.nHid <= 0)
        fail("n_hid", "the mlp gate needs hidden units > 0, found " + std::to_string(v.nHid));
}

void checkRange(double value, double lo, double hi, bool loOpen, bool hiOpen, const char* field)
{
    const bool ok =
        std::isfinite(value) && (loOpen ? value > lo : value >= lo) && (hiOpen ? value < hi : value <= hi);
    if (!ok)
        fail(field, std::string("must be in ") + (loOpen ? "(" : "[") + numberText(lo) + ", " +
                        (std::isinf(hi) ? "inf" : numberText(hi)) + (hiOpen ? ")" : "]") + ", found " +
                        numberText(value));
}

void atLeast(long long value, long long lo, const char* field)
{
    if (value < lo)
        fail(field, "must be at least " + std::to_string(lo) + ", found " + std::to_string(value));
}

void unused(const std::string& value, const char* field, const std::string& usedBy, TrainTask task)
{
    if (!value.empty())
        fail(field,
             "only used by " + usedBy + ", not by task " + toString(task) + " (found '" + value + "')");
}

void checkModel(const TrainConfig& c)
{
    atLeast(c.hiddenSize, 0, "hidden_size");
    atLeast(c.numLayers, 0, "num_layers");
    atLeast(c.numHeads, 0, "num_heads");
    atLeast(c.intermediateSize, 0, "intermediate_size");
    atLeast(c.imageSize, 0, "image_size");
    atLeast(c.patchSize, 0, "patch_size");
    checkVariantFields(c.variant, c.task);
    const bool image = c.task == TrainTask::Image;
    if (!image) {
        if (c.imageSize != 0) fail("image_size", "only used by task image");
        if (c.patchSize != 0) fail("patch_size", "only used by task image");
        atLeast(c.seqLength, 4, "seq_length");
    }

    if (c.task == TrainTask::CausalLm) {
        if (!c.init.empty()) {
            const char* sized = firstSizeField(c);
            if (sized)
                fail(sized, "task clm with init continues the model in " + c.init +
                                " and takes its size from there; leave preset empty and the sizes 0");
            if (!c.variant.isVanilla())
                fail(variantFieldSet(c.variant), "task clm with init keeps the attention variant of " +
                                                     c.init +
                                                     " (its config.json); remove the variant settings");
            return;
        }
        const DecoderConfig d = trainDecoderConfig(c);
        if (d.hiddenSize % d.numHeads != 0)
            fail("num_heads", "hidden size " + std::to_string(d.hiddenSize) + " is not a multiple of " +
                                  std::to_string(d.numHeads) + " heads");
        d.variant.validate("attention");
        DecoderConfig shaped = d;
        shaped.vocabSize = std::max(shaped.vocabSize, 1); // the tokenizer decides it later
        shaped.validate("model");
        return;
    }
    if (c.task == TrainTask::Nli) {
        const char* sized = firstSizeField(c);
        if (sized)
            fail(sized, "task nli fine-tunes the model in init (" + c.init +
                            ") and takes its size from there; leave preset empty and the sizes 0");
        c.variant.withAlphaResolved(c.seqLength).validate("attention");
        return;
    }

    checkPreset(c, image);
    int hidden = 0, heads = 0;
    if (image) {
        const VitConfig v = trainVitConfig(c);
        if (v.imageSize % v.patchSize != 0)
            fail("patch_size", "image size " + std::to_string(v.imageSize) +
                                   " is not a multiple of patch size " + std::to_string(v.patchSize));
        hidden = v.hiddenSize, heads = v.numHeads;
    } else {
        const BertConfig b = trainBertConfig(c);
        hidden = b.hiddenSize, heads = b.numHeads;
    }
    if (hidden % heads != 0)
        fail("num_heads", "hidden size " + std::to_string(hidden) + " is not a multiple of " +
                              std::to_string(heads) + " heads");
    if (image) {
        const VitConfig v = trainVitConfig(c);
        v.variant.validate("attention");
        v.validate("model");
    } else {
        const BertConfig b = trainBertConfig(c);
        b.variant.validate("attention");
        b.validate("model");
    }
}

} // namespace

std::string defaultModelPreset(TrainTask task)
{
    switch (task) {
    case TrainTask::MaskedLm:
        return "bert-mini";
    case TrainTask::Synthetic:
        return "bert-tiny";
    case TrainTask::Image:
        return "vit-fmnist";
    case TrainTask::Nli:
        return "";
    case TrainTask::CausalLm:
        return "gpt2-tiny";
    }
    return "";
}

BertConfig trainBertConfig(const TrainConfig& c)
{
    if (c.task == TrainTask::Image) throw Error("task image trains a ViT, not a BERT model");
    if (c.task == TrainTask::CausalLm) throw Error("task clm trains a causal decoder, not a BERT model");
    if (c.task == TrainTask::Nli) throw Error("task nli fine-tunes the model in init (" + c.init + ")");
    checkPreset(c, false);
    BertConfig b = BertConfig::preset(c.preset.empty() ? defaultModelPreset(c.task) : c.preset);
    if (c.hiddenSize > 0) b.hiddenSize = c.hiddenSize;
    if (c.numLayers > 0) b.numLayers = c.numLayers;
    if (c.numHeads > 0) b.numHeads = c.numHeads;
    if (c.intermediateSize > 0) b.intermediateSize = c.intermediateSize;
    b.maxPositions = std::max(b.maxPositions, c.seqLength);
    b.variant = c.variant.withAlphaResolved(c.seqLength);
    return b;
}

DecoderConfig trainDecoderConfig(const TrainConfig& c)
{
    if (c.task != TrainTask::CausalLm)
        throw Error("task " + toString(c.task) + " does not train a causal decoder (task clm does)");
    if (!c.init.empty()) throw Error("task clm with init continues the model in init (" + c.init + ")");
    const std::string name = c.preset.empty() ? defaultModelPreset(c.task) : c.preset;
    if (!isDecoderPreset(name)) {
        std::string list;
        for (const std::string& n : DecoderConfig::presetNames())
            list += (list.empty() ? "" : ", ") + n;
        if (isBertPreset(name) || isVitPreset(name))
            fail("preset", "task clm trains a causal decoder, but '" + name + "' is a " +
                               (isBertPreset(name) ? "BERT" : "ViT") + " size (use " + list + ")");
        fail("preset", "unknown decoder size '" + name + "' (did you mean '" +
                           closestName(name, DecoderConfig::presetNames()) + "'? task clm takes " + list +
                           ")");
    }
    DecoderConfig d = DecoderConfig::preset(name);
    if (c.hiddenSize > 0) {
        if (d.wordEmbedProjDim == d.hiddenSize) d.wordEmbedProjDim = c.hiddenSize; // no projection
        d.hiddenSize = c.hiddenSize;
    }
    if (c.numLayers > 0) d.numLayers = c.numLayers;
    if (c.numHeads > 0) {
        // Grouped-query attention keeps its groups when they still divide the heads.
        if (d.numKvHeads == d.numHeads || c.numHeads % d.numKvHeads != 0) d.numKvHeads = c.numHeads;
        d.numHeads = c.numHeads;
    }
    if (c.intermediateSize > 0) d.intermediateSize = c.intermediateSize;
    d.maxPositions = std::max(d.maxPositions, c.seqLength);
    d.variant = c.variant.withAlphaResolved(c.seqLength);
    d.tieWordEmbeddings = c.tieWordEmbeddings;
    return d;
}

VitConfig trainVitConfig(const TrainConfig& c)
{
    if (c.task != TrainTask::Image)
        throw Error("task " + toString(c.task) + " trains a " +
                    (c.task == TrainTask::CausalLm ? "causal decoder" : "BERT model") + ", not a ViT");
    checkPreset(c, true);
    VitConfig v = VitConfig::preset(c.preset.empty() ? defaultModelPreset(c.task) : c.preset);
    if (c.hiddenSize > 0) v.hiddenSize = c.hiddenSize;
    if (c.numLayers > 0) v.numLayers = c.numLayers;
    if (c.numHeads > 0) v.numHeads = c.numHeads;
    if (c.intermediateSize > 0) v.intermediateSize = c.intermediateSize;
    if (c.imageSize > 0) v.imageSize = c.imageSize;
    if (c.patchSize > 0) v.patchSize = c.patchSize;
    const int tokens = v.patchSize > 0 && v.imageSize % v.patchSize == 0 ? v.numTokens() : 0;
    v.variant = c.variant.withAlphaResolved(tokens);
    return v;
}

void validateTrainConfig(const TrainConfig& c)
{
    if (c.output.empty()) fail("output", "the run folder is required (--output DIR)");
    const TrainTask t = c.task;
    switch (t) {
    case TrainTask::MaskedLm:
        if (c.corpus.empty()) fail("corpus", "task mlm needs a training text file (--corpus FILE)");
        unused(c.data, "data", "tasks nli and image", t);
        unused(c.init, "init", "tasks nli and clm", t);
        unused(c.tokenizer, "tokenizer", "task clm", t);
        break;
    case TrainTask::CausalLm:
        if (c.corpus.empty()) fail("corpus", "task clm needs a training text file (--corpus FILE)");
        if (c.tokenizer.empty() && c.init.empty())
            fail("tokenizer", "task clm needs a decoder tokenizer folder, vocab.json + merges.txt or "
                              "tokenizer.model (--tokenizer DIR, e.g. sample_data/tokenizers/wiki-bpe-1k)");
        if (!c.tokenizer.empty() && !c.init.empty())
            fail("tokenizer", "task clm with init uses the tokenizer saved in " + c.init +
                                  "; leave tokenizer empty (found '" + c.tokenizer + "')");
        unused(c.data, "data", "tasks nli and image", t);
        unused(c.vocab, "vocab", "tasks mlm and nli", t);
        break;
    case TrainTask::Nli:
        if (c.data.empty()) fail("data", "task nli needs an MNLI file (--data FILE)");
        if (c.init.empty())
            fail("init", "task nli fine-tunes a pre-trained model: give its folder (--init DIR)");
        unused(c.corpus, "corpus", "tasks mlm and clm", t);
        unused(c.validCorpus, "valid_corpus", "tasks mlm and clm", t);
        unused(c.tokenizer, "tokenizer", "task clm", t);
        break;
    case TrainTask::Image:
        if (c.data.empty()) fail("data", "task image needs 'fashion-mnist' or an image folder (--data)");
        unused(c.corpus, "corpus", "tasks mlm and clm", t);
        unused(c.validCorpus, "valid_corpus", "tasks mlm and clm", t);
        unused(c.tokenizer, "tokenizer", "task clm", t);
        unused(c.vocab, "vocab", "the BERT tasks", t);
        unused(c.init, "init", "tasks nli and clm", t);
        break;
    case TrainTask::Synthetic:
        unused(c.corpus, "corpus", "tasks mlm and clm", t);
        unused(c.validCorpus, "valid_corpus", "tasks mlm and clm", t);
        unused(c.tokenizer, "tokenizer", "task clm", t);
        unused(c.data, "data", "tasks nli and image", t);
        unused(c.vocab, "vocab", "tasks mlm and nli", t);
        unused(c.init, "init", "tasks nli and clm", t);
        break;
    }
    atLeast(c.nliTrainPairs, 1, "nli_train_pairs");
    if (c.clipWarmupSteps != 0 && t != TrainTask::CausalLm && t != TrainTask::Image &&
        t != TrainTask::Synthetic)
        fail("clip_warmup_steps", "only used by tasks clm, image and synthetic");
    if (c.clipWarmupSteps < 0 || c.clipWarmupSteps > c.steps)
        fail("clip_warmup_steps", "must be in [0, steps = " + std::to_string(c.steps) + "], found " +
                                      std::to_string(c.clipWarmupSteps));
    if (c.clipWarmupSteps > 0 && c.variant.softmax != SoftmaxKind::Clipped)
        fail("clip_warmup_steps", "only used with softmax clipped");
    if (t != TrainTask::CausalLm) {
        if (c.clmData != ClmData::Text) fail("clm_data", "only used by task clm");
        if (c.initScheme != InitScheme::HuggingFace) fail("init_scheme", "only used by task clm");
        if (!c.tieWordEmbeddings) fail("tie_word_embeddings", "only used by task clm");
    } else {
        if (c.clmData == ClmData::BigramBackcopy && !c.validCorpus.empty())
            fail("valid_corpus", "clm_data bigram-backcopy generates its held-out sequences; leave it empty");
        if (!c.init.empty() && (c.initScheme != InitScheme::HuggingFace || !c.tieWordEmbeddings))
            fail(c.initScheme != InitScheme::HuggingFace ? "init_scheme" : "tie_word_embeddings",
                 "task clm with init keeps the weights and shape of " + c.init);
    }

    checkModel(c);

    atLeast(c.steps, 1, "steps");
    atLeast(c.batchSize, 1, "batch_size");
    checkRange(c.lr, 0, std::numeric_limits<double>::infinity(), true, true, "lr");
    checkRange(c.weightDecay, 0, std::numeric_limits<double>::infinity(), false, true, "weight_decay");
    checkRange(c.beta1, 0, 1, false, true, "beta1");
    checkRange(c.beta2, 0, 1, false, true, "beta2");
    checkRange(c.adamEps, 0, std::numeric_limits<double>::infinity(), true, true, "adam_eps");
    atLeast(c.warmupSteps, 0, "warmup_steps");
    if (c.warmupSteps > c.steps)
        fail("warmup_steps", std::to_string(c.warmupSteps) + " is more than the " + std::to_string(c.steps) +
                                 " steps of the run");
    checkRange(c.gradClip, 0, std::numeric_limits<double>::infinity(), false, true, "grad_clip");
    checkRange(c.maskProbability, 0, 1, true, true, "mask_probability");
    checkRange(c.dropout, 0, 1, false, true, "dropout");

    atLeast(c.logEvery, 1, "log_every");
    atLeast(c.evalEvery, 1, "eval_every");
    atLeast(c.checkpointEvery, 1, "checkpoint_every");
    atLeast(c.evalBatches, 1, "eval_batches");
    atLeast(c.keepCheckpoints, 1, "keep_checkpoints");
    atLeast(c.threads, 0, "threads");
    atLeast(c.worldSize, 1, "world_size");
    if (c.batchSize % c.worldSize != 0)
        fail("batch_size", std::to_string(c.batchSize) + " sequences or images cannot be shared equally by " +
                               std::to_string(c.worldSize) +
                               " processes (world_size); choose a batch_size divisible by the number of "
                               "processes, or another --nproc-per-node");
}

} // namespace outlierlens
