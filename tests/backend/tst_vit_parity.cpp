// Golden parity with timm's VisionTransformer (v0.9.16) and Hugging Face's
// ViTForImageClassification (v4.31): every capture point and the logits, for both naming schemes
// and both weight formats, on the reference's preprocessed pixels.

#include "../common/tensor_compare.h"

#include "analysis/recording_sink.h"
#include "common/error.h"
#include "io/hdf5_store.h"
#include "model/runtime.h"
#include "model/vit_network.h"

#include <QtTest>

#include <filesystem>

using namespace outlierlens;
using outlierlens::test::fixture;

namespace {

constexpr double kTolerance = 1e-4;

torch::Tensor headsOf(const torch::Tensor& ref, int layer, int heads)
{
    const torch::Tensor x = ref[layer];
    return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).permute({0, 2, 1, 3});
}

} // namespace

class TstVitParity : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { configureTorchThreads(); }

    void captures_data()
    {
        QTest::addColumn<QString>("modelDir");
        QTest::addColumn<QString>("weights");
        for (const char* dir : {"vit/timm", "vit/hf"})
            for (const char* w : {"model.safetensors", "pytorch_model.bin"})
                QTest::newRow(qPrintable(QStringLiteral("%1 %2").arg(dir, w))) << dir << w;
    }

    void captures()
    {
        QFETCH(QString, modelDir);
        QFETCH(QString, weights);
        QTemporaryDir tmp;
        const std::filesystem::path src = fixture(modelDir.toStdString());
        const std::filesystem::path dst = tmp.path().toStdString();
        std::filesystem::copy_file(src / "config.json", dst / "config.json");
        std::filesystem::create_symlink(src / weights.toStdString(), dst / weights.toStdString());
        VitNetwork net = VitNetwork::load(tmp.path().toStdString());
        QCOMPARE(net.config().numTokens(), 197);

        Hdf5Reader ref(fixture("vit/reference.h5"));
        RecordingSink sink;
        c10::InferenceMode guard;
        const VitOutputs out = net.forward(ref.readTensor("inputs/pixel_values"), &sink);

        const int H = net.config().numHeads;
        OL_COMPARE_TENSORS("embeddings", sink.at("embeddings"), ref.readTensor("embeddings"), kTolerance);
        const torch::Tensor q = ref.readTensor("layers/q"), k = ref.readTensor("layers/k"),
                            v = ref.readTensor("layers/v");
        const torch::Tensor attentions = ref.readTensor("attentions"),
                            hidden = ref.readTensor("hidden_states");
        const torch::Tensor context = ref.readTensor("layers/context"),
                            attnProj = ref.readTensor("layers/attn_proj");
        const torch::Tensor ffnOut = ref.readTensor("layers/ffn_out");
        for (int i = 0; i < net.config().numLayers; ++i) {
            const QString l = QStringLiteral("layer%1/").arg(i);
            auto at = [&](const char* point) { return sink.at((l + point).toStdString()); };
            const torch::Tensor qh = headsOf(q, i, H), kh = headsOf(k, i, H);
            const torch::Tensor scores =
                torch::matmul(qh, kh.transpose(-1, -2)) / std::sqrt(double(qh.size(-1)));
            OL_COMPARE_TENSORS(l + "attn_scores", at("attn_scores"), scores, kTolerance);
            OL_COMPARE_TENSORS(l + "attn_probs", at("attn_probs"), attentions[i], 1e-5);
            OL_COMPARE_TENSORS(l + "attn_values", at("attn_values"), headsOf(v, i, H), kTolerance);
            OL_COMPARE_TENSORS(l + "attn_context", at("attn_context"), headsOf(context, i, H), kTolerance);
            OL_COMPARE_TENSORS(l + "attn_out", at("attn_out"), attnProj[i], kTolerance);
            OL_COMPARE_TENSORS(l + "ffn_out", at("ffn_out"), ffnOut[i], kTolerance);
            OL_COMPARE_TENSORS(l + "residual", at("residual"), hidden[i + 1], kTolerance);
            OL_COMPARE_TENSORS(l + "out", at("out"), hidden[i + 1], kTolerance);
        }
        OL_COMPARE_TENSORS("logits", out.logits, ref.readTensor("outputs/logits"), kTolerance);
    }

    void huggingFaceQkvMapping()
    {
        // The concatenation order must be timm's (q rows, then k, then v): compare the mapped
        // HF tensors with the timm checkpoint's own.
        LoadReport report;
        StateDict mapped =
            mapHuggingFaceVitKeys(readStateDict(fixture("vit/hf/model.safetensors")), 2, "hf", report);
        StateDict timm = readStateDict(fixture("vit/timm/model.safetensors"));
        QCOMPARE(mapped.size(), timm.size());
        for (const auto& [name, tensor] : timm) {
            QVERIFY2(mapped.count(name), name.c_str());
            QVERIFY2(torch::equal(mapped.at(name), tensor), name.c_str());
        }
    }

    void savedModelLoadsBackIdentically()
    {
        VitNetwork original = VitNetwork::load(fixture("vit/hf"));
        QTemporaryDir out;
        original.save(out.path().toStdString(), "{\"interpolation\": \"bicubic\", \"crop_pct\": 0.9}");
        VitNetwork reloaded = VitNetwork::load(out.path().toStdString());
        const torch::Tensor pixels =
            Hdf5Reader(fixture("vit/reference.h5")).readTensor("inputs/pixel_values");
        c10::InferenceMode guard;
        QVERIFY(torch::equal(reloaded.forward(pixels).logits, original.forward(pixels).logits));
    }

    void gatedVitRuns()
    {
        VitConfig c = VitConfig::preset("vit-fmnist");
        c.variant.gate = GateKind::Linear;
        VitNetwork net = VitNetwork::create(c, 3);
        RecordingSink sink;
        c10::InferenceMode guard;
        const VitOutputs out = net.forward(torch::randn({2, 3, 28, 28}), &sink);
        QCOMPARE(out.logits.sizes(), (c10::IntArrayRef{2, 10}));
        QCOMPARE(sink.at("layer5/attn_gate").sizes(), (c10::IntArrayRef{2, 4, 50}));
        // A new gate starts at pi_init.
        QVERIFY(std::abs(sink.at("layer0/attn_gate").mean().item<double>() - 0.25) < 0.05);
    }

    void clipStrengthFadesTheClippedSoftmaxIn()
    {
        // Training's clipped-softmax warm-up: strength s computes clip((1 - s gamma) p + s gamma, 0, 1) of the
        // plain softmax p (zeta 1), so 0 is the plain softmax and 1 the configured clipping.
        VitConfig c = VitConfig::preset("vit-fmnist");
        c.variant.softmax = SoftmaxKind::Clipped;
        c.variant.gamma = -0.05;
        VitNetwork clipped = VitNetwork::create(c, 4);
        c.variant = AttentionVariant{};
        VitNetwork plain = VitNetwork::create(c, 4);
        const torch::Tensor pixels = torch::randn({2, 3, 28, 28});
        c10::InferenceMode guard;
        const auto probs = [&](VitNetwork& net) {
            RecordingSink sink;
            net.forward(pixels, &sink);
            return sink.at("layer0/attn_probs");
        };
        const torch::Tensor p = probs(plain);
        for (double s : {1.0, 0.5, 0.0}) {
            clipped.setClipStrength(s);
            const double gamma = -0.05 * s;
            const torch::Tensor expected = ((1.0 - gamma) * p + gamma).clamp(0.0, 1.0);
            QVERIFY2(torch::allclose(probs(clipped), expected, 0.0, 1e-6), qPrintable(QString::number(s)));
        }
    }

    void wrongInputShapeIsAnError()
    {
        VitNetwork net = VitNetwork::create(VitConfig::preset("vit-fmnist"), 1);
        c10::InferenceMode guard;
        QVERIFY_THROWS_EXCEPTION(outlierlens::Error, net.forward(torch::zeros({1, 3, 32, 32})));
    }
};

QTEST_APPLESS_MAIN(TstVitParity)
#include "tst_vit_parity.moc"
