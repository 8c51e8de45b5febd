#include "analysis/dataset_statistics.h"
#include "analysis/element_access.h"
#include "analysis/high_norm.h"
#include "analysis/metrics.h"
#include "analysis/statistics_detail.h"

#include "common/error.h"
#include "common/text_format.h"
#include "io/hdf5_store.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace outlierlens {
namespace {

using namespace statistics_detail;
using elements::forRow;
using elements::withElements;

void checkShape(const torch::Tensor& t, const std::string& name, const std::vector<std::int64_t>& expected)
{
    if (t.sizes() != c10::IntArrayRef(expected))
        throw Error(name + ": expected shape " + shapeText(expected) + ", found " +
                    shapeText(t.sizes().vec()));
}

template<typename T>
void addInto(std::vector<T>& into, const std::vector<T>& from)
{
    for (std::size_t i = 0; i < from.size() && i < into.size(); ++i)
        into[i] += from[i];
}

} // namespace

namespace statistics_detail {

/// The tensor behind the model's "max inf norm" and the ones averaged into "avg kurtosis".
CapturePoint infNormPoint(const StatisticsOptions& o)
{
    return figureTensor(o.kind, o.decoder);
}

std::vector<CapturePoint> kurtosisPoints(const StatisticsOptions& o)
{
    return kurtosisTensors(o.kind, o.decoder);
}

std::size_t tensorSlot(CapturePoint point)
{
    const auto& points = statisticsTensorPoints();
    return std::size_t(std::find(points.begin(), points.end(), point) - points.begin());
}

std::string previousOutputName(int layer)
{
    return layer == 0 ? captureName(CapturePoint::Embeddings) : captureName(CapturePoint::Out, layer - 1);
}

} // namespace statistics_detail

const std::vector<CapturePoint>& statisticsTensorPoints()
{
    static const std::vector<CapturePoint> points = {CapturePoint::AttnOut, CapturePoint::FfnOut,
                                                     CapturePoint::Residual, CapturePoint::Out};
    return points;
}

std::set<std::string> requiredCaptures(const StatisticsOptions& options)
{
    std::set<std::string> names;
    for (int layer : options.layers) {
        for (CapturePoint point : statisticsTensorPoints())
            names.insert(captureName(point, layer));
        names.insert(captureName(CapturePoint::AttnProbs, layer));
        names.insert(captureName(CapturePoint::AttnValues, layer));
        names.insert(captureName(CapturePoint::AttnGate, layer));
        names.insert(previousOutputName(layer));
    }
    return names;
}

// ---------------------------------------------------------------------------------------------
DatasetStatistics::DatasetStatistics(StatisticsOptions options)
    : m_options(std::move(options))
{
    const StatisticsOptions& o = m_options;
    if (o.numLayers <= 0 || o.numHeads <= 0 || o.hiddenSize <= 0 || o.headDim <= 0)
        throw Error("statistics options: layers, heads, hidden size and head size must be positive, found " +
                    std::to_string(o.numLayers) + ", " + std::to_string(o.numHeads) + ", " +
                    std::to_string(o.hiddenSize) + ", " + std::to_string(o.headDim));
    if (o.layers.empty()) throw Error("statistics options: no layers selected");
    for (int layer : o.layers)
        if (layer < 0 || layer >= o.numLayers)
            throw Error("statistics options: layer " + std::to_string(layer) + " (0-based) is outside 0.." +
                        std::to_string(o.numLayers - 1));
    if (o.kind == InputKind::Image && (o.gridRows <= 0 || o.gridCols <= 0))
        throw Error("statistics options: an image model needs a patch grid, found " +
                    std::to_string(o.gridRows) + " x " + std::to_string(o.gridCols));
    if (o.registers < 0 || (o.registers > 0 && o.kind != InputKind::Image))
        throw Error("statistics options: " + std::to_string(o.registers) +
                    " register tokens (only image models have them, never fewer than 0)");
    if (!(o.criterion.k > 0) || !(o.criterion.tau > 0) || !(o.criterion.attentionFraction >= 0))
        throw Error("statistics options: k and tau must be positive and the attention fraction non-negative");

    std::sort(m_options.layers.begin(), m_options.layers.end());
    m_options.layers.erase(std::unique(m_options.layers.begin(), m_options.layers.end()),
                           m_options.layers.end());
    std::vector<std::string> delimiters;
    for (const auto& d : m_options.delimiters)
        if (std::find(delimiters.begin(), delimiters.end(), d) == delimiters.end()) delimiters.push_back(d);
    m_options.delimiters = delimiters;

    const std::size_t heads = std::size_t(o.numHeads);
    for (int layer : m_options.layers) {
        LayerAccumulator acc;
        acc.layer = layer;
        acc.tensors.resize(statisticsTensorPoints().size());
        for (auto& t : acc.tensors)
            t.outliersPerDim.assign(std::size_t(o.hiddenSize), 0);
        acc.heads.attentionOutliers.assign(heads, 0);
        acc.heads.absValueOutlierKeys.assign(heads, 0.0);
        acc.heads.absValueOtherKeys.assign(heads, 0.0);
        acc.heads.gateSum.assign(heads, 0.0);
        m_layers.push_back(std::move(acc));
    }
    growKeys();
}

