// Golden parity of the newer decoder families with Hugging Face transformers v4.47.1 (Qwen3: v4.51.3):
// Qwen2 (q/k/v biases), Qwen3 (per-head q/k norms, head_dim), Mistral (sliding window, head_dim), LLaMA 3
// (rope_scaling "llama3"), Gemma 2 (soft-caps, four norms, alternating windows, scaled embeddings), Phi
// (parallel block, partial rotary, head bias), GPT-NeoX (per-head fused QKV, parallel residual) and Falcon
// 7B / 40B (multi-query and grouped fused QKV), found through the family registry. Every capture point the
// references hold, the last hidden state and the logits, on right- and left-padded rows (real positions
// only); keys outside the window get probability exactly 0; sharded, bfloat16 and float16 folders load as
// they are. References: tests/fixtures/families/README.md.

#include "../common/decoder_compare.h"
#include "../common/tensor_compare.h"

#include "io/hdf5_store.h"
#include "model/decoder_modules.h"
#include "model/decoder_network.h"
#include "model/model_family.h"
#include "model/runtime.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <fstream>

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

using namespace outlierlens;
using outlierlens::test::compareReal;
using outlierlens::test::fixture;
using outlierlens::test::heads;
using outlierlens::test::Recorder;

namespace {

constexpr double kActTolerance = 1e-4;  // activations and logits
constexpr double kProbTolerance = 1e-5; // attention probabilities

} // namespace

