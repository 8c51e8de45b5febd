#pragma once
// The activation sink is called on the thread that runs the forward pass.

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace at {
class Tensor;
}

namespace outlierlens {

/// The capture points of DESIGN.md. Per-sample shapes; a batch adds a leading B.
enum class CapturePoint {
    Embeddings,  ///< [T, d]
    AttnScores,  ///< [H, T, T] QK^T/sqrt(d_head), before the mask
    AttnProbs,   ///< [H, T, T] after (clipped) softmax, before dropout
    AttnValues,  ///< [H, T, d_head]
    AttnContext, ///< [H, T, d_head] P.V before the gate
    AttnGate,    ///< [H, T] gate probabilities (gated models only)
    AttnOut,     ///< [T, d] attention output projection, before the residual add
    DownIn,      ///< [T, d_ff] input of the FFN's second linear (after the activation; LLaMA: act(gate) * up)
    FfnOut,      ///< [T, d] second FFN linear, before the residual add
    Residual,    ///< [T, d] sum entering the block's last LayerNorm (BERT) / block output (ViT)
    Out,         ///< [T, d] block output
    Logits,      ///< [C] classifier output
};

/// Where simulated quantization can act on activations (docs/quantization.md has the placement).
/// BERT (post-LN): EmbeddingSum -> EmbeddingNorm; per layer Query, Key, Value, AttnScores (before the
/// mask), AttnProbs, AttnContext (after gating and head merge), AttnOut, AttnResidual (sum before the
/// first LayerNorm), AttnNorm, FfnIntermediate (after GELU), FfnOut, FfnResidual (sum before the second
/// LayerNorm), FfnNorm (block output); Pooler, Logits.
/// ViT (pre-LN): EmbeddingSum (patches + CLS + positions); per layer AttnNorm (norm1), Query ... AttnOut,
/// AttnResidual (x + attention), FfnNorm (norm2), FfnIntermediate, FfnOut, FfnResidual (block output);
/// FinalNorm, Logits.
enum class QuantSite {
    EmbeddingSum,
    EmbeddingNorm,
    Query,
    Key,
    Value,
    AttnScores,
    AttnProbs,
    AttnContext,
    AttnGate, ///< the gates' (or An et al.'s context scale's) values [B, H, T]; never quantized
    AttnOut,
    AttnResidual,
    AttnNorm,
    FfnIntermediate,
    FfnOut,
    FfnResidual,
    FfnNorm,
    FinalNorm,
    Pooler,
    Logits,
    /// Decoder FFNs, for recording only (An et al.'s Figures 7 and 9; never quantized): the gate projection
    /// before its activation (gated FFNs), the up projection (the first linear, before its activation, where
    /// the FFN has no gate) and the activation of the gate. Models pass them only to a sink that transforms
    /// activations, so the usual forward keeps its fused activation.
    FfnGate,
    FfnUp,
    FfnAct,
};
/// Short name, e.g. "attn_scores"; per-layer sites are reported as "layer3/attn_scores".
std::string quantSiteName(QuantSite site);

/// All per-layer points in DESIGN.md order.
const std::vector<CapturePoint>& perLayerCapturePoints();
bool isPerLayer(CapturePoint point);
/// Short name without the layer, e.g. "attn_probs".
std::string pointName(CapturePoint point);
/// Full capture name with a 0-based layer: "layer3/attn_probs"; "embeddings" and "logits" ignore layer.
std::string captureName(CapturePoint point, int layer = -1);
/// Inverse of captureName; nullopt for anything else.
std::optional<std::pair<CapturePoint, int>> parseCaptureName(const std::string& name);

/// Receives activations during a forward pass. The model asks wants() before it computes or
/// copies anything for a point, so an unwanted tensor costs nothing. put() gets the batched tensor
/// ([B, ...]); it must not modify it (the model may keep using it) but may keep a reference.
class ActivationSink
{
public:
    virtual ~ActivationSink() = default;
    virtual bool wants(CapturePoint point, int layer) const = 0;
    virtual void put(CapturePoint point, int layer, const at::Tensor& batched) = 0;
    /// Sinks that simulate quantization return true and implement transform(); the model then passes
    /// each activation of a QuantSite (layer -1 outside the blocks) through transform() and continues
    /// with what it returns. Other sinks cost one virtual call per site.
    virtual bool transformsActivations() const { return false; }
    virtual at::Tensor transform(QuantSite site, int layer, const at::Tensor& batched);
};

/// Convenience used inside models: a sink pointer plus the current layer.
class CaptureScope
{
public:
    CaptureScope(ActivationSink* sink, int layer)
        : m_sink(sink)
        , m_layer(layer)
    {}
    bool wants(CapturePoint point) const { return m_sink && m_sink->wants(point, m_layer); }
    void put(CapturePoint point, const at::Tensor& batched) const
    {
        if (m_sink && m_sink->wants(point, m_layer)) m_sink->put(point, m_layer, batched);
    }
    int layer() const { return m_layer; }
    /// A sink sees the QuantSites (quantization, interventions, recorders): quant() may replace tensors.
    bool transforms() const { return m_sink && m_sink->transformsActivations(); }
    /// `batched` itself, or what a quantizing sink makes of it (ActivationSink::transform).
    at::Tensor quant(QuantSite site, const at::Tensor& batched) const;

private:
    ActivationSink* m_sink;
    int m_layer;
};

} // namespace outlierlens
