#include "systematic_snapshot.h"

#include "analysis/recording_sink.h"
#include "analysis/systematic_statistics.h"
#include "analysis/weight_outliers.h"
#include "model/capture.h"

#include <torch/torch.h>

#include <algorithm>

namespace outlierlens {

struct SystematicWeights
{
    struct Layer
    {
        torch::Tensor weight; ///< W_down as the network stores it (shares its storage)
        bool conv1d = false;  ///< GPT-2's Conv1D layout [I, O]
        WeightMatrixStats stats;
    };
    std::vector<Layer> layers; ///< by layer; an undefined weight where none was found
};

void SystematicWeightsDeleter::operator()(SystematicWeights* p) const
{
    delete p;
}

namespace {

/// Each layer's down projection among the network's parameters, with An et al.'s column ratios.
SystematicWeightsPtr findDownProjections(torch::nn::Module& network, bool conv1d, int layers)
{
    SystematicWeightsPtr w(new SystematicWeights);
    w->layers.resize(std::size_t(layers));
    torch::NoGradGuard noGrad;
    for (const auto& item : network.named_parameters(true)) {
        const std::string& name = item.key();
        if (name.size() < 7 || name.compare(name.size() - 7, 7, ".weight") != 0) continue;
        const auto [layer, module] = weightLayerAndModule(name);
        if (layer < 0 || layer >= layers || !isDownProjection(module) || item.value().dim() != 2) continue;
        SystematicWeights::Layer& l = w->layers[std::size_t(layer)];
        l.weight = item.value().detach();
        l.conv1d = conv1d;
        l.stats = analyzeWeightMatrix(l.weight, WeightOutlierOptions{}, conv1d);
    }
    return w;
}

QVector<float> floats(const torch::Tensor& t)
{
    const torch::Tensor c = t.to(torch::kFloat).contiguous();
    return QVector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

QVector<int> indicesOf(const std::vector<bool>& flags)
{
    QVector<int> out;
    for (std::size_t i = 0; i < flags.size(); ++i)
        if (flags[i]) out << int(i);
    return out;
}

} // namespace

std::set<std::string> systematicCaptureNames(int layers)
{
    std::set<std::string> names;
    for (int l = 0; l < layers; ++l)
        names.insert(captureName(CapturePoint::DownIn, l));
    return names;
}

void fillSystematic(InspectionSnapshot& s, const RecordingSink& sink, torch::nn::Module& network, bool conv1d,
                    const std::vector<TokenCategory>& categories, SystematicWeightsPtr& weights)
{
    // The sink tokens: the same categories, with the ViT's background patches when it has an image.
    std::vector<bool> background;
    if (!s.image.isNull() && s.model.gridSize > 0)
        background = backgroundPatchTokens(s.image.constBits(), s.image.width(), s.image.height(),
                                           int(s.image.bytesPerLine()), s.image.width() / s.model.gridSize,
                                           s.model.registers);
    s.sinkToken.clear();
    for (bool sink : sinkTokens(categories, background))
        s.sinkToken << sink;
    const int L = s.model.layers;
    SystematicOptions options;
    for (int l = 0; l < L; ++l)
        options.layers.push_back(l);
    options.numHeads = s.model.heads;
    options.tau = s.outlierRule.tau; // as `stats`: the tau rule's tau, 1000 by default
    options.attentionFraction = s.outlierRule.attentionFraction;
    SystematicStatistics stats(options);
    for (int l = 0; l < L; ++l)
        stats.addSampleLayer(l, sink.at(captureName(CapturePoint::Out, l))[0],
                             sink.at(captureName(CapturePoint::DownIn, l))[0],
                             sink.at(captureName(CapturePoint::AttnProbs, l))[0], categories);
    stats.endSample();

    if (!weights) weights = findDownProjections(network, conv1d, L);
    SystematicSnapshot& out = s.systematic;
    out = {};
    out.stats = stats.data();
    for (const SystematicStatistics::SampleLayer& last : stats.lastSample()) {
        out.heavyTokens << indicesOf(last.heavyOut);
        out.heavyDownTokens << indicesOf(last.heavyDown);
        out.outlierKeys << indicesOf(last.outlierKey);
    }
    out.hidden = s.model.hidden;
    const bool haveWeights =
        std::all_of(weights->layers.begin(), weights->layers.end(),
                    [](const SystematicWeights::Layer& l) { return l.weight.defined(); });
    torch::NoGradGuard noGrad;
    for (int l = 0; l < L; ++l) {
        const torch::Tensor x =
            sink.at(captureName(CapturePoint::DownIn, l))[0].abs().to(torch::kFloat); // [T, F]
        const int K = int(std::min<std::int64_t>(kSystematicChannels, x.size(1)));
        out.channels = K;
        const torch::Tensor channels = std::get<1>(x.amax(0).topk(K)); // largest first
        for (std::int64_t k = 0; k < K; ++k)
            out.downChannels << int(channels[k].item<std::int64_t>());
        out.downValues += floats(x.index_select(1, channels));
        if (!haveWeights) continue;
        const SystematicWeights::Layer& w = weights->layers[std::size_t(l)];
        // Column j of W [O, I] (row j when stored [I, O]): the weights that read channel j.
        const torch::Tensor columns =
            w.conv1d ? w.weight.index_select(0, channels) : w.weight.index_select(1, channels).t(); // [K, d]
        out.downWeight += floats(columns.abs());
        for (std::int64_t k = 0; k < K; ++k)
            out.downColumnRatio << w.stats.columnRatio.at(std::size_t(channels[k].item<std::int64_t>()));
        out.weightRatioMax << w.stats.maxColumnRatio();
        out.weightRatioMedian << w.stats.medianColumnRatio();
    }
}

QVector<LifecycleLayer> lifecycleOf(const RecordingSink& sink, const SiteRecorder& sites,
                                    const QVector<int>& layers, int totalLayers, int headDim)
{
    QVector<LifecycleLayer> out;
    const auto sample = [](const torch::Tensor& t) { return t.defined() ? floats(t[0]) : QVector<float>(); };
    for (int l : layers) {
        if (l < 0 || l >= totalLayers) continue;
        LifecycleLayer x;
        x.layer = l;
        x.ffnNormIn = sample(sites.at(QuantSite::AttnResidual, l));
        x.ffnNormOut = sample(sites.at(QuantSite::FfnNorm, l));
        x.gate = sample(sites.at(QuantSite::FfnGate, l));
        x.up = sample(sites.at(QuantSite::FfnUp, l));
        x.act = sample(sites.at(QuantSite::FfnAct, l));
        const torch::Tensor up = sites.at(QuantSite::FfnUp, l);
        x.ffn = up.defined() ? int(up.size(-1)) : 0;
        const std::string down = captureName(CapturePoint::DownIn, l);
        if (sink.contains(down)) x.downIn = floats(sink.at(down)[0]);
        x.query = sample(sites.at(QuantSite::Query, l));
        const torch::Tensor key = sites.at(QuantSite::Key, l);
        x.key = sample(key);
        x.kvHeads = key.defined() && headDim > 0 ? int(key.size(-1) / headDim) : 0;
        const std::string scores = captureName(CapturePoint::AttnScores, l);
        if (sink.contains(scores)) x.scores = floats(sink.at(scores)[0]);
        out << x;
    }
    return out;
}

} // namespace outlierlens
