// Training task on causal decoder LLMs (GPT-2, OPT, LLaMA shapes): next-token prediction on blocks
// of a text file, perplexity on held-out blocks.

#include "analysis/showcase.h"
#include "common/error.h"
#include "model/decoder_modules.h" // DecoderLmImpl::headWeight()
#include "model/decoder_network.h"
#include "model/model_family.h"
#include "tasks/data/batch_indices.h"
#include "tasks/data/bigram_backcopy.h"
#include "tasks/data/clm_data.h"
#include "tasks/task_common.h"
#include "tasks/training_task.h"
#include "text/decoder_tokenizer.h"

#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

namespace outlierlens {
namespace fs = std::filesystem;

namespace {

/// The tokenizer files a model folder carries (what DecoderTokenizer::fromModelDir reads).
const std::vector<std::string> kTokenizerFiles = {"vocab.json",
                                                  "merges.txt",
                                                  "tokenizer.model",
                                                  "tokenizer.json",
                                                  "tokenizer_config.json",
                                                  "special_tokens_map.json",
                                                  "added_tokens.json"};

/// Copies every parameter of `from` into the parameter of the same name of `to` (float32, owned
/// memory). Both must have exactly the same names and shapes; errors name `where` and the tensor.
void copyParameters(DecoderNetwork& from, DecoderNetwork& to, const std::string& where)
{
    torch::NoGradGuard noGrad;
    auto target = to.module().named_parameters(true);
    const auto source = from.module().named_parameters(true);
    if (source.size() != target.size())
        throw Error(where + ": " + std::to_string(source.size()) + " parameters, the training model has " +
                    std::to_string(target.size()));
    for (const auto& item : source) {
        torch::Tensor* dst = target.find(item.key());
        if (!dst) throw Error(where + ": unexpected parameter '" + item.key() + "'");
        if (dst->sizes() != item.value().sizes())
            throw Error(where + ": parameter '" + item.key() + "' has shape " +
                        c10::str(item.value().sizes()) + ", expected " + c10::str(dst->sizes()));
        dst->copy_(item.value().to(dst->scalar_type()));
    }
}

class ClmTask : public TrainingTask
{
public:
    explicit ClmTask(const TrainConfig& t)
        : m_config(t)
        , m_tokenizerDir(t.init.empty() ? t.tokenizer : t.init)
    {
        if (m_tokenizerDir.empty())
            throw Error("tokenizer: task clm needs a decoder tokenizer folder (--tokenizer DIR)");
        if (!fs::is_directory(m_tokenizerDir))
            throw Error(m_tokenizerDir + ": no such tokenizer folder (expected vocab.json + merges.txt or "
                                         "tokenizer.model)");
        m_tokenizer = DecoderTokenizer::fromModelDir(m_tokenizerDir);

        const std::int64_t evalBlocks = std::int64_t(t.evalBatches) * t.batchSize;
        if (t.clmData == ClmData::BigramBackcopy) {
            m_backcopy =
                std::make_unique<BigramBackcopy>(BigramBackcopy::build(t.corpus, *m_tokenizer, t.seqLength));
            m_validCount = evalBlocks;
            m_validIds = m_backcopy->sample(t.seed, kValidIndex, int(evalBlocks));
        } else {
            buildTextBlocks(t, evalBlocks);
        }

        DecoderConfig c;
        std::unique_ptr<DecoderNetwork> loaded;
        if (!t.init.empty()) {
            loaded = std::make_unique<DecoderNetwork>(DecoderNetwork::load(t.init));
            c = loaded->config();
            c.torchDtype = "float32";
        } else {
            c = trainDecoderConfig(t);
            c.vocabSize = int(m_tokenizer->vocabSize());
            c.bosTokenId = int(m_tokenizer->bosId());
            c.eosTokenId = int(m_tokenizer->eosId());
            c.padTokenId = int(m_tokenizer->padId());
            c.validate("training config");
        }
        if (c.maxPositions < t.seqLength)
            throw Error((t.init.empty() ? std::string("seq_length") : t.init) + ": blocks of " +
                        std::to_string(t.seqLength) + " tokens exceed the model's " +
                        std::to_string(c.maxPositions) + " positions");
        if (m_tokenizer->vocabSize() > c.vocabSize)
            throw Error(m_tokenizerDir + ": the tokenizer has " + std::to_string(m_tokenizer->vocabSize()) +
                        " tokens, the model's vocabulary only " + std::to_string(c.vocabSize));
        // The model trains in float32 in memory it owns (a loaded checkpoint may be float16 or mapped).
        m_net = std::make_unique<DecoderNetwork>(DecoderNetwork::create(c, t.seed));
        if (loaded) copyParameters(*loaded, *m_net, t.init);
        if (!loaded && t.initScheme == InitScheme::PyTorch) initializeLikePyTorch(t.seed);
        if (t.clipWarmupSteps > 0) m_net->setClipStrength(0.0); // step 0's evaluation: not yet clipped
        m_net->setTraining(false);
    }

