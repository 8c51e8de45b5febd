// Issue #38: every command opens each newer decoder family as a user's folder holds it. The family fixtures
// (tests/fixtures/families: weights whose numbers tst_family_parity checks against transformers) are given
// a 384-token byte-level tokenizer made for them (tests/fixtures/tokenizers/bytelevel-384), so that text
// runs through them: inspect dumps the backend's own numbers, stats writes the statistics and systematic
// groups, figures draws from them, quantize reports FP and W8A8 perplexity, weights scans the down
// projections.

#include "../common/app_runner.h"
#include "../common/tensor_compare.h"

#include "analysis/recording_sink.h"
#include "analysis/statistics_file.h"
#include "io/hdf5_store.h"
#include "model/decoder_network.h"
#include "model/runtime.h"
#include "text/decoder_tokenizer.h"

#include <torch/torch.h>

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QSet>
#include <QTemporaryDir>
#include <nlohmann/json.hpp>

#include <QtTest>

#include <filesystem>

using namespace outlierlens;
using outlierlens::test::fixture;
using outlierlens::test::Run;
using outlierlens::test::runApp;
namespace fs = std::filesystem;

namespace {

const QString kText = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/text/wiki_en_valid.txt");

/// A model folder as a user has it: the fixture's config and weights with a tokenizer beside them.
QString userFolder(const QTemporaryDir& tmp, const QString& family)
{
    const fs::path dir = fs::path(tmp.path().toStdString()) / family.toStdString();
    fs::create_directories(dir);
    const fs::path model = fixture("families/" + family.toStdString() + "/hf");
    const fs::path tokenizer = fixture("tokenizers/bytelevel-384");
    for (const fs::path& file : {model / "config.json", model / "model.safetensors", tokenizer / "vocab.json",
                                 tokenizer / "merges.txt"})
        fs::copy_file(file, dir / file.filename());
    return QString::fromStdString(dir.string());
}

} // namespace

