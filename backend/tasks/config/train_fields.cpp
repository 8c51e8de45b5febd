#include "tasks/config/train_fields.h"

#include "model/variant_fields.h"

// Every TrainConfig field with its group and the help text `train --help` prints.

namespace outlierlens::train_fields {
namespace {

constexpr const char* kData = "task and data";
constexpr const char* kModel = "model";
constexpr const char* kAttention = "attention variant";
constexpr const char* kOptimization = "optimization";
constexpr const char* kRun = "logging, evaluation, checkpoints";
constexpr const char* kSynthetic = "synthetic task";

} // namespace

#define OL_MEMBER(member) [](TrainConfig& c) -> FieldRef { return &c.member; }

const std::vector<FieldDef>& fieldTable()
{
    static const std::vector<FieldDef> table = [] {
        std::vector<FieldDef> table = {
            {"task", kData,
             "what to train: mlm (masked LM on text), nli (MNLI classifier), image (ViT), synthetic, clm "
             "(causal LM on text: GPT-2, OPT or LLaMA-shaped decoders)",
             OL_MEMBER(task)},
            {"output", kData, "run folder for run.json, metrics, checkpoints and the final model (required)",
             OL_MEMBER(output)},
            {"corpus", kData, "mlm, clm: training text file", OL_MEMBER(corpus)},
            {"valid_corpus", kData,
             "mlm, clm: held-out text file for perplexity (empty: the corpus' last blocks)",
             OL_MEMBER(validCorpus)},
            {"data", kData,
             "nli: MNLI file; image: 'fashion-mnist' (Debian's IDX files), 'fashion-mnist-canvas' (the "
             "canvas "
             "task: items on a black canvas, background patches free) or an image folder",
             OL_MEMBER(data)},
            {"vocab", kData, "BERT vocab.txt (empty: sample_data/bert/vocab.txt)", OL_MEMBER(vocab)},
            {"tokenizer", kData,
             "clm: decoder tokenizer folder, vocab.json + merges.txt or tokenizer.model (empty: "
             "sample_data/tokenizers/wiki-bpe-1k; with init: the init model's)",
             OL_MEMBER(tokenizer)},
            {"init", kData,
             "nli: pre-trained model folder to fine-tune, e.g. an mlm run's final/ (required); clm: decoder "
             "folder to continue training",
             OL_MEMBER(init)},
            {"nli_train_pairs", kData,
             "nli: sentence pairs of the data used for training; the rest are held out",
             OL_MEMBER(nliTrainPairs)},
            {"clm_data", kData,
             "clm: text (blocks of the corpus) or bigram-backcopy (character sequences generated from the "
             "corpus' bigrams, where a trigger character makes the next one copy the one before it: Guo et "
             "al. 2024; needs a one-token-per-character tokenizer such as sample_data/tokenizers/bytes)",
             OL_MEMBER(clmData)},

            {"preset", kModel,
             "model size: bert-tiny, bert-mini, bert-small, bert-6l, bert-base, bert-large, "
             "vit-fmnist, vit-tiny, vit-small, vit-base; clm: gpt2-tiny, opt-tiny, llama-tiny, gpt2, "
             "opt-125m, ... (empty: bert-mini for mlm, bert-tiny for synthetic, vit-fmnist for image, "
             "gpt2-tiny for clm; nli and clm with init use the init model's)",
             OL_MEMBER(preset)},
            {"hidden_size", kModel, "hidden size d (0: from the preset)", OL_MEMBER(hiddenSize)},
            {"num_layers", kModel, "transformer layers (0: from the preset)", OL_MEMBER(numLayers)},
            {"num_heads", kModel, "attention heads (0: from the preset)", OL_MEMBER(numHeads)},
            {"intermediate_size", kModel, "FFN hidden size (0: from the preset)",
             OL_MEMBER(intermediateSize)},
            {"seq_length", kModel,
             "BERT tasks: tokens per sequence, [CLS] and [SEP] included; clm: tokens per block",
             OL_MEMBER(seqLength)},
            {"init_scheme", kModel,
             "clm: hf (the family's Hugging Face init: normal(0, 0.02)) or pytorch (PyTorch's module "
             "defaults: Linear uniform(+-1/sqrt(fan_in)), Embedding normal(0, 1))",
             OL_MEMBER(initScheme)},
            {"tie_word_embeddings", kModel, "clm: the LM head shares the token embeddings' weights",
             OL_MEMBER(tieWordEmbeddings)},
            {"image_size", kModel, "image: input size in pixels (0: from the preset)", OL_MEMBER(imageSize)},
            {"patch_size", kModel, "image: patch size in pixels (0: from the preset)", OL_MEMBER(patchSize)},

        };
        // The attention variant's rows come from its own table (model/variant_fields.h).
        for (const VariantField& f : variantFields()) {
            auto member = f.ref;
            table.push_back({f.key, kAttention, f.help, [member](TrainConfig& c) -> FieldRef {
                                 return std::visit([](auto* p) -> FieldRef { return p; }, member(c.variant));
                             }});
        }
        const std::vector<FieldDef> rest = {
            {"clip_warmup_steps", kAttention,
             "clm, image and synthetic, clipped softmax: fade the clipping in over this many steps (gamma "
             "and zeta - 1 grow "
             "linearly from 0, so no probability is clipped at the start; 0: clipped from the first step)",
             OL_MEMBER(clipWarmupSteps)},

            {"steps", kOptimization, "optimizer steps", OL_MEMBER(steps)},
            {"batch_size", kOptimization, "sequences or images per step", OL_MEMBER(batchSize)},
            {"lr", kOptimization, "peak learning rate (after the warm-up)", OL_MEMBER(lr)},
            {"weight_decay", kOptimization,
             "AdamW decoupled weight decay (not on biases and LayerNorm weights)", OL_MEMBER(weightDecay)},
            {"beta1", kOptimization, "AdamW beta1", OL_MEMBER(beta1)},
            {"beta2", kOptimization, "AdamW beta2", OL_MEMBER(beta2)},
            {"adam_eps", kOptimization, "AdamW epsilon", OL_MEMBER(adamEps)},
            {"warmup_steps", kOptimization, "steps of linear learning-rate warm-up from 0",
             OL_MEMBER(warmupSteps)},
            {"decay", kOptimization,
             "learning rate after the warm-up: linear (to 0 at the last step), cosine, constant",
             OL_MEMBER(decay)},
            {"grad_clip", kOptimization, "clip the gradients' total L2 norm to this (0: no clipping)",
             OL_MEMBER(gradClip)},
            {"mask_probability", kOptimization, "mlm: fraction of tokens chosen for prediction",
             OL_MEMBER(maskProbability)},
            {"dropout", kOptimization, "dropout probability (BERT and ViT; the decoders of clm have none)",
             OL_MEMBER(dropout)},
            {"augment", kOptimization, "image: augment the training images", OL_MEMBER(augment)},
            {"precision", kOptimization,
             "fp32, or bf16: mixed precision (bf16 matrix products, float32 weights, optimizer, softmax, "
             "LayerNorm and loss) on CPUs with bf16 instructions; elsewhere it falls back to fp32",
             OL_MEMBER(precision)},
            {"layer_norm_decay", kOptimization, "also decay LayerNorm weights (gamma); damps outliers",
             OL_MEMBER(layerNormDecay)},

            {"log_every", kRun, "steps between progress lines", OL_MEMBER(logEvery)},
            {"eval_every", kRun, "steps between evaluations and outlier probes", OL_MEMBER(evalEvery)},
            {"checkpoint_every", kRun, "steps between checkpoints (a killed run resumes from the last)",
             OL_MEMBER(checkpointEvery)},
            {"eval_batches", kRun, "held-out batches per evaluation", OL_MEMBER(evalBatches)},
            {"keep_checkpoints", kRun, "checkpoints kept (older ones are deleted)",
             OL_MEMBER(keepCheckpoints)},
            {"seed", kRun, "random seed (initialisation, batches, masking, dropout)", OL_MEMBER(seed)},
            {"threads", kRun,
             "LibTorch threads per process (0: all cores, shared by the processes of this machine)",
             OL_MEMBER(threads)},
            {"world_size", kRun,
             "processes training together, set by --nproc-per-node x --nnodes and recorded here; batch_size "
             "is "
             "the global batch, shared equally by them",
             OL_MEMBER(worldSize)},

            {"synthetic_vocab", kSynthetic, "synthetic: vocabulary size", OL_MEMBER(syntheticVocab)},
            {"synthetic_min_length", kSynthetic,
             "synthetic: shortest sequence before padding (0: seq_length)", OL_MEMBER(syntheticMinLength)},
            {"synthetic_delimiters", kSynthetic, "synthetic: delimiter token types (\".\", \",\", ...)",
             OL_MEMBER(syntheticDelimiters)},
            {"delimiter_rate", kSynthetic, "synthetic: probability that a position is a delimiter",
             OL_MEMBER(delimiterRate)},
            {"operator_rate", kSynthetic, "synthetic: probability that a position is a copy operator",
             OL_MEMBER(operatorRate)},
            {"topic_size", kSynthetic, "synthetic: content tokens each sequence draws from (0: all)",
             OL_MEMBER(topicSize)},
            {"sentence_pairs", kSynthetic,
             "synthetic: BERT's pair layout [CLS] A [SEP] B [SEP] (a second [SEP] in the middle third)",
             OL_MEMBER(sentencePairs)},
            {"word_tokens", kSynthetic, "synthetic: content tokens are short English words (\"cat\", ...)",
             OL_MEMBER(wordTokens)},
            {"successor_labels", kSynthetic,
             "synthetic: a content token predicts the next content token (a copy still its source), so "
             "that a head attending to its own token is not a harmless no-op",
             OL_MEMBER(successorLabels)},
        };
        table.insert(table.end(), rest.begin(), rest.end());
        return table;
    }();
    return table;
}

#undef OL_MEMBER

} // namespace outlierlens::train_fields
