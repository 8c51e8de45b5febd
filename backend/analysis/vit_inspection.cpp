#include "analysis/vit_inspection.h"

#include "analysis/metrics.h"
#include "common/error.h"

#include <torch/torch.h>

namespace outlierlens {

VitInspection inspectVit(VitNetwork& network, const ImagePreprocessing& preprocessing,
                         const std::string& imagePath, const std::set<std::string>& captureNames,
                         ActivationSink* through)
{
    return inspectVit(network, preprocessing, decodeImageFile(imagePath), captureNames, through);
}

VitInspection inspectVit(VitNetwork& network, const ImagePreprocessing& preprocessing, const RgbImage& image,
                         const std::set<std::string>& captureNames, ActivationSink* through)
{
    const VitConfig& c = network.config();
    if (preprocessing.size != c.imageSize)
        throw Error("the preprocessing produces " + std::to_string(preprocessing.size) +
                    " px images but the model takes " + std::to_string(c.imageSize) + " px");
    if (c.numChannels != 3)
        throw Error("only 3-channel (RGB) ViTs can take photos; this one has " +
                    std::to_string(c.numChannels) + " channels");
    VitInspection result =
        inspectVitPixels(network, preprocessImage(image, preprocessing).unsqueeze(0), captureNames, through);
    result.resized = resizeAndCrop(image, preprocessing);
    return result;
}

VitInspection inspectVitPixels(VitNetwork& network, const torch::Tensor& pixels,
                               const std::set<std::string>& captureNames, ActivationSink* through)
{
    VitInspection result;
    result.activations = captureNames.empty() ? RecordingSink() : RecordingSink(captureNames);
    result.pixels = pixels;
    c10::InferenceMode guard;
    const ThroughScope scope(result.activations, through);
    const VitOutputs out = network.forward(result.pixels, &result.activations);
    if (out.logits.defined()) result.outputNotice = nonFiniteOutputNotice(out.logits);
    if (out.logits.defined() && result.outputNotice.empty()) {
        const torch::Tensor probs = torch::softmax(out.logits[0].to(torch::kDouble), -1).contiguous();
        result.probabilities.assign(probs.data_ptr<double>(), probs.data_ptr<double>() + probs.numel());
        const auto top = probs.topk(std::min<std::int64_t>(5, probs.numel()));
        const torch::Tensor indices = std::get<1>(top).contiguous();
        for (std::int64_t i = 0; i < indices.numel(); ++i)
            result.top.push_back(int(indices[i].item<std::int64_t>()));
    }
    return result;
}

} // namespace outlierlens
