// Decoder LLMs on the command line, as a user meets them: `inspect --dump` holds Hugging Face's
// numbers under DESIGN.md's names, `stats --data text:` writes a statistics file, `create-model`
// writes a decoder that loads back, and bad folders give one-line errors.

#include "../common/app_runner.h"
#include "../common/tensor_compare.h"

#include "analysis/statistics_file.h"
#include "io/hdf5_store.h"
#include "model/capture.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>

using namespace outlierlens;
using outlierlens::test::fixture;
using outlierlens::test::Run;
using outlierlens::test::runApp;
namespace fs = std::filesystem;

namespace {

QString modelDir(const QString& name)
{
    return QString::fromStdString(fixture("decoders/" + name.toStdString() + "/hf"));
}

} // namespace

class TstDecoderCli : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void inspectDumpsHuggingFaceNumbers_data()
    {
        QTest::addColumn<QString>("name");
        for (const char* name : {"gpt2-seed0", "opt-seed0", "opt-postln-proj-seed0",
                                 "opt-oft-gated-linear-seed0", "opt-oft-clipped-alpha-seed0", "llama-seed0"})
            QTest::newRow(name) << QString::fromLatin1(name);
    }

    void inspectDumpsHuggingFaceNumbers()
    {
        QFETCH(QString, name);
        using torch::indexing::Slice;
        const Hdf5Reader ref(fixture("decoders/" + name.toStdString() + "/reference.h5"));
        // Row 0 of the reference: the first text, cut by the tokenizer to `lengths[0]` tokens.
        const std::string text = ref.readStrings("inputs/texts")[0];
        const std::int64_t T = ref.readTensor("inputs/lengths")[0].item<std::int64_t>();
        QTemporaryDir dir;
        const QString dump = dir.path() + QStringLiteral("/dump.h5");
        const Run r =
            runApp({QStringLiteral("inspect"), QStringLiteral("--model"), modelDir(name),
                    QStringLiteral("--text"), QString::fromStdString(text), QStringLiteral("--max-length"),
                    QString::number(T), QStringLiteral("--dump"), dump});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(QStringLiteral("next token:")), qPrintable(r.out));

        const Hdf5Reader got(dump.toStdString());
        const torch::Tensor ids = ref.readTensor("inputs/input_ids")[0].index({Slice(0, T)});
        QCOMPARE(got.readStrings("tokens").size(), std::size_t(T));
        QCOMPARE(got.readStrings("tokens"), [&] {
            std::vector<std::string> tokens;
            const std::vector<std::string> all = ref.readStrings("inputs/tokens");
            const std::int64_t width = ref.shape("inputs/tokens")[1];
            for (std::int64_t t = 0; t < T; ++t)
                tokens.push_back(all[std::size_t(t)]);
            (void)width;
            return tokens;
        }());
        const int L = int(ref.shape("hidden_states")[0]) - 1;
        OL_COMPARE_TENSORS("embeddings", got.readTensor("embeddings"),
                           ref.readTensor("hidden_states")[0][0].index({Slice(0, T)}), 1e-4);
        for (int l = 0; l < L; ++l) {
            const std::string p = "layer" + std::to_string(l) + "/";
            OL_COMPARE_TENSORS(QString::fromStdString(p + "attn_probs"), got.readTensor(p + "attn_probs"),
                               ref.readTensor("attentions")[l][0].index({Slice(), Slice(0, T), Slice(0, T)}),
                               1e-5);
            OL_COMPARE_TENSORS(QString::fromStdString(p + "down_in"), got.readTensor(p + "down_in"),
                               ref.readTensor("layers/x_down")[l][0].index({Slice(0, T)}), 1e-4);
            OL_COMPARE_TENSORS(QString::fromStdString(p + "ffn_out"), got.readTensor(p + "ffn_out"),
                               ref.readTensor("layers/ffn_out")[l][0].index({Slice(0, T)}), 1e-4);
            OL_COMPARE_TENSORS(QString::fromStdString(p + "attn_out"), got.readTensor(p + "attn_out"),
                               ref.readTensor("layers/attn_proj")[l][0].index({Slice(0, T)}), 1e-4);
            OL_COMPARE_TENSORS(QString::fromStdString(p + "out"), got.readTensor(p + "out"),
                               ref.readTensor("hidden_states")[l + 1][0].index({Slice(0, T)}), 1e-4);
            if (ref.exists("layers/gate")) {
                OL_COMPARE_TENSORS(QString::fromStdString(p + "attn_gate"), got.readTensor(p + "attn_gate"),
                                   ref.readTensor("layers/gate")[l][0].index({Slice(), Slice(0, T)}), 1e-5);
            }
        }
        OL_COMPARE_TENSORS("logits", got.readTensor("logits"),
                           ref.readTensor("outputs/logits")[0].index({Slice(0, T)}), 1e-4);
        QVERIFY(got.stringAttribute("/", "checkpoint_sha256").size() == 64);
        QCOMPARE(ids.size(0), T);
    }

    void inputIdsWithoutTokenizer()
    {
        // issue #38: `inspect --input-ids` runs token ids in a folder with no tokenizer files (the Qwen2
        // fixture), exactly as transformers 4.47.1 does; labels are the ids, nothing is added.
        using torch::indexing::Slice;
        const std::string family = fixture("families/qwen2");
        const Hdf5Reader ref(family + "/reference.h5");
        const torch::Tensor ids = ref.readTensor("inputs/input_ids")[1]; // 11 real tokens, right-padded
        const std::int64_t T = ref.readTensor("inputs/attention_mask")[1].sum().item<std::int64_t>();
        QStringList list;
        for (std::int64_t t = 0; t < T; ++t)
            list << QString::number(ids[t].item<std::int64_t>());
        QTemporaryDir dir;
        const QString dump = dir.path() + QStringLiteral("/dump.h5");
        const Run r = runApp({QStringLiteral("inspect"), QStringLiteral("--model"),
                              QString::fromStdString(family + "/hf"), QStringLiteral("--input-ids"),
                              list.join(QStringLiteral(", ")), QStringLiteral("--dump"), dump});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(QStringLiteral("tokens (%1): %2").arg(T).arg(list.first())),
                 qPrintable(r.out));
        QVERIFY2(r.out.contains(QStringLiteral("next token: #")), qPrintable(r.out));
        const Hdf5Reader got(dump.toStdString());
        QCOMPARE(got.readStrings("tokens").size(), std::size_t(T));
        QCOMPARE(QString::fromStdString(got.readStrings("tokens")[1]), list[1]);
        for (int l = 0; l < 2; ++l) {
            const std::string p = "layer" + std::to_string(l) + "/";
            OL_COMPARE_TENSORS(QString::fromStdString(p + "attn_probs"), got.readTensor(p + "attn_probs"),
                               ref.readTensor("attentions")[l][1].index({Slice(), Slice(0, T), Slice(0, T)}),
                               1e-5);
            OL_COMPARE_TENSORS(QString::fromStdString(p + "out"), got.readTensor(p + "out"),
                               ref.readTensor("hidden_states")[l + 1][1].index({Slice(0, T)}), 1e-4);
        }
        OL_COMPARE_TENSORS("logits", got.readTensor("logits"),
                           ref.readTensor("outputs/logits")[1].index({Slice(0, T)}), 1e-4);

        // Bad ids: one line each, nothing written.
        for (const QString& bad : {QStringLiteral("1,x,3"), QStringLiteral("1,,3"), QStringLiteral("1,-2"),
                                   QStringLiteral("1,384")}) {
            const QString out = dir.path() + QStringLiteral("/bad.h5");
            const Run e = runApp({QStringLiteral("inspect"), QStringLiteral("--model"),
                                  QString::fromStdString(family + "/hf"), QStringLiteral("--input-ids"), bad,
                                  QStringLiteral("--dump"), out});
            QVERIFY2(e.exitCode != 0 && e.err.trimmed().count(QLatin1Char('\n')) == 0, qPrintable(e.err));
            QVERIFY2(e.err.contains(bad.endsWith(QStringLiteral("384")) ? QStringLiteral("vocabulary")
                                                                        : QStringLiteral("not a token id")),
                     qPrintable(e.err));
            QVERIFY(!QFile::exists(out));
        }
    }

    void statsOverTextChunks()
    {
        QTemporaryDir dir;
        const QString out = dir.path() + QStringLiteral("/stats.h5");
        const QString text = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/text/wiki_en_valid.txt");
        const Run r = runApp(
            {QStringLiteral("stats"), QStringLiteral("--model"), modelDir(QStringLiteral("gpt2-seed0")),
             QStringLiteral("--data"), QStringLiteral("text:") + text + QStringLiteral(":6"),
             QStringLiteral("--seq-len"), QStringLiteral("32"), QStringLiteral("--out"), out});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const StatisticsFile stats = readStatisticsFile(out.toStdString());
        QCOMPARE(stats.samples, std::int64_t(6));
        {
            // An et al.'s systematic outliers: every chunk's first token is the initial token.
            Hdf5Reader file(out.toStdString());
            QCOMPARE(file.numberAttribute("systematic", "tau"), 1000.0);
            QCOMPARE(file.numberAttribute("systematic", "samples"), 6.0);
            for (int l = 0; l < 2; ++l) {
                const std::string g = "systematic/layer" + std::to_string(l);
                const torch::Tensor tokens = file.readTensor(g + "/tokens_by_category");
                QCOMPARE(tokens[0].item<std::int64_t>(), std::int64_t(6));
                QCOMPARE(tokens.sum().item<std::int64_t>(), std::int64_t(6 * 32));
                const torch::Tensor top = file.readTensor(g + "/down_in/mean_top_abs");
                QVERIFY(top[0].item<float>() >= top[1].item<float>() &&
                        top[1].item<float>() >= top[2].item<float>());
                QVERIFY(top[2].item<float>() >=
                        file.readTensor(g + "/down_in/mean_median_abs").item<float>());
            }
        }
        // readStatisticsFile() gives the same group back as plain data (the Systematic outliers page).
        QVERIFY(stats.systematic);
        QCOMPARE(stats.systematic->samples, std::int64_t(6));
        QCOMPARE(stats.systematic->tau, 1000.0);
        QCOMPARE(int(stats.systematic->layers.size()), 2);
        {
            Hdf5Reader file(out.toStdString());
            for (const SystematicLayerData& l : stats.systematic->layers) {
                const std::string g = "systematic/layer" + std::to_string(l.layer);
                QCOMPARE(l.tokens[0], std::int64_t(6));
                QCOMPARE(l.downIn.meanTop[0], file.readTensor(g + "/down_in/mean_top_abs")[0].item<double>());
                QCOMPARE(l.attention.consistencySamples,
                         file.readTensor(g + "/attention/consistency_samples").item<std::int64_t>());
                QCOMPARE(int(l.attention.outlierKeyShare.size()), stats.numHeads);
            }
        }
        // --attention-fraction: a lower fraction marks at least the same keys (and the file says which).
        const QString halfOut = dir.path() + QStringLiteral("/fraction.h5");
        const Run half = runApp(
            {QStringLiteral("stats"), QStringLiteral("--model"), modelDir(QStringLiteral("gpt2-seed0")),
             QStringLiteral("--data"), QStringLiteral("text:") + text + QStringLiteral(":6"),
             QStringLiteral("--seq-len"), QStringLiteral("32"), QStringLiteral("--attention-fraction"),
             QStringLiteral("0.05"), QStringLiteral("--out"), halfOut});
        QVERIFY2(half.exitCode == 0, qPrintable(half.err));
        {
            const StatisticsFile lower = readStatisticsFile(halfOut.toStdString());
            QCOMPARE(lower.systematic->attentionFraction, 0.05);
            QCOMPARE(lower.outlierRule.attentionFraction, 0.05);
            for (const SystematicLayerData& l : lower.systematic->layers) {
                const SystematicLayerData* at10 = stats.systematic->layerData(l.layer);
                std::int64_t keys = 0, keys10 = 0;
                for (int c = 0; c < 4; ++c)
                    keys += l.attention.outlierKeys[c], keys10 += at10->attention.outlierKeys[c];
                QVERIFY(keys >= keys10);
            }
        }
        const Run badFraction = runApp(
            {QStringLiteral("stats"), QStringLiteral("--model"), modelDir(QStringLiteral("gpt2-seed0")),
             QStringLiteral("--data"), QStringLiteral("text:") + text, QStringLiteral("--attention-fraction"),
             QStringLiteral("0"), QStringLiteral("--out"), halfOut + "x"});
        QCOMPARE(badFraction.exitCode, 2);
        QVERIFY2(badFraction.err.contains(QStringLiteral("--attention-fraction")),
                 qPrintable(badFraction.err));
        // With tau 3, a token is heavy exactly when it carries a value of the tau rule (|x| > 3 mean|X|):
        // the systematic heavy tokens of `out` equal the tau rule's token occurrences, counted apart.
        const QString tauOut = dir.path() + QStringLiteral("/tau.h5");
        const Run tau =
            runApp({QStringLiteral("stats"), QStringLiteral("--model"),
                    modelDir(QStringLiteral("gpt2-seed0")), QStringLiteral("--data"),
                    QStringLiteral("text:") + text + QStringLiteral(":6"), QStringLiteral("--seq-len"),
                    QStringLiteral("32"), QStringLiteral("--rule"), QStringLiteral("tau"),
                    QStringLiteral("--tau"), QStringLiteral("3"), QStringLiteral("--out"), tauOut});
        QVERIFY2(tau.exitCode == 0, qPrintable(tau.err));
        {
            Hdf5Reader file(tauOut.toStdString());
            std::int64_t heavy = 0;
            for (int l = 0; l < 2; ++l) {
                const std::int64_t systematic =
                    file.readTensor("systematic/layer" + std::to_string(l) + "/out/heavy_tokens_by_category")
                        .sum()
                        .item<std::int64_t>();
                const std::int64_t occurrences =
                    file.readTensor("layer" + std::to_string(l) + "/out/token_outlier_occurrences")
                        .sum()
                        .item<std::int64_t>();
                QCOMPARE(systematic, occurrences);
                heavy += systematic;
            }
            QVERIFY2(heavy > 0, "tau 3 should find heavy tokens");
        }
        // A BERT model refuses text chunks with a one-line error, and writes nothing.
        const Run wrong =
            runApp({QStringLiteral("stats"), QStringLiteral("--model"),
                    QString::fromStdString(fixture("bert/hf")), QStringLiteral("--data"),
                    QStringLiteral("text:") + text, QStringLiteral("--out"), dir.path() + "/x.h5"});
        QCOMPARE(wrong.exitCode, 1);
        // It says what the model reads and the --data form to use instead.
        QVERIFY2(wrong.err.contains(QStringLiteral("is a BERT model, which reads sentence pairs")) &&
                     wrong.err.contains(QStringLiteral("--data mnli:FILE")),
                 qPrintable(wrong.err));
        QVERIFY(!QFile::exists(dir.path() + "/x.h5"));
    }

    void createModelWritesADecoderThatLoads()
    {
        QTemporaryDir dir;
        const QString out = dir.path() + QStringLiteral("/tiny");
        const Run made = runApp(
            {QStringLiteral("create-model"), QStringLiteral("--preset"), QStringLiteral("llama-tiny"),
             QStringLiteral("--dtype"), QStringLiteral("bf16"), QStringLiteral("--tokenizer"),
             QString::fromStdString(fixture("decoders/tokenizers/llama")), QStringLiteral("--out"), out});
        QVERIFY2(made.exitCode == 0, qPrintable(made.err));
        QVERIFY(QFile::exists(out + QStringLiteral("/tokenizer.model")));
        const Run r = runApp({QStringLiteral("inspect"), QStringLiteral("--model"), out,
                              QStringLiteral("--text"), QStringLiteral("Summer is warm. Winter is cold.")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(QStringLiteral("tokens (")), qPrintable(r.out));
    }

    void badDecoderFoldersGiveOneLineErrors()
    {
        QTemporaryDir dir;
        const fs::path model(dir.path().toStdString() + "/m");
        fs::copy(modelDir(QStringLiteral("gpt2-seed0")).toStdString(), model);
        // An architecture nobody knows.
        {
            std::ofstream(model / "config.json")
                << R"({"model_type": "gpt2", "architectures": ["MambaForCausalLM"]})";
        }
        const Run r = runApp({QStringLiteral("inspect"), QStringLiteral("--model"),
                              QString::fromStdString(model.string()), QStringLiteral("--text"),
                              QStringLiteral("hello")});
        QCOMPARE(r.exitCode, 1);
        QCOMPARE(r.err.trimmed().count(QLatin1Char('\n')), 0);
        QVERIFY2(r.err.contains(QStringLiteral("config.json")), qPrintable(r.err));
    }
};

QTEST_MAIN(TstDecoderCli)
#include "tst_decoder_cli.moc"
