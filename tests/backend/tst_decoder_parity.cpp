// Golden parity of the decoder networks with Hugging Face transformers v4.31 (GPT2LMHeadModel,
// OPTForCausalLM pre-LN and post-LN with project_in/out, LlamaForCausalLM with GQA) and with Qualcomm's
// OPTAttentionWithExtras (clipped softmax, gated attention): every capture point, the last hidden
// state and the logits, on right- and left-padded rows (real positions only), from every weight
// format the fixtures hold. References: tests/fixtures/decoders/README.md.

#include "../common/decoder_compare.h"
#include "../common/tensor_compare.h"

#include "io/hdf5_store.h"
#include "model/decoder_network.h"
#include "model/runtime.h"

#include <torch/torch.h>

#include <QtTest>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>

using namespace outlierlens;
using outlierlens::test::compareReal;
using outlierlens::test::fixture;
using outlierlens::test::heads;
using outlierlens::test::Recorder;
namespace fs = std::filesystem;

namespace {

constexpr double kActTolerance = 1e-4;  // activations and logits
constexpr double kProbTolerance = 1e-5; // attention and gate probabilities

/// A temporary model folder with config.json and one weight file (symlinked), so that each
/// format is loaded on its own.
QString folderWith(const QTemporaryDir& tmp, const fs::path& src, const std::string& weights)
{
    fs::copy_file(src / "config.json", fs::path(tmp.path().toStdString()) / "config.json");
    fs::create_symlink(src / weights, fs::path(tmp.path().toStdString()) / weights);
    return tmp.path();
}

struct Worst
{
    double act = 0, prob = 0, logits = 0;
};

} // namespace

