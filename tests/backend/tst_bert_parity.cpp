// Golden parity with Hugging Face transformers' BertForSequenceClassification (v4.31) and with the
// paper's own attention module (Qualcomm outlier-free-transformers) for clipped softmax and gated
// attention: every capture point and the logits, from both weight formats.

#include "../common/tensor_compare.h"

#include "analysis/recording_sink.h"
#include "io/hdf5_store.h"
#include "model/bert_network.h"
#include "model/runtime.h"

#include <QtTest>

#include <filesystem>

using namespace outlierlens;
using outlierlens::test::fixture;

namespace {

constexpr double kTolerance = 1e-4; // the bound; float32 vs float64 error is ~1e-6 here

/// [L, B, T, H*dh] reference slice of layer i -> [B, H, T, dh], the capture layout.
torch::Tensor headsOf(const torch::Tensor& ref, int layer, int heads)
{
    const torch::Tensor x = ref[layer];
    return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).permute({0, 2, 1, 3});
}

} // namespace

class TstBertParity : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { configureTorchThreads(); }

    void captures_data()
    {
        QTest::addColumn<QString>("modelDir");
        QTest::addColumn<QString>("weights");
        QTest::addColumn<QString>("reference");
        const QString hf = QStringLiteral("bert/hf");
        QTest::newRow("vanilla safetensors") << hf << "model.safetensors"
                                             << "bert/reference.h5";
        QTest::newRow("vanilla bin") << hf << "pytorch_model.bin"
                                     << "bert/reference.h5";
        for (const char* v : {"bert-clipped-gamma", "bert-clipped-alpha", "bert-gated-linear",
                              "bert-gated-mlp", "bert-gated-all-heads-linear"}) {
            const QString dir = QStringLiteral("variants/%1").arg(v);
            QTest::newRow(qPrintable(QStringLiteral("%1 safetensors").arg(v)))
                << dir + "/hf"
                << "model.safetensors" << dir + "/reference.h5";
            if (std::filesystem::exists(fixture((dir + "/hf/pytorch_model.bin").toStdString())))
                QTest::newRow(qPrintable(QStringLiteral("%1 bin").arg(v)))
                    << dir + "/hf"
                    << "pytorch_model.bin" << dir + "/reference.h5";
        }
    }

    void captures()
    {
        QFETCH(QString, modelDir);
        QFETCH(QString, weights);
        QFETCH(QString, reference);

        // Load from a folder holding only the chosen weight file, so both formats are exercised.
        QTemporaryDir tmp;
        const std::filesystem::path src = fixture(modelDir.toStdString());
        for (const char* name : {"config.json", "vocab.txt"})
            std::filesystem::copy_file(src / name, std::filesystem::path(tmp.path().toStdString()) / name);
        std::filesystem::create_symlink(src / weights.toStdString(),
                                        std::filesystem::path(tmp.path().toStdString()) /
                                            weights.toStdString());
        BertNetwork net = BertNetwork::load(tmp.path().toStdString());
        QVERIFY(net.head() == BertHead::SequenceClassification);

        Hdf5Reader ref(fixture(reference.toStdString()));
        const torch::Tensor ids = ref.readTensor("inputs/input_ids");
        const torch::Tensor mask = ref.readTensor("inputs/attention_mask");
        const torch::Tensor types = ref.readTensor("inputs/token_type_ids");
        RecordingSink sink;
        c10::InferenceMode guard;
        const BertForward out = net.forward(ids, types, mask, &sink);

        const int H = net.config().numHeads;
        const bool gated = net.config().variant.gate != GateKind::None;
        OL_COMPARE_TENSORS("embeddings", sink.at("embeddings"), ref.readTensor("embeddings"), kTolerance);
        const torch::Tensor q = ref.readTensor("layers/q"), k = ref.readTensor("layers/k");
        const torch::Tensor attentions = ref.readTensor("attentions"),
                            hidden = ref.readTensor("hidden_states");
        const torch::Tensor v = ref.readTensor("layers/v");
        const torch::Tensor context = ref.readTensor(gated ? "layers/context_pre_gate" : "layers/context");
        const torch::Tensor attnProj = ref.readTensor("layers/attn_proj"),
                            ffnOut = ref.readTensor("layers/ffn_out");
        const torch::Tensor attnLn = ref.readTensor("layers/attn_output_ln");
        for (int i = 0; i < net.config().numLayers; ++i) {
            const QString l = QStringLiteral("layer%1/").arg(i);
            auto at = [&](const char* point) { return sink.at((l + point).toStdString()); };
            // Scores are not stored upstream; QK^T/sqrt(d_head) from its q and k is the reference.
            const torch::Tensor qh = headsOf(q, i, H), kh = headsOf(k, i, H);
            const torch::Tensor scores =
                torch::matmul(qh, kh.transpose(-1, -2)) / std::sqrt(double(qh.size(-1)));
            OL_COMPARE_TENSORS(l + "attn_scores", at("attn_scores"), scores, kTolerance);
            OL_COMPARE_TENSORS(l + "attn_probs", at("attn_probs"), attentions[i], 1e-5);
            OL_COMPARE_TENSORS(l + "attn_values", at("attn_values"), headsOf(v, i, H), kTolerance);
            OL_COMPARE_TENSORS(l + "attn_context", at("attn_context"), headsOf(context, i, H), kTolerance);
            if (gated)
                OL_COMPARE_TENSORS(l + "attn_gate", at("attn_gate"), ref.readTensor("layers/gate")[i], 1e-5);
            else
                QVERIFY(!sink.contains((l + "attn_gate").toStdString()));
            OL_COMPARE_TENSORS(l + "attn_out", at("attn_out"), attnProj[i], kTolerance);
            OL_COMPARE_TENSORS(l + "ffn_out", at("ffn_out"), ffnOut[i], kTolerance);
            // The sum entering the last LayerNorm: FFN output + the attention block's LayerNorm output.
            OL_COMPARE_TENSORS(l + "residual", at("residual"), ffnOut[i] + attnLn[i], kTolerance);
            OL_COMPARE_TENSORS(l + "out", at("out"), hidden[i + 1], kTolerance);
        }
        OL_COMPARE_TENSORS("logits", out.logits, ref.readTensor("outputs/logits"), kTolerance);
        OL_COMPARE_TENSORS("sink logits", sink.at("logits"), ref.readTensor("outputs/logits"), kTolerance);
    }

    void clippedSoftmaxHasExactZerosAndRowsBelowOne()
    {
        BertNetwork net = BertNetwork::load(fixture("variants/bert-clipped-gamma/hf"));
        Hdf5Reader ref(fixture("variants/bert-clipped-gamma/reference.h5"));
        RecordingSink sink({"layer0/attn_probs"});
        c10::InferenceMode guard;
        net.forward(ref.readTensor("inputs/input_ids"), ref.readTensor("inputs/token_type_ids"),
                    ref.readTensor("inputs/attention_mask"), &sink);
        QCOMPARE(sink.tensors().size(), std::size_t(1));         // only what was asked for
        const torch::Tensor p = sink.at("layer0/attn_probs")[2]; // sample without padding
        const double zeros = (p == 0).to(torch::kDouble).mean().item<double>();
        QVERIFY2(zeros > 0.2, qPrintable(QString("share of exact zeros %1").arg(zeros)));
        QVERIFY(p.sum(-1).max().item<double>() < 1.0);
    }

    void bareEncoderWithoutPrefix()
    {
        BertNetwork bare = BertNetwork::load(fixture("bert/hf_bare"));
        QVERIFY(bare.head() == BertHead::Encoder);
        Hdf5Reader ref(fixture("bert/reference.h5"));
        c10::InferenceMode guard;
        const BertForward out =
            bare.forward(ref.readTensor("inputs/input_ids"), ref.readTensor("inputs/token_type_ids"),
                         ref.readTensor("inputs/attention_mask"));
        QVERIFY(!out.logits.defined());
        OL_COMPARE_TENSORS("last_hidden_state", out.sequence, ref.readTensor("outputs/last_hidden_state"),
                           kTolerance);
    }
};

QTEST_APPLESS_MAIN(TstBertParity)
#include "tst_bert_parity.moc"
