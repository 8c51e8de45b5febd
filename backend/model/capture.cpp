#include "model/capture.h"

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdlib>

namespace outlierlens {
namespace {

struct PointInfo
{
    CapturePoint point;
    const char* name;
    bool perLayer;
};

constexpr std::array<PointInfo, 12> kPoints = {{
    {CapturePoint::Embeddings, "embeddings", false},
    {CapturePoint::AttnScores, "attn_scores", true},
    {CapturePoint::AttnProbs, "attn_probs", true},
    {CapturePoint::AttnValues, "attn_values", true},
    {CapturePoint::AttnContext, "attn_context", true},
    {CapturePoint::AttnGate, "attn_gate", true},
    {CapturePoint::AttnOut, "attn_out", true},
    {CapturePoint::DownIn, "down_in", true},
    {CapturePoint::FfnOut, "ffn_out", true},
    {CapturePoint::Residual, "residual", true},
    {CapturePoint::Out, "out", true},
    {CapturePoint::Logits, "logits", false},
}};

const PointInfo& info(CapturePoint point)
{
    return kPoints[std::size_t(point)];
}

} // namespace

const std::vector<CapturePoint>& perLayerCapturePoints()
{
    static const std::vector<CapturePoint> points = [] {
        std::vector<CapturePoint> out;
        for (const auto& p : kPoints)
            if (p.perLayer) out.push_back(p.point);
        return out;
    }();
    return points;
}

bool isPerLayer(CapturePoint point)
{
    return info(point).perLayer;
}

std::string pointName(CapturePoint point)
{
    return info(point).name;
}

std::string captureName(CapturePoint point, int layer)
{
    if (!isPerLayer(point)) return info(point).name;
    return "layer" + std::to_string(layer) + "/" + info(point).name;
}

std::optional<std::pair<CapturePoint, int>> parseCaptureName(const std::string& name)
{
    for (const auto& p : kPoints)
        if (!p.perLayer && name == p.name) return std::make_pair(p.point, -1);
    if (name.rfind("layer", 0) != 0) return std::nullopt;
    const auto slash = name.find('/');
    if (slash == std::string::npos || slash == 5) return std::nullopt;
    const std::string digits = name.substr(5, slash - 5);
    for (char c : digits)
        if (c < '0' || c > '9') return std::nullopt;
    if (digits.size() > 6) return std::nullopt;
    const int layer = std::atoi(digits.c_str());
    const std::string rest = name.substr(slash + 1);
    for (const auto& p : kPoints)
        if (p.perLayer && rest == p.name) return std::make_pair(p.point, layer);
    return std::nullopt;
}

std::string quantSiteName(QuantSite site)
{
    switch (site) {
    case QuantSite::EmbeddingSum:
        return "embedding_sum";
    case QuantSite::EmbeddingNorm:
        return "embedding_norm";
    case QuantSite::Query:
        return "query";
    case QuantSite::Key:
        return "key";
    case QuantSite::Value:
        return "value";
    case QuantSite::AttnScores:
        return "attn_scores";
    case QuantSite::AttnProbs:
        return "attn_probs";
    case QuantSite::AttnContext:
        return "attn_context";
    case QuantSite::AttnOut:
        return "attn_out";
    case QuantSite::AttnResidual:
        return "attn_residual";
    case QuantSite::AttnNorm:
        return "attn_norm";
    case QuantSite::FfnIntermediate:
        return "ffn_intermediate";
    case QuantSite::FfnOut:
        return "ffn_out";
    case QuantSite::FfnResidual:
        return "ffn_residual";
    case QuantSite::FfnNorm:
        return "ffn_norm";
    case QuantSite::FinalNorm:
        return "final_norm";
    case QuantSite::Pooler:
        return "pooler";
    case QuantSite::Logits:
        return "logits";
    case QuantSite::AttnGate:
        return "attn_gate";
    case QuantSite::FfnGate:
        return "ffn_gate";
    case QuantSite::FfnUp:
        return "ffn_up";
    case QuantSite::FfnAct:
        return "ffn_act";
    }
    std::abort();
}

at::Tensor ActivationSink::transform(QuantSite, int, const at::Tensor& batched)
{
    return batched;
}

at::Tensor CaptureScope::quant(QuantSite site, const at::Tensor& batched) const
{
    return m_sink && m_sink->transformsActivations() ? m_sink->transform(site, m_layer, batched) : batched;
}

} // namespace outlierlens
