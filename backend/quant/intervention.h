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
    int layer = 0;                    ///< 0-based
    std::string tensor = "out";       ///< attn_out, ffn_out or out (DESIGN.md's capture names)
    std::vector<std::int64_t> dims;   ///< hidden dimensions, 0-based; empty: every dimension
    std::vector<std::int64_t> tokens; ///< token positions, 0-based; empty: every position
    Value value = Value::Zero;
    double constant = 0; ///< Value::Constant

    /// "layer 2 out, dims 17,42, token 0: set to their mean" (layers 1-based).
    std::string describe() const;
    /// Throws Error for a negative layer, dimension or position, or an unknown tensor.
    void validate() const;
};

/// The quantization site that carries `tensor` of a layer (attn_out: AttnOut, ffn_out: FfnOut, out: the
/// block output, FfnNorm in a post-LN BERT block, FfnResidual in ViT and decoder blocks).
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
    Intervention m_intervention;
    QuantSite m_site;
    ActivationSink* m_inner;
    bool m_collecting = false;
    torch::Tensor m_sum; ///< [dims] float64
    std::int64_t m_count = 0;
};

} // namespace outlierlens