std::size_t DatasetStatistics::keyCount() const
{
    if (m_options.kind == InputKind::Image)
        return std::size_t(1 + m_options.registers + m_options.gridRows * m_options.gridCols);
    return m_keyNames.size();
}

std::size_t DatasetStatistics::distinctKeys() const
{
    return keyCount();
}

std::int64_t DatasetStatistics::keyOccurrences(std::size_t key) const
{
    return m_options.kind == InputKind::Image ? m_samples : valueAt(m_keyOccurrences, key);
}

std::int64_t DatasetStatistics::keyOf(const std::string& token)
{
    const auto it = m_keyIndex.find(token);
    if (it != m_keyIndex.end()) return it->second;
    const auto id = std::int64_t(m_keyNames.size());
    m_keyIndex.emplace(token, id);
    m_keyNames.push_back(token);
    m_keyOccurrences.push_back(0);
    return id;
}

void DatasetStatistics::growKeys()
{
    const std::size_t keys = keyCount();
    const std::size_t heads = std::size_t(m_options.numHeads);
    for (auto& layer : m_layers) {
        for (auto& t : layer.tensors) {
            t.keyOutliers.resize(keys, 0);
            t.keyOutlierTokens.resize(keys, 0);
        }
        layer.heads.cumulativeAttention.resize(keys * heads, 0.0);
        layer.heads.attentionOutliersByKey.resize(keys * heads, 0);
        if (m_options.kind == InputKind::Image) {
            layer.norms.sumNorm.resize(keys, 0.0);
            layer.norms.highNorm.resize(keys, 0);
            layer.norms.histogram.resize(std::size_t(kNormBins), 0);
            layer.norms.histogramHigh.resize(std::size_t(kNormBins), 0);
        }
    }
}

struct DatasetStatistics::LayerInputs
{
    std::vector<torch::Tensor> tensors; ///< statisticsTensorPoints() order
    torch::Tensor probs, values, gate, previous;
};

DatasetStatistics::LayerInputs
DatasetStatistics::layerInputs(const std::map<std::string, torch::Tensor>& captures, int layer,
                               std::int64_t T) const
{
    const StatisticsOptions& o = m_options;
    const std::int64_t heads = o.numHeads, d = o.hiddenSize;
    auto fetch = [&](const std::string& name) -> const torch::Tensor& {
        const auto it = captures.find(name);
        if (it == captures.end() || !it->second.defined())
            throw Error("statistics: capture '" + name + "' is missing (sample " + std::to_string(m_samples) +
                        " of this accumulator)");
        return it->second;
    };
    LayerInputs in;
    for (CapturePoint point : statisticsTensorPoints()) {
        const std::string name = captureName(point, layer);
        in.tensors.push_back(fetch(name));
        checkShape(in.tensors.back(), name, {T, d});
    }
    const std::string previous = previousOutputName(layer);
    in.previous = fetch(previous);
    checkShape(in.previous, previous, {T, d});
    const std::string probs = captureName(CapturePoint::AttnProbs, layer);
    in.probs = fetch(probs);
    checkShape(in.probs, probs, {heads, T, T});
    const std::string values = captureName(CapturePoint::AttnValues, layer);
    in.values = fetch(values);
    checkShape(in.values, values, {heads, T, o.headDim});
    const std::string gate = captureName(CapturePoint::AttnGate, layer);
    const auto gateIt = captures.find(gate);
    if (gateIt != captures.end() && gateIt->second.defined()) {
        in.gate = gateIt->second;
        checkShape(in.gate, gate, {heads, T});
    }
    return in;
}