class TstFamilyParity : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { configureTorchThreads(); }

    /// The LM head with a floating-point copy of its weight (what `quantize` uses while the model's own
    /// weights are quantized) computes what the layout's head does: Phi's bias, Gemma 2's soft cap kept.
    void headWithAWeightCopyKeepsBiasAndSoftcap()
    {
        for (const char* family : {"phi", "gemma2", "llama3"}) {
            DecoderNetwork net = DecoderNetwork::load(fixture(std::string("families/") + family + "/hf"));
            const torch::Tensor ids = torch::arange(9).view({1, 9});
            torch::NoGradGuard noGrad;
            const torch::Tensor expected = net.forward(ids).logits;
            const auto* lm = dynamic_cast<const decoder::DecoderLmImpl*>(&net.module());
            QVERIFY(lm);
            const torch::Tensor hidden = net.forward(ids, {}, nullptr, false).lastHidden;
            const torch::Tensor actual = lm->logits(hidden, lm->headWeight().to(torch::kFloat).clone());
            OL_COMPARE_TENSORS(QString(family), actual, expected, 1e-6);
        }
    }

    void captures_data()
    {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("folder");
        QTest::addColumn<QString>("id"); // the registry's family
        const std::pair<const char*, const char*> rows[] = {
            {"qwen2", "qwen2"},       {"qwen3", "qwen3"},      {"mistral", "mistral"},
            {"llama3", "llama"},      {"gemma2", "gemma2"},    {"phi", "phi"},
            {"gpt-neox", "gpt_neox"}, {"falcon-7b", "falcon"}, {"falcon-40b", "falcon"}};
        for (const auto& [family, id] : rows)
            QTest::newRow(family) << family << "hf" << id;
        QTest::newRow("llama3 sharded") << "llama3"
                                        << "hf_sharded"
                                        << "llama";
    }

    void captures()
    {
        QFETCH(QString, family);
        QFETCH(QString, folder);
        QFETCH(QString, id);
        const std::string dir = fixture("families/" + family.toStdString());
        const std::string modelDir = dir + "/" + folder.toStdString();
        // The registry finds the family; the decoder code runs it.
        const ModelFamily& f = modelFamilyOfDir(modelDir);
        QCOMPARE(QString::fromStdString(f.id), id);
        QCOMPARE(f.engine, FamilyEngine::Decoder);
        DecoderNetwork net = DecoderNetwork::load(modelDir);
        const DecoderConfig& c = net.config();
        QCOMPARE(QString::fromStdString(c.familyId()), QString::fromStdString(f.id));

        Hdf5Reader ref(dir + "/reference.h5");
        const torch::Tensor ids = ref.readTensor("inputs/input_ids");
        const torch::Tensor mask = ref.readTensor("inputs/attention_mask");
        Recorder sink;
        c10::InferenceMode guard;
        const DecoderForward out = net.forward(ids, mask, &sink);

        const int H = c.numHeads, Hkv = c.numKvHeads;
        const torch::Tensor hidden = ref.readTensor("hidden_states"),
                            attentions = ref.readTensor("attentions");
        const torch::Tensor scores = ref.readTensor("layers/attn_scores"), v = ref.readTensor("layers/v");
        const torch::Tensor context = ref.readTensor("layers/context"),
                            attnProj = ref.readTensor("layers/attn_proj");
        const torch::Tensor xDown = ref.readTensor("layers/x_down"),
                            ffnOut = ref.readTensor("layers/ffn_out");
        double act = 0, prob = 0;
        compareReal("embeddings", sink.at("embeddings"), hidden[0], mask, {0}, kActTolerance, &act);
        for (int i = 0; i < c.numLayers; ++i) {
            const QString l = QStringLiteral("layer%1/").arg(i);
            auto at = [&](const char* point) { return sink.at((l + point).toStdString()); };
            compareReal(l + "attn_scores", at("attn_scores"), scores[i], mask, {1, 2}, kActTolerance, &act);
            compareReal(l + "attn_probs", at("attn_probs"), attentions[i], mask, {1, 2}, kProbTolerance,
                        &prob);
            compareReal(l + "attn_values", at("attn_values"), heads(v[i], Hkv).repeat_interleave(H / Hkv, 1),
                        mask, {1}, kActTolerance, &act);
            compareReal(l + "attn_context", at("attn_context"), heads(context[i], H), mask, {1},
                        kActTolerance, &act);
            compareReal(l + "attn_out", at("attn_out"), attnProj[i], mask, {0}, kActTolerance, &act);
            compareReal(l + "down_in", at("down_in"), xDown[i], mask, {0}, kActTolerance, &act);
            compareReal(l + "ffn_out", at("ffn_out"), ffnOut[i], mask, {0}, kActTolerance, &act);
            compareReal(l + "out", at("out"), hidden[i + 1], mask, {0}, kActTolerance, &act);

            // Future keys, padded keys and keys outside the sliding window of every real query: exactly 0.
            const torch::Tensor p = at("attn_probs");
            const auto T = p.size(-1);
            torch::Tensor slots = torch::ones({T, T}, torch::kBool).tril();
            if (c.slidingWindow > 0 && (!c.slidingWindowAlternates || i % 2 == 0))
                slots = slots.triu(-(c.slidingWindow - 1));
            const torch::Tensor realQ = mask.view({-1, 1, T, 1}).ne(0);
            const torch::Tensor allowed = slots.view({1, 1, T, T}) & mask.view({-1, 1, 1, T}).ne(0);
            const torch::Tensor hidden0 = p.masked_select(realQ & allowed.logical_not());
            QVERIFY2(hidden0.numel() > 0 && hidden0.eq(0).all().item<bool>(),
                     qPrintable(l + "attn_probs: a masked key has a non-zero probability"));
            // ... and the keys it may see carry all of the probability.
            QVERIFY(torch::allclose(
                p.masked_fill(allowed.logical_not(), 0).sum(-1).masked_select(mask.view({-1, 1, T}).ne(0)),
                torch::ones({1}), 1e-5, 1e-5));
        }
        double logits = 0;
        compareReal("last_hidden_state", out.lastHidden, ref.readTensor("outputs/last_hidden_state"), mask,
                    {0}, kActTolerance, &logits);
        compareReal("logits", out.logits, ref.readTensor("outputs/logits"), mask, {0}, kActTolerance,
                    &logits);
        qInfo("%s %s: max |diff| activations %.3g, probabilities %.3g, logits %.3g", qPrintable(family),
              qPrintable(folder), act, prob, logits);
    }

    void lowPrecisionWeights_data()
    {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("folder");
        QTest::addColumn<QString>("dataset");
        QTest::addColumn<int>("dtype");
        QTest::newRow("llama3 bf16") << "llama3"
                                     << "hf_bf16"
                                     << "bf16_weights/logits" << int(torch::kBFloat16);
        QTest::newRow("mistral fp16") << "mistral"
                                      << "hf_fp16"
                                      << "fp16_weights/logits" << int(torch::kHalf);
        QTest::newRow("gemma2 bf16") << "gemma2"
                                     << "hf_bf16"
                                     << "bf16_weights/logits" << int(torch::kBFloat16);
    }

    void lowPrecisionWeights()
    {
        // Weights stay as stored and are upcast per use: the logits of the stored weights in float32.
        QFETCH(QString, family);
        QFETCH(QString, folder);
        QFETCH(QString, dataset);
        QFETCH(int, dtype);
        const std::string dir = fixture("families/" + family.toStdString());
        DecoderNetwork net = DecoderNetwork::load(dir + "/" + folder.toStdString());
        for (const auto& item : net.module().named_parameters(true))
            QVERIFY2(item.value().scalar_type() == torch::ScalarType(dtype), item.key().c_str());
        Hdf5Reader ref(dir + "/reference.h5");
        const torch::Tensor ids = ref.readTensor("inputs/input_ids"),
                            mask = ref.readTensor("inputs/attention_mask");
        c10::InferenceMode guard;
        const DecoderForward out = net.forward(ids, mask);
        double diff = 0;
        compareReal(dataset, out.logits, ref.readTensor(dataset.toStdString()), mask, {0}, kActTolerance,
                    &diff);
        // The stored weights were used: the float32 model's logits are farther away.
        QVERIFY(test::maxAbsDiff(out.logits, ref.readTensor("outputs/logits")) > 10 * diff);
        qInfo("%s %s: max |diff| logits %.3g", qPrintable(family), qPrintable(folder), diff);
    }

    void trapsAreReadFromTheConfig()
    {
        // What each family's config sets, as read (the parity above shows they are used).
        const DecoderConfig qwen = DecoderConfig::fromFile(fixture("families/qwen2/hf/config.json"));
        QVERIFY(qwen.attentionBias && qwen.tieWordEmbeddings && qwen.slidingWindow == 0);
        const DecoderConfig mistral = DecoderConfig::fromFile(fixture("families/mistral/hf/config.json"));
        QCOMPARE(mistral.slidingWindow, 6);
        QCOMPARE(mistral.headDim(), 16);
        const DecoderConfig llama3 = DecoderConfig::fromFile(fixture("families/llama3/hf/config.json"));
        QCOMPARE(QString::fromStdString(llama3.ropeScalingType), QStringLiteral("llama3"));
        QCOMPARE(llama3.ropeOriginalMaxPositions, 8192);
        // A config written back reads the same.
        QTemporaryDir tmp;
        for (const DecoderConfig* c : {&qwen, &mistral, &llama3}) {
            const QString path = tmp.path() + "/config.json";
            QFile file(path);
            QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
            file.write(QByteArray::fromStdString(c->toJson()));
            file.close();
            const DecoderConfig back = DecoderConfig::fromFile(path.toStdString());
            QCOMPARE(QString::fromStdString(back.familyId()), QString::fromStdString(c->familyId()));
            QCOMPARE(back.attentionBias, c->attentionBias);
            QCOMPARE(back.slidingWindow, c->slidingWindow);
            QCOMPARE(back.headDim(), c->headDim());
            QCOMPARE(QString::fromStdString(back.ropeScalingType),
                     QString::fromStdString(c->ropeScalingType));
            QCOMPARE(back.ropeHighFreqFactor, c->ropeHighFreqFactor);
        }
        // Gemma 2: a field the config leaves out takes Gemma2Config's default (window 4096, caps 50 and 30,
        // query_pre_attn_scalar 256); null switches a cap or the window off.
        std::ifstream in(fixture("families/gemma2/hf/config.json"));
        nlohmann::json j = nlohmann::json::parse(in);
        for (const char* key :
             {"sliding_window", "attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar"})
            j.erase(key);
        const QString path = tmp.path() + "/gemma2.json";
        auto write = [&](const nlohmann::json& config) {
            QFile file(path);
            QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
            file.write(QByteArray::fromStdString(config.dump()));
        };
        write(j);
        DecoderConfig gemma = DecoderConfig::fromFile(path.toStdString());
        QCOMPARE(gemma.slidingWindow, 4096);
        QCOMPARE(gemma.attnLogitSoftcap, 50.0);
        QCOMPARE(gemma.finalLogitSoftcap, 30.0);
        QCOMPARE(gemma.queryPreAttnScalar, 256.0);
        j["attn_logit_softcapping"] = nullptr;
        j["sliding_window"] = nullptr;
        write(j);
        gemma = DecoderConfig::fromFile(path.toStdString());
        QCOMPARE(gemma.attnLogitSoftcap, 0.0);
        QCOMPARE(gemma.slidingWindow, 0);
    }
};

QTEST_GUILESS_MAIN(TstFamilyParity)
#include "tst_family_parity.moc"
