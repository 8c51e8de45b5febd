#include "tasks/data/canvas_data.h"

#include "common/error.h"

#include <torch/torch.h>

#include <array>
#include <cmath>
#include <string>

namespace outlierlens {

void CanvasOptions::validate(int itemSize) const
{
    if (patchSize < 1 || canvasSize < patchSize || canvasSize % patchSize != 0)
        throw Error("canvas task: canvas_size " + std::to_string(canvasSize) +
                    " must be a multiple of patch_size " + std::to_string(patchSize));
    if (canvasSize < itemSize)
        throw Error("canvas task: the " + std::to_string(itemSize) + " px items do not fit a " +
                    std::to_string(canvasSize) + " px canvas");
    if (!(maskRate >= 0 && maskRate < 1)) throw Error("canvas task: the mask rate must be in [0, 1)");
    if (!(objectThreshold >= 0 && objectThreshold < 1))
        throw Error("canvas task: the object threshold must be in [0, 1)");
}

CanvasBatch canvasBatch(const ImageDataset& items, const std::vector<std::int64_t>& indices,
                        const CanvasOptions& o, bool mask, at::Generator& gen)
{
    if (items.storedChannels() != 1) throw Error("canvas task: the items must be gray images");
    const int side = items.imageSize();
    o.validate(side);
    const auto B = std::int64_t(indices.size());
    const int S = o.canvasSize, P = o.patchSize, G = o.grid(), N = o.numPatches();
    torch::Tensor canvas = torch::zeros({B, S, S}, torch::kFloat); // [0, 1]
    torch::Tensor labels = torch::empty({B}, torch::kLong);
    torch::Tensor masked = torch::zeros({B, N}, torch::kBool);
    const torch::Tensor stored = items.storedPixels(); // uint8 [n, 1, side, side]
    const std::int64_t span = S - side + 1;
    for (std::int64_t b = 0; b < B; ++b) {
        const std::int64_t i = indices[std::size_t(b)];
        if (i < 0 || i >= items.size())
            throw Error("canvas task: item " + std::to_string(i) + " is outside 0.." +
                        std::to_string(items.size() - 1));
        const std::int64_t row = torch::randint(span, {1}, gen, torch::kLong).item<std::int64_t>();
        const std::int64_t col = torch::randint(span, {1}, gen, torch::kLong).item<std::int64_t>();
        canvas[b].narrow(0, row, side).narrow(1, col, side).copy_(stored[i][0].to(torch::kFloat) / 255.0);
        labels[b] = items.label(i);
        if (mask && o.maskRate > 0) masked[b] = torch::rand({N}, gen) < o.maskRate;
    }
    // [B, S, S] -> [B, G, P, G, P] -> [B, G, G, P, P] -> [B, N, P * P]: patch (r, c) is token 1 + r * G + c.
    const torch::Tensor targets =
        canvas.view({B, G, P, G, P}).permute({0, 1, 3, 2, 4}).reshape({B, N, P * P});
    const torch::Tensor object = std::get<0>(targets.max(-1)) > o.objectThreshold;
    torch::Tensor shown = targets.clone();
    if (mask) {
        // A checkerboard of 0 and 1 pixels: never a Fashion-MNIST patch, so the model can tell a masked
        // patch.
        const torch::Tensor board = ((torch::arange(P).view({P, 1}) + torch::arange(P).view({1, P})) % 2)
                                        .to(torch::kFloat)
                                        .reshape({P * P});
        shown = torch::where(masked.unsqueeze(-1), board.view({1, 1, P * P}).expand_as(shown), shown);
    }
    const torch::Tensor image = shown.view({B, G, G, P, P}).permute({0, 1, 3, 2, 4}).reshape({B, 1, S, S});
    const std::array<double, 3> mean = items.mean(), sd = items.std();
    CanvasBatch out;
    out.pixels =
        torch::cat({(image - mean[0]) / sd[0], (image - mean[1]) / sd[1], (image - mean[2]) / sd[2]}, 1)
            .contiguous();
    out.labels = labels;
    out.targets = targets.contiguous();
    out.masked = masked;
    out.object = object;
    out.scored = object | masked;
    return out;
}

RgbImage canvasImage(const CanvasBatch& batch, std::int64_t b)
{
    const torch::Tensor gray = batch.pixels[b][0]; // (x - 0.5) / 0.5
    const int S = int(gray.size(0));
    const torch::Tensor bytes =
        ((gray * 0.5 + 0.5) * 255.0).round().clamp(0, 255).to(torch::kUInt8).contiguous();
    RgbImage image;
    image.width = image.height = S;
    image.pixels.resize(std::size_t(S) * S * 3);
    const std::uint8_t* p = bytes.data_ptr<std::uint8_t>();
    for (std::size_t i = 0; i < std::size_t(S) * S; ++i)
        image.pixels[3 * i] = image.pixels[3 * i + 1] = image.pixels[3 * i + 2] = p[i];
    return image;
}

} // namespace outlierlens