class TstFamilyCommands : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { configureTorchThreads(); }

    void everyCommand_data()
    {
        QTest::addColumn<QString>("family");
        for (const char* f :
             {"qwen2", "qwen3", "mistral", "llama3", "gemma2", "phi", "gpt-neox", "falcon-7b", "falcon-40b"})
            QTest::newRow(f) << f;
    }

    void everyCommand()
    {
        QFETCH(QString, family);
        QTemporaryDir tmp;
        const QString model = userFolder(tmp, family);
        const QString text = QStringLiteral("The first token is where the heads park.");

        // inspect: the dump holds what the backend computes on the tokenizer's ids.
        const QString dump = tmp.path() + QStringLiteral("/dump.h5");
        const Run inspect = runApp({QStringLiteral("inspect"), QStringLiteral("--model"), model,
                                    QStringLiteral("--text"), text, QStringLiteral("--dump"), dump});
        QVERIFY2(inspect.exitCode == 0, qPrintable(inspect.err));
        QVERIFY2(inspect.out.contains(QStringLiteral("next token")), qPrintable(inspect.out));
        {
            DecoderNetwork net = DecoderNetwork::load(model.toStdString());
            const Encoding e =
                DecoderTokenizer::fromModelDir(model.toStdString())->encode(text.toStdString());
            const auto T = std::int64_t(e.inputIds.size());
            QVERIFY(T > 5);
            RecordingSink sink;
            {
                c10::InferenceMode guard;
                net.forward(torch::tensor(e.inputIds, torch::kLong).view({1, T}), {}, &sink);
            }
            const Hdf5Reader got(dump.toStdString());
            QCOMPARE(got.readStrings("tokens").size(), std::size_t(T));
            for (const char* name :
                 {"layer1/attn_probs", "layer1/attn_values", "layer0/down_in", "layer1/out"})
                OL_COMPARE_TENSORS(name, got.readTensor(name), sink.at(name)[0], 1e-6);
            OL_COMPARE_TENSORS("logits", got.readTensor("logits"), sink.at("logits")[0], 1e-5);
        }

        // stats over text chunks: statistics and the systematic-outlier group of every layer.
        const QString stats = tmp.path() + QStringLiteral("/stats.h5");
        const Run s =
            runApp({QStringLiteral("stats"), QStringLiteral("--model"), model, QStringLiteral("--data"),
                    QStringLiteral("text:") + kText + QStringLiteral(":4"), QStringLiteral("--seq-len"),
                    QStringLiteral("24"), QStringLiteral("--out"), stats});
        QVERIFY2(s.exitCode == 0, qPrintable(s.err));
        const StatisticsFile file = readStatisticsFile(stats.toStdString());
        QCOMPARE(file.samples, std::int64_t(4));
        QVERIFY(file.systematic);
        QCOMPARE(int(file.systematic->layers.size()), 2);

        // figures from those statistics: An et al.'s Figure 1 and the per-layer figure.
        const QString figures = tmp.path() + QStringLiteral("/figures");
        const Run f =
            runApp({QStringLiteral("figures"), QStringLiteral("--model"), model, QStringLiteral("--data"),
                    QStringLiteral("text:") + kText + QStringLiteral(":4"), QStringLiteral("--only"),
                    QStringLiteral("an1,an3,2"), QStringLiteral("--format"), QStringLiteral("png"),
                    QStringLiteral("--out"), figures});
        QVERIFY2(f.exitCode == 0, qPrintable(f.err));
        QFile index(figures + QStringLiteral("/index.json"));
        QVERIFY(index.open(QIODevice::ReadOnly));
        const QByteArray indexText = index.readAll();
        QVERIFY2(indexText.contains("\"an1\"") || indexText.contains("an1"), indexText.constData());
        QVERIFY2(!QDir(figures).entryList({QStringLiteral("*.png")}, QDir::Files).isEmpty(),
                 qPrintable(QDir(figures).entryList().join(QStringLiteral(", "))));

        // quantize: FP and W8A8 perplexity on held-out text.
        const Run q =
            runApp({QStringLiteral("quantize"), QStringLiteral("--model"), model, QStringLiteral("--data"),
                    QStringLiteral("text:") + kText, QStringLiteral("--calib-batches"), QStringLiteral("2"),
                    QStringLiteral("--seeds"), QStringLiteral("1"), QStringLiteral("--eval-batches"),
                    QStringLiteral("2"), QStringLiteral("--batch-size"), QStringLiteral("4"),
                    QStringLiteral("--seq-length"), QStringLiteral("24")});
        QVERIFY2(q.exitCode == 0, qPrintable(q.err));
        QVERIFY2(q.out.contains(QStringLiteral("W8A8")), qPrintable(q.out));

        // ... after SmoothQuant's migration and (but for Gemma 2, refused) the Hadamard rotation: the same
        // floating-point perplexity, and quantized numbers.
        QStringList transformed = {QStringLiteral("quantize"),
                                   QStringLiteral("--model"),
                                   model,
                                   QStringLiteral("--data"),
                                   QStringLiteral("text:") + kText,
                                   QStringLiteral("--calib-batches"),
                                   QStringLiteral("2"),
                                   QStringLiteral("--seeds"),
                                   QStringLiteral("1"),
                                   QStringLiteral("--eval-batches"),
                                   QStringLiteral("2"),
                                   QStringLiteral("--batch-size"),
                                   QStringLiteral("4"),
                                   QStringLiteral("--seq-length"),
                                   QStringLiteral("24"),
                                   QStringLiteral("--smoothquant"),
                                   QStringLiteral("0.5"),
                                   QStringLiteral("--rotate"),
                                   QStringLiteral("hadamard")};
        const Run t = runApp(transformed);
        if (family == QStringLiteral("gemma2")) {
            QCOMPARE(t.exitCode, 1);
            QVERIFY2(t.err.contains(QStringLiteral("post-attention")), qPrintable(t.err));
            transformed = transformed.mid(0, transformed.size() - 2);
        }
        const Run u = family == QStringLiteral("gemma2") ? runApp(transformed) : t;
        QVERIFY2(u.exitCode == 0, qPrintable(u.err));
        const nlohmann::json result =
            nlohmann::json::parse(u.out.trimmed().split(QLatin1Char('\n')).last().toStdString());
        const double fp = result["fp"].get<double>(), after = result["fp_after_transform"].get<double>();
        QVERIFY2(std::abs(after - fp) < 1e-4 * fp, qPrintable(QString("FP %1, after %2").arg(fp).arg(after)));
        QVERIFY(result["quantized_mean"].get<double>() > 0);

        // weights: the down projection of every layer, under the family's own module name.
        const Run w = runApp({QStringLiteral("weights"), QStringLiteral("--model"), model});
        QVERIFY2(w.exitCode == 0, qPrintable(w.err));
        const QRegularExpression row(
            QStringLiteral("^\\s+(\\d)\\s+(mlp\\.down_proj|mlp\\.fc2|mlp\\.dense_4h_to_h)\\s"),
            QRegularExpression::MultilineOption);
        QSet<QString> layers;
        for (auto it = row.globalMatch(w.out); it.hasNext();)
            layers.insert(it.next().captured(1));
        QVERIFY2(layers == (QSet<QString>{QStringLiteral("0"), QStringLiteral("1")}), qPrintable(w.out));
    }
};

QTEST_GUILESS_MAIN(TstFamilyCommands)
#include "tst_family_commands.moc"