void DatasetStatistics::checkTokens(std::int64_t T, const std::vector<std::string>& tokens,
                                    const std::string& what) const
{
    const StatisticsOptions& o = m_options;
    if (T < 1) throw Error(what + ": a sample needs at least one token");
    if (o.kind == InputKind::Text && std::int64_t(tokens.size()) != T)
        throw Error("statistics: " + std::to_string(tokens.size()) + " token strings for " + what +
                    " with T = " + std::to_string(T));
    if (o.kind == InputKind::Image && T != std::int64_t(keyCount()))
        throw Error(what + ": expected 1 + " +
                    (o.registers ? std::to_string(o.registers) + " registers + " : std::string()) +
                    std::to_string(o.gridRows) + " x " + std::to_string(o.gridCols) + " = " +
                    std::to_string(keyCount()) + " tokens, found " + std::to_string(T));
}

DatasetStatistics::SampleKeys DatasetStatistics::internKeys(std::int64_t T,
                                                            const std::vector<std::string>& tokens)
{
    // Keys of the T tokens: interned token strings (text) or positions (image, 0 = CLS).
    SampleKeys sample;
    sample.keys.resize(std::size_t(T));
    for (std::int64_t t = 0; t < T; ++t) {
        if (m_options.kind == InputKind::Text) {
            const std::int64_t id = keyOf(tokens[std::size_t(t)]);
            ++m_keyOccurrences[std::size_t(id)];
            sample.keys[std::size_t(t)] = std::size_t(id);
        } else {
            sample.keys[std::size_t(t)] = std::size_t(t);
        }
    }
    growKeys();
    return sample;
}

void DatasetStatistics::addSample(const std::map<std::string, torch::Tensor>& captures,
                                  const std::vector<std::string>& tokens)
{
    const StatisticsOptions& o = m_options;
    const std::int64_t d = o.hiddenSize;
    // Find and check everything before touching an accumulator, so an error leaves them unchanged.
    const std::string firstName = captureName(CapturePoint::Out, o.layers.front());
    const auto firstIt = captures.find(firstName);
    if (firstIt == captures.end() || !firstIt->second.defined())
        throw Error("statistics: capture '" + firstName + "' is missing (sample " +
                    std::to_string(m_samples) + " of this accumulator)");
    const torch::Tensor& first = firstIt->second;
    if (first.dim() != 2 || first.size(0) < 1)
        throw Error(firstName + ": expected shape [T, " + std::to_string(d) + "] with T >= 1, found " +
                    shapeText(first.sizes().vec()));
    const std::int64_t T = first.size(0);
    checkTokens(T, tokens, firstName);
    std::vector<LayerInputs> inputs;
    for (const auto& layer : m_layers)
        inputs.push_back(layerInputs(captures, layer.layer, T));

    const SampleKeys sample = internKeys(T, tokens);
    // Layers are independent from here on (the keys are interned): one per intra-op thread.
    at::parallel_for(0, std::int64_t(m_layers.size()), 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t li = begin; li < end; ++li)
            accumulateLayer(o, m_layers[std::size_t(li)], inputs[std::size_t(li)], sample.keys);
    });
    ++m_samples;
}

DatasetStatistics::SampleKeys DatasetStatistics::beginSample(std::int64_t T,
                                                             const std::vector<std::string>& tokens)
{
    checkTokens(T, tokens, "statistics: sample " + std::to_string(m_samples));
    return internKeys(T, tokens);
}

void DatasetStatistics::addSampleLayer(const SampleKeys& sample, int layer,
                                       const std::map<std::string, torch::Tensor>& captures)
{
    const auto it = std::find_if(m_layers.begin(), m_layers.end(),
                                 [&](const LayerAccumulator& acc) { return acc.layer == layer; });
    if (it == m_layers.end())
        throw Error("statistics: layer " + std::to_string(layer) +
                    " (0-based) is not one of the selected layers");
    accumulateLayer(m_options, *it, layerInputs(captures, layer, std::int64_t(sample.keys.size())),
                    sample.keys);
}

