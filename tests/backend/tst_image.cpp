// Image decoding and eval preprocessing against PIL / torchvision / transformers: the ViT fixture's
// reference.h5 (timm and Hugging Face pipelines on two real photos) and tests/fixtures/images/expected.h5
// (make_image_fixtures.py: PIL decodes of odd formats, Image.resize for every filter, small pipelines).

#include "common/error.h"
#include "io/hdf5_store.h"
#include "io/image.h"

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <string>
#include <vector>

using outlierlens::ImagePreprocessing;
using outlierlens::Interpolation;
using outlierlens::RgbImage;

namespace {

std::string fixture(const std::string& relative)
{
    return std::string(OUTLIERLENS_TEST_DATA) + "/" + relative;
}

const std::string kExpected = fixture("images/expected.h5");
const std::string kReference = fixture("vit/reference.h5");

// [H, W, 3] int64, the dtype Hdf5Reader gives integer datasets.
torch::Tensor toTensor(const RgbImage& image)
{
    return torch::from_blob(const_cast<std::uint8_t*>(image.pixels.data()), {image.height, image.width, 3},
                            torch::kByte)
        .to(torch::kLong);
}

// Exact comparison with a readable failure: count and first position of differing values.
void compareExact(const torch::Tensor& actual, const torch::Tensor& expected, const std::string& what)
{
    QVERIFY2(actual.sizes() == expected.sizes(),
             (what + ": shape " + c10::str(actual.sizes()) + " vs expected " + c10::str(expected.sizes()))
                 .c_str());
    const torch::Tensor diff = (actual - expected).abs();
    const std::int64_t wrong = diff.gt(0).sum().item<std::int64_t>();
    if (wrong == 0) return;
    const torch::Tensor first = diff.gt(0).nonzero()[0];
    QFAIL((what + ": " + std::to_string(wrong) + " of " + std::to_string(diff.numel()) +
           " values differ, max |diff| " + std::to_string(diff.max().item<std::int64_t>()) + ", first at " +
           c10::str(first.sizes()) + " index " + c10::str(first))
              .c_str());
}

double maxAbsDiff(const torch::Tensor& a, const torch::Tensor& b)
{
    return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

Interpolation interpolation(const std::string& name)
{
    return outlierlens::interpolationFromName(name, "test");
}

ImagePreprocessing fromCase(const nlohmann::json& c)
{
    ImagePreprocessing p;
    const std::string mode = c.at("mode");
    p.mode = mode == "exact"    ? ImagePreprocessing::Mode::ResizeExact
             : mode == "squash" ? ImagePreprocessing::Mode::SquashThenCenterCrop
                                : ImagePreprocessing::Mode::ShorterSideThenCenterCrop;
    p.size = c.at("size");
    p.cropPct = c.at("crop_pct");
    p.interpolation = interpolation(c.at("interpolation"));
    p.mean = c.at("mean").get<std::array<double, 3>>();
    p.std = c.at("std").get<std::array<double, 3>>();
    p.rescaleFactor = c.at("rescale_factor");
    return p;
}

void writeFile(const QString& path, const QByteArray& bytes)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    QCOMPARE(f.write(bytes), bytes.size());
}

QByteArray readFile(const std::string& path)
{
    QFile f(QString::fromStdString(path));
    if (!f.open(QIODevice::ReadOnly)) return {};
    return f.readAll();
}

QByteArray be32(std::uint32_t v)
{
    QByteArray b(4, '\0');
    for (int i = 0; i < 4; ++i)
        b[i] = char((v >> (24 - 8 * i)) & 0xff);
    return b;
}

// A PNG signature and IHDR chunk claiming the given size, followed by nothing: the size check must
// fire before any decoding.
QByteArray pngHeader(std::uint32_t width, std::uint32_t height)
{
    QByteArray ihdr = "IHDR" + be32(width) + be32(height) + QByteArray("\x08\x02\x00\x00\x00", 5);
    return QByteArray("\x89PNG\r\n\x1a\n", 8) + be32(13) + ihdr + be32(0);
}

// Runs `f`, expecting an outlierlens::Error with a one-line message that contains each fragment.
template<typename F>
void expectError(F&& f, const std::vector<std::string>& fragments)
{
    try {
        f();
    } catch (const outlierlens::Error& e) {
        const std::string message = e.what();
        QVERIFY2(message.find('\n') == std::string::npos, ("not one line: " + message).c_str());
        for (const std::string& fragment : fragments)
            QVERIFY2(message.find(fragment) != std::string::npos,
                     ("'" + fragment + "' missing from: " + message).c_str());
        return;
    }
    QFAIL("no outlierlens::Error thrown");
}

} // namespace