    torch::nn::Module& module() override { return m_net->module(); }

    torch::Tensor trainLoss(std::int64_t step, at::Generator&) override
    {
        const torch::Tensor ids =
            m_backcopy ? m_backcopy->sample(m_config.seed, step, m_config.batchSize)
                       : m_train->blocks(batchIndices(m_trainCount, m_config.batchSize, step, m_config.seed));
        // clip_warmup_steps: the clipping grows with the step, and evaluations in between see the
        // strength the last step trained with.
        if (m_config.clipWarmupSteps > 0)
            m_net->setClipStrength(double(step + 1) / double(m_config.clipWarmupSteps));
        m_net->setTraining(true);
        if (m_shard.whole()) return nextTokenCrossEntropy(logitsOf(ids, nullptr), ids);
        // Every row scores T - 1 tokens, so a shard's share of the batch mean is its mean times its rows'
        // share.
        const torch::Tensor rows = shardRows(ids, m_shard);
        return nextTokenCrossEntropy(logitsOf(rows, nullptr), rows) *
               (double(rows.size(0)) / double(ids.size(0)));
    }

    void keepHeadInFloat() override
    {
        auto* lm = dynamic_cast<decoder::DecoderLmImpl*>(&m_net->module());
        if (!lm) throw Error("causal LM: the decoder module has no LM head");
        m_headFloat = lm->headWeight().detach().to(torch::kFloat).clone();
        m_lm = lm;
    }

    std::pair<std::string, double> evaluate(ActivationSink* sink = nullptr) override
    {
        m_net->setTraining(false);
        c10::InferenceMode guard;
        double lossSum = 0;
        std::int64_t predictions = 0;
        for (std::int64_t start = 0; start < m_validCount; start += m_config.batchSize) {
            const torch::Tensor ids =
                validBlocks(start, std::min<std::int64_t>(m_config.batchSize, m_validCount - start));
            const torch::Tensor logits = logitsOf(ids, sink);
            const std::int64_t n = ids.size(0) * (ids.size(1) - 1);
            lossSum += nextTokenCrossEntropy(logits, ids).item<double>() * double(n);
            predictions += n;
        }
        return {"perplexity", std::exp(lossSum / double(std::max<std::int64_t>(predictions, 1)))};
    }

    void calibrationForward(std::int64_t index, at::Generator&, ActivationSink& sink) override
    {
        const torch::Tensor ids =
            m_backcopy
                ? m_backcopy->sample(m_config.seed, kCalibrationIndex - index, m_config.batchSize)
                : m_train->blocks(batchIndices(m_trainCount, m_config.batchSize, index, m_config.seed + 1));
        m_net->setTraining(false);
        c10::InferenceMode guard;
        logitsOf(ids, &sink);
    }

    std::vector<std::int64_t> probe(ActivationSink& sink) override
    {
        const std::int64_t n = std::min<std::int64_t>(8, m_validCount);
        const torch::Tensor ids = validBlocks(0, n);
        m_net->setTraining(false);
        c10::InferenceMode guard;
        m_net->forward(ids, {}, &sink, false);
        return std::vector<std::int64_t>(std::size_t(n), ids.size(1));
    }