class TstDecoderParity : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { configureTorchThreads(); }

    void captures_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("weights");
        for (const char* m : {"gpt2-seed0", "opt-seed0", "opt-postln-proj-seed0", "llama-seed0",
                              "opt-oft-clipped-alpha-seed0", "opt-oft-gated-linear-seed0"})
            for (const char* w : {"model.safetensors", "pytorch_model.bin"})
                if (fs::exists(fixture(std::string("decoders/") + m + "/hf/" + w)))
                    QTest::newRow(qPrintable(QString("%1 %2").arg(m, w))) << QString(m) << QString(w);
    }

    void captures()
    {
        QFETCH(QString, model);
        QFETCH(QString, weights);
        const fs::path dir = fixture("decoders/" + model.toStdString());
        QTemporaryDir tmp;
        DecoderNetwork net =
            DecoderNetwork::load(folderWith(tmp, dir / "hf", weights.toStdString()).toStdString());
        const DecoderConfig& c = net.config();

        Hdf5Reader ref((dir / "reference.h5").string());
        const torch::Tensor ids = ref.readTensor("inputs/input_ids");
        const torch::Tensor mask = ref.readTensor("inputs/attention_mask");
        Recorder sink;
        c10::InferenceMode guard;
        const DecoderForward out = net.forward(ids, mask, &sink);

        const int H = c.numHeads, Hkv = c.numKvHeads, dh = c.headDim();
        const bool gated = c.variant.gate != GateKind::None;
        const bool postLn = c.arch == DecoderArch::Opt && !c.doLayerNormBefore;
        const torch::Tensor hidden = ref.readTensor("hidden_states"),
                            attentions = ref.readTensor("attentions");
        const bool rotary = c.arch == DecoderArch::Llama;
        const torch::Tensor q = ref.readTensor(rotary ? "layers/q_rot" : "layers/q");
        const torch::Tensor k = ref.readTensor(rotary ? "layers/k_rot" : "layers/k");
        const torch::Tensor v = ref.readTensor("layers/v");
        const torch::Tensor context = ref.readTensor(gated ? "layers/context_pre_gate" : "layers/context");
        const torch::Tensor attnProj = ref.readTensor("layers/attn_proj"),
                            xDown = ref.readTensor("layers/x_down");
        const torch::Tensor ffnOut = ref.readTensor("layers/ffn_out");

        Worst worst;
        compareReal("embeddings", sink.at("embeddings"), hidden[0], mask, {0}, kActTolerance, &worst.act);
        for (int i = 0; i < c.numLayers; ++i) {
            const QString l = QStringLiteral("layer%1/").arg(i);
            auto at = [&](const char* point) { return sink.at((l + point).toStdString()); };
            // Scores are not stored upstream: q.k^T scaled the family's way, from its own q and k.
            torch::Tensor qh = heads(q[i], H), kh = heads(k[i], Hkv), vh = heads(v[i], Hkv);
            if (Hkv != H) {
                kh = kh.repeat_interleave(H / Hkv, 1);
                vh = vh.repeat_interleave(H / Hkv, 1);
            }
            const torch::Tensor scores =
                c.arch == DecoderArch::Opt
                    ? torch::matmul(qh * std::pow(double(dh), -0.5), kh.transpose(-1, -2))
                    : torch::matmul(qh, kh.transpose(-1, -2)) / std::sqrt(double(dh));
            compareReal(l + "attn_scores", at("attn_scores"), scores, mask, {1, 2}, kActTolerance,
                        &worst.act);
            compareReal(l + "attn_probs", at("attn_probs"), attentions[i], mask, {1, 2}, kProbTolerance,
                        &worst.prob);
            compareReal(l + "attn_values", at("attn_values"), vh, mask, {1}, kActTolerance, &worst.act);
            compareReal(l + "attn_context", at("attn_context"), heads(context[i], H), mask, {1},
                        kActTolerance, &worst.act);
            if (gated)
                compareReal(l + "attn_gate", at("attn_gate"), ref.readTensor("layers/gate")[i], mask, {1},
                            kProbTolerance, &worst.prob);
            else
                QVERIFY(!sink.contains((l + "attn_gate").toStdString()));
            compareReal(l + "attn_out", at("attn_out"), attnProj[i], mask, {0}, kActTolerance, &worst.act);
            compareReal(l + "down_in", at("down_in"), xDown[i], mask, {0}, kActTolerance, &worst.act);
            compareReal(l + "ffn_out", at("ffn_out"), ffnOut[i], mask, {0}, kActTolerance, &worst.act);
            compareReal(l + "residual", at("residual"),
                        postLn ? ref.readTensor("layers/resid_mlp")[i] : hidden[i + 1], mask, {0},
                        kActTolerance, &worst.act);
            compareReal(l + "out", at("out"), hidden[i + 1], mask, {0}, kActTolerance, &worst.act);

            // Future and padded keys of every real query: probability exactly 0.
            const torch::Tensor p = at("attn_probs");
            const auto T = p.size(-1);
            const torch::Tensor realQ = mask.view({-1, 1, T, 1}).ne(0);
            const torch::Tensor allowed =
                torch::ones({T, T}, torch::kBool).tril().view({1, 1, T, T}) & mask.view({-1, 1, 1, T}).ne(0);
            const torch::Tensor leaked = p.masked_select(realQ & allowed.logical_not());
            QVERIFY2(leaked.numel() > 0 && leaked.eq(0).all().item<bool>(),
                     qPrintable(l + "attn_probs: a masked key has a non-zero probability"));
        }
        compareReal("last_hidden_state", out.lastHidden, ref.readTensor("outputs/last_hidden_state"), mask,
                    {0}, kActTolerance, &worst.act);
        compareReal("logits", out.logits, ref.readTensor("outputs/logits"), mask, {0}, kActTolerance,
                    &worst.logits);
        QVERIFY(sink.at("logits").equal(out.logits));
        qInfo("%s %s: max |diff| activations %.3g, probabilities %.3g, logits %.3g", qPrintable(model),
              qPrintable(weights), worst.act, worst.prob, worst.logits);
    }

    void clippedSoftmaxZerosAndRowsBelowOne()
    {
        DecoderNetwork net = DecoderNetwork::load(fixture("decoders/opt-oft-clipped-alpha-seed0/hf"));
        QVERIFY(net.config().variant.softmax == SoftmaxKind::Clipped);
        QVERIFY(std::abs(net.config().variant.effectiveGamma() - (-12.0 / 512.0)) < 1e-12);
        Hdf5Reader ref(fixture("decoders/opt-oft-clipped-alpha-seed0/reference.h5"));
        Recorder sink({"layer0/attn_probs"});
        c10::InferenceMode guard;
        net.forward(ref.readTensor("inputs/input_ids"), ref.readTensor("inputs/attention_mask"), &sink);
        QCOMPARE(sink.tensors().size(), std::size_t(1));         // only what was asked for
        const torch::Tensor p = sink.at("layer0/attn_probs")[2]; // the longest row: no padding
        const auto T = p.size(-1);
        const torch::Tensor causal = torch::ones({T, T}, torch::kBool).tril();
        const double zeros =
            p.masked_select(causal.unsqueeze(0)).eq(0).to(torch::kDouble).mean().item<double>();
        QVERIFY2(zeros > 0.2, qPrintable(QString("share of exact zeros among real keys %1").arg(zeros)));
        QVERIFY(p.sum(-1).narrow(-1, 1, T - 1).max().item<double>() < 1.0);
    }

    void shardedLoadsTheSameTensors()
    {
        DecoderNetwork whole = DecoderNetwork::load(fixture("decoders/llama-seed0/hf"));
        DecoderNetwork sharded = DecoderNetwork::load(fixture("decoders/llama-seed0/hf_sharded"));
        QVERIFY(QString::fromStdString(sharded.weightsFile()).endsWith("model.safetensors.index.json"));
        const auto a = whole.module().named_parameters(true), b = sharded.module().named_parameters(true);
        QCOMPARE(a.size(), b.size());
        QVERIFY(a.size() > 10);
        for (const auto& item : a) {
            const torch::Tensor* other = b.find(item.key());
            QVERIFY2(other, qPrintable(QString::fromStdString(item.key())));
            QVERIFY2(other->equal(item.value()), qPrintable(QString::fromStdString(item.key())));
        }
        QVERIFY(!sharded.loadReport().ignored.empty()); // rotary_emb.inv_freq buffers
        Hdf5Reader ref(fixture("decoders/llama-seed0/reference.h5"));
        c10::InferenceMode guard;
        const torch::Tensor mask = ref.readTensor("inputs/attention_mask");
        const DecoderForward out = sharded.forward(ref.readTensor("inputs/input_ids"), mask);
        compareReal("sharded logits", out.logits, ref.readTensor("outputs/logits"), mask, {0}, kActTolerance);
    }

    void bfloat16WeightsStayBfloat16()
    {
        const std::string dir = fixture("decoders/llama-seed0/hf_bf16");
        DecoderNetwork net = DecoderNetwork::load(dir);
        int bf16 = 0;
        for (const auto& item : net.module().named_parameters(true)) {
            QVERIFY2(item.value().scalar_type() == torch::kBFloat16,
                     qPrintable(QString::fromStdString(item.key())));
            ++bf16;
        }
        QVERIFY(bf16 > 10);
        DecoderNetwork f32 = DecoderNetwork::load(fixture("decoders/llama-seed0/hf"));
        QCOMPARE(net.parameterBytes() * 2, f32.parameterBytes());

        // The weights are views of the memory-mapped file, not copies.
        std::ifstream maps("/proc/self/maps");
        std::string line;
        bool mapped = false;
        const std::string file = fs::canonical(dir + "/model.safetensors").string();
        while (std::getline(maps, line))
            mapped = mapped || line.find(file) != std::string::npos;
        QVERIFY2(mapped, "hf_bf16/model.safetensors is not memory-mapped");

        Hdf5Reader ref(fixture("decoders/llama-seed0/reference.h5"));
        const torch::Tensor ids = ref.readTensor("inputs/input_ids"),
                            mask = ref.readTensor("inputs/attention_mask");
        c10::InferenceMode guard;
        const DecoderForward out = net.forward(ids, mask);
        QVERIFY(out.logits.scalar_type() == torch::kFloat);
        double worst = 0;
        compareReal("bf16 weights logits", out.logits, ref.readTensor("bf16_weights/logits"), mask, {0},
                    kActTolerance, &worst);
        // Honest check that the bf16 weights were used: the float32 model's logits are ~1e-2 away.
        QVERIFY(test::maxAbsDiff(out.logits, ref.readTensor("outputs/logits")) > 1e-3);
        qInfo("bf16 weights: max |diff| logits %.3g", worst);

        // bfloat16 compute runs and stays close (no reference: a sanity bound, not parity).
        net.setComputeDtype(torch::kBFloat16);
        const DecoderForward low = net.forward(ids, mask);
        QVERIFY(low.logits.scalar_type() == torch::kFloat);
        QVERIFY(torch::isfinite(low.logits).all().item<bool>());
    }

    /// An et al.'s Table-2 variants (no upstream golden outputs exist for them on HF layouts): config
    /// round trip and parameter names, exact zeros on masked keys, each formula checked on the
    /// captured scores, probabilities and values, and "neutral" parameters reproducing vanilla.
    void anEtAlVariants_data()
    {
        QTest::addColumn<QString>("preset");
        QTest::addColumn<QString>("variant");
        for (const char* p : {"gpt2-tiny", "opt-tiny", "llama-tiny"})
            for (const char* v : {"fixed-bias", "context-bias", "attention-bias", "context-scale", "sigmoid",
                                  "clip-per-query"})
                QTest::newRow(qPrintable(QString("%1 %2").arg(p, v))) << QString(p) << QString(v);
    }

    void anEtAlVariants()
    {
        QFETCH(QString, preset);
        QFETCH(QString, variant);
        const std::string name = variant.toStdString();
        DecoderConfig config = DecoderConfig::preset(preset.toStdString());
        AttentionVariant& v = config.variant;
        if (name == "fixed-bias") v.bias = BiasKind::Fixed;
        if (name == "context-bias") v.bias = BiasKind::Context;
        if (name == "attention-bias") v.bias = BiasKind::Attention;
        if (name == "context-scale") v.contextScale = true;
        if (name == "sigmoid") v.softmax = SoftmaxKind::Sigmoid;
        if (name == "clip-per-query") {
            v.softmax = SoftmaxKind::Clipped;
            v.alpha = 2.0;
            v.maxSeqLength = 64;
            v.clipPerQuery = true;
            v = v.withAlphaResolved();
        }
        DecoderNetwork created = DecoderNetwork::create(config, 3);
        {
            // Make every variant parameter matter (new models start near neutral); the scale's
            // logits stay moderate so that 2 sigmoid(.) does not saturate to exactly 0 or 2.
            torch::NoGradGuard noGrad;
            for (auto& item : created.module().named_parameters(true)) {
                if (item.key().find("_bias") != std::string::npos) item.value().normal_(0.0, 1.0);
                if (item.key().find("context_scale") != std::string::npos) item.value().normal_(0.0, 0.1);
            }
        }
        QTemporaryDir tmp;
        created.save(tmp.path().toStdString());
        DecoderNetwork net = DecoderNetwork::load(tmp.path().toStdString());
        const AttentionVariant& lv = net.config().variant;
        QVERIFY(lv.bias == v.bias && lv.contextScale == v.contextScale && lv.softmax == v.softmax &&
                lv.clipPerQuery == v.clipPerQuery);
        QVERIFY(!lv.isVanilla());
        int extra = 0;
        for (const auto& item : net.module().named_parameters(true)) {
            const std::string& key = item.key();
            extra += key.find("attn.k_bias") != std::string::npos ||
                     key.find("attn.v_bias") != std::string::npos ||
                     key.find("attn.context_scale.0.") != std::string::npos;
        }
        const int perLayer = name == "fixed-bias" ? 1 : name == "sigmoid" || name == "clip-per-query" ? 0 : 2;
        QCOMPARE(extra, perLayer * config.numLayers);

        // A right-padded and a left-padded row.
        const torch::Tensor ids = torch::randint(3, config.vocabSize, {2, 7});
        const torch::Tensor mask =
            torch::tensor({1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1}, torch::kLong).view({2, 7});
        Recorder sink;
        c10::InferenceMode guard;
        const DecoderForward out = net.forward(ids, mask, &sink);
        QVERIFY(torch::isfinite(out.logits).all().item<bool>());
        const auto T = ids.size(1);
        const torch::Tensor allowed =
            torch::ones({T, T}, torch::kBool).tril().view({1, 1, T, T}) & mask.view({2, 1, 1, T}).ne(0);
        const torch::Tensor realQ = mask.view({2, 1, T, 1}).ne(0).expand({2, config.numHeads, T, T});
        for (int i = 0; i < config.numLayers; ++i) {
            const std::string l = "layer" + std::to_string(i) + "/";
            const torch::Tensor S = sink.at(l + "attn_scores"), P = sink.at(l + "attn_probs");
            const torch::Tensor V = sink.at(l + "attn_values"), C = sink.at(l + "attn_context");
            QVERIFY(P.masked_select(realQ & allowed.logical_not()).eq(0).all().item<bool>());
            const torch::Tensor softmaxS = torch::softmax(
                S.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity()), -1);
            auto real = [&](const torch::Tensor& t) { return t.masked_select(realQ); };
            if (name == "sigmoid") {
                const torch::Tensor expected =
                    torch::sigmoid(S - std::log(double(T))).masked_fill(allowed.logical_not(), 0.0);
                OL_COMPARE_TENSORS(QString::fromStdString(l + "sigmoid probs"), real(P), real(expected),
                                   1e-6);
                QVERIFY((P.sum(-1) - 1).abs().max().item<double>() > 1e-2); // not normalised
                OL_COMPARE_TENSORS(QString::fromStdString(l + "context"), C, torch::matmul(P, V), 1e-5);
            } else if (name == "clip-per-query") {
                // Query t of a row sees n = t + 1 - (left padding) keys; its gamma is -alpha / n.
                const torch::Tensor n = allowed.sum(-1, true).to(torch::kFloat);
                const torch::Tensor gamma = -2.0 / n.clamp_min(1.0);
                const torch::Tensor expected = torch::clamp(softmaxS * (1.0 - gamma) + gamma, 0.0, 1.0);
                OL_COMPARE_TENSORS(QString::fromStdString(l + "per-query clipped probs"), real(P),
                                   real(expected), 1e-6);
                // Not the fixed -alpha / T: with T = 64 the first queries would keep their small weights.
                const torch::Tensor fixedT = torch::clamp(softmaxS * (1.0 + 2.0 / 64) - 2.0 / 64, 0.0, 1.0);
                QVERIFY(test::maxAbsDiff(real(P), real(fixedT)) > 1e-2);
                OL_COMPARE_TENSORS(QString::fromStdString(l + "context"), C, torch::matmul(P, V), 1e-5);
            } else if (name == "attention-bias") {
                const torch::Tensor r = P.sum(-1, true); // 1 - p_sink
                const torch::Tensor realR = r.masked_select(mask.view({2, 1, T, 1}).ne(0));
                QVERIFY(realR.lt(1.0).all().item<bool>() && realR.gt(0.0).all().item<bool>());
                OL_COMPARE_TENSORS(QString::fromStdString(l + "probs / rowsum"), real(P / r), real(softmaxS),
                                   1e-5);
                torch::Tensor vBias;
                for (const auto& item : net.module().named_parameters(true))
                    if (item.key().find("." + std::to_string(i) + ".") != std::string::npos &&
                        item.key().find("v_bias") != std::string::npos)
                        vBias = item.value();
                QVERIFY(vBias.defined());
                const torch::Tensor expected = torch::matmul(P, V) + (1 - r) * vBias;
                OL_COMPARE_TENSORS(QString::fromStdString(l + "context with sink value"), C, expected, 1e-5);
            } else {
                OL_COMPARE_TENSORS(QString::fromStdString(l + "softmax probs"), real(P), real(softmaxS),
                                   1e-6);
                OL_COMPARE_TENSORS(QString::fromStdString(l + "context"), C, torch::matmul(P, V), 1e-5);
            }
            if (name == "context-scale") {
                const torch::Tensor g = sink.at(l + "attn_gate");
                QVERIFY(g.gt(0).all().item<bool>() && g.lt(2).all().item<bool>());
                QVERIFY((g - 1).abs().max().item<double>() > 1e-2);
            } else {
                QVERIFY(!sink.contains(l + "attn_gate"));
            }
        }

        // Neutral parameters (v' = 0; context-scale weights 0 -> factor 1) reproduce the vanilla model.
        if (name == "fixed-bias" || name == "context-bias" || name == "context-scale") {
            DecoderConfig plain = config;
            plain.variant = AttentionVariant();
            DecoderNetwork vanilla = DecoderNetwork::create(plain, 0);
            torch::NoGradGuard noGrad;
            const auto source = net.module().named_parameters(true);
            for (auto& item : vanilla.module().named_parameters(true))
                item.value().copy_(*source.find(item.key()));
            for (auto& item : net.module().named_parameters(true))
                if (item.key().find("v_bias") != std::string::npos ||
                    item.key().find("context_scale") != std::string::npos)
                    item.value().zero_();
            const torch::Tensor a = net.forward(ids, mask).logits, b = vanilla.forward(ids, mask).logits;
            OL_COMPARE_TENSORS("neutral variant vs vanilla", a, b, 1e-5);
            QVERIFY(test::maxAbsDiff(out.logits, b) > 1e-3); // and the trained-looking parameters did matter
        }
    }

    void positionsIgnorePadding()
    {
        // Unpadded single rows give the same real-token activations as the padded batch.
        DecoderNetwork net = DecoderNetwork::load(fixture("decoders/opt-seed0/hf"));
        Hdf5Reader ref(fixture("decoders/opt-seed0/reference.h5"));
        const torch::Tensor ids = ref.readTensor("inputs/input_ids"),
                            mask = ref.readTensor("inputs/attention_mask");
        c10::InferenceMode guard;
        const torch::Tensor batched = net.forward(ids, mask).logits;
        for (int64_t b = 0; b < ids.size(0); ++b) {
            const torch::Tensor idx = mask[b].nonzero().flatten();
            const torch::Tensor single = net.forward(ids[b].index_select(0, idx).unsqueeze(0)).logits[0];
            OL_COMPARE_TENSORS(QString("row %1 alone").arg(b), single, batched[b].index_select(0, idx),
                               kActTolerance);
        }
    }
};

QTEST_GUILESS_MAIN(TstDecoderParity)
#include "tst_decoder_parity.moc"