void DatasetStatistics::accumulateLayer(const StatisticsOptions& o, LayerAccumulator& layer,
                                        const LayerInputs& in, const std::vector<std::size_t>& keys)
{
    const auto T = std::int64_t(keys.size());
    const std::int64_t d = o.hiddenSize;
    const auto H = std::size_t(o.numHeads);

    for (std::size_t ti = 0; ti < in.tensors.size(); ++ti) {
        TensorAccumulator& acc = layer.tensors[ti];
        const SampleSummary x = summariseSample(in.tensors[ti], o.criterion, false);
        addInto(acc.outliersPerDim, x.perDim);
        for (std::size_t t = 0; t < x.perToken.size(); ++t) {
            acc.outliers += x.perToken[t];
            acc.keyOutliers[keys[t]] += x.perToken[t];
            if (x.perToken[t] > 0) ++acc.keyOutlierTokens[keys[t]];
        }
        acc.valuesExamined += T * d;
        acc.sumMaxInfNorm += x.maxInfNorm;
        acc.sumKurtosis += x.kurtosis;
    }

    // Images: the norm of every token of the block output and the high-norm tokens (Darcet et al.).
    if (o.kind == InputKind::Image) {
        const auto outIndex = std::size_t(
            std::find(statisticsTensorPoints().begin(), statisticsTensorPoints().end(), CapturePoint::Out) -
            statisticsTensorPoints().begin());
        const torch::Tensor out = in.tensors[outIndex].to(torch::kFloat).contiguous();
        const std::vector<double> norms = tokenNorms(out.data_ptr<float>(), T, d);
        const std::vector<bool> high = highNormTokens(norms, 1 + o.registers);
        NormAccumulator& n = layer.norms;
        for (std::size_t t = 0; t < norms.size(); ++t) {
            n.sumNorm[keys[t]] += norms[t];
            n.highNorm[keys[t]] += high[t];
            ++n.histogram[std::size_t(normBin(norms[t]))];
            if (high[t]) ++n.histogramHigh[std::size_t(normBin(norms[t]))];
        }
    }

    // Cumulative attention of each key: the sum over queries of probs [H, T(query), T(key)].
    HeadAccumulator& h = layer.heads;
    std::vector<double> cumulative(H * std::size_t(T), 0.0); // [H, T]
    withElements(in.probs, [&](const auto* p, c10::IntArrayRef s) {
        for (std::size_t head = 0; head < H; ++head)
            for (std::int64_t i = 0; i < T; ++i)
                forRow(p + std::int64_t(head) * s[0] + i * s[1], T, s[2], [&](std::int64_t j, double v) {
                    cumulative[head * std::size_t(T) + std::size_t(j)] += v;
                });
    });
    const double attentionThreshold = o.criterion.attentionFraction * double(T); // attentionOutlierKeys()
    for (std::size_t head = 0; head < H; ++head) {
        for (std::size_t t = 0; t < keys.size(); ++t) {
            const std::size_t at = head * keys.size() + t;
            h.cumulativeAttention[keys[t] * H + head] += cumulative[at];
            if (cumulative[at] >= attentionThreshold) {
                ++h.attentionOutliersByKey[keys[t] * H + head];
                ++h.attentionOutliers[head];
            }
        }
    }
    h.keysExamined += T;

    // Figure 3e: mean |v| of keys with / without an outlier in the previous layer's output.
    const SampleSummary previous = summariseSample(in.previous, o.criterion, false);
    std::int64_t outlierKeys = 0;
    for (std::int64_t c : previous.perToken)
        outlierKeys += c > 0;
    const std::int64_t dh = in.values.size(2);
    withElements(in.values, [&](const auto* p, c10::IntArrayRef s) {
        for (std::size_t head = 0; head < H; ++head) {
            double withOutlier = 0, other = 0;
            for (std::int64_t t = 0; t < T; ++t) {
                double sumAbs = 0;
                forRow(p + std::int64_t(head) * s[0] + t * s[1], dh, s[2],
                       [&](std::int64_t, double v) { sumAbs += std::abs(v); });
                (previous.perToken[std::size_t(t)] > 0 ? withOutlier : other) += sumAbs / double(dh);
            }
            h.absValueOutlierKeys[head] += withOutlier;
            h.absValueOtherKeys[head] += other;
        }
    });
    h.outlierKeys += outlierKeys;
    h.otherKeys += T - outlierKeys;

    if (in.gate.defined()) {
        withElements(in.gate, [&](const auto* p, c10::IntArrayRef s) {
            for (std::size_t head = 0; head < H; ++head) {
                double sum = 0;
                forRow(p + std::int64_t(head) * s[0], T, s[1], [&](std::int64_t, double v) { sum += v; });
                h.gateSum[head] += sum;
            }
        });
        h.gateTokens += T;
    }
}