    /// Block outputs first: the tensor of the decoder figures (DESIGN.md).
    std::vector<CapturePoint> trackedPoints() const override
    {
        return {CapturePoint::Out, CapturePoint::FfnOut};
    }
    int numLayers() const override { return m_net->config().numLayers; }

    void saveModel(const std::string& dir, const std::string& card) const override
    {
        m_net->save(dir);
        for (const std::string& name : kTokenizerFiles) {
            const fs::path source = fs::path(m_tokenizerDir) / name;
            if (fs::is_regular_file(source))
                fs::copy_file(source, fs::path(dir) / name, fs::copy_options::overwrite_existing);
        }
        writeModelCard(dir, card);
        if (m_backcopy) {
            writeSampleInputs(dir);
            writeShowcase(dir, computeShowcase(dir)); // from the saved folder, as the app will load it
        }
    }

    void loadWeights(const std::string& dir) override
    {
        DecoderNetwork saved = DecoderNetwork::load(dir);
        copyParameters(saved, *m_net, dir);
    }

    std::string describe() const override
    {
        const DecoderConfig& c = m_net->config();
        return toString(c.arch) + " causal LM (" + std::to_string(c.numLayers) + " layers, hidden " +
               std::to_string(c.hiddenSize) + ", " + std::to_string(c.numHeads) + " heads, T " +
               std::to_string(m_config.seqLength) + ", " + m_tokenizer->kind() + " vocabulary of " +
               std::to_string(m_tokenizer->vocabSize()) + ") on " +
               (m_backcopy ? "Bigram-Backcopy sequences from the character bigrams of " : "") +
               fs::path(m_config.corpus).filename().string() + ", " + c.variant.describe();
    }

private:
    /// Logits [B, T, V] float32: the network's own head, or the floating-point copy of it.
    torch::Tensor logitsOf(const torch::Tensor& ids, ActivationSink* sink)
    {
        if (!m_headFloat.defined()) return m_net->forward(ids, {}, sink, true).logits;
        const torch::Tensor hidden = m_net->forward(ids, {}, sink, false).lastHidden;
        // The layout's own head computation (Phi's bias, Gemma 2's soft cap) with the float weight.
        return m_lm->logits(hidden.to(torch::kFloat), m_headFloat);
    }

    torch::Tensor validBlocks(std::int64_t start, std::int64_t count) const
    {
        if (m_backcopy) return m_validIds.narrow(0, start, count);
        return (m_valid ? *m_valid : *m_train).range(m_validOffset + start, count);
    }

    /// Task data from the text: blocks of the corpus, held out from valid_corpus or its last blocks.
    void buildTextBlocks(const TrainConfig& t, std::int64_t evalBlocks)
    {
        m_train = std::make_unique<TokenBlocks>(TokenBlocks::build(t.corpus, *m_tokenizer, t.seqLength));
        if (!t.validCorpus.empty()) {
            m_valid = std::make_unique<TokenBlocks>(
                TokenBlocks::build(t.validCorpus, *m_tokenizer, t.seqLength, std::size_t(evalBlocks)));
            m_validCount = std::min<std::int64_t>(evalBlocks, m_valid->size());
            m_trainCount = m_train->size();
        } else {
            // No held-out file: the last blocks of the corpus are held out and never trained on.
            if (m_train->size() < evalBlocks + t.batchSize)
                throw Error(t.corpus + ": " + std::to_string(m_train->size()) + " blocks of " +
                            std::to_string(t.seqLength) + " tokens (" +
                            std::to_string(m_train->tokenCount()) + " tokens) are too few to hold out " +
                            std::to_string(evalBlocks) + " and train with batches of " +
                            std::to_string(t.batchSize));
            m_validCount = evalBlocks;
            m_validOffset = m_train->size() - evalBlocks;
            m_trainCount = m_validOffset;
        }
        if (m_trainCount < t.batchSize)
            throw Error(t.corpus + ": " + std::to_string(m_trainCount) + " blocks of " +
                        std::to_string(t.seqLength) + " tokens (" + std::to_string(m_train->tokenCount()) +
                        " tokens), fewer than one batch of " + std::to_string(t.batchSize));
    }

