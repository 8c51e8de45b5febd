// The command line as a user meets it: the real executable, real model folders, exit codes,
// one-line errors, nothing partial left behind, and dumps that hold Hugging Face's numbers.

#include "../common/app_runner.h"
#include "../common/tensor_compare.h"

#include "io/hdf5_store.h"
#include "io/safetensors.h"
#include "model/capture.h"
#include "model/precision.h"
#include "model/runtime.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include <filesystem>
#include <fstream>

using namespace outlierlens;
using outlierlens::test::fixture;
using outlierlens::test::Run;
using outlierlens::test::runApp;
namespace fs = std::filesystem;

namespace {

QString fx(const char* relative)
{
    return QString::fromStdString(fixture(relative));
}

/// A model folder holding the fixture's config and vocab and `weights` as its weight file.
void makeModel(const QString& dir, const QByteArray& weights, const char* weightsName = "model.safetensors")
{
    fs::copy_file(fixture("bert/hf/config.json"), (dir + "/config.json").toStdString());
    fs::copy_file(fixture("bert/hf/vocab.txt"), (dir + "/vocab.txt").toStdString());
    std::ofstream out((dir + "/" + weightsName).toStdString(), std::ios::binary);
    out.write(weights.constData(), weights.size());
}

QByteArray readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return QByteArray::fromStdString(std::string(std::istreambuf_iterator<char>(in), {}));
}

QByteArray le64(quint64 v)
{
    QByteArray b(8, '\0');
    for (int i = 0; i < 8; ++i)
        b[i] = char((v >> (8 * i)) & 0xff);
    return b;
}

} // namespace

