#include "model/attention.h"

#include "common/error.h"
#include "model/linear.h"
#include "model/onednn_ops.h"

#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

namespace outlierlens {

void AttentionGates::create(torch::nn::Module& owner, const AttentionVariant& variant, int numHeads,
                            int headDim)
{
    m_kind = variant.gate;
    m_numHeads = numHeads;
    m_headDim = headDim;
    const double initBias = std::log(variant.piInit / (1.0 - variant.piInit));
    torch::NoGradGuard noGrad;
    switch (m_kind) {
    case GateKind::None:
        return;
    case GateKind::AllHeadsLinear:
        m_allHeads = owner.register_module("alpha", torch::nn::Linear(numHeads * headDim, numHeads));
        m_allHeads->bias.fill_(initBias);
        return;
    case GateKind::Linear:
    case GateKind::Mlp:
        break;
    }
    m_perHead = torch::nn::ModuleList();
    for (int h = 0; h < numHeads; ++h) {
        if (m_kind == GateKind::Linear) {
            torch::nn::Linear fc(headDim, 1);
            fc->bias.fill_(initBias);
            m_perHead->push_back(fc);
        } else {
            torch::nn::Linear last(variant.nHid, 1);
            last->bias.fill_(initBias);
            m_perHead->push_back(
                torch::nn::Sequential(torch::nn::Linear(headDim, variant.nHid), torch::nn::ReLU(), last));
        }
    }
    owner.register_module("alpha", m_perHead);
}

const torch::nn::LinearImpl* AttentionGates::firstLayer(int h) const
{
    const auto& gate = (*m_perHead)[std::size_t(h)];
    return m_kind == GateKind::Linear ? gate->as<torch::nn::Linear>()
                                      : (*gate->as<torch::nn::Sequential>())[0]->as<torch::nn::Linear>();
}

void AttentionGates::appendReaders(std::vector<NormReader>& readers) const
{
    if (m_kind == GateKind::None) return;
    if (m_kind == GateKind::AllHeadsLinear) {
        const torch::nn::LinearImpl* all = m_allHeads.get();
        NormReader r;
        r.weight = all->weight;
        r.ensureBias = [all]() -> torch::Tensor { return all->bias; };
        readers.push_back(std::move(r));
        return;
    }
    for (int h = 0; h < m_numHeads; ++h) {
        const torch::nn::LinearImpl* first = firstLayer(h);
        NormReader r;
        r.weight = first->weight;
        r.first = std::int64_t(h) * m_headDim;
        r.ensureBias = [first]() -> torch::Tensor { return first->bias; };
        readers.push_back(std::move(r));
    }
}

torch::Tensor AttentionGates::forward(const torch::Tensor& x)
{
    const auto B = x.size(0), T = x.size(1);
    if (m_kind == GateKind::AllHeadsLinear)
        return torch::sigmoid(linearLayer(m_allHeads, x)).permute({0, 2, 1}); // [B, H, T]
    // Each head's gate sees that head's d_head slice of the block input, or all of it once its first
    // layer has been widened to d_model inputs (zero outside the slice: a rotation, norm_readers.h).
    const torch::Tensor heads = x.view({B, T, m_numHeads, m_headDim});
    std::vector<torch::Tensor> logits;
    logits.reserve(std::size_t(m_numHeads));
    auto product = [](const torch::nn::LinearImpl* l, const torch::Tensor& in) {
        return linearLayer(in, l->weight, l->bias);
    };
    for (int h = 0; h < m_numHeads; ++h) {
        const torch::nn::LinearImpl* first = firstLayer(h);
        const torch::Tensor in = first->weight.size(1) == m_headDim ? heads.select(2, h) : x;
        torch::Tensor out = product(first, in);
        if (m_kind == GateKind::Mlp) // Linear, ReLU, Linear: the two products as every other linear layer's
            out = product(
                (*(*m_perHead)[std::size_t(h)]->as<torch::nn::Sequential>())[2]->as<torch::nn::Linear>(),
                torch::relu(out));
        logits.push_back(out.squeeze(-1)); // [B, T]
    }
    return torch::sigmoid(torch::stack(logits, 1)); // [B, H, T]
}

torch::Tensor attentionSoftmax(const torch::Tensor& scores, const AttentionVariant& variant,
                               const torch::Tensor& keysSeen)
{
    // bf16 scores (autocast) get a float32 softmax, as the decoders and Hugging Face do.
    const bool reduced = scores.scalar_type() == torch::kBFloat16 || scores.scalar_type() == torch::kHalf;
    const torch::Tensor in = reduced ? scores.to(torch::kFloat) : scores;
    torch::Tensor probs = onednn::canSoftmax(in) ? onednn::softmax(in) : torch::softmax(in, -1);
    if (variant.softmax == SoftmaxKind::Clipped) {
        const double gamma = variant.effectiveGamma();
        if (variant.clipPerQuery) {
            if (!keysSeen.defined() || variant.maxSeqLength <= 0)
                throw Error("clip_per_query needs the keys each query sees and the length T of gamma");
            const torch::Tensor gammaPerQuery = (gamma * variant.maxSeqLength) / keysSeen.clamp_min(1.0);
            probs = torch::clamp(probs * (variant.zeta - gammaPerQuery) + gammaPerQuery, 0.0, 1.0);
        } else {
            probs = torch::clamp(probs * (variant.zeta - gamma) + gamma, 0.0, 1.0);
        }
    }
    return probs;
}

torch::Tensor additiveAttentionMask(const torch::Tensor& attentionMask, torch::ScalarType dtype)
{
    if (!attentionMask.defined()) return {};
    const double lowest = dtype == torch::kDouble ? std::numeric_limits<double>::lowest()
                                                  : double(std::numeric_limits<float>::lowest());
    const torch::Tensor m = attentionMask.to(dtype).unsqueeze(1).unsqueeze(2);
    return (1.0 - m) * lowest;
}

torch::Tensor multiHeadAttention(const AttentionSpec& spec, const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, const torch::Tensor& x,
                                 const torch::Tensor& additiveMask, AttentionGates& gates,
                                 torch::nn::Dropout& probsDropout, const CaptureScope& capture)
{
    if (spec.variant.isDecoderOnly())
        throw Error("attention variant '" + spec.variant.describe() + "' is implemented for decoders only");
    const auto B = q.size(0), T = q.size(1);
    const int H = spec.numHeads, dh = spec.headDim;
    auto split = [&](const torch::Tensor& t) { return t.view({B, T, H, dh}).permute({0, 2, 1, 3}); };
    const torch::Tensor qh = split(q), kh = split(k), vh = split(v);

    torch::Tensor scores = activationProduct(qh, kh.transpose(-1, -2), std::sqrt(double(dh)));
    capture.put(CapturePoint::AttnScores, scores);
    scores = capture.quant(QuantSite::AttnScores, scores);
    if (additiveMask.defined()) scores = scores + additiveMask;
    torch::Tensor probs = attentionSoftmax(scores, spec.variant);
    capture.put(CapturePoint::AttnProbs, probs);
    probs = capture.quant(QuantSite::AttnProbs, probs);
    capture.put(CapturePoint::AttnValues, vh);
    probs = probsDropout->forward(probs);

    // [B, H, T, dh], laid out [B, T, H, dh] so that merging the heads below is a view (the gates'
    // product keeps that layout).
    torch::Tensor context = activationProduct(probs, vh, 1.0, true);
    capture.put(CapturePoint::AttnContext, context);
    if (gates.enabled()) {
        const torch::Tensor pi = gates.forward(x); // [B, H, T]
        capture.put(CapturePoint::AttnGate, pi);
        context = context * capture.quant(QuantSite::AttnGate, pi).unsqueeze(-1);
    }
    return capture.quant(QuantSite::AttnContext, context.permute({0, 2, 1, 3}).reshape({B, T, H * dh}));
}

} // namespace outlierlens
