#pragma once
// Used by the thread that runs the forward pass; read afterwards by the same or another thread
// once the pass is over.

#include "model/capture.h"

#include <torch/types.h>

#include <map>
#include <set>
#include <string>

namespace outlierlens {

/// Keeps the activations of one forward pass by capture name ("layer3/attn_probs"). Tensors are
/// kept by reference: the models never modify a tensor after handing it to the sink.
class RecordingSink : public ActivationSink
{
public:
    /// Records every capture point.
    RecordingSink() = default;
    /// Records only the named capture points (names as captureName() gives them).
    explicit RecordingSink(std::set<std::string> names);

    bool wants(CapturePoint point, int layer) const override;
    void put(CapturePoint point, int layer, const at::Tensor& batched) override;

    /// Passes every activation of a QuantSite through `through`'s transform() (an InterventionSink, a
    /// SiteRecorder) while recording; null: none. The caller keeps `through` alive while it is set.
    void setThrough(ActivationSink* through) { m_through = through; }
    bool transformsActivations() const override { return m_through && m_through->transformsActivations(); }
    at::Tensor transform(QuantSite site, int layer, const at::Tensor& batched) override;

    const std::map<std::string, torch::Tensor>& tensors() const { return m_tensors; }
    bool contains(const std::string& name) const { return m_tensors.count(name) > 0; }
    /// The batched tensor recorded under `name`; throws Error if it was not recorded.
    const torch::Tensor& at(const std::string& name) const;
    void clear() { m_tensors.clear(); }

private:
    bool m_all = true;
    std::set<std::string> m_names;
    std::map<std::string, torch::Tensor> m_tensors;
    ActivationSink* m_through = nullptr;
};

/// Records the activations of chosen QuantSites by layer ([B, ...] as the model passes them), and passes
/// them on unchanged, or through `next`'s transform() when given.
class SiteRecorder : public ActivationSink
{
public:
    explicit SiteRecorder(std::set<QuantSite> sites, ActivationSink* next = nullptr);
    bool wants(CapturePoint, int) const override { return false; }
    void put(CapturePoint, int, const at::Tensor&) override {}
    bool transformsActivations() const override { return true; }
    at::Tensor transform(QuantSite site, int layer, const at::Tensor& batched) override;
    /// The activation of `site` in `layer` as it left this sink; undefined if it never came.
    torch::Tensor at(QuantSite site, int layer) const;
    /// Records `site` (added to the sites) only in `layers` (0-based), not in every layer.
    void recordOnly(QuantSite site, std::set<int> layers);

private:
    std::set<QuantSite> m_sites;
    std::map<QuantSite, std::set<int>> m_layers; ///< sites recorded only in some layers
    ActivationSink* m_next;
    std::map<std::pair<QuantSite, int>, torch::Tensor> m_tensors;
};

/// Sets a RecordingSink's through sink for one scope.
class ThroughScope
{
public:
    ThroughScope(RecordingSink& sink, ActivationSink* through)
        : m_sink(sink)
    {
        m_sink.setThrough(through);
    }
    ~ThroughScope() { m_sink.setThrough(nullptr); }
    ThroughScope(const ThroughScope&) = delete;
    ThroughScope& operator=(const ThroughScope&) = delete;

private:
    RecordingSink& m_sink;
};

/// One sample of a batched capture with padding removed: `length` real tokens of sample `index`.
/// Works for every capture point's shape ([B,H,T,T], [B,H,T,d], [B,H,T], [B,T,d], [B,C], [B,T,V]).
torch::Tensor sampleOf(CapturePoint point, const torch::Tensor& batched, std::int64_t index,
                       std::int64_t length);

} // namespace outlierlens
