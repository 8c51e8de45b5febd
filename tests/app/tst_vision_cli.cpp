// DINOv2 with registers and CLIP's vision tower on the command line (issue #42): `inspect --pixels X.npy`
// runs an already preprocessed input as it is, and its dump holds the reference's numbers (Hugging Face
// transformers and timm) under DESIGN.md's names, registers labelled; a bad .npy is one clear error.

#include "../common/app_runner.h"
#include "../common/tensor_compare.h"

#include "analysis/vit_inspection.h"
#include "io/hdf5_store.h"
#include "io/image.h"
#include "model/capture.h"
#include "model/vit_network.h"

#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace outlierlens;
using outlierlens::test::fixture;
using outlierlens::test::Run;
using outlierlens::test::runApp;

namespace {

/// Writes a .npy (format 1.0) with this header dict and raw data, as numpy.save lays it out.
void writeNpy(const std::string& path, const std::string& dict, const char* data, std::size_t bytes)
{
    std::string header = dict;
    while ((10 + header.size() + 1) % 64 != 0)
        header += ' ';
    header += '\n';
    std::ofstream out(path, std::ios::binary);
    out.write("\x93NUMPY\x01\x00", 8);
    const unsigned char length[2] = {static_cast<unsigned char>(header.size() & 0xff),
                                     static_cast<unsigned char>(header.size() >> 8)};
    out.write(reinterpret_cast<const char*>(length), 2);
    out.write(header.data(), std::streamsize(header.size()));
    out.write(data, std::streamsize(bytes));
}

/// A float32 tensor as numpy.save writes it ('<f4', C order); `shape` as the header's tuple text.
void writeFloatNpy(const std::string& path, const torch::Tensor& t)
{
    const torch::Tensor c = t.to(torch::kFloat).contiguous();
    std::string shape = "(";
    for (int i = 0; i < c.dim(); ++i)
        shape += std::to_string(c.size(i)) + (c.dim() == 1 || i + 1 < c.dim() ? ", " : "");
    shape += ")";
    writeNpy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }",
             static_cast<const char*>(c.data_ptr()), std::size_t(c.numel()) * 4);
}

} // namespace

