#include "tasks/probe_metrics.h"

#include "analysis/metrics.h"
#include "analysis/recording_sink.h"
#include "tasks/training_task.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <set>
#include <string>
#include <vector>

namespace outlierlens {

nlohmann::json probeMetrics(TrainingTask& task)
{
    std::set<std::string> names;
    for (int l = 0; l < task.numLayers(); ++l) {
        for (CapturePoint p : task.trackedPoints())
            names.insert(captureName(p, l));
        names.insert(captureName(CapturePoint::AttnGate, l));
        names.insert(captureName(CapturePoint::AttnProbs, l));
    }
    RecordingSink sink(names);
    const std::vector<std::int64_t> lengths = task.probe(sink);
    nlohmann::json infNorm, kurtosis, gate = nlohmann::json::array();
    for (CapturePoint p : task.trackedPoints()) {
        std::vector<double> norms, kurts;
        for (int l = 0; l < task.numLayers(); ++l) {
            const torch::Tensor& batched = sink.at(captureName(p, l));
            double n = 0, k = 0;
            for (std::size_t b = 0; b < lengths.size(); ++b) {
                const torch::Tensor x = sampleOf(p, batched, std::int64_t(b), lengths[b]);
                n += maxInfNorm(x);
                k += pearsonKurtosis(x);
            }
            norms.push_back(n / double(lengths.size()));
            kurts.push_back(k / double(lengths.size()));
        }
        infNorm[pointName(p)] = norms;
        kurtosis[pointName(p)] = kurts;
    }
    for (int l = 0; l < task.numLayers(); ++l) {
        const std::string name = captureName(CapturePoint::AttnGate, l);
        if (!sink.contains(name)) break;
        const torch::Tensor pi = sink.at(name); // [B, H, T]
        std::vector<double> perHead(std::size_t(pi.size(1)), 0.0);
        std::int64_t tokens = 0;
        for (std::size_t b = 0; b < lengths.size(); ++b) {
            const torch::Tensor one =
                sampleOf(CapturePoint::AttnGate, pi, std::int64_t(b), lengths[b]).to(torch::kDouble);
            const torch::Tensor sums = one.sum(1);
            for (std::size_t h = 0; h < perHead.size(); ++h)
                perHead[h] += sums[std::int64_t(h)].item<double>();
            tokens += lengths[b];
        }
        for (double& v : perHead)
            v /= double(tokens);
        gate.push_back(perHead);
    }
    // Per layer and head, the first-token attention (docs/metrics.md) averaged over the probe samples:
    // how much a head sinks on the first token ([CLS] for encoders, BOS for decoders) as training goes.
    nlohmann::json firstToken = nlohmann::json::array();
    for (int l = 0; l < task.numLayers(); ++l) {
        const std::string name = captureName(CapturePoint::AttnProbs, l);
        if (!sink.contains(name)) break;
        const torch::Tensor& probs = sink.at(name); // [B, H, T, T]
        torch::Tensor sum = torch::zeros({probs.size(1)}, torch::kDouble);
        for (std::size_t b = 0; b < lengths.size(); ++b)
            sum += firstTokenAttention(sampleOf(CapturePoint::AttnProbs, probs, std::int64_t(b), lengths[b]));
        sum /= double(lengths.size());
        firstToken.push_back(
            std::vector<double>(sum.data_ptr<double>(), sum.data_ptr<double>() + sum.numel()));
    }
    nlohmann::json out = {{"max_inf_norm", infNorm}, {"kurtosis", kurtosis}};
    if (!firstToken.empty()) out["first_token_attention"] = firstToken;
    if (!gate.empty()) out["gate"] = gate;
    return out;
}

} // namespace outlierlens
