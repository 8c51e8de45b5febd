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
    FfnOut,      ///< [T, d] second FFN linear, before the residual add
    Residual,    ///< [T, d] sum entering the block's last LayerNorm (BERT) / block output (ViT)
    Out,         ///< [T, d] block output
    Logits,      ///< [C] classifier output
};

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

private:
    ActivationSink* m_sink;
    int m_layer;
};

} // namespace outlierlens
