// Training tasks on BERT: masked-LM pre-training, MNLI fine-tuning and the synthetic no-op task.

#include "analysis/showcase.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "common/json_util.h"

#include "model/bert_network.h"
#include "tasks/data/mlm_data.h"
#include "tasks/data/nli_data.h"
#include "tasks/data/synthetic_data.h"
#include "tasks/task_common.h"
#include "tasks/training_task.h"
#include "text/wordpiece.h"
#include <nlohmann/json.hpp>

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace outlierlens {
namespace fs = std::filesystem;

namespace {

/// The BERT shape of a config: its preset, then any explicit sizes.
BertConfig bertShape(const TrainConfig& t, const std::string& fallbackPreset)
{
    BertConfig c = BertConfig::preset(t.preset.empty() ? fallbackPreset : t.preset);
    if (t.hiddenSize > 0) c.hiddenSize = t.hiddenSize;
    if (t.numLayers > 0) c.numLayers = t.numLayers;
    if (t.numHeads > 0) c.numHeads = t.numHeads;
    if (t.intermediateSize > 0) c.intermediateSize = t.intermediateSize;
    c.maxPositions = std::max(c.maxPositions, t.seqLength);
    c.hiddenDropout = c.attentionDropout = t.dropout;
    c.variant = t.variant.withAlphaResolved(t.seqLength); // gamma = -alpha / T, T the training length
    c.validate("training config");
    return c;
}

SyntheticTaskOptions syntheticOptions(const TrainConfig& t)
{
    SyntheticTaskOptions o;
    o.vocabSize = t.syntheticVocab;
    o.seqLength = t.seqLength;
    o.minLength = t.syntheticMinLength;
    o.numDelimiters = t.syntheticDelimiters;
    o.delimiterRate = t.delimiterRate;
    o.operatorRate = t.operatorRate;
    o.topicSize = t.topicSize;
    o.sentencePairs = t.sentencePairs;
    o.wordTokens = t.wordTokens;
    o.successorLabels = t.successorLabels;
    o.validate();
    return o;
}

/// Shared by the three BERT tasks: the network, its vocabulary file and the probe bookkeeping.
class BertTaskBase : public TrainingTask
{
public:
    torch::nn::Module& module() override { return m_net->module(); }
    std::vector<CapturePoint> trackedPoints() const override
    {
        return {CapturePoint::FfnOut, CapturePoint::Out};
    }
    int numLayers() const override { return m_net->config().numLayers; }
    void loadWeights(const std::string& dir) override { loadWeightsInto(m_net->module(), dir); }
    void saveModel(const std::string& dir, const std::string& card) const override
    {
        m_net->save(dir);
        fs::copy_file(m_vocabFile, fs::path(dir) / "vocab.txt", fs::copy_options::overwrite_existing);
        writeModelCard(dir, card);
    }

protected:
    std::unique_ptr<BertNetwork> m_net;
    std::string m_vocabFile;
};

// ---------------------------------------------------------------------------------------------
class MlmTask : public BertTaskBase
{
public:
    explicit MlmTask(const TrainConfig& t)
        : m_config(t)
        , m_tokenizer(t.init.empty() ? BertTokenizer::fromVocabFile(t.vocab)
                                     : BertTokenizer::fromModelDir(t.init))
    {
        m_vocabFile = t.init.empty() ? t.vocab : (fs::path(t.init) / "vocab.txt").string();
        const std::int64_t evalSequences = std::int64_t(t.evalBatches) * t.batchSize;
        PackedCorpus corpus = PackedCorpus::build(t.corpus, m_tokenizer, t.seqLength);
        if (!t.validCorpus.empty()) {
            m_train = std::make_unique<PackedCorpus>(std::move(corpus));
            m_valid =
                std::make_unique<PackedCorpus>(PackedCorpus::build(t.validCorpus, m_tokenizer, t.seqLength));
            m_validCount = std::min<std::int64_t>(evalSequences, m_valid->size());
        } else {
            // No held-out file: the last sequences of the corpus are held out and never trained on.
            if (corpus.size() <= evalSequences + t.batchSize)
                throw Error(t.corpus + ": " + std::to_string(corpus.size()) + " sequences of " +
                            std::to_string(t.seqLength) + " tokens are too few to hold out " +
                            std::to_string(evalSequences) + " and train with batches of " +
                            std::to_string(t.batchSize));
            m_train = std::make_unique<PackedCorpus>(std::move(corpus));
            m_validCount = evalSequences;
            m_validOffset = m_train->size() - evalSequences;
        }
        m_trainCount = m_validOffset > 0 ? m_validOffset : m_train->size();
        if (m_trainCount < t.batchSize)
            throw Error(t.corpus + ": " + std::to_string(m_trainCount) + " sequences of " +
                        std::to_string(t.seqLength) + " tokens, fewer than one batch of " +
                        std::to_string(t.batchSize));
        if (!t.init.empty()) {
            m_net = std::make_unique<BertNetwork>(BertNetwork::load(t.init));
            if (m_net->head() != BertHead::MaskedLM)
                throw Error(t.init + ": masked-LM runs start from a BertForMaskedLM model, found " +
                            toString(m_net->head()));
            return;
        }
        BertConfig c = bertShape(t, "bert-mini");
        c.vocabSize = int(m_tokenizer.vocabSize());
        c.architectures = {"BertForMaskedLM"};
        m_net = std::make_unique<BertNetwork>(BertNetwork::create(c, BertHead::MaskedLM, t.seed));
    }

    torch::Tensor trainLoss(std::int64_t step, at::Generator& gen) override
    {
        const torch::Tensor ids =
            m_train->sequences(batchIndices(m_trainCount, m_config.batchSize, step, m_config.seed));
        const MlmBatch b = maskForMlm(ids, m_tokenizer, m_config.maskProbability, gen);
        if (m_shard.whole()) return lossOf(b);
        const MlmBatch shard = {shardRows(b.inputIds, m_shard), shardRows(b.tokenTypeIds, m_shard),
                                shardRows(b.attentionMask, m_shard), shardRows(b.labels, m_shard)};
        return lossOf(shard, nullptr, scoredCount(b.labels));
    }

    std::pair<std::string, double> evaluate(ActivationSink* sink = nullptr) override
    {
        at::Generator gen = evaluationGenerator(m_config);
        c10::InferenceMode guard;
        double lossSum = 0;
        std::int64_t tokens = 0;
        for (std::int64_t start = 0; start < m_validCount; start += m_config.batchSize) {
            const MlmBatch batch = maskForMlm(
                validSequences(start, std::min<std::int64_t>(m_config.batchSize, m_validCount - start)),
                m_tokenizer, m_config.maskProbability, gen);
            const std::int64_t n = (batch.labels != -100).sum().item<std::int64_t>();
            if (n == 0) continue;
            lossSum += lossOf(batch, sink).item<double>() * double(n);
            tokens += n;
        }
        return {"perplexity", std::exp(lossSum / double(std::max<std::int64_t>(tokens, 1)))};
    }

    void calibrationForward(std::int64_t index, at::Generator& gen, ActivationSink& sink) override
    {
        const torch::Tensor ids =
            m_train->sequences(batchIndices(m_trainCount, m_config.batchSize, index, m_config.seed + 1));
        const MlmBatch b = maskForMlm(ids, m_tokenizer, m_config.maskProbability, gen);
        c10::InferenceMode guard;
        lossOf(b, &sink);
    }

    std::vector<std::int64_t> probe(ActivationSink& sink) override
    {
        const std::int64_t n = std::min<std::int64_t>(8, m_validCount);
        const torch::Tensor ids = validSequences(0, n);
        c10::InferenceMode guard;
        m_net->forward(ids, torch::zeros_like(ids), torch::ones_like(ids), &sink);
        return std::vector<std::int64_t>(std::size_t(n), ids.size(1));
    }

    std::string describe() const override
    {
        const BertConfig& c = m_net->config();
        return "BERT masked-LM pre-training (" + std::to_string(c.numLayers) + " layers, hidden " +
               std::to_string(c.hiddenSize) + ", " + std::to_string(c.numHeads) + " heads, T " +
               std::to_string(m_config.seqLength) + ") on " + fs::path(m_config.corpus).filename().string() +
               ", " + c.variant.describe();
    }

private:
    torch::Tensor validSequences(std::int64_t start, std::int64_t count) const
    {
        std::vector<std::int64_t> indices;
        for (std::int64_t i = 0; i < count; ++i)
            indices.push_back(m_validOffset + start + i);
        return (m_valid ? *m_valid : *m_train).sequences(indices);
    }

    /// The vocabulary projection runs only on the ~15% predicted positions: with a 30,522-token
    /// vocabulary it would otherwise cost more than the whole encoder of a small model.
    /// The mean loss of `b`, or with `batchScored` > 0 its share of a batch with that many
    /// predicted positions (a distributed run's shard).
    torch::Tensor lossOf(const MlmBatch& b, ActivationSink* sink = nullptr, std::int64_t batchScored = 0)
    {
        BertForMaskedLM mlm = m_net->maskedLm();
        const torch::Tensor hidden =
            mlm->bert->forward(b.inputIds, b.tokenTypeIds, b.attentionMask, sink).sequence;
        const torch::Tensor labels = b.labels.reshape({-1});
        const torch::Tensor picked = (labels != -100).nonzero().squeeze(1);
        const torch::Tensor states = hidden.reshape({-1, hidden.size(-1)}).index_select(0, picked);
        const torch::Tensor logits = mlm->predictions->forward(states, mlm->decoderWeight());
        if (batchScored > 0) return crossEntropyShare(logits, labels.index_select(0, picked), batchScored);
        return maskedCrossEntropy(logits, labels.index_select(0, picked));
    }

    TrainConfig m_config;
    BertTokenizer m_tokenizer;
    std::unique_ptr<PackedCorpus> m_train, m_valid;
    std::int64_t m_trainCount = 0, m_validCount = 0, m_validOffset = 0;
};

// ---------------------------------------------------------------------------------------------
class NliTask : public BertTaskBase
{
public:
    explicit NliTask(const TrainConfig& t)
        : m_config(t)
        , m_tokenizer(BertTokenizer::fromModelDir(t.init))
    {
        m_vocabFile = (fs::path(t.init) / "vocab.txt").string();
        BertNetwork pretrained = BertNetwork::load(t.init);
        BertConfig c = pretrained.config();
        if (!t.variant.isVanilla() && t.variant.describe() != c.variant.describe())
            throw Error("the attention variant of a fine-tuning run comes from the pre-trained model (" +
                        t.init + ": " + c.variant.describe() +
                        "); remove the variant settings from the config");
        const bool hasMnliHead =
            pretrained.head() == BertHead::SequenceClassification && c.id2label.size() == 3;
        if (!hasMnliHead) c.id2label = {"entailment", "neutral", "contradiction"};
        c.architectures = {"BertForSequenceClassification"};
        c.hiddenDropout = c.attentionDropout = t.dropout;
        m_net =
            std::make_unique<BertNetwork>(BertNetwork::create(c, BertHead::SequenceClassification, t.seed));
        if (hasMnliHead) {
            // Already an MNLI classifier (e.g. a fine-tuned checkpoint being evaluated): keep all of it.
            torch::NoGradGuard noGrad;
            auto target = m_net->module().named_parameters(true);
            for (const auto& item : pretrained.module().named_parameters(true))
                target[item.key()].copy_(item.value());
        }
        // The encoder starts from the pre-trained weights; the pooler and classifier are new.
        torch::NoGradGuard noGrad;
        auto target = m_net->encoder()->named_parameters(true);
        std::size_t copied = 0;
        for (const auto& item : pretrained.encoder()->named_parameters(true)) {
            torch::Tensor* dst = target.find(item.key());
            if (!dst || dst->sizes() != item.value().sizes())
                throw Error(t.init + ": encoder tensor '" + item.key() +
                            "' does not fit the fine-tuning model");
            dst->copy_(item.value());
            ++copied;
        }
        m_data = std::make_unique<NliDataset>(
            NliDataset::build(t.data, m_tokenizer, t.seqLength, std::size_t(t.nliTrainPairs), c.id2label));
        if (m_data->trainSize() < t.batchSize)
            throw Error(t.data + ": " + std::to_string(m_data->trainSize()) +
                        " training pairs, fewer than one batch");
        if (m_data->evalSize() < 1)
            throw Error(t.data + ": no pairs left for evaluation after the first " +
                        std::to_string(t.nliTrainPairs));
    }

    torch::Tensor trainLoss(std::int64_t step, at::Generator&) override
    {
        const NliDataset::Batch b =
            m_data->trainBatch(batchIndices(m_data->trainSize(), m_config.batchSize, step, m_config.seed));
        if (m_shard.whole())
            return maskedCrossEntropy(m_net->forward(b.inputIds, b.tokenTypeIds, b.attentionMask).logits,
                                      b.labels);
        const torch::Tensor logits =
            m_net
                ->forward(shardRows(b.inputIds, m_shard), shardRows(b.tokenTypeIds, m_shard),
                          shardRows(b.attentionMask, m_shard))
                .logits;
        return crossEntropyShare(logits, shardRows(b.labels, m_shard), scoredCount(b.labels));
    }

    std::pair<std::string, double> evaluate(ActivationSink* sink = nullptr) override
    {
        c10::InferenceMode guard;
        std::int64_t correct = 0;
        for (std::int64_t start = 0; start < m_data->evalSize(); start += m_config.batchSize) {
            const int size = int(std::min<std::int64_t>(m_config.batchSize, m_data->evalSize() - start));
            const NliDataset::Batch b = m_data->evalBatch(start, size);
            const torch::Tensor logits =
                m_net->forward(b.inputIds, b.tokenTypeIds, b.attentionMask, sink).logits;
            correct += (logits.argmax(-1) == b.labels).sum().item<std::int64_t>();
        }
        return {"accuracy", double(correct) / double(m_data->evalSize())};
    }

    void calibrationForward(std::int64_t index, at::Generator&, ActivationSink& sink) override
    {
        const NliDataset::Batch b = m_data->trainBatch(
            batchIndices(m_data->trainSize(), m_config.batchSize, index, m_config.seed + 1));
        c10::InferenceMode guard;
        m_net->forward(b.inputIds, b.tokenTypeIds, b.attentionMask, &sink);
    }

    std::vector<std::int64_t> probe(ActivationSink& sink) override
    {
        const int n = int(std::min<std::int64_t>(8, m_data->evalSize()));
        const NliDataset::Batch b = m_data->evalBatch(0, n);
        c10::InferenceMode guard;
        m_net->forward(b.inputIds, b.tokenTypeIds, b.attentionMask, &sink);
        const torch::Tensor lengths = b.attentionMask.sum(1);
        std::vector<std::int64_t> out;
        for (int i = 0; i < n; ++i)
            out.push_back(lengths[i].item<std::int64_t>());
        return out;
    }

    std::string describe() const override
    {
        return "BERT fine-tuned on MNLI pairs [0, " + std::to_string(m_config.nliTrainPairs) + ") of " +
               fs::path(m_config.data).filename().string() + " from " +
               fs::path(m_config.init).filename().string() + ", accuracy on the remaining pairs; " +
               m_net->config().variant.describe();
    }

private:
    TrainConfig m_config;
    BertTokenizer m_tokenizer;
    std::unique_ptr<NliDataset> m_data;
};

// ---------------------------------------------------------------------------------------------
class SyntheticTask : public BertTaskBase
{
public:
    SyntheticTask(const TrainConfig& t, const std::string& vocabFile)
        : m_config(t)
        , m_options(syntheticOptions(t))
    {
        m_vocabFile = vocabFile;
        if (!t.init.empty()) {
            const std::optional<SyntheticTaskOptions> recorded = readSyntheticOptions(t.init);
            if (!recorded)
                throw Error(
                    t.init +
                    ": not a model of the synthetic task (no \"outlierlens_synthetic\" in config.json)");
            m_options = *recorded;
            m_vocabFile = (fs::path(t.init) / "vocab.txt").string();
            m_net = std::make_unique<BertNetwork>(BertNetwork::load(t.init));
            if (m_net->head() != BertHead::MaskedLM)
                throw Error(t.init + ": synthetic-task models are BertForMaskedLM, found " +
                            toString(m_net->head()));
            return;
        }
        BertConfig c = bertShape(t, "bert-tiny");
        c.vocabSize = int(syntheticVocabulary(m_options).size());
        c.maxPositions = std::max(m_options.seqLength, 64);
        c.architectures = {"BertForMaskedLM"};
        c.variant = c.variant.withAlphaResolved(m_options.seqLength);
        m_net = std::make_unique<BertNetwork>(BertNetwork::create(c, BertHead::MaskedLM, t.seed));
        if (t.clipWarmupSteps > 0) m_net->setClipStrength(0.0); // step 0's evaluation: not yet clipped
    }

    torch::Tensor trainLoss(std::int64_t step, at::Generator& gen) override
    {
        // clip_warmup_steps: the clipping grows with the step; evaluations see the last step's strength.
        if (m_config.clipWarmupSteps > 0)
            m_net->setClipStrength(double(step + 1) / double(m_config.clipWarmupSteps));
        const SyntheticBatch b = syntheticBatch(m_options, m_config.batchSize, gen);
        if (m_shard.whole()) return lossOf(b);
        SyntheticBatch shard;
        shard.inputIds = shardRows(b.inputIds, m_shard);
        shard.attentionMask = shardRows(b.attentionMask, m_shard);
        shard.tokenTypeIds = shardRows(b.tokenTypeIds, m_shard);
        shard.labels = shardRows(b.labels, m_shard);
        return lossOf(shard, scoredCount(b.labels));
    }

    std::pair<std::string, double> evaluate(ActivationSink* sink = nullptr) override
    {
        at::Generator gen = evaluationGenerator(m_config);
        c10::InferenceMode guard;
        std::int64_t correct = 0, total = 0;
        for (int i = 0; i < m_config.evalBatches; ++i) {
            const SyntheticBatch b = syntheticBatch(m_options, m_config.batchSize, gen);
            const torch::Tensor predicted =
                m_net->forward(b.inputIds, b.tokenTypeIds, b.attentionMask, sink).logits.argmax(-1);
            const torch::Tensor scored = b.labels != -100;
            correct += (predicted.eq(b.labels) & scored).sum().item<std::int64_t>();
            total += scored.sum().item<std::int64_t>();
        }
        return {"accuracy", double(correct) / double(std::max<std::int64_t>(total, 1))};
    }

    void calibrationForward(std::int64_t, at::Generator& gen, ActivationSink& sink) override
    {
        const SyntheticBatch b = syntheticBatch(m_options, m_config.batchSize, gen);
        c10::InferenceMode guard;
        m_net->forward(b.inputIds, b.tokenTypeIds, b.attentionMask, &sink);
    }

    std::vector<std::int64_t> probe(ActivationSink& sink) override
    {
        at::Generator gen = evaluationGenerator(m_config);
        const SyntheticBatch b = syntheticBatch(m_options, 8, gen);
        c10::InferenceMode guard;
        m_net->forward(b.inputIds, b.tokenTypeIds, b.attentionMask, &sink);
        const torch::Tensor lengths = b.attentionMask.sum(1);
        std::vector<std::int64_t> out;
        for (std::int64_t i = 0; i < lengths.size(0); ++i)
            out.push_back(lengths[i].item<std::int64_t>());
        return out;
    }

    std::string describe() const override
    {
        const BertConfig& c = m_net->config();
        return "Synthetic no-op task (" + std::to_string(c.numLayers) + " layers, hidden " +
               std::to_string(c.hiddenSize) + ", " + std::to_string(c.numHeads) + " heads, T " +
               std::to_string(m_options.seqLength) + "), " + c.variant.describe();
    }

    /// Also records the task's options in config.json ("outlierlens_synthetic"), so the app can
    /// generate inputs of the kind the model was trained on.
    void saveModel(const std::string& dir, const std::string& card) const override
    {
        BertTaskBase::saveModel(dir, card);
        const std::string configPath = (fs::path(dir) / "config.json").string();
        nlohmann::json config = jsonutil::parseFile(configPath);
        config["outlierlens_synthetic"] = {{"vocab_size", m_options.vocabSize},
                                           {"seq_length", m_options.seqLength},
                                           {"min_length", m_options.minLength},
                                           {"delimiters", m_options.numDelimiters},
                                           {"delimiter_rate", m_options.delimiterRate},
                                           {"operator_rate", m_options.operatorRate},
                                           {"topic_size", m_options.topicSize},
                                           {"copy_offsets", m_options.copyOffsets},
                                           {"sentence_pairs", m_options.sentencePairs},
                                           {"word_tokens", m_options.wordTokens},
                                           {"successor_labels", m_options.successorLabels}};
        writeTextFileAtomically(configPath, config.dump(2) + "\n");
        // Its own inputs (generated examples 1-16, the app's "synthetic example N"), and where its
        // no-op head shows best on them, computed from the saved folder as the app will load it.
        std::string lines;
        for (std::uint64_t seed = 1; seed <= kSampleInputs; ++seed)
            lines += syntheticExampleText(m_options, seed) + "\n";
        writeTextFileAtomically((fs::path(dir) / "sample_inputs.txt").string(), lines);
        writeShowcase(dir, computeShowcase(dir));
    }

    /// The vocabulary file a synthetic run writes once into its run folder.
    static std::string writeVocabulary(const TrainConfig& t)
    {
        const std::string path = (fs::path(t.output) / "synthetic_vocab.txt").string();
        std::ofstream out(path);
        for (const std::string& token : syntheticVocabulary(syntheticOptions(t)))
            out << token << '\n';
        if (!out) throw Error(path + ": cannot write");
        return path;
    }

private:
    static constexpr std::uint64_t kSampleInputs = 16;

    /// The mean loss of `b`, or with `batchScored` > 0 its share of a batch with that many scored
    /// positions (a distributed run's shard).
    torch::Tensor lossOf(const SyntheticBatch& b, std::int64_t batchScored = 0)
    {
        const torch::Tensor logits = m_net->forward(b.inputIds, b.tokenTypeIds, b.attentionMask).logits;
        if (batchScored > 0)
            return crossEntropyShare(logits.reshape({-1, logits.size(-1)}), b.labels.reshape({-1}),
                                     batchScored);
        return maskedCrossEntropy(logits.reshape({-1, logits.size(-1)}), b.labels.reshape({-1}));
    }

    TrainConfig m_config;
    SyntheticTaskOptions m_options;
};

} // namespace

std::unique_ptr<TrainingTask> makeBertTask(const TrainConfig& config)
{
    switch (config.task) {
    case TrainTask::MaskedLm:
        return std::make_unique<MlmTask>(config);
    case TrainTask::Nli:
        return std::make_unique<NliTask>(config);
    case TrainTask::Synthetic:
        return std::make_unique<SyntheticTask>(
            config, config.init.empty() ? SyntheticTask::writeVocabulary(config) : std::string());
    case TrainTask::Image:
    case TrainTask::CausalLm:
        break;
    }
    throw Error("not a BERT task");
}

} // namespace outlierlens
