// Causal-LM training (task clm) and W8A8 simulation on decoders: token blocks are the concatenated
// stream, the loss goes down, perplexity is exp(mean next-token cross entropy) of the model's logits,
// a stopped run resumes onto the same curve, bad configs fail clearly, and quantize measures the
// floating-point perplexity evaluate() gives.

#include "model/decoder_network.h"
#include "quant/evaluation.h"
#include "tasks/data/clm_data.h"
#include "tasks/training_task.h"
#include "text/decoder_tokenizer.h"
#include "train/trainer.h"

#include "../common/tensor_compare.h"
#include "common/error.h"

#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

using namespace outlierlens;

namespace {

const std::string kTokenizer = OUTLIERLENS_SOURCE_DIR "/sample_data/tokenizers/wiki-bpe-1k";
const std::string kTrain = OUTLIERLENS_TEST_DATA "/train/tiny_train.txt";
const std::string kValid = OUTLIERLENS_TEST_DATA "/train/tiny_valid.txt";
const std::string kTooSmall = OUTLIERLENS_TEST_DATA "/train/too_small.txt";

/// A GPT-2-shaped decoder with 2 layers of 64 units on blocks of 32 tokens.
TrainConfig tinyClm(const std::string& output, std::int64_t steps)
{
    TrainConfig c;
    c.task = TrainTask::CausalLm;
    c.output = output;
    c.corpus = kTrain;
    c.validCorpus = kValid;
    c.tokenizer = kTokenizer;
    c.preset = "gpt2-tiny";
    c.seqLength = 32;
    c.batchSize = 8;
    c.steps = steps;
    c.lr = 3e-3;
    c.warmupSteps = 2;
    c.logEvery = 1;
    c.evalEvery = 1000;
    c.checkpointEvery = 4;
    c.evalBatches = 2;
    c.threads = 1;
    c.seed = 5;
    return c;
}

struct Collected
{
    std::map<std::int64_t, double> losses;
    std::vector<nlohmann::json> evals;
};

TrainResult train(const TrainConfig& c, bool resume, Collected& out, std::int64_t stopAfter = -1)
{
    std::atomic<bool> stop{false};
    return runTraining(c, resume, stop, [&](const std::string& line) {
        const nlohmann::json j = nlohmann::json::parse(line);
        if (j["type"] == "progress") {
            out.losses[j["step"].get<std::int64_t>()] = j["loss"].get<double>();
            if (j["step"].get<std::int64_t>() == stopAfter) stop = true;
        }
        if (j["type"] == "eval") out.evals.push_back(j);
    });
}

std::string expectError(const std::function<void()>& f)
{
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

/// The token stream the task should see, built here from the tokenizer alone: each non-blank line
/// encoded, followed by <|endoftext|> (the tokenizer adds no BOS).
std::vector<std::int64_t> expectedStream(const std::string& file, const DecoderTokenizer& tok)
{
    std::ifstream in(file);
    std::vector<std::int64_t> stream;
    for (std::string line; std::getline(in, line);) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        for (std::int64_t id : tok.encode(line).inputIds)
            stream.push_back(id);
        stream.push_back(tok.eosId());
    }
    return stream;
}

/// Keeps layer 1's attention probabilities [B, H, T, T].
struct FirstProbs : ActivationSink
{
    torch::Tensor probs;
    bool wants(CapturePoint point, int layer) const override
    {
        return point == CapturePoint::AttnProbs && layer == 0;
    }
    void put(CapturePoint, int, const at::Tensor& batched) override { probs = batched.clone(); }
};

} // namespace

