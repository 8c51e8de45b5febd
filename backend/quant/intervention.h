#pragma once
// Interventions on activations (issue #43; Sun et al. 2024, "Massive Activations"): set chosen entries of
// one layer's tensor to 0, to their data-set mean or to a value, and measure what the model loses. Runs on
// the thread that runs the model.

#include "model/capture.h"
#include "quant/intervention_spec.h"

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens {

/// The quantization site that carries `tensor` of a layer (attn_out: AttnOut, ffn_out: FfnOut, out: the
/// block output, FfnNorm in a post-LN BERT block, FfnResidual in ViT and decoder blocks; attn_probs:
/// AttnProbs, after the softmax and before the product with V; attn_context: AttnContext, the heads'
/// outputs before the output projection).
QuantSite interventionSite(const std::string& tensor, bool postLayerNormBert);

/// An ActivationSink that applies an Intervention at its site. While collecting (setCollecting(true)) it
/// leaves activations unchanged and accumulates, per chosen dimension, the mean over the chosen positions
/// of every sample it sees (Value::Mean's mean; padding positions count like any other). Captures go on
/// to `inner`.
class InterventionSink : public ActivationSink
{
public:
    InterventionSink(Intervention intervention, QuantSite site, ActivationSink* inner = nullptr);

    void setCollecting(bool collecting) { m_collecting = collecting; }
    /// The collected means, [dims] (every dimension when Intervention::dims is empty); undefined before.
    torch::Tensor means() const;
    /// How many batches reached the intervention's site (a model without gates never reaches attn_gate).
    std::int64_t applied() const { return m_applied; }

    bool wants(CapturePoint point, int layer) const override
    {
        return m_inner && m_inner->wants(point, layer);
    }
    void put(CapturePoint point, int layer, const at::Tensor& batched) override
    {
        if (m_inner) m_inner->put(point, layer, batched);
    }
    bool transformsActivations() const override { return true; }
    at::Tensor transform(QuantSite site, int layer, const at::Tensor& batched) override;

private:
    at::Tensor removeKeys(const at::Tensor& probs) const;
    at::Tensor ablateHeads(const at::Tensor& context) const;
    at::Tensor setGates(const at::Tensor& gates) const;

    Intervention m_intervention;
    QuantSite m_site;
    ActivationSink* m_inner;
    bool m_collecting = false;
    torch::Tensor m_sum; ///< [dims] float64
    std::int64_t m_count = 0;
    std::int64_t m_heads = 0; ///< the layer's heads, from its attention (AttnProbs comes before AttnContext)
    std::int64_t m_applied = 0;
};

} // namespace outlierlens
