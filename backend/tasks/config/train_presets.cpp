// trainPresets() and presetConfig() (declared in train_config.h).

#include "tasks/config/train_config.h"

#include "common/error.h"
#include "tasks/config/closest_name.h"

namespace outlierlens {
namespace {

/// The BERT-base masked-LM recipe of the paper, as in Qualcomm's released pre-training scripts
/// (outlier-free-transformers, scripts/bert_base_{vanilla,clipped_softmax,gated_attention}.sh:
/// --max_seq_length 128 --mlm_probability 0.15 --learning_rate 0.0001 --lr_scheduler_type linear
/// --max_train_steps 1000000 --num_warmup_steps 10000 --per_device_train_batch_size 256
/// --max_grad_norm 1.0 --weight_decay 0.01 --seed 1000; torch.optim.AdamW's default betas and eps;
/// no decay on biases and LayerNorm weights; BERT's dropout 0.1).
TrainConfig paperBertRecipe(const std::string& preset)
{
    TrainConfig c;
    c.task = TrainTask::MaskedLm;
    c.preset = preset;
    c.seqLength = 128;
    c.steps = 1000000;
    c.batchSize = 256;
    c.lr = 1e-4;
    c.weightDecay = 0.01;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.adamEps = 1e-8;
    c.warmupSteps = 10000;
    c.decay = DecayKind::Linear;
    c.gradClip = 1.0;
    c.maskProbability = 0.15;
    c.dropout = 0.1;
    c.seed = 1000;
    c.logEvery = 100;
    c.evalEvery = 10000;
    c.checkpointEvery = 10000;
    c.evalBatches = 16;
    return c;
}

std::vector<TrainPreset> makePresets()
{
    std::vector<TrainPreset> presets;

    {
        TrainConfig c;
        c.task = TrainTask::Image;
        c.output = "runs/demo-vit-fmnist";
        c.data = "fashion-mnist";
        c.preset = "vit-fmnist";
        c.steps = 3000;
        c.batchSize = 128;
        c.lr = 1e-3;
        c.weightDecay = 0.05;
        c.warmupSteps = 200;
        c.decay = DecayKind::Cosine;
        c.gradClip = 1.0;
        c.dropout = 0.0;
        c.augment = true;
        c.logEvery = 10;
        c.evalEvery = 250;
        c.checkpointEvery = 500;
        presets.push_back(
            {"demo-vit-fmnist",
             "Tiny ViT (vit-fmnist: 28 px, patch 4, d 128, 6 layers, 4 heads) on Fashion-MNIST from "
             "Debian's dataset-fashion-mnist: 3,000 steps of batch 128, AdamW lr 1e-3, weight decay "
             "0.05, cosine decay. About an hour on two CPU cores.",
             c});
    }
    {
        // The canvas task (tasks/data/canvas_data.h, ../docs/demo-models.md): the probe's recipe, where
        // background patches become the sinks of a ViT's no-op heads within a few thousand steps.
        TrainConfig c;
        c.task = TrainTask::Image;
        c.output = "runs/demo-vit-canvas";
        c.data = "fashion-mnist-canvas";
        c.preset = "vit-canvas";
        c.steps = 8000;
        c.batchSize = 64;
        c.lr = 1e-3;
        c.weightDecay = 1e-4;
        c.beta1 = 0.9;
        c.beta2 = 0.99;
        c.adamEps = 1e-8;
        c.warmupSteps = 200;
        c.decay = DecayKind::Constant;
        c.gradClip = 0.0;
        c.dropout = 0.0;
        c.augment = false;
        c.precision = Precision::Bf16;
        c.logEvery = 50;
        c.evalEvery = 500;
        c.checkpointEvery = 500;
        c.evalBatches = 8;
        presets.push_back(
            {"demo-vit-canvas",
             "Pre-LN ViT (vit-canvas: 56 px, patch 7, d 128, 4 layers, 4 heads) on the canvas task: a "
             "Fashion-MNIST item at a random place on a black canvas, a quarter of the patches masked; CLS "
             "classifies, item and masked patches reconstruct their own pixels, background patches are never "
             "scored. 8,000 steps of batch 64, AdamW lr 1e-3 constant after 200 warm-up steps, betas (0.9, "
             "0.99), weight decay 1e-4, no clipping, bf16 where the CPU has it. Add --gate linear or "
             "--softmax "
             "clipped for the paper's fixes.",
             c});
    }
    {
        TrainConfig c;
        c.task = TrainTask::MaskedLm;
        c.output = "runs/demo-bert-mlm";
        c.corpus = "sample_data/text/wiki_en_train.txt";
        c.validCorpus = "sample_data/text/wiki_en_valid.txt";
        c.preset = "bert-mini";
        c.seqLength = 128;
        c.steps = 10000;
        c.batchSize = 32;
        c.lr = 5e-4;
        c.weightDecay = 0.01;
        c.warmupSteps = 500;
        c.decay = DecayKind::Linear;
        c.gradClip = 1.0;
        c.maskProbability = 0.15;
        c.dropout = 0.1;
        c.logEvery = 20;
        c.evalEvery = 500;
        c.checkpointEvery = 1000;
        presets.push_back(
            {"demo-bert-mlm",
             "bert-mini (4 layers, d 256, 4 heads) masked-LM pre-training on the bundled English "
             "Wikipedia text: 10,000 steps of 32 sequences of 128 tokens, AdamW lr 5e-4, 500 warm-up "
             "steps, linear decay. Several hours on two CPU cores.",
             c});
    }
    {
        TrainConfig c;
        c.task = TrainTask::Nli;
        c.output = "runs/demo-bert-nli";
        c.data = "sample_data/mnli/mnli_dev_matched.jsonl";
        c.init = "runs/demo-bert-mlm/final";
        c.nliTrainPairs = 8000;
        c.seqLength = 128;
        c.steps = 1500;
        c.batchSize = 32;
        c.lr = 1e-4;
        c.weightDecay = 0.01;
        c.warmupSteps = 150;
        c.decay = DecayKind::Linear;
        c.gradClip = 1.0;
        c.dropout = 0.1;
        c.logEvery = 10;
        c.evalEvery = 250;
        c.checkpointEvery = 500;
        presets.push_back(
            {"demo-bert-nli",
             "Fine-tunes the demo-bert-mlm model (runs/demo-bert-mlm/final) on MNLI: 8,000 pairs of "
             "the bundled dev-matched file for training, the rest held out; 1,500 steps (6 epochs) "
             "of batch 32, AdamW lr 1e-4, 10% warm-up, linear decay.",
             c});
    }
    {
        TrainConfig c;
        c.task = TrainTask::Synthetic;
        c.output = "runs/demo-synthetic";
        c.preset = "bert-tiny"; // d 128, FFN 512; 4 layers and 4 heads below
        c.numLayers = 4;
        c.numHeads = 4;
        c.seqLength = 64;
        c.steps = 12000;
        c.batchSize = 64;
        c.lr = 1e-3;
        c.weightDecay = 0.01;
        c.beta2 = 0.99;
        c.warmupSteps = 100;
        c.decay = DecayKind::Constant;
        c.gradClip = 0.0;
        c.dropout = 0.0;
        c.precision = Precision::Bf16;
        c.logEvery = 50;
        c.evalEvery = 500;
        c.checkpointEvery = 500;
        c.sentencePairs = true;
        c.wordTokens = true;
        c.successorLabels = true;
        presets.push_back(
            {"demo-synthetic",
             "Post-LN BERT-style encoder (4 layers, d 128, 4 heads, length 64) on the synthetic task in "
             "BERT's pair layout [CLS] A [SEP] B [SEP], with word tokens and successor labels (a head "
             "reading its own token is no no-op): 12,000 steps of batch 64, AdamW lr 1e-3 held constant "
             "after 100 warm-up steps, betas (0.9, 0.99), no clipping, bf16 where the CPU has it. About 40 "
             "minutes on one core. Add --gate linear --pi-init 0.25, or --softmax clipped --alpha 4 "
             "--clip-warmup-steps 1000, for the paper's fixes.",
             c});
    }
    {
        TrainConfig c;
        c.task = TrainTask::CausalLm;
        c.output = "runs/demo-clm";
        c.corpus = "sample_data/text/wiki_en_train.txt";
        c.validCorpus = "sample_data/text/wiki_en_valid.txt";
        c.tokenizer = "sample_data/tokenizers/wiki-bpe-1k";
        c.preset = "gpt2-tiny";
        c.hiddenSize = 128;
        c.numLayers = 4;
        c.numHeads = 4;
        c.intermediateSize = 512;
        c.seqLength = 128;
        c.steps = 400;
        c.batchSize = 16;
        c.lr = 2e-3;
        c.weightDecay = 0.1;
        c.beta1 = 0.9;
        c.beta2 = 0.95;
        c.warmupSteps = 40;
        c.decay = DecayKind::Cosine;
        c.gradClip = 1.0;
        c.dropout = 0.0;
        c.logEvery = 10;
        c.evalEvery = 100;
        c.checkpointEvery = 100;
        c.evalBatches = 8;
        presets.push_back(
            {"demo-clm",
             "GPT-2-shaped causal decoder (4 layers, d 128, 4 heads, FFN 512, blocks of 128 tokens) "
             "trained on the bundled English Wikipedia text with the bundled 1,257-token byte-level BPE "
             "(sample_data/tokenizers/wiki-bpe-1k): 400 steps of batch 16, AdamW lr 2e-3, betas (0.9, "
             "0.95), weight decay 0.1, 40 warm-up steps, cosine decay; perplexity on the held-out "
             "file. Minutes on two CPU cores; add --softmax clipped --alpha 12 or --gate linear for "
             "the paper's variants.",
             c});
    }
    {
        // The Bigram-Backcopy recipe (../docs/demo-models.md): Guo et al. 2024's task and model shape
        // (pre-LN, ReLU FFN, learned positions, embeddings drawn with std 1, untied head, AdamW with
        // betas (0.9, 0.99), no clipping, constant rate), at the size that grows a BOS sink and its
        // outlier within minutes of bf16 training on one core.
        TrainConfig c;
        c.task = TrainTask::CausalLm;
        c.clmData = ClmData::BigramBackcopy;
        c.output = "runs/demo-backcopy";
        c.corpus = "sample_data/text/wiki_en_train.txt";
        c.tokenizer = "sample_data/tokenizers/bytes";
        c.preset = "opt-tiny";
        c.hiddenSize = 128;
        c.numLayers = 3;
        c.numHeads = 2;
        c.intermediateSize = 512;
        c.seqLength = 64;
        c.initScheme = InitScheme::PyTorch;
        c.tieWordEmbeddings = false;
        c.steps = 20000;
        c.batchSize = 32;
        c.lr = 1e-3;
        c.weightDecay = 1e-4;
        c.beta1 = 0.9;
        c.beta2 = 0.99;
        c.adamEps = 1e-8;
        c.warmupSteps = 100;
        c.decay = DecayKind::Constant;
        c.gradClip = 0.0;
        c.dropout = 0.0;
        c.precision = Precision::Bf16;
        c.logEvery = 100;
        c.evalEvery = 1000;
        c.checkpointEvery = 1000;
        c.evalBatches = 4;
        presets.push_back(
            {"demo-backcopy",
             "OPT-shaped causal decoder (3 layers, d 128, 2 heads, ReLU FFN 512, 64 tokens) on the "
             "Bigram-Backcopy task (Guo et al. 2024) built from the bundled Wikipedia text's characters, "
             "with the byte-level tokenizer sample_data/tokenizers/bytes: 20,000 steps of batch 32, AdamW "
             "lr 1e-3 constant after 100 warm-up steps, betas (0.9, 0.99), weight decay 1e-4, no clipping, "
             "bf16 where the CPU has it. Heads are needed only after a trigger character, so the vanilla "
             "model parks its attention on the first token and grows an outlier there; add --gate linear "
             "or --softmax clipped --alpha 2 for the paper's fixes.",
             c});
    }
    {
        // The paper's OPT-125m recipe (Bondarenko et al. 2023, appendix C.2, and Qualcomm's
        // outlier-free-transformers scripts/opt_125m_*.sh): 12 layers, d 768, block 512, 125k steps
        // of 48 x 4 sequences, AdamW lr 4e-4 with betas (0.9, 0.95), 2,000 warm-up steps and linear
        // decay, weight decay 0.1 also on LayerNorm weights, clipping 1.0. The decoders here have no
        // dropout (the paper's 0.1 is not reproduced).
        TrainConfig c;
        c.task = TrainTask::CausalLm;
        c.output = "runs/paper-opt-125m";
        c.preset = "opt-125m";
        c.seqLength = 512;
        c.steps = 125000;
        c.batchSize = 192;
        c.lr = 4e-4;
        c.weightDecay = 0.1;
        c.layerNormDecay = true;
        c.beta1 = 0.9;
        c.beta2 = 0.95;
        c.adamEps = 1e-8;
        c.warmupSteps = 2000;
        c.decay = DecayKind::Linear;
        c.gradClip = 1.0;
        c.dropout = 0.0;
        c.logEvery = 100;
        c.evalEvery = 5000;
        c.checkpointEvery = 5000;
        c.evalBatches = 16;
        presets.push_back(
            {"paper-opt-125m",
             "The paper's OPT-125m causal-LM pre-training (Wikipedia + BookCorpus; Qualcomm's scripts): "
             "block 512, batch 192, 125k steps, AdamW lr 4e-4, betas (0.9, 0.95), 2k warm-up steps, "
             "linear decay, weight decay 0.1 including LayerNorm weights, clipping 1.0. Fill in corpus, "
             "valid_corpus and tokenizer (facebook/opt-125m's); add --softmax clipped --alpha 12 or "
             "--gate linear for the paper's variants. Needs a GPU-class machine.",
             c});
    }
    {
        TrainConfig c = paperBertRecipe("bert-base");
        c.output = "runs/paper-bert-base-mlm";
        presets.push_back(
            {"paper-bert-base-mlm",
             "The paper's BERT-base pre-training (Wikipedia + BookCorpus, as Qualcomm's released "
             "scripts run it): T 128, batch 256, 1M steps, AdamW lr 1e-4 with 10k warm-up steps and "
             "linear decay, weight decay 0.01, gradient clipping 1.0, seed 1000. Fill in corpus and "
             "valid_corpus; add --softmax clipped --gamma -0.025 or --gate mlp --n_hid N for the "
             "paper's variants. Needs a GPU-class machine.",
             c});
    }
    {
        TrainConfig c = paperBertRecipe("bert-6l");
        c.output = "runs/paper-bert-6l";
        presets.push_back(
            {"paper-bert-6l",
             "The paper's ablation model BERT-6L (bert-base width, 6 layers) with the BERT-base recipe "
             "above (T 128, batch 256, 1M steps, lr 1e-4, 10k warm-up, linear decay, weight decay "
             "0.01, clipping 1.0). Fill in corpus and valid_corpus.",
             c});
    }
    {
        // ViT-S/16 on ImageNet-1k, 300 epochs: the timm/DeiT recipe the paper trains with. An epoch of
        // the 1,281,167 training images is 2,502 full batches of 512 (timm drops the last partial one).
        constexpr std::int64_t kStepsPerEpoch = 2502;
        TrainConfig c;
        c.task = TrainTask::Image;
        c.output = "runs/paper-vit-s16";
        c.preset = "vit-small";
        c.imageSize = 224;
        c.patchSize = 16;
        c.steps = 300 * kStepsPerEpoch;
        c.batchSize = 512;
        c.lr = 1e-3;
        c.weightDecay = 0.05;
        c.beta1 = 0.9;
        c.beta2 = 0.999;
        c.adamEps = 1e-8;
        c.warmupSteps = 5 * kStepsPerEpoch;
        c.decay = DecayKind::Cosine;
        c.gradClip = 0.0;
        c.dropout = 0.0;
        c.augment = true;
        c.logEvery = 100;
        c.evalEvery = kStepsPerEpoch;
        c.checkpointEvery = kStepsPerEpoch;
        c.evalBatches = 16;
        presets.push_back(
            {"paper-vit-s16",
             "ViT-S/16 on ImageNet-1k for 300 epochs (750,600 steps of batch 512), AdamW lr 1e-3, "
             "weight decay 0.05, 5 warm-up epochs and cosine decay, no dropout: the timm/DeiT recipe "
             "the paper trains with. Set data to an ImageNet folder (train/<class>/*.JPEG). Needs a "
             "GPU-class machine.",
             c});
    }
    return presets;
}

} // namespace

const std::vector<TrainPreset>& trainPresets()
{
    static const std::vector<TrainPreset> presets = makePresets();
    return presets;
}

TrainConfig presetConfig(const std::string& name)
{
    std::vector<std::string> names;
    for (const TrainPreset& p : trainPresets()) {
        if (p.name == name) return p.config;
        names.push_back(p.name);
    }
    std::string list;
    for (const std::string& n : names)
        list += (list.empty() ? "" : ", ") + n;
    throw Error("unknown training preset '" + name + "' (did you mean '" + closestName(name, names) +
                "'? known: " + list + ")");
}

} // namespace outlierlens