class TstClm : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_dir;

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        torch::set_num_threads(1);
    }

    void blocksAreTheConcatenatedStream()
    {
        const auto tok = DecoderTokenizer::fromModelDir(kTokenizer);
        QCOMPARE(tok->bosId(), tok->eosId()); // GPT-2 style: <|endoftext|>
        const std::vector<std::int64_t> stream = expectedStream(kValid, *tok);
        const TokenBlocks blocks = TokenBlocks::build(kValid, *tok, 32);
        QCOMPARE(blocks.tokenCount(), std::int64_t(stream.size()));
        QCOMPARE(blocks.size(), std::int64_t(stream.size() / 32));
        for (std::int64_t b : {std::int64_t(0), blocks.size() / 2, blocks.size() - 1}) {
            const torch::Tensor row = blocks.blocks({b})[0];
            for (std::int64_t t = 0; t < 32; ++t)
                QCOMPARE(row[t].item<std::int64_t>(), stream[std::size_t(b * 32 + t)]);
        }
        QCOMPARE(TokenBlocks::build(kValid, *tok, 32, 3).size(), std::int64_t(3));
    }

    void lossGoesDownOnARepeatedCorpus()
    {
        const std::string corpus = (m_dir.path() + "/repeated.txt").toStdString();
        {
            std::ofstream out(corpus);
            for (int i = 0; i < 200; ++i)
                out << "The city of Paris is the capital of France and its largest city.\n";
        }
        TrainConfig c = tinyClm((m_dir.path() + "/repeated").toStdString(), 30);
        c.corpus = corpus;
        c.validCorpus.clear(); // the last blocks are held out
        Collected run;
        const TrainResult r = train(c, false, run);
        QVERIFY(r.outcome == TrainOutcome::Finished);
        QCOMPARE(run.losses.size(), std::size_t(30));
        const double first = run.losses.at(1),
                     last = (run.losses.at(28) + run.losses.at(29) + run.losses.at(30)) / 3;
        QVERIFY2(first > 6.0,
                 qPrintable(QString("initial loss %1, expected about ln(1257) = 7.1").arg(first)));
        QVERIFY2(last < first - 3.0, qPrintable(QString("loss %1 -> %2").arg(first).arg(last)));
        // The final evaluation reports a perplexity that reflects the learnt repetition.
        const double ppl = run.evals.back()["eval"]["perplexity"].get<double>();
        QVERIFY2(ppl < std::exp(first) / 10, qPrintable(QString("perplexity %1").arg(ppl)));
    }

    /// train --task clm on every decoder layout (issue #38): the loss of a repeated sentence falls, and the
    /// saved model reloads as its family.
    void everyLayoutTrains_data()
    {
        QTest::addColumn<QString>("preset");
        QTest::addColumn<QString>("family");
        QTest::newRow("qwen3") << "qwen3-tiny"
                               << "qwen3";
        QTest::newRow("mistral") << "mistral-tiny"
                                 << "mistral";
        QTest::newRow("gemma2") << "gemma2-tiny"
                                << "gemma2";
        QTest::newRow("phi") << "phi-tiny"
                             << "phi";
        QTest::newRow("pythia") << "pythia-tiny"
                                << "gpt_neox";
        QTest::newRow("falcon-7b") << "falcon-tiny"
                                   << "falcon";
        QTest::newRow("falcon-40b") << "falcon40b-tiny"
                                    << "falcon";
    }

    void everyLayoutTrains()
    {
        QFETCH(QString, preset);
        QFETCH(QString, family);
        const std::string corpus = (m_dir.path() + "/repeated-" + preset + ".txt").toStdString();
        {
            std::ofstream out(corpus);
            for (int i = 0; i < 200; ++i)
                out << "The city of Paris is the capital of France and its largest city.\n";
        }
        TrainConfig c = tinyClm((m_dir.path() + "/layout-" + preset).toStdString(), 12);
        c.preset = preset.toStdString();
        c.corpus = corpus;
        c.validCorpus.clear();
        Collected run;
        QVERIFY(train(c, false, run).outcome == TrainOutcome::Finished);
        const double first = run.losses.at(1), last = (run.losses.at(11) + run.losses.at(12)) / 2;
        QVERIFY2(last < first - 1.0, qPrintable(QString("loss %1 -> %2").arg(first).arg(last)));
        std::unique_ptr<TrainingTask> task = makeTrainingTask(c);
        const std::string folder = (m_dir.path() + "/layout-model-" + preset).toStdString();
        task->saveModel(folder, "# test\n");
        const DecoderNetwork net = DecoderNetwork::load(folder);
        QCOMPARE(QString::fromStdString(net.config().familyId()), family);
    }

    void evaluateIsExpOfMeanNextTokenCrossEntropy()
    {
        TrainConfig c = tinyClm((m_dir.path() + "/eval").toStdString(), 1);
        std::unique_ptr<TrainingTask> task = makeTrainingTask(c);
        QCOMPARE(task->numLayers(), 2);
        QVERIFY(task->trackedPoints().front() == CapturePoint::Out);
        task->module().eval();
        const auto [name, ppl] = task->evaluate();
        QCOMPARE(name, std::string("perplexity"));

        // Independently: the saved model's logits on the first eval_batches x batch_size held-out blocks.
        const std::string folder = (m_dir.path() + "/eval-model").toStdString();
        task->saveModel(folder, "# test\n");
        QVERIFY(std::filesystem::exists(folder + "/vocab.json"));
        QVERIFY(std::filesystem::exists(folder + "/merges.txt"));
        DecoderNetwork net = DecoderNetwork::load(folder);
        const auto tok = DecoderTokenizer::fromModelDir(folder);
        const std::vector<std::int64_t> stream = expectedStream(kValid, *tok);
        const std::int64_t n = 2 * 8, T = 32;
        QVERIFY(std::int64_t(stream.size()) >= n * T);
        const torch::Tensor ids =
            torch::tensor(std::vector<std::int64_t>(stream.begin(), stream.begin() + n * T)).view({n, T});
        c10::InferenceMode guard;
        const torch::Tensor logits = net.forward(ids, {}, nullptr, true).logits.to(torch::kDouble);
        const torch::Tensor logp = torch::log_softmax(logits, -1);
        double sum = 0;
        for (std::int64_t b = 0; b < n; ++b)
            for (std::int64_t t = 0; t + 1 < T; ++t)
                sum -= logp[b][t][ids[b][t + 1].item<std::int64_t>()].item<double>();
        const double expected = std::exp(sum / double(n * (T - 1)));
        QVERIFY2(
            std::abs(ppl - expected) < 1e-4 * expected,
            qPrintable(QString("evaluate %1, recomputed %2").arg(ppl, 0, 'g', 10).arg(expected, 0, 'g', 10)));
        QVERIFY(ppl > 100); // an untrained model over 1,257 tokens is close to uniform
    }

    void stoppedRunResumesOntoTheSameCurve()
    {
        const std::string whole = (m_dir.path() + "/whole").toStdString();
        const std::string parts = (m_dir.path() + "/parts").toStdString();
        Collected a, b;
        QVERIFY(train(tinyClm(whole, 12), false, a).outcome == TrainOutcome::Finished);
        const TrainResult stopped = train(tinyClm(parts, 12), false, b, 6);
        QVERIFY(stopped.outcome == TrainOutcome::Stopped);
        QCOMPARE(stopped.step, std::int64_t(6));
        QVERIFY(train(tinyClm(parts, 12), true, b).outcome == TrainOutcome::Finished);
        QCOMPARE(b.losses.size(), a.losses.size());
        for (const auto& [step, loss] : a.losses)
            QVERIFY2(std::abs(b.losses.at(step) - loss) <= 1e-6 * std::abs(loss),
                     qPrintable(QString("step %1: %2 vs %3").arg(step).arg(b.losses.at(step)).arg(loss)));
        QVERIFY(a.losses.at(12) < a.losses.at(1));
        const double pa = a.evals.back()["eval"]["perplexity"].get<double>();
        const double pb = b.evals.back()["eval"]["perplexity"].get<double>();
        QVERIFY2(std::abs(pa - pb) <= 1e-6 * pa, qPrintable(QString("%1 vs %2").arg(pa).arg(pb)));
        // The final folder loads as a decoder with the trained shape.
        const DecoderNetwork net = DecoderNetwork::load(whole + "/final");
        QCOMPARE(net.config().numLayers, 2);
        QCOMPARE(net.config().vocabSize, 1257);
    }

    void badConfigsSayWhatIsWrong()
    {
        const std::string out = (m_dir.path() + "/bad").toStdString();
        TrainConfig noTokenizer = tinyClm(out, 5);
        noTokenizer.tokenizer.clear();
        QString e = QString::fromStdString(expectError([&] { validateTrainConfig(noTokenizer); }));
        QVERIFY2(e.startsWith("tokenizer: task clm needs a decoder tokenizer folder"), qPrintable(e));

        TrainConfig missing = tinyClm(out, 5);
        missing.tokenizer = "/nonexistent/tokenizer";
        e = QString::fromStdString(expectError([&] { makeTrainingTask(missing); }));
        QVERIFY2(e.contains("/nonexistent/tokenizer") && e.contains("vocab.json"), qPrintable(e));

        TrainConfig tooShort = tinyClm(out, 5);
        tooShort.corpus = kTooSmall;
        e = QString::fromStdString(expectError([&] { makeTrainingTask(tooShort); }));
        QVERIFY2(e.contains("too_small.txt") && e.contains("one block needs 32"), qPrintable(e));

        TrainConfig fewBlocks = tinyClm(out, 5);
        fewBlocks.batchSize = 4096;
        e = QString::fromStdString(expectError([&] { makeTrainingTask(fewBlocks); }));
        QVERIFY2(e.contains("tiny_train.txt") && e.contains("fewer than one batch of 4096"), qPrintable(e));

        TrainConfig bertSize = tinyClm(out, 5);
        bertSize.preset = "bert-mini";
        e = QString::fromStdString(expectError([&] { validateTrainConfig(bertSize); }));
        QVERIFY2(e.contains("'bert-mini' is a BERT size") && e.contains("llama-tiny"), qPrintable(e));

        TrainConfig sizedInit = tinyClm(out, 5);
        sizedInit.tokenizer.clear();
        sizedInit.init = "/models/decoder";
        e = QString::fromStdString(expectError([&] { validateTrainConfig(sizedInit); }));
        QVERIFY2(e.startsWith("preset: task clm with init"), qPrintable(e));
    }

    void sizesAndVariantReachTheModel()
    {
        TrainConfig c = tinyClm((m_dir.path() + "/llama").toStdString(), 4);
        c.preset = "llama-tiny";
        c.hiddenSize = 32;
        c.numHeads = 2;
        c.intermediateSize = 48;
        c.variant.softmax = SoftmaxKind::Clipped;
        c.variant.alpha = 12.0;
        validateTrainConfig(c);
        const DecoderConfig d = trainDecoderConfig(c);
        QVERIFY(d.arch == DecoderArch::Llama);
        QCOMPARE(d.hiddenSize, 32);
        QCOMPARE(d.numHeads, 2);
        QCOMPARE(d.numKvHeads, 2); // llama-tiny's 2 groups still divide the heads
        QCOMPARE(d.intermediateSize, 48);
        QCOMPARE(d.variant.maxSeqLength, 32);
        QCOMPARE(d.variant.effectiveGamma(), -12.0 / 32);

        std::unique_ptr<TrainingTask> task = makeTrainingTask(c);
        const std::string folder = (m_dir.path() + "/llama-model").toStdString();
        task->saveModel(folder, "# test\n");
        const DecoderNetwork net = DecoderNetwork::load(folder);
        QCOMPARE(net.config().hiddenSize, 32);
        QVERIFY(net.config().variant.softmax == SoftmaxKind::Clipped);
        QCOMPARE(net.config().variant.effectiveGamma(), -12.0 / 32);
    }

    /// An et al.'s Table-2 variants (`train --attention NAME`): each trains, its extra parameters get
    /// gradients (they move from their initial values), and the final model reloads as that variant.
    void anEtAlVariantsTrain_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("described");
        QTest::addColumn<QString>("parameter"); // a parameter only the variant has ("": none)
        QTest::newRow("fixed-bias") << "fixed-bias"
                                    << "fixed-bias"
                                    << "layers.0.self_attn.v_bias";
        QTest::newRow("context-bias") << "context-bias"
                                      << "context-bias"
                                      << "layers.0.self_attn.k_bias";
        QTest::newRow("attention-bias") << "attention-bias"
                                        << "attention-bias"
                                        << "layers.1.self_attn.v_bias";
        QTest::newRow("context-scale") << "context-scale"
                                       << "context-scale"
                                       << "layers.1.self_attn.context_scale.0.weight";
        QTest::newRow("sigmoid") << "sigmoid"
                                 << "sigmoid attention"
                                 << "";
    }

    void anEtAlVariantsTrain()
    {
        QFETCH(QString, name);
        QFETCH(QString, described);
        QFETCH(QString, parameter);
        const std::string run = (m_dir.path() + "/an-" + name).toStdString();
        TrainConfig c = tinyClm(run, 4);
        c.preset = "opt-tiny"; // OPT's parameter names (layers.N.self_attn...)
        applyTrainFlag(c, "--attention", name.toStdString());
        validateTrainConfig(c);
        std::unique_ptr<TrainingTask> initial = makeTrainingTask(c);
        const std::string initFolder = run + "-init";
        initial->saveModel(initFolder, "# test\n");
        Collected collected;
        train(c, false, collected);
        QCOMPARE(int(collected.losses.size()), 4);
        for (const auto& [step, loss] : collected.losses)
            QVERIFY2(std::isfinite(loss), qPrintable(QString::number(step)));
        DecoderNetwork before = DecoderNetwork::load(initFolder);
        DecoderNetwork after = DecoderNetwork::load(run + "/final");
        QCOMPARE(QString::fromStdString(after.config().variant.describe()), described);
        if (parameter.isEmpty()) return;
        const auto find = [&](DecoderNetwork& net) {
            for (const auto& item : net.module().named_parameters(true))
                if (QString::fromStdString(item.key()).endsWith(parameter)) return item.value().clone();
            return torch::Tensor();
        };
        const torch::Tensor p0 = find(before), p1 = find(after);
        QVERIFY2(p0.defined() && p1.defined(), qPrintable(parameter));
        QVERIFY2(!torch::equal(p0, p1), qPrintable(parameter + " did not move"));
    }

    /// clip_warmup_steps: strength 0 is the plain softmax, strength s the clipped softmax with gamma
    /// and zeta - 1 scaled by s, strength 1 the configured one (exact zeros appear); the trainer fades
    /// it in with the step, and the config says when the field does not apply.
    void clipWarmupFadesTheClippingIn()
    {
        torch::NoGradGuard noGrad;
        DecoderConfig config = DecoderConfig::preset("opt-tiny");
        config.variant.softmax = SoftmaxKind::Clipped;
        config.variant.alpha = 4.0;
        config.variant.maxSeqLength = 16;
        config.variant.zeta = 1.5;
        DecoderConfig plain = config;
        plain.variant = AttentionVariant{};
        DecoderConfig half = config;
        half.variant.alpha.reset();
        half.variant.maxSeqLength = 0;
        half.variant.gamma = -0.5 * 4.0 / 16;
        half.variant.zeta = 1.25;
        // Same seed, same shapes: the same weights (the variants add no parameters).
        DecoderNetwork clipped = DecoderNetwork::create(config, 3);
        DecoderNetwork vanilla = DecoderNetwork::create(plain, 3);
        DecoderNetwork halfway = DecoderNetwork::create(half, 3);
        const torch::Tensor ids = torch::randint(0, config.vocabSize, {2, 16});
        const auto probsAndLogits = [&](DecoderNetwork& net) {
            FirstProbs sink;
            torch::Tensor logits = net.forward(ids, {}, &sink).logits;
            return std::make_pair(sink.probs, logits);
        };
        const auto [fullProbs, fullLogits] = probsAndLogits(clipped);
        QVERIFY(
            fullProbs.eq(0).logical_and(torch::ones({16, 16}).tril().to(torch::kBool)).any().item<bool>());
        clipped.setClipStrength(0.0);
        const auto [zeroProbs, zeroLogits] = probsAndLogits(clipped);
        QVERIFY(zeroLogits.equal(probsAndLogits(vanilla).second));
        QVERIFY(!zeroLogits.equal(fullLogits));
        clipped.setClipStrength(0.5);
        OL_COMPARE_TENSORS("half strength", probsAndLogits(clipped).second, probsAndLogits(halfway).second,
                           1e-6);

        const std::string out = (m_dir.path() + "/fade").toStdString();
        TrainConfig c = tinyClm(out, 6);
        c.clipWarmupSteps = 4;
        QString e = QString::fromStdString(expectError([&] { validateTrainConfig(c); }));
        QVERIFY2(e.startsWith("clip_warmup_steps: only used with softmax clipped"), qPrintable(e));
        c.variant.softmax = SoftmaxKind::Clipped;
        c.variant.alpha = 4.0;
        c.clipWarmupSteps = 7;
        e = QString::fromStdString(expectError([&] { validateTrainConfig(c); }));
        QVERIFY2(e.contains("must be in [0, steps = 6]"), qPrintable(e));
        c.clipWarmupSteps = 4;
        validateTrainConfig(c);
        QCOMPARE(parseTrainConfig(trainConfigToJson(c), "run.json").clipWarmupSteps, std::int64_t(4));
        c.task = TrainTask::MaskedLm;
        c.tokenizer.clear();
        e = QString::fromStdString(expectError([&] { validateTrainConfig(c); }));
        QVERIFY2(e.startsWith("clip_warmup_steps: only used by tasks clm, image and synthetic"),
                 qPrintable(e));
    }

    void quantizeMeasuresTheFloatPerplexityOfEvaluate()
    {
        // A briefly trained model, so that the logits are not nearly uniform.
        const std::string run = (m_dir.path() + "/quant-run").toStdString();
        Collected collected;
        QVERIFY(train(tinyClm(run, 20), false, collected).outcome == TrainOutcome::Finished);
        const std::string model = run + "/final";

        QuantExperiment e;
        e.modelDir = model;
        e.data = "text:" + kTrain;
        e.calibBatches = 2;
        e.seeds = 2;
        e.batchSize = 8;
        e.evalBatches = 2;
        e.seqLength = 32;
        const QuantResult r = runQuantExperiment(e, [](const std::string&) {});
        QCOMPARE(r.metricName, std::string("perplexity"));
        QCOMPARE(r.trackedPoint, std::string("out"));

        // The same held-out blocks through the training task's evaluate().
        TrainConfig t;
        t.task = TrainTask::CausalLm;
        t.output = run + "/unused";
        t.init = model;
        t.corpus = kTrain;
        t.batchSize = 8;
        t.seqLength = 32;
        t.evalBatches = 2;
        std::unique_ptr<TrainingTask> task = makeTrainingTask(t);
        task->module().eval();
        QCOMPARE(r.floatMetric, task->evaluate().second);

        QCOMPARE(r.quantMetrics.size(), std::size_t(2));
        for (double q : r.quantMetrics) {
            QVERIFY(std::isfinite(q) && q > 1);
            QVERIFY2(q != r.floatMetric, "W8A8 changed nothing");
            QVERIFY2(q < 2 * r.floatMetric, qPrintable(QString("FP %1, W8A8 %2").arg(r.floatMetric).arg(q)));
        }
        // Weights: embeddings and every projection; the tied head keeps a float copy, so no lm_head.
        const auto has = [&](const std::string& name) {
            return std::find(r.quantizedWeights.begin(), r.quantizedWeights.end(), name) !=
                   r.quantizedWeights.end();
        };
        QVERIFY(has("transformer.wte.weight"));
        QVERIFY(has("transformer.h.0.attn.c_attn.weight"));
        QVERIFY(has("transformer.h.1.mlp.c_proj.weight"));
        for (const std::string& w : r.quantizedWeights)
            QVERIFY2(w.find("ln_") == std::string::npos && w.find("lm_head") == std::string::npos, w.c_str());
        // Activation sites of OFT's placement, and no logits quantizer (the head is floating point).
        for (const char* site :
             {"embedding_sum", "layer0/query", "layer0/attn_scores", "layer0/attn_probs",
              "layer0/attn_context", "layer0/attn_out", "layer0/attn_residual", "layer0/attn_norm",
              "layer1/ffn_intermediate", "layer1/ffn_out", "layer1/ffn_residual", "final_norm"})
            QVERIFY2(r.ranges.count(site) == 1, site);
        QCOMPARE(r.ranges.count("logits"), std::size_t(0));
    }
};

QTEST_GUILESS_MAIN(TstClm)
#include "tst_clm.moc"
