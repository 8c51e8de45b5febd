// Decoding: header probing (format, size, completeness) before OpenCV decodes the pixels.
#include "io/image.h"
#include "io/image_writer.h"

#include "common/atomic_file.h"
#include "common/error.h"

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <unistd.h>

namespace outlierlens {
namespace {

// A compressed image bigger than this is not a photo; imdecode also takes an int-sized buffer.
constexpr std::uintmax_t kMaxFileBytes = 1ull << 30;

// Header probing: format and size from the first bytes, before OpenCV allocates anything.
enum class Format { Png, Jpeg, Bmp, WebP };

struct Header
{
    Format format;
    std::int64_t width = 0, height = 0;
};

// libpng and libjpeg print their warnings and errors to stderr themselves (OpenCV gives them no handler
// of their own), before and apart from our one-line message. While an image decodes, stderr goes to a
// temporary file instead; what they said is kept for the error message. stderr is one per process:
// decodes on several threads take turns (decoding is short next to a forward pass).
class StderrCapture
{
public:
    StderrCapture()
        : m_turn(mutex())
    {
        std::fflush(stderr);
        m_file = std::tmpfile();
        m_saved = m_file ? ::dup(STDERR_FILENO) : -1;
        if (m_saved >= 0) ::dup2(::fileno(m_file), STDERR_FILENO);
    }
    ~StderrCapture() { restore(); }
    StderrCapture(const StderrCapture&) = delete;
    StderrCapture& operator=(const StderrCapture&) = delete;