class TestImage : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    // --- reference.h5: the real photos through the real ViT fixture's two pipelines -------------

    void referenceDecode_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("dataset");
        QTest::newRow("png") << "vit/images/chelsea_cat.png"
                             << "preprocess/source/00";
        // libjpeg-turbo through OpenCV and through PIL: same islow IDCT and fancy upsampling.
        QTest::newRow("jpeg") << "vit/images/grace_hopper.jpg"
                              << "preprocess/source/01";
    }

    void referenceDecode()
    {
        QFETCH(QString, file);
        QFETCH(QString, dataset);
        const RgbImage image = outlierlens::decodeImageFile(fixture(file.toStdString()));
        const outlierlens::Hdf5Reader reference(kReference);
        compareExact(toTensor(image), reference.readTensor(dataset.toStdString()), file.toStdString());
    }

    void referencePipelines_data()
    {
        QTest::addColumn<QString>("modelDir");
        QTest::addColumn<QString>("prefix");
        QTest::newRow("timm") << "vit/timm"
                              << "preprocess/timm";
        QTest::newRow("hf") << "vit/hf"
                            << "preprocess/hf";
    }

    void referencePipelines()
    {
        QFETCH(QString, modelDir);
        QFETCH(QString, prefix);
        const ImagePreprocessing p = ImagePreprocessing::fromModelDir(fixture(modelDir.toStdString()));
        const outlierlens::Hdf5Reader reference(kReference);
        const std::string base = prefix.toStdString();
        const torch::Tensor pixelValues = reference.readTensor(base + "/pixel_values");
        const char* images[] = {"vit/images/chelsea_cat.png", "vit/images/grace_hopper.jpg"};
        for (int i = 0; i < 2; ++i) {
            const RgbImage image = outlierlens::decodeImageFile(fixture(images[i]));
            if (reference.exists(base + "/resized_cropped_uint8"))
                compareExact(toTensor(outlierlens::resizeAndCrop(image, p)),
                             reference.readTensor(base + "/resized_cropped_uint8")[i],
                             base + " " + images[i]);
            const torch::Tensor x = outlierlens::preprocessImage(image, p);
            QCOMPARE(x.scalar_type(), torch::kFloat);
            QVERIFY(x.sizes() == pixelValues[i].sizes());
            const double diff = maxAbsDiff(x, pixelValues[i]);
            qInfo("%s %s: max |pixel_values - reference| = %.3g", base.c_str(), images[i], diff);
            QVERIFY2(diff <= 1e-5, std::to_string(diff).c_str());
        }
    }

    // --- expected.h5: PIL decodes of every pixel layout ------------------------------------------

    void decode_data()
    {
        QTest::addColumn<QString>("name");
        const outlierlens::Hdf5Reader expected(kExpected);
        for (const std::string& name : expected.members("decode"))
            QTest::newRow(name.c_str()) << QString::fromStdString(name);
    }

    void decode()
    {
        QFETCH(QString, name);
        const std::string file = name.toStdString();
        const RgbImage image = outlierlens::decodeImageFile(fixture("images/" + file));
        const outlierlens::Hdf5Reader expected(kExpected);
        compareExact(toTensor(image), expected.readTensor("decode/" + file), file);
    }

    void gray16KeepsHighByteWherePilClips()
    {
        // PIL opens a 16-bit grayscale PNG as mode "I" and convert("RGB") clips at 255; we keep the high
        // byte as PIL itself does for 16-bit RGB. The fixture records PIL's result to show the difference.
        const outlierlens::Hdf5Reader expected(kExpected);
        const torch::Tensor ours = toTensor(outlierlens::decodeImageFile(fixture("images/gray16.png")));
        QVERIFY(!torch::equal(ours, expected.readTensor("pil_clipped/gray16.png")));
        QVERIFY(torch::equal(ours, expected.readTensor("decode/gray16.png")));
    }

    void decodeFromMemory()
    {
        const QByteArray bytes = readFile(fixture("images/rgba.png"));
        const RgbImage image =
            outlierlens::decodeImageData(reinterpret_cast<const std::uint8_t*>(bytes.constData()),
                                         std::size_t(bytes.size()), "memory:rgba");
        const outlierlens::Hdf5Reader expected(kExpected);
        compareExact(toTensor(image), expected.readTensor("decode/rgba.png"), "rgba from memory");
    }

    // --- expected.h5: Image.resize for every filter and direction --------------------------------

    void resizeMatchesPillow_data()
    {
        QTest::addColumn<QString>("filter");
        QTest::addColumn<QString>("sizeCase");
        const outlierlens::Hdf5Reader expected(kExpected);
        for (const std::string& filter : expected.members("resize"))
            for (const std::string& sizeCase : expected.members("resize/" + filter))
                QTest::newRow((filter + "/" + sizeCase).c_str())
                    << QString::fromStdString(filter) << QString::fromStdString(sizeCase);
    }

    void resizeMatchesPillow()
    {
        QFETCH(QString, filter);
        QFETCH(QString, sizeCase);
        const outlierlens::Hdf5Reader expected(kExpected);
        const std::string dataset = "resize/" + filter.toStdString() + "/" + sizeCase.toStdString();
        const std::vector<std::int64_t> shape = expected.shape(dataset);
        const RgbImage source = outlierlens::decodeImageFile(fixture("images/resize_src.png"));
        const RgbImage resized = outlierlens::resizeImage(source, int(shape[1]), int(shape[0]),
                                                          interpolation(filter.toStdString()));
        compareExact(toTensor(resized), expected.readTensor(dataset), dataset);
    }

    // --- expected.h5: whole eval transforms on edge-case images ----------------------------------

    void pipelines_data()
    {
        QTest::addColumn<QString>("name");
        const outlierlens::Hdf5Reader expected(kExpected);
        for (const std::string& name : expected.members("pipeline"))
            QTest::newRow(name.c_str()) << QString::fromStdString(name);
    }

    void pipelines()
    {
        // one_pixel: 1x1 upscaled; small_upscale: smaller than the crop; half_even_crop: (37 - 32) / 2 =
        // 2.5 rounds to 2 as Python's round(); pad: crop_pct > 1 pads with black; wide: 3000x10, resized
        // to 10500x35 (timm32) and 74400x248 (timm224) of which only the crop is computed.
        QFETCH(QString, name);
        const outlierlens::Hdf5Reader expected(kExpected);
        const std::string group = "pipeline/" + name.toStdString();
        const nlohmann::json c = nlohmann::json::parse(expected.stringAttribute(group, "case"));
        const ImagePreprocessing p = fromCase(c);
        const RgbImage image =
            outlierlens::decodeImageFile(fixture("images/" + c.at("image").get<std::string>()));
        compareExact(toTensor(outlierlens::resizeAndCrop(image, p)),
                     expected.readTensor(group + "/resized_cropped_uint8"), group);
        if (expected.exists(group + "/pixel_values")) {
            const double diff = maxAbsDiff(outlierlens::preprocessImage(image, p),
                                           expected.readTensor(group + "/pixel_values"));
            QVERIFY2(diff <= 1e-5, (group + ": max |diff| " + std::to_string(diff)).c_str());
        }
    }

    // --- configuration ---------------------------------------------------------------------------

    void fromModelDirFixtures()
    {
        const ImagePreprocessing timm = ImagePreprocessing::fromModelDir(fixture("vit/timm"));
        QCOMPARE(int(timm.mode), int(ImagePreprocessing::Mode::ShorterSideThenCenterCrop));
        QCOMPARE(timm.size, 224);
        QCOMPARE(timm.cropPct, 0.9);
        QCOMPARE(timm.resizeSize(), 248);
        QCOMPARE(int(timm.interpolation), int(Interpolation::Bicubic));
        QCOMPARE(timm.mean[1], 0.5);
        QCOMPARE(timm.std[2], 0.5);
        QVERIFY2(timm.describe().find("248") != std::string::npos, timm.describe().c_str());

        const ImagePreprocessing hf = ImagePreprocessing::fromModelDir(fixture("vit/hf"));
        QCOMPARE(int(hf.mode), int(ImagePreprocessing::Mode::ResizeExact));
        QCOMPARE(hf.size, 224);
        QCOMPARE(hf.resizeSize(), 224);
        QCOMPARE(int(hf.interpolation), int(Interpolation::Bilinear));
        QCOMPARE(hf.rescaleFactor, 0.00392156862745098);
        QVERIFY2(hf.describe().find("bilinear") != std::string::npos, hf.describe().c_str());
    }

    void fromModelDirDefaults()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        // timm 0.9 defaults for an empty pretrained_cfg; google/vit-* style processor with "size": 384.
        writeFile(dir.filePath("config.json"), R"({"architecture": "vit", "pretrained_cfg": {}})");
        const ImagePreprocessing timm = ImagePreprocessing::fromModelDir(dir.path().toStdString());
        QCOMPARE(timm.resizeSize(), 256); // floor(224 / 0.875)
        QCOMPARE(timm.mean[0], 0.485);
        QCOMPARE(timm.std[2], 0.225);
        QCOMPARE(int(timm.interpolation), int(Interpolation::Bicubic));

        writeFile(dir.filePath("config.json"), R"({"model_type": "vit"})");
        writeFile(dir.filePath("preprocessor_config.json"),
                  R"({"feature_extractor_type": "ViTFeatureExtractor", "size": 384, "resample": 3,
                      "do_normalize": false})");
        const ImagePreprocessing hf = ImagePreprocessing::fromModelDir(dir.path().toStdString());
        QCOMPARE(hf.size, 384);
        QCOMPARE(int(hf.interpolation), int(Interpolation::Bicubic));
        QCOMPARE(hf.mean[0], 0.0);
        QCOMPARE(hf.std[0], 1.0);
        QCOMPARE(hf.rescaleFactor, 1.0 / 255.0);

        writeFile(
            dir.filePath("config.json"),
            R"({"pretrained_cfg": {"input_size": [3, 32, 32], "crop_mode": "squash", "crop_pct": 1.0}})");
        const ImagePreprocessing squash = ImagePreprocessing::fromModelDir(dir.path().toStdString());
        QCOMPARE(int(squash.mode), int(ImagePreprocessing::Mode::SquashThenCenterCrop));
        QCOMPARE(squash.resizeSize(), 32);
    }

    void fromModelDirErrors_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("json");
        QTest::addColumn<QString>("fragment");
        QTest::newRow("interpolation") << "config.json"
                                       << R"({"pretrained_cfg": {"interpolation": "cubic"}})"
                                       << "interpolation";
        QTest::newRow("non-square") << "config.json"
                                    << R"({"pretrained_cfg": {"input_size": [3, 224, 160]}})"
                                    << "input_size";
        QTest::newRow("channels") << "config.json"
                                  << R"({"pretrained_cfg": {"input_size": [1, 224, 224]}})"
                                  << "input_size";
        QTest::newRow("border") << "config.json"
                                << R"({"pretrained_cfg": {"crop_mode": "border"}})"
                                << "crop_mode";
        QTest::newRow("crop_pct type") << "config.json"
                                       << R"({"pretrained_cfg": {"crop_pct": "0.9"}})"
                                       << "crop_pct";
        QTest::newRow("mean length") << "config.json"
                                     << R"({"pretrained_cfg": {"mean": [0.5, 0.5]}})"
                                     << "mean";
        QTest::newRow("std zero") << "config.json"
                                  << R"({"pretrained_cfg": {"std": [0.5, 0, 0.5]}})"
                                  << "std";
        QTest::newRow("not an object") << "config.json"
                                       << R"({"pretrained_cfg": [1]})"
                                       << "pretrained_cfg";
        QTest::newRow("malformed json") << "config.json"
                                        << R"({"pretrained_cfg": )"
                                        << "malformed";
        QTest::newRow("resample") << "preprocessor_config.json"
                                  << R"({"resample": 9})"
                                  << "resample";
        QTest::newRow("exact resize and crop") << "preprocessor_config.json"
                                               << R"({"do_center_crop": true, "size": 256, "crop_size": 224})"
                                               << "centre crop of 224";
        QTest::newRow("crop larger") << "preprocessor_config.json"
                                     << R"({"do_center_crop": true, "size": {"shortest_edge": 200},
                                            "crop_size": {"height": 224, "width": 224}})"
                                     << "crop_size";
        QTest::newRow("crop not square") << "preprocessor_config.json"
                                         << R"({"do_center_crop": true, "size": {"shortest_edge": 256},
                                                "crop_size": {"height": 224, "width": 200}})"
                                         << "crop_size";
        QTest::newRow("shortest_edge") << "preprocessor_config.json"
                                       << R"({"size": {"shortest_edge": 224}})"
                                       << "size";
        QTest::newRow("size zero") << "preprocessor_config.json"
                                   << R"({"size": 0})"
                                   << "size";
        QTest::newRow("no resize") << "preprocessor_config.json"
                                   << R"({"do_resize": false})"
                                   << "do_resize";
    }

    void fromModelDirErrors()
    {
        QFETCH(QString, file);
        QFETCH(QString, json);
        QFETCH(QString, fragment);
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        writeFile(dir.filePath(file), json.toUtf8());
        const std::string path = dir.filePath(file).toStdString();
        expectError([&] { ImagePreprocessing::fromModelDir(dir.path().toStdString()); },
                    {path, fragment.toStdString()});
    }

    /// DINOv2's and CLIP's processors (BitImageProcessor, CLIPImageProcessor): the shorter side to
    /// shortest_edge (PIL resize, checked against Pillow above), then transformers' center_crop, whose
    /// offset is (size - crop) // 2, where torchvision rounds half to even. A 300 x 454 image resizes to
    /// 256 x 387 (int(256 * 454 / 300)): the rows start at 81 here, at 82 in torchvision.
    void hfShortestEdgeThenCenterCrop()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        writeFile(dir.filePath("config.json"), R"({"model_type": "dinov2"})");
        writeFile(dir.filePath("preprocessor_config.json"), R"({
            "crop_size": {"height": 224, "width": 224}, "do_center_crop": true, "do_convert_rgb": true,
            "do_normalize": true, "do_rescale": true, "do_resize": true, "image_mean": [0.485, 0.456, 0.406],
            "image_processor_type": "BitImageProcessor", "image_std": [0.229, 0.224, 0.225], "resample": 3,
            "rescale_factor": 0.00392156862745098, "size": {"shortest_edge": 256}})");
        const ImagePreprocessing p = ImagePreprocessing::fromModelDir(dir.path().toStdString());
        QCOMPARE(int(p.mode), int(ImagePreprocessing::Mode::HfShortestEdgeThenCenterCrop));
        QCOMPARE(p.shortestEdge, 256);
        QCOMPARE(p.resizeSize(), 256);
        QCOMPARE(p.size, 224);
        QCOMPARE(int(p.interpolation), int(Interpolation::Bicubic));
        QCOMPARE(p.mean[0], 0.485);
        QVERIFY2(p.describe().find("shorter side to 256") != std::string::npos, p.describe().c_str());

        RgbImage image;
        image.width = 300, image.height = 454;
        image.pixels.resize(std::size_t(image.width) * image.height * 3);
        std::uint32_t state = 12345;
        for (auto& v : image.pixels)
            v = std::uint8_t((state = state * 1664525u + 1013904223u) >> 24);
        const RgbImage resized = outlierlens::resizeImage(image, 256, 387, Interpolation::Bicubic);
        const RgbImage got = outlierlens::resizeAndCrop(image, p);
        QCOMPARE(got.width, 224);
        QCOMPARE(got.height, 224);
        const int top = (387 - 224) / 2, left = (256 - 224) / 2; // 81 and 16
        for (int y = 0; y < 224; ++y)
            for (int x = 0; x < 224; ++x)
                for (int c = 0; c < 3; ++c) {
                    const auto want =
                        resized.pixels[(std::size_t(y + top) * 256 + std::size_t(x + left)) * 3 + c];
                    const auto have = got.pixels[(std::size_t(y) * 224 + std::size_t(x)) * 3 + c];
                    if (want != have)
                        QFAIL(qPrintable(QStringLiteral("pixel %1,%2 channel %3: %4, expected %5")
                                             .arg(x)
                                             .arg(y)
                                             .arg(c)
                                             .arg(have)
                                             .arg(want)));
                }
        // The same image through a torchvision-style crop would start one row lower: the rule matters.
        QVERIFY(outlierlens::centerCrop(resized, 224, 224).pixels != got.pixels);
        // A landscape image: the shorter side is the height.
        std::swap(image.width, image.height);
        const RgbImage wide = outlierlens::resizeAndCrop(image, p);
        QCOMPARE(wide.width, 224);
        QCOMPARE(wide.height, 224);
    }

    void fromModelDirWithoutConfig()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        expectError([&] { ImagePreprocessing::fromModelDir(dir.path().toStdString()); },
                    {dir.path().toStdString(), "preprocessor_config.json"});
    }

    // --- bad input -------------------------------------------------------------------------------

    void decodeErrors_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("fragment");
        const QByteArray png = readFile(fixture("vit/images/chelsea_cat.png"));
        const QByteArray jpeg = readFile(fixture("vit/images/grace_hopper.jpg"));
        QVERIFY(png.size() > 1000 && jpeg.size() > 1000);
        QTest::newRow("empty") << QByteArray() << "empty";
        QTest::newRow("text") << QByteArray("label,path\ncat,cat.png\n") << "not an image";
        QTest::newRow("gif") << QByteArray("GIF89a\x01\x00\x01\x00\x00\x00\x00;", 14) << "GIF";
        QTest::newRow("png truncated") << png.left(png.size() / 2) << "truncated";
        QTest::newRow("png header only") << png.left(20) << "PNG";
        QTest::newRow("jpeg truncated") << jpeg.left(jpeg.size() / 2) << "truncated";
        QTest::newRow("jpeg without EOI") << jpeg.left(jpeg.size() - 2) << "truncated";
        QTest::newRow("jpeg header only") << jpeg.left(100) << "truncated";
        QTest::newRow("huge") << pngHeader(100000, 100000) << "larger than the limit";
        QTest::newRow("too many pixels") << pngHeader(20000, 20000) << "larger than the limit";
        QTest::newRow("zero width") << pngHeader(0, 10) << "zero size";
        QByteArray corrupt = png; // inside IDAT: a critical chunk's CRC fails
        for (int i = png.size() / 2; i < png.size() / 2 + 300; ++i)
            corrupt[i] = char(0x55);
        QTest::newRow("png corrupt") << corrupt << "corrupt";
    }

    void decodeErrors()
    {
        QFETCH(QByteArray, bytes);
        QFETCH(QString, fragment);
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString path = dir.filePath("input.img");
        writeFile(path, bytes);
        expectError([&] { outlierlens::decodeImageFile(path.toStdString()); },
                    {path.toStdString(), fragment.toStdString()});
    }

    void decodeMissingOrDirectory()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::string missing = dir.filePath("missing.png").toStdString();
        expectError([&] { outlierlens::decodeImageFile(missing); }, {missing, "cannot open"});
        const std::string folder = dir.path().toStdString();
        expectError([&] { outlierlens::decodeImageFile(folder); }, {folder, "not a regular file"});
    }

    void invalidArguments()
    {
        const RgbImage image = outlierlens::decodeImageFile(fixture("images/small.png"));
        expectError([&] { outlierlens::resizeImage(image, 0, 5, Interpolation::Bilinear); }, {"resizeImage"});
        expectError([&] { outlierlens::resizeAndCrop(RgbImage{}, ImagePreprocessing{}); }, {"resizeAndCrop"});
        ImagePreprocessing p;
        p.cropPct = 0.0;
        expectError([&] { outlierlens::preprocessImage(image, p); }, {"crop_pct"});
    }

    void centerCropPadsLikeTorchvision()
    {
        // 20x13 to 16x16: no padding across (left = round(2.0) = 2), 3 rows of padding down (1 top, 2
        // bottom).
        const RgbImage image = outlierlens::decodeImageFile(fixture("images/small.png"));
        const RgbImage crop = outlierlens::centerCrop(image, 16, 16);
        QCOMPARE(crop.width, 16);
        QCOMPARE(crop.height, 16);
        const torch::Tensor t = toTensor(crop);
        const torch::Tensor src = toTensor(image);
        QVERIFY(torch::equal(t[0], torch::zeros_like(t[0])));
        QVERIFY(torch::equal(t.slice(0, 14, 16), torch::zeros_like(t.slice(0, 14, 16))));
        QVERIFY(torch::equal(t.slice(0, 1, 14), src.slice(1, 2, 18)));
    }
};

QTEST_GUILESS_MAIN(TestImage)
#include "tst_image.moc"