class TstCli : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void inspectDumpsHuggingFaceNumbers()
    {
        // Sample 0 of the reference inputs is this pair ([CLS] the to of a . [SEP] the and , in . [SEP]).
        QTemporaryDir dir;
        const QString dump = dir.path() + "/out.h5";
        const Run r = runApp({"inspect", "--model", fx("bert/hf"), "--text", "the to of a.", "--pair",
                              "the and, in.", "--dump", dump});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("tokens (13): [CLS] the to of a . [SEP] the and , in . [SEP]"),
                 qPrintable(r.out));
        QVERIFY2(r.out.contains("prediction: "), qPrintable(r.out));

        Hdf5Reader got(dump.toStdString());
        Hdf5Reader ref(fixture("bert/reference.h5"));
        const std::int64_t T = 13;
        using torch::indexing::Slice;
        QCOMPARE(got.readStrings("tokens").size(), std::size_t(T));
        QCOMPARE(got.readStrings("tokens")[5], std::string("."));
        QVERIFY(got.stringAttribute("/", "checkpoint_sha256").size() == 64);
        QVERIFY(got.stringAttribute("/", "input").find("the to of a.") != std::string::npos);
        QVERIFY(!got.stringAttribute("/", "app_version").empty());
        QVERIFY(!got.stringAttribute("/", "model").empty());
        // Every capture point of DESIGN.md is there, unpadded.
        QCOMPARE(got.shape("embeddings"), (std::vector<std::int64_t>{T, 128}));
        for (int layer = 0; layer < 2; ++layer)
            for (CapturePoint p : perLayerCapturePoints()) {
                if (p == CapturePoint::AttnGate) continue; // vanilla model
                QVERIFY2(got.exists(captureName(p, layer)), captureName(p, layer).c_str());
            }
        QCOMPARE(got.shape("layer1/attn_probs"), (std::vector<std::int64_t>{2, T, T}));
        QCOMPARE(got.shape("layer1/attn_values"), (std::vector<std::int64_t>{2, T, 64}));
        QCOMPARE(got.shape("logits"), (std::vector<std::int64_t>{3}));
        // The numbers are Hugging Face's (reference sample 0, real tokens only).
        OL_COMPARE_TENSORS("embeddings", got.readTensor("embeddings"),
                           ref.readTensor("embeddings")[0].index({Slice(0, T)}), 1e-4);
        OL_COMPARE_TENSORS("attn_probs", got.readTensor("layer1/attn_probs"),
                           ref.readTensor("attentions")[1][0].index({Slice(), Slice(0, T), Slice(0, T)}),
                           1e-5);
        OL_COMPARE_TENSORS("out", got.readTensor("layer1/out"),
                           ref.readTensor("hidden_states")[2][0].index({Slice(0, T)}), 1e-4);
        OL_COMPARE_TENSORS("logits", got.readTensor("logits"), ref.readTensor("outputs/logits")[0], 1e-4);
    }

    void inspectGatedModelDumpsGates()
    {
        QTemporaryDir dir;
        const QString dump = dir.path() + "/gated.h5";
        const Run r = runApp({"inspect", "--model", fx("variants/bert-gated-mlp/hf"), "--text",
                              "the to of a.", "--pair", "the and, in.", "--dump", dump});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY(r.out.contains("gated attention (mlp"));
        Hdf5Reader got(dump.toStdString());
        QCOMPARE(got.shape("layer0/attn_gate"), (std::vector<std::int64_t>{2, 13}));
        using torch::indexing::Slice;
        Hdf5Reader ref(fixture("variants/bert-gated-mlp/reference.h5"));
        OL_COMPARE_TENSORS("attn_gate", got.readTensor("layer1/attn_gate"),
                           ref.readTensor("layers/gate")[1][0].index({Slice(), Slice(0, 13)}), 1e-5);
    }

    void inspectImageMatchesTimm()
    {
        // Decoding + timm's eval transform + the model, end to end, against timm's numbers.
        QTemporaryDir dir;
        const QString dump = dir.path() + "/cat.h5";
        const Run r = runApp({"inspect", "--model", fx("vit/timm"), "--image",
                              fx("vit/images/chelsea_cat.png"), "--dump", dump});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("top-5: "), qPrintable(r.out));
        Hdf5Reader got(dump.toStdString());
        Hdf5Reader ref(fixture("vit/reference.h5"));
        const std::vector<std::string> tokens = got.readStrings("tokens");
        QCOMPARE(tokens.size(), std::size_t(197));
        QCOMPARE(tokens[0], std::string("[CLS]"));
        QCOMPARE(tokens[15], std::string("patch 1,0"));
        QCOMPARE(got.intArrayAttribute("tokens", "grid"), (std::vector<std::int64_t>{14, 14}));
        OL_COMPARE_TENSORS("embeddings", got.readTensor("embeddings"), ref.readTensor("embeddings")[0], 1e-4);
        OL_COMPARE_TENSORS("layer1/attn_probs", got.readTensor("layer1/attn_probs"),
                           ref.readTensor("attentions")[1][0], 1e-5);
        OL_COMPARE_TENSORS("logits", got.readTensor("logits"), ref.readTensor("outputs/logits")[0], 1e-4);
    }

    void inspectBf16StaysNearTheReference_data()
    {
        QTest::addColumn<QStringList>("input");
        QTest::addColumn<QString>("reference");
        QTest::newRow("bert") << QStringList{"--model",      fx("bert/hf"), "--text",
                                             "the to of a.", "--pair",      "the and, in."}
                              << "bert/reference.h5";
        QTest::newRow("vit") << QStringList{"--model", fx("vit/timm"), "--image",
                                            fx("vit/images/chelsea_cat.png")}
                             << "vit/reference.h5";
    }

    void inspectBf16StaysNearTheReference()
    {
        // --precision bf16 (autocast): the layer outputs within 2% of their largest magnitude of the
        // upstream float32 numbers, attention probabilities within 0.02, and not the float32 numbers.
        QFETCH(QStringList, input);
        QFETCH(QString, reference);
        QTemporaryDir dir;
        const QString dump = dir.path() + "/bf16.h5";
        const Run r =
            runApp(QStringList{"inspect"} + input + QStringList{"--precision", "bf16", "--dump", dump});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        Hdf5Reader got(dump.toStdString());
        Hdf5Reader ref(fixture(reference.toStdString()));
        const std::int64_t T = got.shape("layer1/out")[0];
        using torch::indexing::Slice;
        const torch::Tensor out = got.readTensor("layer1/out");
        const torch::Tensor refOut = ref.readTensor("hidden_states")[2][0].index({Slice(0, T)});
        const double outError = (out - refOut).abs().max().item<double>() / refOut.abs().max().item<double>();
        const double probError =
            (got.readTensor("layer1/attn_probs") -
             ref.readTensor("attentions")[1][0].index({Slice(), Slice(0, T), Slice(0, T)}))
                .abs()
                .max()
                .item<double>();
        QVERIFY2(outError < 0.02, qPrintable(QString("out: %1 of max").arg(outError)));
        QVERIFY2(probError < 0.02, qPrintable(QString("probabilities: %1").arg(probError)));
        if (cpuSupportsBf16()) QVERIFY2(outError > 1e-5, qPrintable(QString("out: %1").arg(outError)));
        const Run bad = runApp(QStringList{"inspect"} + input + QStringList{"--precision", "fp16"});
        QCOMPARE(bad.exitCode, 2);
        QVERIFY2(bad.err.contains("fp32 or bf16"), qPrintable(bad.err));
    }

    void badImagesFailWithOneLine()
    {
        QTemporaryDir dir;
        const QString broken = dir.path() + "/broken.png";
        {
            std::ofstream out(broken.toStdString());
            out << "\x89PNG not really";
        }
        // A PNG cut after its header: libpng printed its own lines before ours (issue #15.6).
        const QString truncated = dir.path() + "/truncated.png";
        {
            QFile cat(QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/images/chelsea_cat.png"));
            QVERIFY(cat.open(QIODevice::ReadOnly));
            QFile out(truncated);
            QVERIFY(out.open(QIODevice::WriteOnly));
            out.write(cat.read(3000));
        }
        for (const QString& image :
             {broken, truncated, dir.path() + "/missing.jpg", fx("bert/hf/config.json")}) {
            const Run r = runApp({"inspect", "--model", fx("vit/hf"), "--image", image});
            QCOMPARE(r.exitCode, 1);
            QVERIFY2(r.err.startsWith("outlierlens inspect: error: ") && r.err.count('\n') == 1,
                     qPrintable(r.err));
            QVERIFY2(r.err.contains(QFileInfo(image).fileName()), qPrintable(r.err));
        }
    }

    void tokenizeMatchesHuggingFace()
    {
        QTemporaryDir dir;
        fs::copy_file(OUTLIERLENS_SOURCE_DIR "/sample_data/bert/vocab.txt",
                      (dir.path() + "/vocab.txt").toStdString());
        const Run r = runApp({"tokenize", "--model", dir.path(), "--text", "How old are you?", "--pair",
                              "I am 25 years old."});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
        // tokenizer_cases.jsonl, case pair_qa.
        const QList<int> expected{101,  2129, 2214, 2024, 2017, 1029, 102,
                                  1045, 2572, 2423, 2086, 2214, 1012, 102};
        QList<int> ids;
        for (const auto& v : j["input_ids"].toArray())
            ids << v.toInt();
        QCOMPARE(ids, expected);
        QCOMPARE(j["tokens"].toArray().size(), expected.size());
        QCOMPARE(j["token_type_ids"].toArray().last().toInt(), 1);
    }

    void maxLengthTruncates()
    {
        const Run r = runApp({"inspect", "--model", fx("bert/hf"), "--text", "the to of a the to of a",
                              "--pair", "the and in the and in", "--max-length", "8"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("tokens (8):"), qPrintable(r.out));
        // Said, not silent: [CLS] + 8 + [SEP] + 6 + [SEP] = 17 tokens before the cut.
        QVERIFY2(r.err.contains("note: the input has 17 tokens; it was cut to 8"), qPrintable(r.err));
        const Run whole = runApp({"inspect", "--model", fx("bert/hf"), "--text", "the to of a"});
        QVERIFY2(!whole.err.contains("note: the input has"), qPrintable(whole.err));
    }

    void badCheckpointsFailWithOneLine_data()
    {
        QTest::addColumn<QByteArray>("weights");
        QTest::addColumn<QString>("weightsName");
        QTest::addColumn<QString>("mustMention");
        const QByteArray good = readFile(fixture("bert/hf/model.safetensors"));
        QTest::newRow("truncated safetensors") << good.left(good.size() / 2) << "model.safetensors"
                                               << "model.safetensors";
        QTest::newRow("header larger than file") << le64(1ull << 40) + QByteArray("{}") << "model.safetensors"
                                                 << "model.safetensors";
        QTest::newRow("malformed header") << le64(10) + QByteArray("{\"a\": [1,") << "model.safetensors"
                                          << "model.safetensors";
        QTest::newRow("unknown dtype")
            << le64(64) +
                   QByteArray("{\"x\":{\"dtype\":\"F7\",\"shape\":[1],\"data_offsets\":[0,4]}}")
                       .leftJustified(64, ' ') +
                   QByteArray(4, '\0')
            << "model.safetensors"
            << "F7";
        QTest::newRow("random bytes") << QByteArray(4096, '\x5a') << "model.safetensors"
                                      << "model.safetensors";
        QTest::newRow("empty") << QByteArray() << "model.safetensors"
                               << "model.safetensors";
        QTest::newRow("disallowed pickle global")
            << readFile(fixture("io/disallowed_global.bin")) << "pytorch_model.bin"
            << "not allowed";
        QTest::newRow("legacy torch.save") << readFile(fixture("io/legacy.bin")) << "pytorch_model.bin"
                                           << "pytorch_model.bin";
        QTest::newRow("truncated bin")
            << readFile(fixture("bert/hf/pytorch_model.bin")).left(100000) << "pytorch_model.bin"
            << "pytorch_model.bin";
    }
    void badCheckpointsFailWithOneLine()
    {
        QFETCH(QByteArray, weights);
        QFETCH(QString, weightsName);
        QFETCH(QString, mustMention);
        QTemporaryDir dir;
        makeModel(dir.path(), weights, qPrintable(weightsName));
        const QString dump = dir.path() + "/never.h5";
        const Run r = runApp({"inspect", "--model", dir.path(), "--text", "the", "--dump", dump});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.startsWith("outlierlens inspect: error: "), qPrintable(r.err));
        QVERIFY2(r.err.count('\n') == 1, qPrintable(r.err));
        QVERIFY2(r.err.contains(mustMention), qPrintable(r.err));
        QVERIFY(!QFile::exists(dump));
        QCOMPARE(QDir(dir.path()).entryList({"*.tmp*"}).size(), 0);
    }

    /// Issue #15.1: JSON nested 100,000 deep crashed the program (stack overflow printing or walking
    /// it). Config, safetensors header and MNLI lines now give one line naming the file.
    void deeplyNestedJsonIsRefused()
    {
        const QByteArray deep = QByteArray(100000, '[') + QByteArray(100000, ']');
        QTemporaryDir dir;
        makeModel(dir.path(), readFile(fixture("bert/hf/model.safetensors")));
        QByteArray config = readFile(fixture("bert/hf/config.json"));
        const QRegularExpression vocab(QStringLiteral("\"vocab_size\"\\s*:\\s*\\d+"));
        const QString replaced =
            QString::fromUtf8(config).replace(vocab, QStringLiteral("\"vocab_size\": ") + deep);
        QVERIFY(replaced.size() > config.size());
        QFile file(dir.path() + "/config.json");
        QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
        file.write(replaced.toUtf8());
        file.close();
        Run r = runApp({"inspect", "--model", dir.path(), "--text", "the"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("config.json: JSON nested deeper than 256 levels"), qPrintable(r.err));

        // A safetensors header: 8-byte length, then the JSON.
        QTemporaryDir headerDir;
        const QByteArray header = QByteArray("{\"a\": ") + deep + "}";
        makeModel(headerDir.path(), le64(quint64(header.size())) + header);
        r = runApp({"inspect", "--model", headerDir.path(), "--text", "the"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("safetensors header: JSON nested deeper than 256 levels"), qPrintable(r.err));

        // One MNLI line.
        QFile pairs(dir.path() + "/pairs.jsonl");
        QVERIFY(pairs.open(QIODevice::WriteOnly));
        pairs.write("{\"premise\": \"a\", \"hypothesis\": " + deep + "}\n");
        pairs.close();
        r = runApp({"stats", "--model", fx("bert/hf"), "--data", "mnli:" + pairs.fileName(), "--out",
                    dir.path() + "/s.h5"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("pairs.jsonl") && r.err.contains("nested deeper than 256"),
                 qPrintable(r.err));
    }

    /// A number beyond a double's range (1e999) ended the program with nlohmann's out_of_range
    /// (found by CI's fuzzing of config.json); it is refused with one line naming the file and number.
    void numberOutOfDoubleRangeIsRefused()
    {
        QTemporaryDir dir;
        makeModel(dir.path(), readFile(fixture("bert/hf/model.safetensors")));
        const QByteArray config = readFile(fixture("bert/hf/config.json"));
        const QRegularExpression eps(QStringLiteral("\"layer_norm_eps\"\\s*:\\s*[-0-9.eE]+"));
        const QString replaced =
            QString::fromUtf8(config).replace(eps, QStringLiteral("\"layer_norm_eps\": 1e999"));
        QVERIFY(replaced.contains("1e999"));
        QFile file(dir.path() + "/config.json");
        QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
        file.write(replaced.toUtf8());
        file.close();
        const Run r = runApp({"inspect", "--model", dir.path(), "--text", "the"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("config.json: number 1e999 at byte") &&
                     r.err.contains("outside the range of a double"),
                 qPrintable(r.err));
        QVERIFY2(!r.err.contains("json.exception"), qPrintable(r.err));
    }

    /// OpenBLAS 0.3.21 does not know some AVX-512 Xeons and uses its generic kernels there (float32
    /// products 3-4x slower); the app then re-executes itself with OPENBLAS_CORETYPE set when it runs a
    /// model (`bench` records the kernels it ran with), not for `--version`, which says what it would
    /// do. A user's own OPENBLAS_CORETYPE is left alone.
    void blasKernelsAreChosenForTheCpu()
    {
        const std::string library = blasKernels(); // this process: the library's own choice
        if (library.empty() || qEnvironmentVariableIsSet("OPENBLAS_CORETYPE"))
            QSKIP("the BLAS is not OpenBLAS, or this test runs with OPENBLAS_CORETYPE set");
        __builtin_cpu_init();
        const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                            __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
        const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        const QString own = QString::fromStdString(library);
        const QString expected = own != QLatin1String("Prescott") ? own
                                 : avx512                         ? QStringLiteral("SkylakeX")
                                 : avx2                           ? QStringLiteral("Haswell")
                                                                  : own;
        const QStringList bench = {"bench",  "--config", "bert-tiny", "--seq", "8",
                                   "--runs", "1",        "--warmup",  "0"};
        const auto benchKernels = [](const Run& r) {
            return QJsonDocument::fromJson(r.out.toUtf8()).object().value("blas_kernels").toString();
        };

        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.remove(QStringLiteral("OPENBLAS_CORETYPE"));
        const Run version = runApp({"--version"}, 60000, env);
        QCOMPARE(version.exitCode, 0);
        const QString line = expected == own
                                 ? "BLAS: OpenBLAS, " + own + " kernels\n"
                                 : "BLAS: OpenBLAS, " + expected +
                                       " kernels when running models (the library's own choice here: " + own +
                                       ")\n";
        QVERIFY2(version.out.contains(line), qPrintable(version.out));
        const Run chosen = runApp(bench, 120000, env);
        QCOMPARE(chosen.exitCode, 0);
        QCOMPARE(benchKernels(chosen), expected);

        env.insert(QStringLiteral("OPENBLAS_CORETYPE"), QStringLiteral("Prescott"));
        const Run users = runApp(bench, 120000, env);
        QCOMPARE(users.exitCode, 0);
        QCOMPARE(benchKernels(users), QStringLiteral("Prescott"));
        QVERIFY2(runApp({"--version"}, 60000, env).out.contains("BLAS: OpenBLAS, Prescott kernels\n"),
                 "a user's OPENBLAS_CORETYPE is reported as it is");
    }

    /// Issue #15.4: a checkpoint of NaN weights printed "entailment (entailment -nan, ...)" with exit 0.
    void nonFiniteOutputIsAnErrorNotAPrediction()
    {
        QTemporaryDir dir;
        StateDict weights = readSafetensors(fixture("bert/hf/model.safetensors"));
        weights.at("bert.embeddings.LayerNorm.weight").fill_(std::nan(""));
        makeModel(dir.path(), {});
        writeSafetensors((dir.path() + "/model.safetensors").toStdString(), weights);
        const QString dump = dir.path() + "/nan.h5";
        Run r = runApp({"inspect", "--model", dir.path(), "--text", "the cat", "--dump", dump});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("the model's output holds 3 NaN and 0 infinite values (of 3): no prediction"),
                 qPrintable(r.err));
        QVERIFY2(!r.out.contains("prediction:"), qPrintable(r.out));
        QVERIFY2(QFile::exists(dump), "the dump shows where the NaN arose"); // written before the error

        QFile pairs(dir.path() + "/pairs.tsv");
        QVERIFY(pairs.open(QIODevice::WriteOnly));
        pairs.write("index\tsentence1\tsentence2\tgold_label\n0\tA cat.\tAn animal.\tentailment\n");
        pairs.close();
        const QString stats = dir.path() + "/stats.h5";
        r = runApp({"stats", "--model", dir.path(), "--data", "mnli:" + pairs.fileName(), "--out", stats});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("NaN") && r.err.contains(dir.path()), qPrintable(r.err));
        QVERIFY(!QFile::exists(stats));
    }

    /// Issue #41.2: a model with NaN weights is not scored ("FP accuracy 29.57%, W8A8 29.57%", exit 0, from
    /// argmaxes of NaN; "perplexity nan" for a decoder): quantize refuses it, naming the tensor.
    void quantizeRefusesNonFiniteWeights()
    {
        QTemporaryDir dir;
        StateDict weights = readSafetensors(fixture("bert/hf/model.safetensors"));
        weights.at("classifier.bias").fill_(std::nan(""));
        makeModel(dir.path(), {});
        writeSafetensors((dir.path() + "/model.safetensors").toStdString(), weights);
        QFile pairs(dir.path() + "/pairs.tsv");
        QVERIFY(pairs.open(QIODevice::WriteOnly));
        pairs.write("index\tsentence1\tsentence2\tgold_label\n");
        for (int i = 0; i < 8; ++i)
            pairs.write(QByteArray::number(i) + "\tA cat sat.\tAn animal sat.\tentailment\n");
        pairs.close();
        Run r =
            runApp({"quantize", "--model", dir.path(), "--data", "mnli:" + pairs.fileName(),
                    "--nli-train-pairs", "4", "--batch-size", "2", "--calib-batches", "1", "--seeds", "1"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(
            r.err.contains("the model's tensor 'classifier.bias' holds 3 NaN and 0 infinite values (of 3): "
                           "no score from it"),
            qPrintable(r.err));
        QVERIFY2(!r.out.contains("accuracy"), qPrintable(r.out));

        QTemporaryDir decoder;
        for (const auto& entry : fs::directory_iterator(fixture("decoders/gpt2-seed0/hf")))
            fs::copy_file(entry.path(), fs::path(decoder.path().toStdString()) / entry.path().filename());
        StateDict gpt2 = readSafetensors(fixture("decoders/gpt2-seed0/hf/model.safetensors"));
        gpt2.at("transformer.ln_f.weight").fill_(std::nan(""));
        fs::remove((decoder.path() + "/pytorch_model.bin").toStdString());
        writeSafetensors((decoder.path() + "/model.safetensors").toStdString(), gpt2);
        r = runApp({"quantize", "--model", decoder.path(), "--data",
                    "text:" OUTLIERLENS_SOURCE_DIR "/sample_data/text/wiki_en_valid.txt", "--seq-length",
                    "32", "--calib-batches", "1", "--seeds", "1"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("'transformer.ln_f.weight' holds") && !r.out.contains("perplexity"),
                 qPrintable(r.err + r.out));
    }

    /// Issue #15.6: messages that said too little or came too late.
    void inputsAreJudgedUpFrontAndInWords()
    {
        // Hugging Face encodes "" as [CLS] [SEP]; it was a usage error here.
        Run r = runApp({"tokenize", "--model", fx("bert/hf"), "--text", ""});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(R"("tokens":["[CLS]","[SEP]"])"), qPrintable(r.out));

        // Latin-1 bytes in an argument: refused, not tokenized as "caf". Raw bytes need a shell.
        QProcess shell;
        shell.start(QStringLiteral("/bin/sh"),
                    {"-c", "exec \"$0\" tokenize --model \"$1\" --text \"$(printf 'caf\\351')\"",
                     QStringLiteral(OUTLIERLENS_BINARY_DIR "/app/outlierlens"), fx("bert/hf")});
        QVERIFY(shell.waitForFinished(60000));
        QCOMPARE(shell.exitCode(), 2);
        QVERIFY2(shell.readAllStandardError().contains("--text is not valid UTF-8"), "no word on the bytes");

        // An output folder that does not exist is said before the passes, not after them.
        const QString pairs = "mnli:" + fx("text/mnli_sample.jsonl");
        r = runApp({"stats", "--model", fx("bert/hf"), "--data", pairs, "--out", "/nonexistent/dir/s.h5"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("/nonexistent/dir/s.h5: cannot write here") && !r.err.contains(" pairs ("),
                 qPrintable(r.err));
        r = runApp({"quantize", "--model", fx("bert/hf"), "--data", pairs, "--out", "/nonexistent/dir/q"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("/nonexistent/dir/q.json: cannot write here"), qPrintable(r.err));

        // A count beyond 64 bits said only "stoull".
        r = runApp({"stats", "--model", fx("bert/hf"), "--data", pairs + ":99999999999999999999999", "--out",
                    "/tmp/never.h5"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("is larger than any data set"), qPrintable(r.err));

        // Issue #41.6: --out naming a folder is said before the passes (it failed at the final rename).
        QTemporaryDir dir;
        r = runApp({"stats", "--model", fx("bert/hf"), "--data", pairs, "--out", dir.path()});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(dir.path() + ": is a folder") && !r.err.contains(" pairs ("),
                 qPrintable(r.err));
        // Text data that is not UTF-8: the message names the file, not only "tokenizer".
        QFile latin1(dir.path() + "/latin1.txt");
        QVERIFY(latin1.open(QIODevice::WriteOnly));
        latin1.write("caf\xe9 au lait\n");
        latin1.close();
        r = runApp({"stats", "--model",
                    QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/backcopy-vanilla"), "--data",
                    "text:" + latin1.fileName(), "--out", dir.path() + "/s.h5"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(latin1.fileName() + ": ") && r.err.contains("not valid UTF-8"),
                 qPrintable(r.err));
    }

    void usageErrors_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<int>("exitCode");
        QTest::newRow("no model") << QStringList{"inspect", "--text", "a"} << 2;
        QTest::newRow("unknown option") << QStringList{"inspect", "--frobnicate"} << 2;
        QTest::newRow("unknown command") << QStringList{"frobnicate"} << 2;
        QTest::newRow("bad number") << QStringList{"inspect",      "--model", fx("bert/hf"), "--text", "a",
                                                   "--max-length", "x"}
                                    << 2;
        QTest::newRow("bad variant") << QStringList{"inspect", "--model", fx("bert/hf"), "--text",
                                                    "a",       "--gamma", "0.5"}
                                     << 1;
        // No option takes nan or inf: they would flow into a result printed as a number.
        for (const char* option : {"--gamma", "--zeta", "--alpha"})
            for (const char* value : {"nan", "-inf", "inf"})
                QTest::newRow(qPrintable(QStringLiteral("%1 %2").arg(option, value)))
                    << QStringList{"inspect",   "--model", fx("bert/hf"), "--text", "a",
                                   "--softmax", "clipped", option,        value}
                    << 2;
        QTest::newRow("create-model --gamma nan")
            << QStringList{"create-model", "--vocab", fx("bert/hf/vocab.txt"),
                           "--softmax",    "clipped", "--gamma",
                           "nan",          "--out",   "/tmp/never-written"}
            << 2;
        QTest::newRow("stats --k nan") << QStringList{"stats",
                                                      "--model",
                                                      fx("bert/hf"),
                                                      "--data",
                                                      "mnli:" + fx("text/mnli_sample.jsonl"),
                                                      "--k",
                                                      "nan",
                                                      "--out",
                                                      "/tmp/never-written.h5"}
                                       << 2;
        // One rule parser for every command (issue #40.1): a key receives at most T, so a fraction above 1
        // is refused, by `figures` as by `stats`; so is an unknown rule name.
        for (const char* command : {"stats", "figures"}) {
            QTest::newRow(qPrintable(QStringLiteral("%1 --attention-fraction 2").arg(command)))
                << QStringList{command,
                               "--model",
                               fx("bert/hf"),
                               "--data",
                               "mnli:" + fx("text/mnli_sample.jsonl"),
                               "--attention-fraction",
                               "2",
                               "--out",
                               "/tmp/never-written"}
                << 2;
            QTest::newRow(qPrintable(QStringLiteral("%1 --rule 6sigma").arg(command)))
                << QStringList{command,
                               "--model",
                               fx("bert/hf"),
                               "--data",
                               "mnli:" + fx("text/mnli_sample.jsonl"),
                               "--rule",
                               "6sigma",
                               "--out",
                               "/tmp/never-written"}
                << 2;
        }
        QTest::newRow("image on BERT")
            << QStringList{"inspect", "--model", fx("bert/hf"), "--image", "x.png"} << 2;
        QTest::newRow("quantize: unknown estimator")
            << QStringList{"quantize", "--model", fx("bert/hf"), "--data", "synthetic", "--estimator", "max"}
            << 2;
        QTest::newRow("quantize: bad data spec")
            << QStringList{"quantize", "--model", fx("bert/hf"), "--data", "pictures"} << 1;
        QTest::newRow("quantize: not a synthetic model")
            << QStringList{"quantize", "--model", fx("bert/hf"), "--data", "synthetic"} << 1;
        QTest::newRow("quantize: missing data file")
            << QStringList{"quantize", "--model", fx("bert/hf"), "--data", "mnli:/nonexistent.tsv"} << 1;
        QTest::newRow("quantize: 1 bit")
            << QStringList{"quantize", "--model", fx("bert/hf"), "--data", "synthetic", "--bits-a", "1"} << 2;
        QTest::newRow("quantize: unknown granularity")
            << QStringList{"quantize",  "--model",           fx("bert/hf"), "--data",
                           "synthetic", "--act-granularity", "row"}
            << 2;
        QTest::newRow("quantize: per-channel with mse")
            << QStringList{"quantize",          "--model", fx("bert/hf"), "--data", "synthetic",
                           "--act-granularity", "channel", "--estimator", "mse"}
            << 2;
        QTest::newRow("intervene: no layer")
            << QStringList{"intervene", "--model", fx("bert/hf"), "--data", "synthetic"} << 2;
        QTest::newRow("intervene: bad dims")
            << QStringList{"intervene", "--model", fx("bert/hf"), "--data", "synthetic",
                           "--layer",   "1",       "--dims",      "3,x"}
            << 2;
        QTest::newRow("intervene: bad value")
            << QStringList{"intervene", "--model", fx("bert/hf"), "--data", "synthetic",
                           "--layer",   "1",       "--set",       "half"}
            << 2;
        QTest::newRow("intervene: attention without keys")
            << QStringList{"intervene", "--model", fx("bert/hf"), "--data",    "synthetic",
                           "--layer",   "1",       "--tensor",    "attn_probs"}
            << 2;
        QTest::newRow("intervene: keys without attention")
            << QStringList{"intervene", "--model", fx("bert/hf"), "--data", "synthetic",
                           "--layer",   "1",       "--keys",      "0"}
            << 2;
        QTest::newRow("intervene: heads with dims")
            << QStringList{"intervene", "--model",      fx("bert/hf"), "--data", "synthetic", "--layer", "1",
                           "--tensor",  "attn_context", "--heads",     "1",      "--dims",    "3"}
            << 2;
        QTest::newRow("intervene: heads without attention")
            << QStringList{"intervene", "--model", fx("bert/hf"), "--data", "synthetic",
                           "--layer",   "1",       "--heads",     "1"}
            << 2;
        QTest::newRow("intervene: bad tensor")
            << QStringList{"intervene", "--model", fx("bert/hf"), "--data",  "synthetic",
                           "--layer",   "1",       "--tensor",    "residual"}
            << 2;
    }
    void usageErrors()
    {
        QFETCH(QStringList, args);
        QFETCH(int, exitCode);
        const Run r = runApp(args);
        QCOMPARE(r.exitCode, exitCode);
        QVERIFY2(!r.err.isEmpty(), "an error must say why");
    }

    void helpForEveryCommand()
    {
        for (const char* c : {"inspect", "tokenize", "bench", "create-model", "stats", "train", "sweep",
                              "convert", "quantize", "intervene", "showcase"}) {
            const Run r = runApp({c, "--help"});
            QCOMPARE(r.exitCode, 0);
            QVERIFY2(r.out.startsWith(QStringLiteral("Usage: outlierlens %1 [options]").arg(c)),
                     qPrintable(r.out));
        }
        QCOMPARE(runApp({"--help"}).exitCode, 0);
    }

    void dumpToUnwritablePlace()
    {
        const Run r =
            runApp({"inspect", "--model", fx("bert/hf"), "--text", "a", "--dump", "/nonexistent/dir/out.h5"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("/nonexistent/dir/out.h5"), qPrintable(r.err));
    }

    /// Issue #41.1: a write that fails (here a file-size limit, which fails writes as a full disk does) is
    /// one line naming the file and the reason, exit 1, no signal (HDF5 used to crash at exit closing the
    /// file twice), and nothing left in the folder.
    void fullDiskIsOneLineAndLeavesNothing_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::newRow("inspect --dump")
            << QStringList{"inspect", "--model", fx("bert/hf"), "--text", "a sentence to dump", "--dump"};
        QTest::newRow("stats --out") << QStringList{
            "stats", "--model", fx("bert/hf"), "--data", "mnli:" + fx("text/mnli_sample.jsonl"), "--out"};
        // Issue #41.4: folders too (they used to leave OUT.tmp/ behind, and convert said "Input/output
        // error").
        QTest::newRow("create-model --out") << QStringList{
            "create-model", "--preset", "bert-tiny", "--vocab", fx("bert/hf/vocab.txt"), "--out"};
        QTest::newRow("convert --out") << QStringList{"convert", "--model", fx("bert/hf"), "--out"};
        QTest::newRow("figures --out") << QStringList{
            "figures", "--model",
            QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/backcopy-vanilla"), "--out"};
    }
    void fullDiskIsOneLineAndLeavesNothing()
    {
        QFETCH(QStringList, args);
        if (!QFileInfo::exists(QStringLiteral("/usr/bin/prlimit"))) QSKIP("needs prlimit (util-linux)");
        QTemporaryDir dir;
        const QString out = dir.path() + "/out.h5";
        QProcess p;
        p.start(QStringLiteral("/usr/bin/prlimit"),
                QStringList{"--fsize=4096", "--", QStringLiteral(OUTLIERLENS_BINARY_DIR "/app/outlierlens")}
                    << args << out);
        QVERIFY(p.waitForFinished(120000));
        const QString err = QString::fromUtf8(p.readAllStandardError()).trimmed();
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 1);
        // Progress lines may come first; the error is one line naming the file and the reason.
        const QStringList errors = err.split('\n').filter(QStringLiteral("error:"));
        QVERIFY2(errors.size() == 1 && errors[0].contains(out) &&
                     errors[0].contains(QStringLiteral(": cannot write: File too large")),
                 qPrintable(err));
        QVERIFY2(QDir(dir.path()).entryList(QDir::NoDotAndDotDot | QDir::AllEntries | QDir::Hidden).isEmpty(),
                 qPrintable(QDir(dir.path()).entryList(QDir::NoDotAndDotDot | QDir::AllEntries).join(", ")));
    }

    /// Issue #41.6: create-model out of memory (here a 4 GB address-space limit, less than the 7B preset's
    /// parameter shapes reserve before it writes them one at a time) names the folder and the model's
    /// shape, exit 1, and leaves nothing.
    void createModelOutOfMemorySaysWhat()
    {
        if (!QFileInfo::exists(QStringLiteral("/usr/bin/prlimit"))) QSKIP("needs prlimit (util-linux)");
        QTemporaryDir dir;
        const QString out = dir.path() + "/llama";
        QProcess p;
        p.start(QStringLiteral("/usr/bin/prlimit"),
                {"--as=4000000000", "--", QStringLiteral(OUTLIERLENS_BINARY_DIR "/app/outlierlens"),
                 "create-model", "--preset", "llama-7b", "--dtype", "bf16", "--out", out});
        QVERIFY(p.waitForFinished(120000));
        const QString err = QString::fromUtf8(p.readAllStandardError());
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 1);
        QVERIFY2(err.contains(out + ": not enough memory to build llama-7b (32 layers, hidden 4096"),
                 qPrintable(err));
        QVERIFY(QDir(dir.path()).entryList(QDir::NoDotAndDotDot | QDir::AllEntries).isEmpty());
    }

    void createdModelLoads()
    {
        QTemporaryDir dir;
        const QString model = dir.path() + "/m";
        Run r = runApp({"create-model", "--preset", "bert-tiny", "--vocab", fx("bert/hf/vocab.txt"), "--gate",
                        "linear", "--out", model});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY(QFile::exists(model + "/README.md"));
        r = runApp({"inspect", "--model", model, "--text", "the to of a."});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY(r.out.contains("gated attention (linear)"));
        // Refuses to overwrite.
        QCOMPARE(runApp({"create-model", "--vocab", fx("bert/hf/vocab.txt"), "--out", model}).exitCode, 1);
    }

    void convertToFloat16LoadsWithTheSameTensorNames()
    {
        QTemporaryDir dir;
        const QString out = dir.path() + "/half";
        Run r = runApp({"convert", "--model", fx("variants/bert-gated-linear/hf"), "--out", out, "--fp16"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY(QFile::exists(out + "/vocab.txt") && QFile::exists(out + "/config.json"));
        QVERIFY(!QFile::exists(out + "/pytorch_model.bin"));
        // The fp16 model predicts what the original predicts, its logits within fp16 rounding.
        const QString dump = dir.path() + "/half.h5";
        r = runApp(
            {"inspect", "--model", out, "--text", "the to of a.", "--pair", "the and, in.", "--dump", dump});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        Hdf5Reader ref(fixture("variants/bert-gated-linear/reference.h5"));
        OL_COMPARE_TENSORS("logits", Hdf5Reader(dump.toStdString()).readTensor("logits"),
                           ref.readTensor("outputs/logits")[0], 2e-2);
        QCOMPARE(runApp({"convert", "--model", fx("bert/hf"), "--out", out}).exitCode, 1); // exists
    }

    void benchPrintsJson()
    {
        const Run r =
            runApp({"bench", "--config", "bert-tiny", "--seq", "32", "--runs", "2", "--warmup", "0"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QVERIFY(j["no_capture_ms"].toObject()["median"].toDouble() > 0);
        QVERIFY(j["capture_all_ms"].toObject()["median"].toDouble() > 0);
        QCOMPARE(j["seq"].toInt(), 32);
        QVERIFY(j["captured_mb"].toDouble() > 0);
        // Issue #44: the forward's matrix-product FLOPs, counted here for bert-tiny (2 layers, d 128, FFN
        // 512) at T = 32: per layer 4 projections 2 T d^2, scores and P.V 2 T^2 d each, the FFN 2 * 2 T d
        // d_ff; and the achieved rate as a share of the measured peak.
        const QJsonObject rate = j["rate"].toObject();
        const double T = 32, d = 128, ff = 512;
        const double flop = 2 * (4 * 2 * T * d * d + 2 * 2 * T * T * d + 2 * 2 * T * d * ff);
        QVERIFY2(std::abs(rate["gflop_per_forward"].toDouble() - flop / 1e9) < 1e-12,
                 qPrintable(QString::number(rate["gflop_per_forward"].toDouble())));
        const double achieved = rate["achieved_gflops"].toDouble();
        QVERIFY(
            std::abs(achieved - flop / 1e9 / (j["no_capture_ms"].toObject()["median"].toDouble() / 1000)) <
            1e-6 * achieved);
        QVERIFY(rate["peak_gflops_fp32"].toDouble() > 0 && rate["peak_gflops_bf16"].toDouble() > 0);
        QVERIFY(std::abs(rate["share_of_peak"].toDouble() - achieved / rate["peak_gflops_fp32"].toDouble()) <
                1e-9);
    }

    void tokenizeDecoderFolders_data()
    {
        QTest::addColumn<QString>("caseId");
        QTest::newRow("gpt2") << "gpt2/special_in_text";
        QTest::newRow("opt pair") << "opt/pair";
        QTest::newRow("opt without BOS") << "opt/no_special_tokens";
        QTest::newRow("llama") << "llama/special_then_word";
        QTest::newRow("llama without BOS") << "llama/no_bos";
    }
    void tokenizeDecoderFolders()
    {
        // Folders holding only tokenizer files; expected ids and tokens are Hugging Face's (the golden
        // case files of the decoder fixtures).
        QFETCH(QString, caseId);
        QJsonObject c;
        for (const char* file :
             {"decoders/tokenizer_cases_bpe.jsonl", "decoders/tokenizer_cases_spm.jsonl"}) {
            QFile f(fx(file));
            QVERIFY(f.open(QIODevice::ReadOnly));
            while (!f.atEnd()) {
                const QJsonObject o = QJsonDocument::fromJson(f.readLine()).object();
                if (o["id"].toString() == caseId) c = o;
            }
        }
        QVERIFY2(!c.isEmpty(), qPrintable(caseId));
        const QString folder = fx(("decoders/tokenizers/" + c["tokenizer"].toString()).toUtf8().constData());
        QStringList args{"tokenize", "--model", folder, "--text", c["text"].toString()};
        if (c["text_pair"].isString()) args << "--pair" << c["text_pair"].toString();
        if (!c["add_special_tokens"].toBool()) args << "--no-special-tokens";
        const Run r = runApp(args);
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QCOMPARE(j["input_ids"].toArray(), c["input_ids"].toArray());
        QCOMPARE(j["tokens"].toArray(), c["tokens"].toArray());
        QVERIFY(!j.contains("token_type_ids"));
    }

    void tokenizeDecoderErrors()
    {
        // --max-length truncates like HF's longest_first (opt/pair: 3 tokens off each segment).
        const Run t = runApp({"tokenize", "--model", fx("decoders/tokenizers/opt"), "--text",
                              "Question: who?", "--pair", " Answer: me.", "--max-length", "10"});
        QVERIFY2(t.exitCode == 0, qPrintable(t.err));
        QCOMPARE(QJsonDocument::fromJson(t.out.toUtf8()).object()["input_ids"].toArray(),
                 QJsonArray({2, 52, 88, 379, 294, 2, 813, 86, 90, 265}));
        // A broken merges file is one line naming it.
        QTemporaryDir dir;
        fs::copy_file(fixture("decoders/tokenizers/gpt2/vocab.json"),
                      (dir.path() + "/vocab.json").toStdString());
        std::ofstream((dir.path() + "/merges.txt").toStdString()) << "#version: 0.2\nh e l\n";
        const Run r = runApp({"tokenize", "--model", dir.path(), "--text", "hello"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("merges.txt:2") && r.err.trimmed().count('\n') == 0, qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TstCli)
#include "tst_cli.moc"