    /// Restores stderr; returns the last line printed meanwhile (e.g. "libpng error: ...").
    std::string restore()
    {
        std::string last;
        if (m_saved >= 0) {
            std::fflush(stderr);
            ::dup2(m_saved, STDERR_FILENO);
            ::close(m_saved);
            m_saved = -1;
            std::rewind(m_file);
            char line[512];
            while (std::fgets(line, sizeof line, m_file))
                if (line[0] != '\n') last = line;
            while (!last.empty() && (last.back() == '\n' || last.back() == '\r'))
                last.pop_back();
        }
        if (m_file) std::fclose(m_file);
        m_file = nullptr;
        return last;
    }

private:
    static std::mutex& mutex()
    {
        static std::mutex m;
        return m;
    }
    std::lock_guard<std::mutex> m_turn;
    std::FILE* m_file = nullptr;
    int m_saved = -1;
};

std::uint32_t be32(const std::uint8_t* p)
{
    return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
}
std::uint32_t be16(const std::uint8_t* p)
{
    return (std::uint32_t(p[0]) << 8) | p[1];
}
std::uint32_t le16(const std::uint8_t* p)
{
    return std::uint32_t(p[0]) | (std::uint32_t(p[1]) << 8);
}
std::uint32_t le24(const std::uint8_t* p)
{
    return le16(p) | (std::uint32_t(p[2]) << 16);
}
std::uint32_t le32(const std::uint8_t* p)
{
    return le24(p) | (std::uint32_t(p[3]) << 24);
}

bool startsWith(const std::uint8_t* data, std::size_t size, const char* magic, std::size_t n)
{
    return size >= n && std::memcmp(data, magic, n) == 0;
}

Header probePng(const std::uint8_t* data, std::size_t size, const std::string& name)
{
    // Signature (8), then the IHDR chunk: length 13, "IHDR", width, height (big-endian).
    if (size < 33)
        throw Error(name + ": PNG file ends inside its IHDR header (" + std::to_string(size) + " bytes)");
    if (be32(data + 8) != 13 || std::memcmp(data + 12, "IHDR", 4) != 0)
        throw Error(name + ": corrupt PNG: expected the IHDR chunk first");
    return {Format::Png, be32(data + 16), be32(data + 20)};
}

// Walks the marker segments of a JPEG stream up to EOI: gives the frame size and rejects a file that
// ends early, which libjpeg would silently pad with grey (PIL raises "image file is truncated").
Header probeJpeg(const std::uint8_t* data, std::size_t size, const std::string& name)
{
    const std::string truncated = name + ": truncated JPEG: the file ends before the end-of-image marker";
    Header header{Format::Jpeg};
    bool haveFrame = false;
    std::size_t pos = 2;
    while (true) {
        // Like libjpeg, skip stray bytes before a marker, then any 0xFF fill bytes.
        while (pos < size && data[pos] != 0xFF)
            ++pos;
        while (pos < size && data[pos] == 0xFF)
            ++pos;
        if (pos >= size) throw Error(truncated);
        const std::uint8_t marker = data[pos++];
        if (marker == 0xD9) break;                                          // EOI
        if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue; // TEM, RSTn: no payload
        if (pos + 2 > size) throw Error(truncated);
        const std::size_t length = be16(data + pos);
        if (length < 2) throw Error(name + ": corrupt JPEG: segment length " + std::to_string(length));
        if (pos + length > size) throw Error(truncated);
        const bool isFrame =
            marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
        if (isFrame && !haveFrame) {
            if (length < 8)
                throw Error(name + ": corrupt JPEG: frame header of " + std::to_string(length) + " bytes");
            header.height = be16(data + pos + 3);
            header.width = be16(data + pos + 5);
            haveFrame = true;
        }
        pos += length;
        if (marker == 0xDA) {
            if (!haveFrame) throw Error(name + ": corrupt JPEG: scan data before the frame header");
            // Entropy-coded data: 0xFF is always followed by 0x00 (stuffing) or RSTn inside it.
            while (true) {
                while (pos < size && data[pos] != 0xFF)
                    ++pos;
                if (pos + 1 >= size) throw Error(truncated);
                const std::uint8_t next = data[pos + 1];
                if (next == 0x00 || next == 0xFF || (next >= 0xD0 && next <= 0xD7)) {
                    ++pos;
                    continue;
                }
                break; // a real marker: back to the segment loop
            }
        }
    }
    if (!haveFrame) throw Error(name + ": corrupt JPEG: no frame header before the end-of-image marker");
    return header;
}

Header probeBmp(const std::uint8_t* data, std::size_t size, const std::string& name)
{
    if (size < 26)
        throw Error(name + ": BMP file ends inside its header (" + std::to_string(size) + " bytes)");
    const std::uint32_t infoSize = le32(data + 14);
    if (infoSize == 12) return {Format::Bmp, le16(data + 18), le16(data + 20)};
    const auto width = std::int32_t(le32(data + 18));
    const auto height = std::int32_t(le32(data + 22)); // negative: rows stored top-down
    if (width < 0) throw Error(name + ": corrupt BMP: negative width " + std::to_string(width));
    return {Format::Bmp, width, height == INT32_MIN ? std::int64_t(1) << 31 : std::abs(std::int64_t(height))};
}

Header probeWebP(const std::uint8_t* data, std::size_t size, const std::string& name)
{
    const std::string shortHeader = name + ": WebP file ends inside its header";
    if (size < 30) throw Error(shortHeader);
    if (std::memcmp(data + 12, "VP8X", 4) == 0)
        return {Format::WebP, le24(data + 24) + 1, le24(data + 27) + 1};
    if (std::memcmp(data + 12, "VP8L", 4) == 0) {
        if (data[20] != 0x2F) throw Error(name + ": corrupt WebP: bad lossless signature");
        const std::uint32_t bits = le32(data + 21);
        return {Format::WebP, (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1};
    }
    if (std::memcmp(data + 12, "VP8 ", 4) == 0) {
        if (data[23] != 0x9D || data[24] != 0x01 || data[25] != 0x2A)
            throw Error(name + ": corrupt WebP: bad lossy start code");
        return {Format::WebP, le16(data + 26) & 0x3FFF, le16(data + 28) & 0x3FFF};
    }
    throw Error(name + ": corrupt WebP: expected a VP8, VP8L or VP8X chunk");
}

Header probeHeader(const std::uint8_t* data, std::size_t size, const std::string& name)
{
    if (startsWith(data, size, "\x89PNG\r\n\x1a\n", 8)) return probePng(data, size, name);
    if (startsWith(data, size, "\xFF\xD8\xFF", 3)) return probeJpeg(data, size, name);
    if (startsWith(data, size, "BM", 2)) return probeBmp(data, size, name);
    if (size >= 12 && std::memcmp(data, "RIFF", 4) == 0 && std::memcmp(data + 8, "WEBP", 4) == 0)
        return probeWebP(data, size, name);
    if (startsWith(data, size, "GIF8", 4))
        throw Error(name + ": GIF images are not supported (expected PNG, JPEG, BMP or WebP)");
    if (startsWith(data, size, "II*\0", 4) || startsWith(data, size, "MM\0*", 4))
        throw Error(name + ": TIFF images are not supported (expected PNG, JPEG, BMP or WebP)");
    throw Error(name + ": not an image: expected PNG, JPEG, BMP or WebP data");
}

void checkImageSize(std::int64_t width, std::int64_t height, const std::string& name)
{
    const std::string size = std::to_string(width) + "x" + std::to_string(height);
    if (width <= 0 || height <= 0) throw Error(name + ": image has zero size (" + size + ")");
    if (width > kMaxImageSide || height > kMaxImageSide || width * height > kMaxImagePixels)
        throw Error(name + ": image of " + size + " pixels is larger than the limit of " +
                    std::to_string(kMaxImageSide) + " per side and " +
                    std::to_string(kMaxImagePixels / 1000000) + " Mpixel");
}

// OpenCV's IMREAD_UNCHANGED result (1, 3 or 4 channels in B, G, R, A order; 8 or 16 bits) as RGB.
RgbImage toRgb(const cv::Mat& mat, const std::string& name)
{
    const int channels = mat.channels();
    const int depth = mat.depth();
    if ((depth != CV_8U && depth != CV_16U) || channels < 1 || channels > 4)
        throw Error(name +
                    ": unsupported pixel format (expected 8 or 16-bit samples, 1 to 4 channels), found " +
                    cv::typeToString(mat.type()));
    RgbImage out;
    out.width = mat.cols;
    out.height = mat.rows;
    out.pixels.resize(std::size_t(out.width) * out.height * 3);
    // 1: gray; 2: gray + alpha; 3: BGR; 4: BGRA. Alpha is dropped as PIL's convert("RGB") does.
    const int r = channels >= 3 ? 2 : 0, g = channels >= 3 ? 1 : 0, b = 0;
    std::uint8_t* dst = out.pixels.data();
    for (int y = 0; y < mat.rows; ++y) {
        if (depth == CV_8U) {
            const std::uint8_t* src = mat.ptr<std::uint8_t>(y);
            for (int x = 0; x < mat.cols; ++x, src += channels, dst += 3) {
                dst[0] = src[r];
                dst[1] = src[g];
                dst[2] = src[b];
            }
        } else {
            const std::uint16_t* src = mat.ptr<std::uint16_t>(y);
            for (int x = 0; x < mat.cols; ++x, src += channels, dst += 3) {
                dst[0] = std::uint8_t(src[r] >> 8);
                dst[1] = std::uint8_t(src[g] >> 8);
                dst[2] = std::uint8_t(src[b] >> 8);
            }
        }
    }
    return out;
}

} // namespace

RgbImage decodeImageData(const std::uint8_t* data, std::size_t size, const std::string& name)
{
    if (size == 0) throw Error(name + ": empty file, expected an image");
    if (size > kMaxFileBytes)
        throw Error(name + ": file of " + std::to_string(size) + " bytes is larger than the image limit of " +
                    std::to_string(kMaxFileBytes) + " bytes");
    const Header header = probeHeader(data, size, name);
    checkImageSize(header.width, header.height, name);

    cv::Mat decoded;
    StderrCapture decoderSays;
    try {
        const cv::Mat buffer(1, int(size), CV_8UC1, const_cast<std::uint8_t*>(data));
        // IMREAD_UNCHANGED keeps 16-bit samples and alpha for our own conversion, and ignores EXIF
        // orientation as PIL's convert() does.
        decoded = cv::imdecode(buffer, cv::IMREAD_UNCHANGED);
    } catch (const cv::Exception& e) {
        decoderSays.restore();
        throw Error(name + ": cannot decode the image: " + e.err);
    }
    const std::string said = decoderSays.restore();
    if (decoded.empty())
        throw Error(name + ": cannot decode the image: corrupt or truncated data" +
                    (said.empty() ? std::string() : " (" + said + ")"));
    if (decoded.cols != header.width || decoded.rows != header.height)
        throw Error(name + ": decoded image is " + std::to_string(decoded.cols) + "x" +
                    std::to_string(decoded.rows) + ", expected the header's " + std::to_string(header.width) +
                    "x" + std::to_string(header.height));
    return toRgb(decoded, name);
}

void writePngFile(const std::string& path, const RgbImage& image)
{
    if (image.width <= 0 || image.height <= 0 ||
        image.pixels.size() != std::size_t(image.width) * std::size_t(image.height) * 3)
        throw Error(path + ": not a complete RGB image to write");
    cv::Mat bgr(image.height, image.width, CV_8UC3); // OpenCV's channel order
    for (std::size_t i = 0; i < std::size_t(image.width) * std::size_t(image.height); ++i)
        for (int c = 0; c < 3; ++c)
            bgr.data[3 * i + std::size_t(c)] = image.pixels[3 * i + std::size_t(2 - c)];
    std::vector<std::uint8_t> png;
    if (!cv::imencode(".png", bgr, png)) throw Error(path + ": cannot encode the image as PNG");
    AtomicFile file(path);
    writeFileBytes(file.tempPath(), png.data(), png.size(), path);
    file.commit();
}

RgbImage decodeImageFile(const std::string& path)
{
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (ec || !fs::exists(status))
        throw Error(path + ": cannot open image: " + (ec ? ec.message() : std::string("no such file")));
    if (!fs::is_regular_file(status)) throw Error(path + ": cannot open image: not a regular file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open image: " + std::strerror(errno));
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    if (size < 0) throw Error(path + ": cannot read image: cannot determine the file size");
    if (std::uintmax_t(size) > kMaxFileBytes)
        throw Error(path + ": file of " + std::to_string(size) + " bytes is larger than the image limit of " +
                    std::to_string(kMaxFileBytes) + " bytes");
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
    in.seekg(0);
    if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size))
        throw Error(path + ": cannot read image: read " + std::to_string(in.gcount()) + " of " +
                    std::to_string(size) + " bytes");
    return decodeImageData(bytes.data(), bytes.size(), path);
}

} // namespace outlierlens
