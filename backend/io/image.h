#pragma once
// Any thread; every function is reentrant (no shared state, each call reads its own file).
//
// Image decoding and the eval transforms of ViT checkpoints, reproduced bit for bit: decoding as
// PIL's Image.open(path).convert("RGB"), resampling as Pillow 9.4's Image.resize (separable filters
// that widen when shrinking, i.e. antialiased, in 22-bit fixed point), cropping as torchvision's
// CenterCrop. OpenCV's cv::resize does not antialias when shrinking, so it is not used here.

#include <torch/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens {

/// Decoded 8-bit RGB image, row-major HWC: pixel (x, y) channel c (0 = R) at (y * width + x) * 3 + c.
struct RgbImage
{
    int width = 0, height = 0;
    std::vector<std::uint8_t> pixels;
};

/// Images above these limits are refused from their header, before any pixel is decoded.
constexpr int kMaxImageSide = 40000;
constexpr std::int64_t kMaxImagePixels = 100'000'000;

/// Decodes a PNG, JPEG, BMP or WebP file the way PIL's Image.open(path).convert("RGB") does:
/// grayscale replicated to R = G = B, alpha dropped without compositing, palettes expanded, 1/2/4-bit
/// samples scaled to 0..255, EXIF orientation not applied. 16-bit samples keep their high byte
/// (v >> 8), which is what PIL does for 16-bit RGB(A) and gray+alpha PNGs; for 16-bit grayscale PNGs
/// PIL instead clips the value to 255 (mode "I" to "RGB"), which whitens the image: we do not copy that.
/// JPEGs are decoded by the same libjpeg-turbo as PIL (islow IDCT, fancy chroma upsampling): identical
/// pixels. Known differences: CMYK JPEGs go through OpenCV's CMYK conversion (may differ by a few
/// levels); a PNG without IEND is refused (PIL accepts it); a bad CRC in an ancillary PNG chunk is
/// ignored (PIL refuses the file); GIF and TIFF are not supported.
/// Throws Error naming the file for a missing, empty, unsupported, truncated or corrupt file, a zero
/// size, or a size above kMaxImageSide / kMaxImagePixels (checked from the header before decoding).
RgbImage decodeImageFile(const std::string& path);

/// As decodeImageFile() for bytes already in memory; `name` stands for the file in error messages.
RgbImage decodeImageData(const std::uint8_t* data, std::size_t size, const std::string& name);

/// Pillow's resampling filters (Image.Resampling), with PIL's numbering in the comments.
enum class Interpolation {
    Nearest,  ///< 0
    Lanczos,  ///< 1, a = 3
    Bilinear, ///< 2, triangle
    Bicubic,  ///< 3, Keys cubic with a = -0.5
    Box,      ///< 4
    Hamming,  ///< 5
};

/// Lower-case name as timm writes it ("bicubic"); interpolationFromName() accepts these.
std::string interpolationName(Interpolation interpolation);
/// Throws Error naming `where` for an unknown name.
Interpolation interpolationFromName(const std::string& name, const std::string& where);

/// Resizes like Pillow 9.4's Image.resize((width, height), filter) on an RGB image: per output pixel
/// a filter whose support grows by the downscale factor, coefficients normalised and rounded to
/// 22-bit fixed point, horizontal pass then vertical pass with rounding and clipping to uint8 in
/// between; a pass whose size does not change is skipped. Sizes in pixels, each >= 1.
RgbImage resizeImage(const RgbImage& image, int width, int height, Interpolation interpolation);

/// torchvision's CenterCrop((height, width)) on a PIL image: zero (black) padding first if the crop is
/// larger than the image (left = (crop - w) / 2, rest on the right), then top = round((h - crop) / 2)
/// with Python's round-half-to-even, left likewise.
RgbImage centerCrop(const RgbImage& image, int width, int height);

/// An eval transform: timm's (resize shorter side to floor(size / crop_pct), centre crop), timm's
/// "squash" (resize to floor(size / crop_pct) square, centre crop) or Hugging Face
/// ViTImageProcessor's (resize to size x size, no crop).
struct ImagePreprocessing
{
    /// timm's eval transforms (crop_mode center / squash), Hugging Face's ViTImageProcessor (resize to the
    /// size) and the processors of DINOv2 and CLIP (BitImageProcessor, CLIPImageProcessor: shorter side
    /// to shortest_edge, then a centre crop of crop_size with Hugging Face's floor offsets).
    enum class Mode {
        ShorterSideThenCenterCrop,
        SquashThenCenterCrop,
        ResizeExact,
        HfShortestEdgeThenCenterCrop
    };
    Mode mode = Mode::ShorterSideThenCenterCrop;
    int size = 224;         ///< output height = width, pixels
    double cropPct = 0.9;   ///< timm crop_pct; used by the two timm modes
    int shortestEdge = 256; ///< HfShortestEdgeThenCenterCrop: the shorter side before the crop
    Interpolation interpolation = Interpolation::Bicubic;
    std::array<double, 3> mean{0.5, 0.5, 0.5}, std{0.5, 0.5, 0.5}; ///< per channel R, G, B
    double rescaleFactor = 1.0 / 255.0;

    /// From a timm-style config.json ("pretrained_cfg": input_size, interpolation, mean, std,
    /// crop_pct, crop_mode; absent fields take timm 0.9's defaults) or, when config.json has no
    /// "pretrained_cfg", a Hugging Face preprocessor_config.json next to it (ViTImageProcessor,
    /// BitImageProcessor, CLIPImageProcessor: do_resize, size ({height, width}, an integer or
    /// {shortest_edge}), resample, do_center_crop, crop_size, do_rescale, rescale_factor, do_normalize,
    /// image_mean, image_std).
    /// Errors name the file and field.
    static ImagePreprocessing fromModelDir(const std::string& modelDir);
    /// timm's eval transform for these data-config values (timm's names and defaults).
    static ImagePreprocessing timmEval(int size, double cropPct, Interpolation interpolation);

    /// The side the image is resized to before cropping: floor(size / cropPct) (timm's scale_size),
    /// shortestEdge (Hugging Face's shortest_edge), or size for ResizeExact.
    int resizeSize() const;
    /// One line for logs, dumps and the UI, e.g. "timm: shorter side to 248 (bicubic), centre crop 224, ...".
    std::string describe() const;
    /// Throws Error naming `where` if a field is out of range (size < 1, std 0, ...).
    void validate(const std::string& where) const;
};

/// The resized (and cropped) uint8 image, before normalisation: size x size RGB.
RgbImage resizeAndCrop(const RgbImage& image, const ImagePreprocessing& p);

/// The model input: float32 [3, size, size] (CHW, channel 0 = R), (x * rescaleFactor - mean) / std
/// evaluated in double and rounded once to float.
torch::Tensor preprocessImage(const RgbImage& image, const ImagePreprocessing& p);

} // namespace outlierlens
