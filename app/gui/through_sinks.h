#pragma once
// Worker thread (the inspection worker's forward passes). Private to inspection_worker.cpp: torch inside.

#include "analysis/recording_sink.h"
#include "common/error.h"
#include "quant/intervention.h"

#include <QString>
#include <QVector>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace outlierlens {

/// What an inspection passes the model's QuantSites through: the intervention, when one is set, behind a
/// recorder of the pre-norms' outputs (pre-LN models) and of the intervened site.
class ThroughSinks
{
public:
    /// `lifecycle`: layers whose lifecycle sites (lifecycleSites()) are recorded too.
    ThroughSinks(const std::optional<Intervention>& intervention, bool postLayerNormBert, bool preNorm,
                 const QVector<int>& lifecycle = {})
        : m_preNorm(preNorm)
    {
        std::set<QuantSite> sites;
        if (preNorm) sites.insert(QuantSite::AttnNorm);
        if (intervention) {
            m_site = interventionSite(intervention->tensor, postLayerNormBert);
            m_intervention.emplace(*intervention, m_site);
            m_description = *intervention;
            sites.insert(m_site);
        }
        m_recorder.emplace(sites, m_intervention ? &*m_intervention : nullptr);
        const std::set<int> layers(lifecycle.begin(), lifecycle.end());
        for (QuantSite site : lifecycleSites())
            if (!layers.empty() && !sites.count(site)) m_recorder->recordOnly(site, layers);
    }
    /// What An et al.'s Figures 7-9 read beyond the captures.
    static const std::vector<QuantSite>& lifecycleSites()
    {
        static const std::vector<QuantSite> sites{
            QuantSite::AttnResidual, QuantSite::FfnNorm, QuantSite::FfnGate, QuantSite::FfnUp,
            QuantSite::FfnAct,       QuantSite::Query,   QuantSite::Key};
        return sites;
    }
    ActivationSink* through() { return &*m_recorder; }
    const SiteRecorder* norms() const { return m_preNorm ? &*m_recorder : nullptr; }
    const SiteRecorder& recorder() const { return *m_recorder; }
    /// After the forward pass: an Error when the intervention never reached its site; else the capture of
    /// the intervened tensor (taken before its site's edit, as quantizers see it) becomes the edited one,
    /// so that the pages show the intervened values where they were set.
    void showIntervened(RecordingSink& recording) const
    {
        if (!m_intervention) return;
        const Intervention& i = *m_description;
        if (m_intervention->applied() == 0)
            throw Error("intervention: " + i.describe() + ": the model has no such activation" +
                        (i.tensor == "attn_gate" ? " (no gates)" : ""));
        static const std::map<std::string, CapturePoint> kCaptureOf = {
            {"attn_out", CapturePoint::AttnOut},
            {"ffn_out", CapturePoint::FfnOut},
            {"out", CapturePoint::Out},
            {"attn_probs", CapturePoint::AttnProbs},
            {"attn_gate", CapturePoint::AttnGate}};
        const auto point = kCaptureOf.find(i.tensor);
        const torch::Tensor edited = m_recorder->at(m_site, i.layer);
        if (point != kCaptureOf.end() && edited.defined() &&
            recording.contains(captureName(point->second, i.layer)))
            recording.put(point->second, i.layer, edited);
    }
    /// The snapshot's description of the intervention ("" for none).
    static QString describe(const std::optional<Intervention>& intervention)
    {
        return intervention ? QString::fromStdString(intervention->describe()) : QString();
    }

private:
    bool m_preNorm;
    QuantSite m_site = QuantSite::Logits;
    std::optional<Intervention> m_description;
    std::optional<InterventionSink> m_intervention;
    std::optional<SiteRecorder> m_recorder;
};

} // namespace outlierlens
