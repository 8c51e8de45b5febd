#include "tasks/data/image_data.h"

#include "common/error.h"

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

namespace outlierlens {
namespace fs = std::filesystem;

std::string ImageDataset::pretrainedCfgJson(int imageSize) const
{
    const auto mu = mean(), sigma = std();
    return nlohmann::json{{"input_size", {3, imageSize, imageSize}},
                          {"interpolation", "bilinear"},
                          {"crop_pct", 1.0},
                          {"crop_mode", "center"},
                          {"mean", {mu[0], mu[1], mu[2]}},
                          {"std", {sigma[0], sigma[1], sigma[2]}}}
        .dump();
}

namespace {

constexpr std::uint32_t kImagesMagic = 0x00000803; // unsigned bytes, 3 dimensions
constexpr std::uint32_t kLabelsMagic = 0x00000801; // unsigned bytes, 1 dimension
constexpr std::uint32_t kMaxIdxCount = 10'000'000;
constexpr std::uint32_t kMaxIdxSide = 1024;
constexpr int kMaxFolderImageSize = 4096;

std::string hex32(std::uint32_t v)
{
    char buffer[16];
    std::snprintf(buffer, sizeof buffer, "0x%08x", v);
    return buffer;
}

// A gzip (or plain: zlib reads those transparently) file read in full-size pieces.
class GzReader
{
public:
    explicit GzReader(std::string path)
        : m_path(std::move(path))
    {
        std::error_code ec;
        if (!fs::is_regular_file(m_path, ec)) throw Error(m_path + ": no such file");
        m_file = gzopen(m_path.c_str(), "rb");
        if (!m_file) throw Error(m_path + ": cannot open");
        gzbuffer(m_file, 1 << 20);
    }
    ~GzReader()
    {
        if (m_file) gzclose(m_file);
    }
    GzReader(const GzReader&) = delete;
    GzReader& operator=(const GzReader&) = delete;

