// Resampling and cropping as Pillow 9.4 and torchvision 0.14, and the tensor conversion.
#include "io/image.h"

#include "common/error.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace outlierlens {
namespace {

// Resampling as Pillow 9.4 (libImaging/Resample.c and Geometry.c), restated. Every expression that
// feeds a rounding keeps Pillow's order of floating-point operations so that results agree exactly.

constexpr double kPi = 3.14159265358979323846;
constexpr int kPrecisionBits = 32 - 8 - 2; // fixed-point fraction bits of the 8-bit path

double boxWeight(double x)
{
    return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0;
}

double triangleWeight(double x)
{
    x = std::fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

double hammingWeight(double x)
{
    x = std::fabs(x);
    if (x == 0.0) return 1.0;
    if (x >= 1.0) return 0.0;
    x *= kPi;
    // Pillow writes these two constants as float literals; keep their float values.
    return std::sin(x) / x * (0.54f + 0.46f * std::cos(x));
}

double keysCubicWeight(double x)
{
    constexpr double a = -0.5;
    x = std::fabs(x);
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

double sinc(double x)
{
    if (x == 0.0) return 1.0;
    x *= kPi;
    return std::sin(x) / x;
}

double lanczos3Weight(double x)
{
    return (x >= -3.0 && x < 3.0) ? sinc(x) * sinc(x / 3) : 0.0;
}

struct Filter
{
    double (*weight)(double);
    double support; // radius at scale 1
};

Filter filterFor(Interpolation interpolation)
{
    switch (interpolation) {
    case Interpolation::Box:
        return {boxWeight, 0.5};
    case Interpolation::Bilinear:
        return {triangleWeight, 1.0};
    case Interpolation::Hamming:
        return {hammingWeight, 1.0};
    case Interpolation::Bicubic:
        return {keysCubicWeight, 2.0};
    case Interpolation::Lanczos:
        return {lanczos3Weight, 3.0};
    case Interpolation::Nearest:
        break;
    }
    throw Error("resampling: nearest neighbour has no filter kernel");
}

// Fixed-point taps of output samples [firstOut, firstOut + countOut) of a 1-D resize inSize -> outSize.
struct Kernel
{
    int stride = 0;              // taps reserved per output sample
    std::vector<int> first;      // first input sample per output sample
    std::vector<int> count;      // number of taps per output sample
    std::vector<std::int32_t> w; // stride weights per output sample, scaled by 2^kPrecisionBits
};

Kernel makeKernel(int inSize, int outSize, int firstOut, int countOut, const Filter& filter)
{
    const double scale = double(inSize) / outSize;
    const double filterScale = std::max(scale, 1.0); // widen the filter when shrinking (antialiasing)
    const double support = filter.support * filterScale;
    const double invFilterScale = 1.0 / filterScale;
    Kernel k;
    k.stride = int(std::ceil(support)) * 2 + 1;
    k.first.resize(std::size_t(countOut));
    k.count.resize(std::size_t(countOut));
    k.w.assign(std::size_t(countOut) * k.stride, 0);
    std::vector<double> weights(std::size_t(k.stride));
    for (int i = 0; i < countOut; ++i) {
        const double center = (firstOut + i + 0.5) * scale;
        // Truncating casts of (value + 0.5), as Pillow rounds these bounds.
        const int lo = std::max(int(center - support + 0.5), 0);
        const int hi = std::min(int(center + support + 0.5), inSize);
        const int n = std::clamp(hi - lo, 0, k.stride);
        double sum = 0.0;
        for (int j = 0; j < n; ++j) {
            weights[j] = filter.weight((j + lo - center + 0.5) * invFilterScale);
            sum += weights[j];
        }
        std::int32_t* fixed = &k.w[std::size_t(i) * k.stride];
        for (int j = 0; j < n; ++j) {
            const double v = sum != 0.0 ? weights[j] / sum : weights[j];
            // Round half away from zero.
            fixed[j] = v < 0 ? std::int32_t(-0.5 + v * (1 << kPrecisionBits))
                             : std::int32_t(0.5 + v * (1 << kPrecisionBits));
        }
        k.first[i] = lo;
        k.count[i] = n;
    }
    return k;
}

std::uint8_t clipFixed(std::int64_t acc)
{
    if (acc < 0) return 0;
    const std::int64_t v = acc >> kPrecisionBits;
    return std::uint8_t(v > 255 ? 255 : v);
}

// A planar view of interleaved RGB rows: `width` x `height` pixels, 3 bytes each.
struct Plane
{
    int width = 0, height = 0;
    std::vector<std::uint8_t> px;
};

// Rows [rowBegin, rowEnd) of `in` (inWidth pixels wide) resampled across: one output column per kernel entry.
Plane horizontalPass(const std::uint8_t* in, int inWidth, int rowBegin, int rowEnd, const Kernel& k)
{
    Plane out;
    out.width = int(k.first.size());
    out.height = rowEnd - rowBegin;
    out.px.resize(std::size_t(out.width) * out.height * 3);
    std::uint8_t* dst = out.px.data();
    for (int y = rowBegin; y < rowEnd; ++y) {
        const std::uint8_t* row = in + std::size_t(y) * inWidth * 3;
        for (int i = 0; i < out.width; ++i, dst += 3) {
            const std::int32_t* w = &k.w[std::size_t(i) * k.stride];
            const std::uint8_t* src = row + std::size_t(k.first[i]) * 3;
            std::int64_t r = 1 << (kPrecisionBits - 1), g = r, b = r;
            for (int j = 0; j < k.count[i]; ++j, src += 3) {
                r += std::int64_t(src[0]) * w[j];
                g += std::int64_t(src[1]) * w[j];
                b += std::int64_t(src[2]) * w[j];
            }
            dst[0] = clipFixed(r);
            dst[1] = clipFixed(g);
            dst[2] = clipFixed(b);
        }
    }
    return out;
}

// `in` holds rows starting at input row `rowOffset`; every output row of k is produced.
Plane verticalPass(const Plane& in, int rowOffset, const Kernel& k)
{
    Plane out;
    out.width = in.width;
    out.height = int(k.first.size());
    out.px.resize(std::size_t(out.width) * out.height * 3);
    const std::size_t rowBytes = std::size_t(in.width) * 3;
    for (int i = 0; i < out.height; ++i) {
        const std::int32_t* w = &k.w[std::size_t(i) * k.stride];
        std::uint8_t* dst = out.px.data() + std::size_t(i) * rowBytes;
        if (k.count[i] == 0) { // no taps: Pillow's sum is just the rounding offset, i.e. 0
            std::memset(dst, 0, rowBytes);
            continue;
        }
        const std::uint8_t* top = in.px.data() + std::size_t(k.first[i] - rowOffset) * rowBytes;
        for (std::size_t x = 0; x < rowBytes; ++x) {
            std::int64_t acc = 1 << (kPrecisionBits - 1);
            const std::uint8_t* src = top + x;
            for (int j = 0; j < k.count[i]; ++j, src += rowBytes)
                acc += std::int64_t(*src) * w[j];
            dst[x] = clipFixed(acc);
        }
    }
    return out;
}

// Pillow's nearest-neighbour scaling picks source index int(o) with o = s/2, s/2 + s, ... accumulated
// (s = in / out); the accumulation, not i * s, decides the exact indices.
std::vector<int> nearestIndices(int inSize, int outSize)
{
    const double step = double(inSize) / outSize;
    std::vector<int> index(std::size_t(outSize), -1);
    double o = step * 0.5;
    for (int i = 0; i < outSize; ++i, o += step) {
        const int v = o < 0.0 ? -1 : int(o);
        index[i] = v < inSize ? v : -1;
    }
    return index;
}

// Output pixels [x0, x0 + w) x [y0, y0 + h) of Pillow's resize of `image` to outW x outH. Output
// pixels are independent of each other, so computing a window equals cropping the full result.
RgbImage resizeWindow(const RgbImage& image, int outW, int outH, Interpolation interpolation, int x0, int y0,
                      int w, int h)
{
    RgbImage out;
    out.width = w;
    out.height = h;
    if (outW == image.width && outH == image.height) { // Image.resize returns a copy
        out.pixels.resize(std::size_t(w) * h * 3);
        for (int y = 0; y < h; ++y)
            std::memcpy(&out.pixels[std::size_t(y) * w * 3],
                        &image.pixels[(std::size_t(y0 + y) * image.width + x0) * 3], std::size_t(w) * 3);
        return out;
    }
    if (interpolation == Interpolation::Nearest) {
        const std::vector<int> xs = nearestIndices(image.width, outW);
        const std::vector<int> ys = nearestIndices(image.height, outH);
        out.pixels.assign(std::size_t(w) * h * 3, 0); // Pillow fills unmapped pixels with zero
        for (int y = 0; y < h; ++y) {
            const int sy = ys[std::size_t(y0 + y)];
            if (sy < 0) continue;
            for (int x = 0; x < w; ++x) {
                const int sx = xs[std::size_t(x0 + x)];
                if (sx < 0) continue;
                std::memcpy(&out.pixels[(std::size_t(y) * w + x) * 3],
                            &image.pixels[(std::size_t(sy) * image.width + sx) * 3], 3);
            }
        }
        return out;
    }
    const Filter filter = filterFor(interpolation);
    const bool needHorizontal = outW != image.width;
    const bool needVertical = outH != image.height;
    Kernel vertical;
    int rowBegin = y0, rowEnd = y0 + h; // input rows the vertical pass reads
    if (needVertical) {
        vertical = makeKernel(image.height, outH, y0, h, filter);
        rowBegin = image.height;
        rowEnd = 0;
        for (std::size_t i = 0; i < vertical.first.size(); ++i) {
            if (vertical.count[i] == 0) continue;
            rowBegin = std::min(rowBegin, vertical.first[i]);
            rowEnd = std::max(rowEnd, vertical.first[i] + vertical.count[i]);
        }
        rowEnd = std::max(rowEnd, rowBegin);
    }
    Plane band;
    if (needHorizontal) {
        band = horizontalPass(image.pixels.data(), image.width, rowBegin, rowEnd,
                              makeKernel(image.width, outW, x0, w, filter));
    } else {
        band.width = w;
        band.height = rowEnd - rowBegin;
        band.px.resize(std::size_t(band.width) * band.height * 3);
        for (int y = rowBegin; y < rowEnd; ++y)
            std::memcpy(&band.px[std::size_t(y - rowBegin) * w * 3],
                        &image.pixels[(std::size_t(y) * image.width + x0) * 3], std::size_t(w) * 3);
    }
    if (needVertical) band = verticalPass(band, rowBegin, vertical);
    out.pixels = std::move(band.px);
    return out;
}

void checkImage(const RgbImage& image, const char* what)
{
    if (image.width <= 0 || image.height <= 0 ||
        image.pixels.size() != std::size_t(image.width) * std::size_t(image.height) * 3)
        throw Error(std::string(what) +
                    ": expected a non-empty RGB image with width * height * 3 bytes, found " +
                    std::to_string(image.width) + "x" + std::to_string(image.height) + " with " +
                    std::to_string(image.pixels.size()) + " bytes");
}

void checkOutputSize(std::int64_t width, std::int64_t height, const char* what)
{
    if (width < 1 || height < 1 || width * height > kMaxImagePixels)
        throw Error(std::string(what) + ": output size " + std::to_string(width) + "x" +
                    std::to_string(height) + " must be at least 1x1 and at most " +
                    std::to_string(kMaxImagePixels) + " pixels");
}

// torchvision CenterCrop along one axis: where output index 0 falls in the input (negative: padding).
int cropOffset(int size, int crop)
{
    if (crop > size) return -((crop - size) / 2);
    // int(round((size - crop) / 2.0)) with Python's round half to even.
    const int d = size - crop;
    int half = d / 2;
    if (d % 2 == 1 && half % 2 == 1) ++half;
    return half;
}

// Hugging Face's image_transforms.center_crop along one axis: (size - crop) // 2 (floor; a crop no larger
// than the image, which hfCenterCropSizes() checks).
int hfCropOffset(int size, int crop)
{
    return (size - crop) / 2;
}

// Crops (with zero padding) the resize of `image` to resizedW x resizedH, computing only what is kept;
// the offsets by torchvision's rule or, with `huggingFace`, by Hugging Face's.
RgbImage resizeThenCenterCrop(const RgbImage& image, int resizedW, int resizedH, Interpolation interpolation,
                              int cropW, int cropH, bool huggingFace = false)
{
    const int offX = huggingFace ? hfCropOffset(resizedW, cropW) : cropOffset(resizedW, cropW);
    const int offY = huggingFace ? hfCropOffset(resizedH, cropH) : cropOffset(resizedH, cropH);
    const int x0 = std::max(offX, 0), y0 = std::max(offY, 0);
    const int x1 = std::min(offX + cropW, resizedW), y1 = std::min(offY + cropH, resizedH);
    const RgbImage kept = resizeWindow(image, resizedW, resizedH, interpolation, x0, y0, x1 - x0, y1 - y0);
    if (kept.width == cropW && kept.height == cropH) return kept;
    RgbImage out;
    out.width = cropW;
    out.height = cropH;
    out.pixels.assign(std::size_t(cropW) * cropH * 3, 0);
    for (int y = 0; y < kept.height; ++y)
        std::memcpy(&out.pixels[(std::size_t(y0 - offY + y) * cropW + (x0 - offX)) * 3],
                    &kept.pixels[std::size_t(y) * kept.width * 3], std::size_t(kept.width) * 3);
    return out;
}

} // namespace

std::string interpolationName(Interpolation interpolation)
{
    switch (interpolation) {
    case Interpolation::Nearest:
        return "nearest";
    case Interpolation::Lanczos:
        return "lanczos";
    case Interpolation::Bilinear:
        return "bilinear";
    case Interpolation::Bicubic:
        return "bicubic";
    case Interpolation::Box:
        return "box";
    case Interpolation::Hamming:
        return "hamming";
    }
    return "unknown";
}

Interpolation interpolationFromName(const std::string& name, const std::string& where)
{
    for (Interpolation i : {Interpolation::Nearest, Interpolation::Lanczos, Interpolation::Bilinear,
                            Interpolation::Bicubic, Interpolation::Box, Interpolation::Hamming})
        if (interpolationName(i) == name) return i;
    throw Error(where + ": unknown interpolation '" + name +
                "', expected nearest, bilinear, bicubic, lanczos, box or hamming");
}

RgbImage resizeImage(const RgbImage& image, int width, int height, Interpolation interpolation)
{
    checkImage(image, "resizeImage");
    checkOutputSize(width, height, "resizeImage");
    return resizeWindow(image, width, height, interpolation, 0, 0, width, height);
}

RgbImage centerCrop(const RgbImage& image, int width, int height)
{
    checkImage(image, "centerCrop");
    checkOutputSize(width, height, "centerCrop");
    return resizeThenCenterCrop(image, image.width, image.height, Interpolation::Nearest, width, height);
}

RgbImage resizeAndCrop(const RgbImage& image, const ImagePreprocessing& p)
{
    checkImage(image, "resizeAndCrop");
    p.validate("image preprocessing");
    const int scale = p.resizeSize();
    switch (p.mode) {
    case ImagePreprocessing::Mode::ResizeExact:
        return resizeWindow(image, p.size, p.size, p.interpolation, 0, 0, p.size, p.size);
    case ImagePreprocessing::Mode::SquashThenCenterCrop:
        return resizeThenCenterCrop(image, scale, scale, p.interpolation, p.size, p.size);
    case ImagePreprocessing::Mode::HfShortestEdgeThenCenterCrop: {
        // transformers' get_resize_output_image_size(default_to_square=False): the shorter side becomes
        // shortest_edge, the longer int(shortest_edge * long / short); PIL resize; center_crop by floor.
        const bool portrait = image.width <= image.height;
        const std::int64_t shortSide = portrait ? image.width : image.height;
        const std::int64_t longSide = portrait ? image.height : image.width;
        const double longScaledExact = double(std::int64_t(scale) * longSide) / double(shortSide);
        if (longScaledExact > double(kMaxImagePixels))
            throw Error("resizeAndCrop: a " + std::to_string(image.width) + "x" +
                        std::to_string(image.height) +
                        " image is too elongated to resize its shorter side to " + std::to_string(scale));
        const int longScaled = int(longScaledExact);
        const int w = portrait ? scale : longScaled, h = portrait ? longScaled : scale;
        return resizeThenCenterCrop(image, w, h, p.interpolation, p.size, p.size, true);
    }
    case ImagePreprocessing::Mode::ShorterSideThenCenterCrop: {
        // torchvision Resize(int): the shorter side becomes `scale`, the longer int(scale * long / short).
        const bool portrait = image.width <= image.height;
        const std::int64_t shortSide = portrait ? image.width : image.height;
        const std::int64_t longSide = portrait ? image.height : image.width;
        const double longScaledExact = double(std::int64_t(scale) * longSide) / double(shortSide);
        if (longScaledExact > double(kMaxImagePixels)) // only the crop is computed, but indices span it all
            throw Error("resizeAndCrop: a " + std::to_string(image.width) + "x" +
                        std::to_string(image.height) +
                        " image is too elongated to resize its shorter side to " + std::to_string(scale));
        const int longScaled = int(longScaledExact);
        const int w = portrait ? scale : longScaled, h = portrait ? longScaled : scale;
        return resizeThenCenterCrop(image, w, h, p.interpolation, p.size, p.size);
    }
    }
    throw Error("image preprocessing: unknown mode");
}

torch::Tensor preprocessImage(const RgbImage& image, const ImagePreprocessing& p)
{
    const RgbImage resized = resizeAndCrop(image, p);
    const std::int64_t n = std::int64_t(resized.width) * resized.height;
    torch::Tensor out = torch::empty({3, resized.height, resized.width}, torch::kFloat);
    float* dst = out.data_ptr<float>();
    for (int c = 0; c < 3; ++c) {
        const std::uint8_t* src = resized.pixels.data() + c;
        float* plane = dst + c * n;
        for (std::int64_t i = 0; i < n; ++i)
            plane[i] = float((src[i * 3] * p.rescaleFactor - p.mean[c]) / p.std[c]);
    }
    return out;
}

} // namespace outlierlens
