#include "analysis/recording_sink.h"

#include "common/error.h"

#include <torch/torch.h>

namespace outlierlens {

RecordingSink::RecordingSink(std::set<std::string> names)
    : m_all(false)
    , m_names(std::move(names))
{}

bool RecordingSink::wants(CapturePoint point, int layer) const
{
    return m_all || m_names.count(captureName(point, layer)) > 0;
}

void RecordingSink::put(CapturePoint point, int layer, const at::Tensor& batched)
{
    m_tensors[captureName(point, layer)] = batched;
}

at::Tensor RecordingSink::transform(QuantSite site, int layer, const at::Tensor& batched)
{
    return m_through ? m_through->transform(site, layer, batched) : batched;
}

SiteRecorder::SiteRecorder(std::set<QuantSite> sites, ActivationSink* next)
    : m_sites(std::move(sites))
    , m_next(next)
{}

at::Tensor SiteRecorder::transform(QuantSite site, int layer, const at::Tensor& batched)
{
    const torch::Tensor out =
        m_next && m_next->transformsActivations() ? m_next->transform(site, layer, batched) : batched;
    if (m_sites.count(site)) {
        const auto only = m_layers.find(site);
        if (only == m_layers.end() || only->second.count(layer)) m_tensors[{site, layer}] = out;
    }
    return out;
}

void SiteRecorder::recordOnly(QuantSite site, std::set<int> layers)
{
    m_sites.insert(site);
    m_layers[site] = std::move(layers);
}

torch::Tensor SiteRecorder::at(QuantSite site, int layer) const
{
    const auto it = m_tensors.find({site, layer});
    return it == m_tensors.end() ? torch::Tensor() : it->second;
}

const torch::Tensor& RecordingSink::at(const std::string& name) const
{
    const auto it = m_tensors.find(name);
    if (it == m_tensors.end()) throw Error("activation '" + name + "' was not recorded");
    return it->second;
}

torch::Tensor sampleOf(CapturePoint point, const torch::Tensor& batched, std::int64_t index,
                       std::int64_t length)
{
    using torch::indexing::Slice;
    const torch::Tensor one = batched.select(0, index);
    switch (point) {
    case CapturePoint::AttnScores:
    case CapturePoint::AttnProbs:
        return one.index({Slice(), Slice(0, length), Slice(0, length)});
    case CapturePoint::AttnValues:
    case CapturePoint::AttnContext:
    case CapturePoint::AttnGate:
        return one.index({Slice(), Slice(0, length)});
    case CapturePoint::Embeddings:
    case CapturePoint::AttnOut:
    case CapturePoint::DownIn:
    case CapturePoint::FfnOut:
    case CapturePoint::Residual:
    case CapturePoint::Out:
        return one.index({Slice(0, length)});
    case CapturePoint::Logits:
        return one.dim() >= 2 ? one.index({Slice(0, length)}) : one; // masked LM logits are per token
    }
    return one;
}

} // namespace outlierlens