    /// PyTorch's module defaults (init_scheme pytorch), drawn from a generator of the run's seed:
    /// matrices and their biases uniform(+-1/sqrt(fan_in)) as nn.Linear (kaiming_uniform with
    /// a = sqrt(5)), token and position embeddings normal(0, 1) as nn.Embedding (padding row zero);
    /// norms keep 1 and 0, the attention gates their init (bias logit(pi_init)).
    void initializeLikePyTorch(std::uint64_t seed)
    {
        torch::NoGradGuard noGrad;
        at::Generator generator = at::detail::createCPUGenerator(seed + 0x7079746f); // "pyto"
        auto params = m_net->module().named_parameters(true);
        const auto endsWith = [](const std::string& name, const std::string& tail) {
            return name.size() >= tail.size() &&
                   name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
        };
        for (auto& item : params) {
            const std::string& name = item.key();
            torch::Tensor& p = item.value();
            if (name.find(".alpha") != std::string::npos || p.dim() != 2) continue;
            if (endsWith(name, "embed_tokens.weight") || endsWith(name, "embed_positions.weight") ||
                endsWith(name, "wte.weight") || endsWith(name, "wpe.weight")) {
                p.normal_(0.0, 1.0, generator);
                const int pad = m_net->config().padTokenId;
                if (endsWith(name, "embed_tokens.weight") && pad >= 0 && pad < p.size(0)) p[pad].zero_();
                continue;
            }
            // nn.Linear stores [out, in]; GPT-2's Conv1D [in, out].
            const bool conv1d = modelFamily(m_net->config().familyId()).conv1dWeights &&
                                name.find("lm_head") == std::string::npos;
            const double bound = 1.0 / std::sqrt(double(p.size(conv1d ? 0 : 1)));
            p.uniform_(-bound, bound, generator);
            if (endsWith(name, ".weight"))
                if (torch::Tensor* bias = params.find(name.substr(0, name.size() - 6) + "bias"))
                    bias->uniform_(-bound, bound, generator);
        }
    }

    /// The first held-out sequences as text, one per line: inputs for the app and `inspect`.
    void writeSampleInputs(const std::string& dir) const
    {
        std::ofstream out(fs::path(dir) / "sample_inputs.txt", std::ios::binary);
        const std::int64_t n = std::min<std::int64_t>(16, m_validIds.size(0));
        for (std::int64_t i = 0; i < n; ++i)
            out << m_backcopy->text(m_validIds[i]) << '\n';
        if (!out) throw Error(dir + "/sample_inputs.txt: could not be written");
    }

    TrainConfig m_config;
    std::string m_tokenizerDir;
    std::unique_ptr<DecoderTokenizer> m_tokenizer;
    std::unique_ptr<DecoderNetwork> m_net;
    std::unique_ptr<TokenBlocks> m_train, m_valid;
    std::unique_ptr<BigramBackcopy> m_backcopy; ///< clm_data bigram-backcopy instead of text blocks
    torch::Tensor m_validIds;                   ///< bigram-backcopy: the held-out sequences [N, T]
    /// Keys of the generated sequences outside the training steps' (which are >= 0).
    static constexpr std::int64_t kValidIndex = -1, kCalibrationIndex = -2;
    torch::Tensor m_headFloat;                    ///< [V, E] set by keepHeadInFloat()
    const decoder::DecoderLmImpl* m_lm = nullptr; ///< the network's LM module, set with m_headFloat
    std::int64_t m_trainCount = 0, m_validCount = 0, m_validOffset = 0;
};

} // namespace

std::unique_ptr<TrainingTask> makeClmTask(const TrainConfig& config)
{
    return std::make_unique<ClmTask>(config);
}

} // namespace outlierlens