    /// Reads exactly `size` bytes; `what` names them in the error ("the header", "60000 labels").
    void read(void* data, std::size_t size, const std::string& what)
    {
        auto* out = static_cast<std::uint8_t*>(data);
        std::size_t done = 0;
        while (done < size) {
            const auto piece = static_cast<unsigned>(std::min<std::size_t>(size - done, 1u << 30));
            const int got = gzread(m_file, out + done, piece);
            if (got < 0) {
                int code = 0;
                throw Error(m_path + ": corrupt gzip data while reading " + what + " (" +
                            gzerror(m_file, &code) + ")");
            }
            if (got == 0)
                throw Error(m_path + ": truncated: " + what + " need " + std::to_string(size) +
                            " bytes, found " + std::to_string(done));
            done += static_cast<std::size_t>(got);
        }
    }
    std::uint32_t readBigEndian32(const std::string& what)
    {
        std::uint8_t b[4];
        read(b, 4, what);
        return (std::uint32_t(b[0]) << 24) | (std::uint32_t(b[1]) << 16) | (std::uint32_t(b[2]) << 8) | b[3];
    }
    /// Throws if anything follows the expected data (a file of another layout or a concatenation).
    void expectEnd(const std::string& after)
    {
        std::uint8_t extra = 0;
        const int got = gzread(m_file, &extra, 1);
        if (got < 0) {
            int code = 0;
            throw Error(m_path + ": corrupt gzip data after " + after + " (" + gzerror(m_file, &code) + ")");
        }
        if (got > 0)
            throw Error(m_path + ": unexpected bytes after " + after + " (the header's count is wrong?)");
    }

private:
    std::string m_path;
    gzFile m_file = nullptr;
};

void checkMagic(std::uint32_t found, std::uint32_t expected, const std::string& path, const std::string& what)
{
    if (found == expected) return;
    throw Error(path + ": not an IDX " + what + " file: expected magic " + hex32(expected) + ", found " +
                hex32(found));
}

bool hasImageExtension(const fs::path& path)
{
    std::string ext = path.extension().string();
    for (char& c : ext)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp" || ext == ".webp";
}

std::string firstExisting(const std::string& dir, const std::string& name)
{
    std::error_code ec;
    const fs::path gz = fs::path(dir) / (name + ".gz");
    if (fs::is_regular_file(gz, ec)) return gz.string();
    const fs::path plain = fs::path(dir) / name;
    if (fs::is_regular_file(plain, ec)) return plain.string();
    throw Error(gz.string() + ": no such file (nor " + plain.filename().string() +
                "); Fashion-MNIST comes with Debian's dataset-fashion-mnist package");
}

} // namespace

ImageDataset ImageDataset::fashionMnist(const std::string& dir, bool train)
{
    const std::string prefix = train ? "train" : "t10k";
    const std::string images = firstExisting(dir, prefix + "-images-idx3-ubyte");
    const std::string labels = firstExisting(dir, prefix + "-labels-idx1-ubyte");
    return idxFiles(images, labels,
                    {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
                     "Bag", "Ankle boot"});
}

ImageDataset ImageDataset::idxFiles(const std::string& imagesFile, const std::string& labelsFile,
                                    std::vector<std::string> classNames)
{
    if (classNames.empty()) throw Error(imagesFile + ": no class names given");
    GzReader labelReader(labelsFile);
    checkMagic(labelReader.readBigEndian32("the magic number"), kLabelsMagic, labelsFile, "label");
    const std::uint32_t labelCount = labelReader.readBigEndian32("the label count");

    GzReader imageReader(imagesFile);
    checkMagic(imageReader.readBigEndian32("the magic number"), kImagesMagic, imagesFile, "image");
    const std::uint32_t count = imageReader.readBigEndian32("the image count");
    const std::uint32_t rows = imageReader.readBigEndian32("the row count");
    const std::uint32_t cols = imageReader.readBigEndian32("the column count");
    if (count == 0 || count > kMaxIdxCount)
        throw Error(imagesFile + ": image count " + std::to_string(count) + " is outside [1, " +
                    std::to_string(kMaxIdxCount) + "]");
    if (rows == 0 || cols == 0 || rows > kMaxIdxSide || cols > kMaxIdxSide)
        throw Error(imagesFile + ": image size " + std::to_string(rows) + " x " + std::to_string(cols) +
                    " is outside [1, " + std::to_string(kMaxIdxSide) + "]");
    if (rows != cols)
        throw Error(imagesFile + ": images are " + std::to_string(rows) + " x " + std::to_string(cols) +
                    "; expected square images");
    if (labelCount != count)
        throw Error(labelsFile + ": " + std::to_string(labelCount) + " labels, but " + imagesFile + " has " +
                    std::to_string(count) + " images");

    ImageDataset data;
    data.m_source = imagesFile;
    data.m_imageSize = static_cast<int>(rows);
    data.m_classNames = std::move(classNames);
    const std::int64_t n = count, side = rows;
    data.m_pixels = torch::empty({n, 1, side, side}, torch::kUInt8);
    imageReader.read(data.m_pixels.data_ptr<std::uint8_t>(), static_cast<std::size_t>(n * side * side),
                     "the pixels of " + std::to_string(count) + " images");
    imageReader.expectEnd(std::to_string(count) + " images");

    std::vector<std::uint8_t> raw(count);
    labelReader.read(raw.data(), raw.size(), std::to_string(count) + " labels");
    labelReader.expectEnd(std::to_string(count) + " labels");
    data.m_labels = torch::empty({n}, torch::kInt64);
    auto* labels = data.m_labels.data_ptr<std::int64_t>();
    for (std::uint32_t i = 0; i < count; ++i) {
        if (raw[i] >= data.m_classNames.size())
            throw Error(labelsFile + ": label " + std::to_string(raw[i]) + " of image " + std::to_string(i) +
                        " (0-based) is not below the number of classes, " +
                        std::to_string(data.m_classNames.size()));
        labels[i] = raw[i];
    }
    return data;
}

ImageDataset ImageDataset::folder(const std::string& dir, int imageSize)
{
    if (imageSize < 1 || imageSize > kMaxFolderImageSize)
        throw Error(dir + ": image size must be in [1, " + std::to_string(kMaxFolderImageSize) + "], got " +
                    std::to_string(imageSize));
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw Error(dir + ": no such folder");

    ImageDataset data;
    data.m_source = dir;
    data.m_imageSize = imageSize;
    std::vector<fs::path> classDirs;
    try {
        for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
            if (entry.is_directory() && entry.path().filename().string().rfind('.', 0) != 0)
                classDirs.push_back(entry.path());
        }
    } catch (const fs::filesystem_error& e) {
        throw Error(dir + ": cannot list the folder (" + e.code().message() + ")");
    }
    std::sort(classDirs.begin(), classDirs.end(), [](const fs::path& a, const fs::path& b) {
        return a.filename().string() < b.filename().string();
    });
    if (classDirs.empty())
        throw Error(dir + ": no class sub-folders (expected one folder of images per class)");