void DatasetStatistics::merge(const DatasetStatistics& other)
{
    if (&other == this) {
        const DatasetStatistics copy = other;
        merge(copy);
        return;
    }
    const StatisticsOptions& a = m_options;
    const StatisticsOptions& b = other.m_options;
    if (a.kind != b.kind || a.layers != b.layers || a.numLayers != b.numLayers || a.numHeads != b.numHeads ||
        a.hiddenSize != b.hiddenSize || a.headDim != b.headDim || a.gridRows != b.gridRows ||
        a.gridCols != b.gridCols || a.registers != b.registers || a.criterion != b.criterion ||
        a.delimiters != b.delimiters)
        throw Error("statistics merge: the two accumulators were built with different options");

    // Map the other's keys onto ours.
    std::vector<std::size_t> keyMap(other.keyCount());
    for (std::size_t i = 0; i < keyMap.size(); ++i) {
        if (a.kind == InputKind::Image) {
            keyMap[i] = i;
        } else {
            const std::int64_t id = keyOf(other.m_keyNames[i]);
            m_keyOccurrences[std::size_t(id)] += other.m_keyOccurrences[i];
            keyMap[i] = std::size_t(id);
        }
    }
    growKeys();

    const auto H = std::size_t(a.numHeads);
    for (std::size_t li = 0; li < m_layers.size(); ++li) {
        LayerAccumulator& mine = m_layers[li];
        const LayerAccumulator& theirs = other.m_layers[li];
        for (std::size_t ti = 0; ti < mine.tensors.size(); ++ti) {
            TensorAccumulator& x = mine.tensors[ti];
            const TensorAccumulator& y = theirs.tensors[ti];
            addInto(x.outliersPerDim, y.outliersPerDim);
            x.valuesExamined += y.valuesExamined;
            x.outliers += y.outliers;
            x.sumMaxInfNorm += y.sumMaxInfNorm;
            x.sumKurtosis += y.sumKurtosis;
            for (std::size_t k = 0; k < keyMap.size(); ++k) {
                x.keyOutliers[keyMap[k]] += valueAt(y.keyOutliers, k);
                x.keyOutlierTokens[keyMap[k]] += valueAt(y.keyOutlierTokens, k);
            }
        }
        HeadAccumulator& x = mine.heads;
        const HeadAccumulator& y = theirs.heads;
        for (std::size_t k = 0; k < keyMap.size(); ++k) {
            for (std::size_t head = 0; head < H; ++head) {
                x.cumulativeAttention[keyMap[k] * H + head] += valueAt(y.cumulativeAttention, k * H + head);
                x.attentionOutliersByKey[keyMap[k] * H + head] +=
                    valueAt(y.attentionOutliersByKey, k * H + head);
            }
        }
        addInto(x.attentionOutliers, y.attentionOutliers);
        x.keysExamined += y.keysExamined;
        addInto(x.absValueOutlierKeys, y.absValueOutlierKeys);
        addInto(x.absValueOtherKeys, y.absValueOtherKeys);
        x.outlierKeys += y.outlierKeys;
        x.otherKeys += y.otherKeys;
        addInto(x.gateSum, y.gateSum);
        x.gateTokens += y.gateTokens;
        addInto(mine.norms.sumNorm, theirs.norms.sumNorm); // image keys map to themselves
        addInto(mine.norms.highNorm, theirs.norms.highNorm);
        addInto(mine.norms.histogram, theirs.norms.histogram);
        addInto(mine.norms.histogramHigh, theirs.norms.histogramHigh);
    }
    m_samples += other.m_samples;
}

} // namespace outlierlens