class TstVisionCli : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void inspectPixelsDumpsReferenceNumbers_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("prefix"); // the reference's input set
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("cols");
        QTest::addColumn<bool>("batchDim"); // write [1, 3, h, w] instead of [3, h, w]
        for (const char* naming : {"hf", "timm"}) {
            QTest::newRow(qPrintable(QStringLiteral("dinov2-reg %1").arg(naming)))
                << QStringLiteral("dinov2-reg/%1").arg(naming) << "" << 4 << 4 << false;
            QTest::newRow(qPrintable(QStringLiteral("dinov2-reg %1 interpolated").arg(naming)))
                << QStringLiteral("dinov2-reg/%1").arg(naming) << "interp/" << 5 << 7 << true;
            QTest::newRow(qPrintable(QStringLiteral("clip-vision %1").arg(naming)))
                << QStringLiteral("clip-vision/%1").arg(naming) << "" << 4 << 4 << false;
        }
    }

    void inspectPixelsDumpsReferenceNumbers()
    {
        QFETCH(QString, model);
        QFETCH(QString, prefix);
        QFETCH(int, rows);
        QFETCH(int, cols);
        QFETCH(bool, batchDim);
        const std::string family = model.section('/', 0, 0).toStdString();
        const std::string p = prefix.toStdString();
        const Hdf5Reader ref(fixture("families/" + family + "/reference.h5"));
        QTemporaryDir dir;
        const std::string npy = dir.path().toStdString() + "/pixels.npy";
        const torch::Tensor pixels = ref.readTensor(p + "inputs/pixel_values")[0];
        writeFloatNpy(npy, batchDim ? pixels.unsqueeze(0) : pixels);
        const QString dump = dir.path() + QStringLiteral("/dump.h5");
        const Run r =
            runApp({QStringLiteral("inspect"), QStringLiteral("--model"),
                    QString::fromStdString(fixture("families/" + model.toStdString())),
                    QStringLiteral("--pixels"), QString::fromStdString(npy), QStringLiteral("--dump"), dump});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QVERIFY2(r.out.contains(QStringLiteral("no preprocessing")), qPrintable(r.out));

        const Hdf5Reader got(dump.toStdString());
        const int registers = family == "dinov2-reg" ? 4 : 0;
        const std::vector<std::string> tokens = got.readStrings("tokens");
        QCOMPARE(tokens.size(), std::size_t(1 + registers + rows * cols));
        QCOMPARE(tokens[0], std::string("[CLS]"));
        for (int i = 1; i <= registers; ++i)
            QCOMPARE(tokens[std::size_t(i)], "[REG" + std::to_string(i) + "]");
        QCOMPARE(tokens[std::size_t(1 + registers)], std::string("patch 0,0"));
        QCOMPARE(tokens.back(), "patch " + std::to_string(rows - 1) + "," + std::to_string(cols - 1));

        OL_COMPARE_TENSORS("embeddings", got.readTensor("embeddings"), ref.readTensor(p + "embeddings")[0],
                           1e-4);
        const int L = int(ref.shape(p + "hidden_states")[0]) - 1;
        for (int l = 0; l < L; ++l) {
            const std::string n = "layer" + std::to_string(l) + "/";
            OL_COMPARE_TENSORS(QString::fromStdString(n + "attn_probs"), got.readTensor(n + "attn_probs"),
                               ref.readTensor(p + "attentions")[l][0], 1e-5);
            OL_COMPARE_TENSORS(QString::fromStdString(n + "attn_out"), got.readTensor(n + "attn_out"),
                               ref.readTensor(p + "layers/attn_proj")[l][0], 1e-4);
            OL_COMPARE_TENSORS(QString::fromStdString(n + "down_in"), got.readTensor(n + "down_in"),
                               ref.readTensor(p + "layers/x_down")[l][0], 1e-4);
            OL_COMPARE_TENSORS(QString::fromStdString(n + "ffn_out"), got.readTensor(n + "ffn_out"),
                               ref.readTensor(p + "layers/ffn_out")[l][0], 1e-4);
            OL_COMPARE_TENSORS(QString::fromStdString(n + "out"), got.readTensor(n + "out"),
                               ref.readTensor(p + "hidden_states")[l + 1][0], 1e-4);
        }
        QVERIFY(!got.exists("logits"));
        QCOMPARE(got.stringAttribute("/", "input"), npy);
    }

    void badNpyIsOneClearError_data()
    {
        QTest::addColumn<QString>("dict");
        QTest::addColumn<int>("bytes");
        QTest::addColumn<QString>("expected");
        const QString shape = QStringLiteral("(3, 56, 56)");
        const int floats = 3 * 56 * 56;
        QTest::newRow("float64") << "{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + ", }"
                                 << floats * 8 << "holds float64; expected little-endian float32";
        QTest::newRow("big-endian") << "{'descr': '>f4', 'fortran_order': False, 'shape': " + shape + ", }"
                                    << floats * 4 << "holds big-endian float32";
        QTest::newRow("uint8") << "{'descr': '|u1', 'fortran_order': False, 'shape': " + shape + ", }"
                               << floats << "holds uint8";
        QTest::newRow("fortran order") << "{'descr': '<f4', 'fortran_order': True, 'shape': " + shape + ", }"
                                       << floats * 4 << "Fortran (column-major) order";
        QTest::newRow("truncated") << "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }"
                                   << floats * 4 - 4 << "needs 37632 bytes of float32 but 37628 follow";
        QTest::newRow("wrong shape") << "{'descr': '<f4', 'fortran_order': False, 'shape': (56, 56), }"
                                     << 56 * 56 * 4 << "expected preprocessed pixels of shape [3, h, w]";
        QTest::newRow("not a multiple of the patch")
            << "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 56, 60), }" << 3 * 56 * 60 * 4
            << "multiples of the patch size 14";
        QTest::newRow("not npy") << "" << 0 << "not a NumPy .npy file";
    }

    void badNpyIsOneClearError()
    {
        QFETCH(QString, dict);
        QFETCH(int, bytes);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        const std::string npy = dir.path().toStdString() + "/bad.npy";
        const std::vector<char> data(std::size_t(bytes), 0);
        if (dict.isEmpty())
            std::ofstream(npy, std::ios::binary) << "P6\n56 56\n255\n";
        else
            writeNpy(npy, dict.toStdString(), data.data(), data.size());
        const Run r = runApp({QStringLiteral("inspect"), QStringLiteral("--model"),
                              QString::fromStdString(fixture("families/dinov2-reg/hf")),
                              QStringLiteral("--pixels"), QString::fromStdString(npy)});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(expected), qPrintable(r.err));
        QVERIFY2(r.err.trimmed().count(QLatin1Char('\n')) == 0, qPrintable(r.err)); // one line
        QVERIFY2(!r.out.contains(QStringLiteral("dump:")), qPrintable(r.out));
    }

    /// `stats` over images through a DINOv2 with registers: the registers are their own keys and
    /// category, and the block output's token norms (Darcet et al.) equal the backend's forward pass, norms
    /// taken here with torch.
    void statsRecordRegistersAndTokenNorms()
    {
        QTemporaryDir dir;
        const std::filesystem::path images = dir.path().toStdString() + "/images";
        std::filesystem::create_directories(images);
        for (const char* name : {"chelsea_cat.png", "coffee_cup.png"})
            std::filesystem::copy_file(std::string(OUTLIERLENS_SOURCE_DIR "/sample_data/images/") + name,
                                       images / name);
        const QString model = QString::fromStdString(fixture("families/dinov2-reg/timm"));
        const QString statsPath = dir.path() + "/reg.h5";
        const Run r = runApp({QStringLiteral("stats"), QStringLiteral("--model"), model,
                              QStringLiteral("--data"), "images:" + QString::fromStdString(images.string()),
                              QStringLiteral("--systematic"), QStringLiteral("--out"), statsPath});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        Hdf5Reader s(statsPath.toStdString());
        QCOMPARE(std::int64_t(s.numberAttribute("/", "registers")), std::int64_t(4));
        QCOMPARE(s.shape("layer1/out/register_outliers"), (std::vector<std::int64_t>{4}));
        QCOMPARE(s.shape("layer1/heads/register_mean_cumulative_attention"),
                 (std::vector<std::int64_t>{4, 4}));
        const std::vector<std::int64_t> grid = s.shape("layer1/out/patch_outliers");
        QCOMPARE(grid.size(), std::size_t(2));
        const std::int64_t T = 1 + 4 + grid[0] * grid[1];
        // An et al.'s categories: 1 initial token and 4 registers per image; the patches "other".
        const torch::Tensor byCategory = s.readTensor("systematic/layer1/tokens_by_category");
        QCOMPARE(byCategory.size(0), std::int64_t(5));
        QCOMPARE(byCategory[0].item<std::int64_t>(), std::int64_t(2));
        QCOMPARE(byCategory[3].item<std::int64_t>(), 2 * grid[0] * grid[1]);
        QCOMPARE(byCategory[4].item<std::int64_t>(), std::int64_t(2 * 4));

        VitNetwork network = VitNetwork::load(model.toStdString());
        const ImagePreprocessing preprocessing = ImagePreprocessing::fromModelDir(model.toStdString());
        for (int layer = 0; layer < 2; ++layer) {
            torch::Tensor sum = torch::zeros({T}, torch::kDouble);
            torch::Tensor high = torch::zeros({T}, torch::kLong);
            for (const char* name : {"chelsea_cat.png", "coffee_cup.png"}) {
                const VitInspection v = inspectVit(network, preprocessing, (images / name).string());
                const torch::Tensor norms = v.activations.at(captureName(CapturePoint::Out, layer))[0]
                                                .to(torch::kDouble)
                                                .pow(2)
                                                .sum(-1)
                                                .sqrt();
                sum += norms;
                const double median =
                    std::get<0>(norms.slice(0, 5).sort()).select(0, (T - 5 - 1) / 2).item<double>();
                high += (norms > 3 * median).to(torch::kLong);
            }
            const std::string g = "layer" + std::to_string(layer) + "/out/";
            QVERIFY(
                torch::allclose(s.readTensor(g + "mean_token_norm").to(torch::kDouble), sum / 2, 1e-4, 1e-5));
            QVERIFY(torch::equal(s.readTensor(g + "high_norm_tokens").to(torch::kLong), high));
            QCOMPARE(s.readTensor(g + "norm_histogram").sum().item<std::int64_t>(), 2 * T);
            QCOMPARE(s.readTensor(g + "norm_histogram_high_norm").sum().item<std::int64_t>(),
                     high.sum().item<std::int64_t>());
        }
    }

    void pixelsNeedAnImageModel()
    {
        QTemporaryDir dir;
        const std::string npy = dir.path().toStdString() + "/pixels.npy";
        writeFloatNpy(npy, torch::zeros({3, 56, 56}));
        const Run text = runApp({QStringLiteral("inspect"), QStringLiteral("--model"),
                                 QString::fromStdString(fixture("families/qwen2/hf")),
                                 QStringLiteral("--pixels"), QString::fromStdString(npy)});
        QCOMPARE(text.exitCode, 2);
        QVERIFY2(text.err.contains(QStringLiteral("--image/--pixels need a model that reads images")),
                 qPrintable(text.err));
        const Run both =
            runApp({QStringLiteral("inspect"), QStringLiteral("--model"),
                    QString::fromStdString(fixture("families/dinov2-reg/hf")), QStringLiteral("--pixels"),
                    QString::fromStdString(npy), QStringLiteral("--image"), QStringLiteral("x.png")});
        QCOMPARE(both.exitCode, 2);
        QVERIFY2(both.err.contains(QStringLiteral("not both")), qPrintable(both.err));
    }
};

QTEST_APPLESS_MAIN(TstVisionCli)
#include "tst_vision_cli.moc"