    std::vector<std::string> files;
    std::vector<std::int64_t> labels;
    for (std::size_t c = 0; c < classDirs.size(); ++c) {
        std::vector<std::string> found;
        try {
            for (const fs::directory_entry& entry : fs::recursive_directory_iterator(
                     classDirs[c], fs::directory_options::follow_directory_symlink)) {
                if (entry.is_regular_file() && hasImageExtension(entry.path()))
                    found.push_back(entry.path().string());
            }
        } catch (const fs::filesystem_error& e) {
            throw Error(classDirs[c].string() + ": cannot list the folder (" + e.code().message() + ")");
        }
        if (found.empty())
            throw Error(classDirs[c].string() +
                        ": no image files (.png, .jpg, .jpeg, .bmp, .webp) for class '" +
                        classDirs[c].filename().string() + "'");
        std::sort(found.begin(), found.end());
        data.m_classNames.push_back(classDirs[c].filename().string());
        for (std::string& f : found) {
            files.push_back(std::move(f));
            labels.push_back(static_cast<std::int64_t>(c));
        }
    }

    const auto n = static_cast<std::int64_t>(files.size());
    const std::int64_t plane = std::int64_t(imageSize) * imageSize;
    data.m_pixels = torch::empty({n, 3, imageSize, imageSize}, torch::kUInt8);
    data.m_labels = torch::tensor(labels, torch::kInt64);
    auto* pixels = data.m_pixels.data_ptr<std::uint8_t>();

    // Decode in parallel; on failure report the first bad file in sorted order.
    std::atomic<std::int64_t> next{0};
    std::vector<std::string> errors(files.size());
    const auto worker = [&] {
        for (std::int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
            try {
                const RgbImage image = resizeImage(decodeImageFile(files[static_cast<std::size_t>(i)]),
                                                   imageSize, imageSize, Interpolation::Bilinear);
                std::uint8_t* out = pixels + i * 3 * plane;
                for (std::int64_t p = 0; p < plane; ++p)
                    for (int c = 0; c < 3; ++c)
                        out[c * plane + p] = image.pixels[static_cast<std::size_t>(p * 3 + c)];
            } catch (const std::exception& e) {
                errors[static_cast<std::size_t>(i)] = e.what();
            }
        }
    };
    const unsigned threads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads && t < files.size(); ++t)
        pool.emplace_back(worker);
    worker();
    for (std::thread& t : pool)
        t.join();
    for (const std::string& e : errors)
        if (!e.empty()) throw Error(e);
    return data;
}

std::int64_t ImageDataset::label(std::int64_t i) const
{
    checkIndex(i);
    return m_labels[i].item<std::int64_t>();
}

