#pragma once
// Any thread (pure functions; canvasBatch() mutates only the generator it is given).
//
// The ViT "canvas" task (its runs: docs/demo-models.md): a gray 28 x 28 item (Fashion-MNIST) pasted at
// a random place on a black S x S canvas (S = 56, patch 7: 8 x 8 patches + CLS). A share of the patches is
// masked (their pixels replaced by a checkerboard that never occurs in the data). The loss: CLS classifies
// the item, and every patch that holds part of the item or is masked predicts its own pixels through a small
// reconstruction head: identity for visible item patches (a "no-op": any attention update there only costs),
// reconstruction for masked ones (attention needed). Visible background patches are never scored: free
// places, as [SEP] is in BERT, where a head with nothing to do can park its attention. Measured in a PyTorch
// probe of this task (same shape, one core): by 5,000 steps the block output of layer 2 had max |x| 34 x its
// median and kurtosis 60, the largest value on a visible background patch in 64 of 64 images.

#include "io/image.h"
#include "tasks/data/image_data.h"

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace outlierlens {

/// The image task's data value that selects the canvas task.
inline constexpr const char* kCanvasData = "fashion-mnist-canvas";

struct CanvasOptions
{
    int canvasSize = 56;    ///< S: pixels of the square canvas (a multiple of patchSize, >= the item's side)
    int patchSize = 7;      ///< P: pixels of a square patch
    double maskRate = 0.25; ///< probability that a patch is masked (training batches only)
    double objectThreshold =
        0.05; ///< a patch holds part of the item when its brightest pixel exceeds this (0..1)

    int grid() const { return canvasSize / patchSize; }
    int numPatches() const { return grid() * grid(); }
    /// Throws Error naming the option for a canvas that is not a multiple of the patch, rates outside [0, 1).
    void validate(int itemSize) const;
};

/// One batch of canvases. Patches are numbered row-major over the grid (0-based), as the ViT's tokens 1..N.
struct CanvasBatch
{
    torch::Tensor
        pixels; ///< float32 [B, 3, S, S]: (x - 0.5) / 0.5, gray replicated to R, G, B (ImageDataset's)
    torch::Tensor labels; ///< int64 [B]: the item's class
    torch::Tensor
        targets; ///< float32 [B, N, P * P]: each patch's own pixels of the unmasked canvas, in [0, 1]
    torch::Tensor
        scored; ///< bool [B, N]: the patch holds part of the item or is masked (reconstruction loss)
    torch::Tensor masked; ///< bool [B, N]
    torch::Tensor object; ///< bool [B, N]: the patch holds part of the item
};

/// Canvases of the gray items `indices` of `items` (1 stored channel, side <= S): per canvas the item's
/// offset (row, column, each uniform in [0, S - side]) and, when `mask`, each patch's mask draw, all from
/// `gen` in this order, so a generator seeded from (seed, step) reproduces the batch. Throws Error for an
/// index out of range, a colour data set or invalid options.
CanvasBatch canvasBatch(const ImageDataset& items, const std::vector<std::int64_t>& indices,
                        const CanvasOptions& options, bool mask, at::Generator& gen);

/// The RGB image of canvas `b` of an unmasked batch (pixels back to bytes), e.g. a model's sample image.
RgbImage canvasImage(const CanvasBatch& batch, std::int64_t b);

} // namespace outlierlens
