#pragma once
// Any thread. An ImageDataset is immutable after it is loaded: one const object may be shared by
// several threads. batch() mutates only the generator it is given (one generator per thread).

#include "io/image.h"
#include "tasks/data/batch_indices.h"

#include <torch/types.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace outlierlens {

/// Where Debian's dataset-fashion-mnist package puts the IDX files.
constexpr const char* kDebianFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// A labelled image classification set held in memory as uint8 pixels (gray or RGB), all images
/// imageSize() x imageSize(): Fashion-MNIST's IDX files or an image folder with one sub-folder per class.
class ImageDataset
{
public:
    /// Fashion-MNIST from `dir` (e.g. kDebianFashionMnistDir): train-images-idx3-ubyte.gz and
    /// train-labels-idx1-ubyte.gz (60,000 images), or the t10k-* pair when train is false (10,000); the
    /// uncompressed files (no .gz) are accepted too. 28 x 28 gray, 10 classes in torchvision's order
    /// ("T-shirt/top" ... "Ankle boot"). Throws Error naming the file for a missing or truncated file,
    /// a wrong magic number, image and label counts that differ, a label >= 10 or absurd sizes.
    static ImageDataset fashionMnist(const std::string& dir, bool train);

    /// Any IDX pair (magic 0x00000803 unsigned-byte images N x rows x cols with rows == cols, and
    /// 0x00000801 labels N), gzipped or not; labels must be below classNames.size().
    static ImageDataset idxFiles(const std::string& imagesFile, const std::string& labelsFile,
                                 std::vector<std::string> classNames);

    /// An image folder as torchvision's ImageFolder: one sub-folder per class, class names (and label ids
    /// 0, 1, ...) in byte order of the folder names (hidden folders skipped), images (.png .jpg .jpeg
    /// .bmp .webp, any case, in any depth below the class folder, sorted by path) decoded as RGB and
    /// resized to imageSize x imageSize with Pillow-exact bilinear resampling (no crop; aspect ratio not
    /// kept). Decoding runs on all cores. Throws Error naming the folder or file for a missing folder, no
    /// class folder, a class without images, an undecodable image or imageSize outside [1, 4096].
    static ImageDataset folder(const std::string& dir, int imageSize);

    /// Number of images N.
    std::int64_t size() const { return m_labels.size(0); }
    int numClasses() const { return static_cast<int>(m_classNames.size()); }
    /// Class names by label id (0-based).
    const std::vector<std::string>& classNames() const { return m_classNames; }
    /// Height = width of every image, pixels.
    int imageSize() const { return m_imageSize; }
    /// 1 (gray) or 3 (RGB): how the pixels are stored.
    int storedChannels() const { return static_cast<int>(m_pixels.size(1)); }
    /// Every image as stored: uint8 [N, storedChannels(), S, S] (e.g. the items of the canvas task).
    const torch::Tensor& storedPixels() const { return m_pixels; }
    /// Label id of image i (0-based).
    std::int64_t label(std::int64_t i) const;

    /// Images with these 0-based indices: pixels float32 [B, 3, S, S], (x / 255 - mean) / std per
    /// channel R, G, B (gray replicated to 3 channels), and labels int64 [B]. augment: per image a random
    /// crop of the image zero-padded (black, before normalisation) by pad = max(1, round(S / 14))
    /// pixels on each side (2 for 28 x 28), then a horizontal flip with probability 1/2, as
    /// torchvision's RandomCrop(S, padding=pad) + RandomHorizontalFlip; draws come from `gen` (none when
    /// augment is false). Throws Error for an index out of range.
    std::pair<torch::Tensor, torch::Tensor> batch(const std::vector<std::int64_t>& indices, bool augment,
                                                  at::Generator& gen) const;

    /// The augmentation padding for this image size: max(1, round(imageSize / 14)) pixels.
    int augmentPadding() const;

    /// The uint8 image i (0-based) as RGB, S x S (gray replicated), e.g. for sample PNGs in the gallery.
    RgbImage image(std::int64_t i) const;

    /// The timm pretrained_cfg (JSON text) of a model trained on this data's batch() at `imageSize` pixels:
    /// 3-channel input, bilinear resize without crop, this normalisation; what the app preprocesses with.
    std::string pretrainedCfgJson(int imageSize) const;
    /// Normalisation used by batch(), per channel R, G, B (0.5 and 0.5: pixels map to [-1, 1]).
    std::array<double, 3> mean() const { return {0.5, 0.5, 0.5}; }
    std::array<double, 3> std() const { return {0.5, 0.5, 0.5}; }

private:
    ImageDataset() = default;
    void checkIndex(std::int64_t i) const;

    std::string m_source; // file or folder, for messages
    int m_imageSize = 0;
    std::vector<std::string> m_classNames;
    torch::Tensor m_pixels; // uint8 [N, C, S, S], C = 1 or 3
    torch::Tensor m_labels; // int64 [N]
};

} // namespace outlierlens