void ImageDataset::checkIndex(std::int64_t i) const
{
    if (i < 0 || i >= size())
        throw Error(m_source + ": image index " + std::to_string(i) + " out of range [0, " +
                    std::to_string(size()) + ")");
}

int ImageDataset::augmentPadding() const
{
    return std::max(1, (m_imageSize + 7) / 14);
}

std::pair<torch::Tensor, torch::Tensor> ImageDataset::batch(const std::vector<std::int64_t>& indices,
                                                            bool augment, at::Generator& gen) const
{
    for (const std::int64_t i : indices)
        checkIndex(i);
    const auto b = static_cast<std::int64_t>(indices.size());
    const std::int64_t s = m_imageSize, plane = s * s;
    const std::int64_t channels = m_pixels.size(1);
    const int pad = augmentPadding();

    torch::Tensor offsets, flips;
    if (augment) {
        offsets = torch::randint(0, 2 * pad + 1, {b, 2}, gen, torch::kInt64);
        flips = torch::rand({b}, gen, torch::TensorOptions().dtype(torch::kFloat64)).lt(0.5);
    }

    // (v / 255 - mean) / std for every byte value, per channel, computed in double and rounded once.
    const std::array<double, 3> mu = mean(), sigma = std();
    float table[3][256];
    for (int c = 0; c < 3; ++c)
        for (int v = 0; v < 256; ++v)
            table[c][v] = static_cast<float>((v / 255.0 - mu[c]) / sigma[c]);

    torch::Tensor out = torch::empty({b, 3, s, s}, torch::kFloat32);
    torch::Tensor labels = torch::empty({b}, torch::kInt64);
    const auto* src = m_pixels.data_ptr<std::uint8_t>();
    const auto* allLabels = m_labels.data_ptr<std::int64_t>();
    auto* dst = out.data_ptr<float>();
    auto* lab = labels.data_ptr<std::int64_t>();
    for (std::int64_t k = 0; k < b; ++k) {
        const std::int64_t i = indices[static_cast<std::size_t>(k)];
        lab[k] = allLabels[i];
        std::int64_t dx = pad, dy = pad;
        bool flip = false;
        if (augment) {
            dy = offsets[k][0].item<std::int64_t>();
            dx = offsets[k][1].item<std::int64_t>();
            flip = flips[k].item<bool>();
        }
        for (int c = 0; c < 3; ++c) {
            const std::uint8_t* image = src + (i * channels + (channels == 3 ? c : 0)) * plane;
            float* o = dst + (k * 3 + c) * plane;
            for (std::int64_t y = 0; y < s; ++y) {
                // Output (x, y) shows padded-image pixel (x' + dx, y + dy) with x' = x or S-1-x after the
                // flip, i.e. source pixel (x' + dx - pad, y + dy - pad), black outside the image.
                const std::int64_t sy = y + dy - pad;
                for (std::int64_t x = 0; x < s; ++x) {
                    const std::int64_t sx = (flip ? s - 1 - x : x) + dx - pad;
                    const bool inside = sy >= 0 && sy < s && sx >= 0 && sx < s;
                    o[y * s + x] = table[c][inside ? image[sy * s + sx] : 0];
                }
            }
        }
    }
    return {out, labels};
}

RgbImage ImageDataset::image(std::int64_t i) const
{
    checkIndex(i);
    const std::int64_t s = m_imageSize, plane = s * s, channels = m_pixels.size(1);
    RgbImage image;
    image.width = image.height = m_imageSize;
    image.pixels.resize(static_cast<std::size_t>(plane * 3));
    const std::uint8_t* src = m_pixels.data_ptr<std::uint8_t>() + i * channels * plane;
    for (std::int64_t p = 0; p < plane; ++p)
        for (int c = 0; c < 3; ++c)
            image.pixels[static_cast<std::size_t>(p * 3 + c)] = src[(channels == 3 ? c : 0) * plane + p];
    return image;
}

} // namespace outlierlens
