#pragma once
// Runs on the thread that owns the network.

#include "analysis/recording_sink.h"
#include "io/image.h"
#include "model/vit_network.h"

#include <set>
#include <string>
#include <vector>

namespace outlierlens {

/// One image run through a ViT with its activations recorded.
struct VitInspection
{
    RgbImage resized;                  ///< the model's view of the image (resized and cropped, uint8)
    torch::Tensor pixels;              ///< [1, C, H, W] what the model was fed
    RecordingSink activations;         ///< batched tensors, B = 1
    std::vector<double> probabilities; ///< softmax of the logits (empty without a head)
    std::vector<int> top;              ///< classes by decreasing probability (up to 5)
    /// nonFiniteOutputNotice() of the logits: non-empty means no prediction was made.
    std::string outputNotice{};
};

/// Decodes, preprocesses and runs an image file under InferenceMode, recording `captureNames`
/// (empty = every capture point), its QuantSites passing through `through` when given
/// (RecordingSink::setThrough).
VitInspection inspectVit(VitNetwork& network, const ImagePreprocessing& preprocessing,
                         const std::string& imagePath, const std::set<std::string>& captureNames = {},
                         ActivationSink* through = nullptr);
/// The same for an image already decoded.
VitInspection inspectVit(VitNetwork& network, const ImagePreprocessing& preprocessing, const RgbImage& image,
                         const std::set<std::string>& captureNames = {}, ActivationSink* through = nullptr);
/// The same for pixels already preprocessed, [1, C, h, w] float32, run as they are (`inspect --pixels`);
/// `resized` stays empty.
VitInspection inspectVitPixels(VitNetwork& network, const torch::Tensor& pixels,
                               const std::set<std::string>& captureNames = {},
                               ActivationSink* through = nullptr);

} // namespace outlierlens
