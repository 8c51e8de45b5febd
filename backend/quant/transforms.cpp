#include "quant/transforms.h"

#include "common/error.h"
#include "common/text_format.h"

#include <torch/torch.h>

namespace outlierlens {

std::string ModelTransform::describe() const
{
    if (smoothQuantAlpha) return "smoothquant " + numberText(*smoothQuantAlpha);
    return {};
}

at::Tensor ChannelMaxSink::transform(QuantSite site, int layer, const at::Tensor& batched)
{
    if (site != QuantSite::AttnNorm && site != QuantSite::FfnNorm) return batched;
    const torch::Tensor m = batched.detach().abs().to(torch::kFloat).reshape({-1, batched.size(-1)}).amax(0);
    torch::Tensor& slot = m_maxima[{layer, site}];
    slot = slot.defined() ? torch::maximum(slot, m) : m;
    return batched;
}

double ChannelMaxSink::overallMax() const
{
    double best = 0;
    for (const auto& entry : m_maxima)
        best = std::max(best, entry.second.max().item<double>());
    return best;
}

void smoothQuant(const std::vector<NormReaders>& norms,
                 const std::map<std::pair<int, QuantSite>, torch::Tensor>& maxima, double alpha)
{
    if (!(alpha >= 0 && alpha <= 1)) throw Error("the SmoothQuant alpha must be in [0, 1]");
    torch::NoGradGuard noGrad;
    for (const NormReaders& n : norms) {
        const auto found = maxima.find({n.layer, n.site});
        if (found == maxima.end())
            throw Error("SmoothQuant: the calibration batches never reached " + n.name);
        const std::int64_t d = n.weight.size(0);
        if (found->second.size(0) != d)
            throw Error("SmoothQuant: " + n.name + " has " + std::to_string(d) + " channels, its output " +
                        std::to_string(found->second.size(0)));
        // max |W_j| over every output of every reader of channel j.
        torch::Tensor weightMax = torch::zeros({d});
        for (const NormReader& r : n.readers) {
            const torch::Tensor columns = r.weight.abs().to(torch::kFloat).amax(r.inputOnRows ? 1 : 0);
            torch::Tensor slot = weightMax.narrow(0, r.first, columns.size(0));
            slot.copy_(torch::maximum(slot, columns));
        }
        const torch::Tensor s =
            (found->second.clamp_min(1e-5).pow(alpha) / weightMax.clamp_min(1e-5).pow(1.0 - alpha))
                .clamp_min(1e-5);
        const auto scaled = [](const torch::Tensor& t, const torch::Tensor& by) {
            t.copy_(t.to(torch::kFloat) * by);
        };
        if (n.onePlusWeight)
            n.weight.copy_((1.0 + n.weight.to(torch::kFloat)) / s - 1.0);
        else
            scaled(n.weight, 1.0 / s);
        if (n.bias.defined()) scaled(n.bias, 1.0 / s);
        for (const NormReader& r : n.readers) {
            const std::int64_t in = r.weight.size(r.inputOnRows ? 0 : 1);
            const torch::Tensor part = s.narrow(0, r.first, in);
            scaled(r.weight, r.inputOnRows ? part.unsqueeze(1) : part.unsqueeze(0));
        }
    }
}

TransformReport applyTransform(torch::nn::Module& module, const ModelTransform& transform,
                               const std::function<void(ActivationSink&)>& calibrate)
{
    TransformReport report;
    if (!transform.any()) return report;
    const std::vector<NormReaders> norms = preNormsOf(module);
    ChannelMaxSink before;
    calibrate(before);
    report.normedMaxBefore = before.overallMax();
    if (transform.smoothQuantAlpha) smoothQuant(norms, before.maxima(), *transform.smoothQuantAlpha);
    ChannelMaxSink after;
    calibrate(after);
    report.normedMaxAfter = after.overallMax();
    return report;
}

} // namespace outlierlens
