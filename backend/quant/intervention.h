#pragma once
// Interventions on activations (issue #43; Sun et al. 2024, "Massive Activations"): set chosen entries of
// one layer's tensor to 0, to their data-set mean or to a value, and measure what the model loses. Runs on
// the thread that runs the model.

#include "model/capture.h"

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens {

struct Intervention
{
    enum class Value { Zero, Mean, Constant };
    int layer = 0; ///< 0-based
    /// attn_out, ffn_out or out (DESIGN.md's capture names), attn_probs: keys removed from the attention,
    /// or attn_context: the output of the chosen heads (P V, times the gate where there is one) set to 0
    /// at the chosen queries (a head ablated; for a gated model, its gate shut), or attn_gate: the chosen
    /// heads' gate values (gated attention, An et al.'s context scale) set to 0 or to a constant (1: forced
    /// open) at the chosen queries
    std::string tensor = "out";
    std::vector<std::int64_t> dims;   ///< hidden dimensions, 0-based; empty: every dimension
    std::vector<std::int64_t> tokens; ///< token positions (attn_probs: queries), 0-based; empty: every one
    Value value = Value::Zero;
    double constant = 0; ///< Value::Constant
    // attn_probs: the keys whose probability becomes 0 for the chosen queries of the chosen heads.
    std::vector<std::int64_t> keys; ///< key positions, 0-based; at least one
    std::vector<std::int64_t>
        heads;               ///< attn_probs, attn_context, attn_gate: heads, 0-based; empty: every head
    bool renormalize = true; ///< the rest of each row rescaled to sum to 1 (as if masked)

    /// "layer 2 out, dims 17,42, token 0: set to their mean", "layer 1 attention, every head: key 0 removed
    /// from every query, renormalised" (layers and heads 1-based).
    std::string describe() const;
    /// Throws Error for a negative layer, dimension, position or head, an unknown tensor, attn_probs
    /// without keys, or attn_probs or attn_context with a value other than zero or with dimensions.
    void validate() const;
};

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
