#include "analysis/dataset_statistics.h"

// DatasetStatistics::write: the HDF5 statistics file (docs/stats-format.md); statistics_file.cpp reads it.

#include "analysis/high_norm.h"
#include "analysis/statistics_detail.h"
#include "common/error.h"
#include "io/hdf5_store.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace outlierlens {
namespace {

using namespace statistics_detail;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double ratio(double numerator, std::int64_t denominator)
{
    return denominator > 0 ? numerator / double(denominator) : kNaN;
}

void writeScalar(Hdf5Writer& writer, const std::string& path, std::int64_t value)
{
    writer.writeInt64(path, &value, {});
}

void writeScalar(Hdf5Writer& writer, const std::string& path, double value)
{
    writer.writeFloat64(path, &value, {});
}

std::string joined(const std::vector<std::string>& parts)
{
    std::string s;
    for (const auto& p : parts)
        s += (s.empty() ? "" : ",") + p;
    return s;
}

} // namespace

void DatasetStatistics::write(Hdf5Writer& writer) const
{
    const StatisticsOptions& o = m_options;
    if (m_samples == 0) throw Error("statistics: no samples were added, nothing to write");

    // Text keys in a deterministic order (most frequent first, ties by string), so that files do
    // not depend on the order in which samples or workers arrived.
    std::vector<std::size_t> order(keyCount());
    std::iota(order.begin(), order.end(), std::size_t(0));
    if (o.kind == InputKind::Text) {
        std::sort(order.begin(), order.end(), [this](std::size_t x, std::size_t y) {
            if (m_keyOccurrences[x] != m_keyOccurrences[y]) return m_keyOccurrences[x] > m_keyOccurrences[y];
            return m_keyNames[x] < m_keyNames[y];
        });
        std::vector<std::string> names;
        std::vector<std::int64_t> occurrences;
        for (std::size_t k : order) {
            names.push_back(m_keyNames[k]);
            occurrences.push_back(m_keyOccurrences[k]);
        }
        writer.writeStrings("tokens", names);
        writer.writeInt64("token_occurrences", occurrences.data(), {std::int64_t(occurrences.size())});
        writer.writeStrings("delimiters", o.delimiters);
    }

    for (const auto& layer : m_layers) {
        const std::string group = "layer" + std::to_string(layer.layer);
        for (std::size_t ti = 0; ti < layer.tensors.size(); ++ti)
            writeTensor(writer, group + "/" + pointName(statisticsTensorPoints()[ti]), layer.tensors[ti],
                        order);
        writeHeads(writer, group + "/heads", layer.heads, order);
        writer.setAttribute(group + "/heads", "previous_output", previousOutputName(layer.layer));
        if (o.kind == InputKind::Image) writeNorms(writer, group + "/out", layer.norms);
    }
    writeSummary(writer);

    writer.setAttribute("/", "format", std::string("outlierlens-stats"));
    writer.setAttribute("/", "format_version", std::int64_t(1));
    writer.setAttribute("/", "kind", std::string(o.kind == InputKind::Text ? "text" : "image"));
    writer.setAttribute("/", "samples", m_samples);
    writer.setAttribute("/", "layers", std::vector<std::int64_t>(o.layers.begin(), o.layers.end()));
    writer.setAttribute("/", "num_layers", std::int64_t(o.numLayers));
    writer.setAttribute("/", "num_heads", std::int64_t(o.numHeads));
    writer.setAttribute("/", "hidden_size", std::int64_t(o.hiddenSize));
    writer.setAttribute("/", "head_dim", std::int64_t(o.headDim));
    if (o.kind == InputKind::Image) {
        writer.setAttribute("/", "grid", std::vector<std::int64_t>{o.gridRows, o.gridCols});
        writer.setAttribute("/", "registers", std::int64_t(o.registers));
    }
    writer.setAttribute("/", "rule", outlierRuleName(o.criterion.rule));
    writer.setAttribute("/", "k", o.criterion.k);
    writer.setAttribute("/", "tau", o.criterion.tau);
    writer.setAttribute("/", "attention_fraction", o.criterion.attentionFraction);
    writer.setAttribute("/", "criterion", o.criterion.describe());
    writer.setAttribute("/", "indexing",
                        std::string("0-based layers, heads, hidden dimensions and patch rows/columns"));
}

void DatasetStatistics::writeTensor(Hdf5Writer& writer, const std::string& group,
                                    const TensorAccumulator& acc, const std::vector<std::size_t>& order) const
{
    const StatisticsOptions& o = m_options;
    writer.writeInt64(group + "/outliers_per_dim", acc.outliersPerDim.data(), {o.hiddenSize});
    writeScalar(writer, group + "/values_examined", acc.valuesExamined);
    writeScalar(writer, group + "/outliers", acc.outliers);
    writeScalar(writer, group + "/mean_max_inf_norm", acc.sumMaxInfNorm / double(m_samples));
    writeScalar(writer, group + "/mean_kurtosis", acc.sumKurtosis / double(m_samples));

    if (o.kind == InputKind::Text) {
        std::vector<std::int64_t> outliers, occurrences;
        for (std::size_t k : order) {
            outliers.push_back(valueAt(acc.keyOutliers, k));
            occurrences.push_back(valueAt(acc.keyOutlierTokens, k));
        }
        const std::vector<std::int64_t> shape = {std::int64_t(order.size())};
        writer.writeInt64(group + "/token_outliers", outliers.data(), shape);
        writer.writeInt64(group + "/token_outlier_occurrences", occurrences.data(), shape);
        std::int64_t delimiterOutliers = 0, delimiterTokens = 0;
        for (const auto& delimiter : o.delimiters) {
            const auto it = m_keyIndex.find(delimiter);
            if (it == m_keyIndex.end()) continue;
            delimiterOutliers += valueAt(acc.keyOutliers, std::size_t(it->second));
            delimiterTokens += valueAt(acc.keyOutlierTokens, std::size_t(it->second));
        }
        const std::int64_t outlierTokens =
            std::accumulate(acc.keyOutlierTokens.begin(), acc.keyOutlierTokens.end(), std::int64_t(0));
        writeScalar(writer, group + "/delimiter_outliers", delimiterOutliers);
        writeScalar(writer, group + "/delimiter_share", ratio(double(delimiterOutliers), acc.outliers));
        writeScalar(writer, group + "/delimiter_outlier_occurrences", delimiterTokens);
        writeScalar(writer, group + "/delimiter_occurrence_share",
                    ratio(double(delimiterTokens), outlierTokens));
    } else {
        const std::vector<std::int64_t> grid = {o.gridRows, o.gridCols};
        const std::ptrdiff_t first = 1 + o.registers; // CLS, registers, patches
        const std::vector<std::int64_t> patches(acc.keyOutliers.begin() + first, acc.keyOutliers.end());
        const std::vector<std::int64_t> patchTokens(acc.keyOutlierTokens.begin() + first,
                                                    acc.keyOutlierTokens.end());
        writer.writeInt64(group + "/patch_outliers", patches.data(), grid);
        writer.writeInt64(group + "/patch_outlier_occurrences", patchTokens.data(), grid);
        writeScalar(writer, group + "/cls_outliers", acc.keyOutliers[0]);
        writeScalar(writer, group + "/cls_outlier_occurrences", acc.keyOutlierTokens[0]);
        if (o.registers > 0) {
            const std::vector<std::int64_t> registers(acc.keyOutliers.begin() + 1,
                                                      acc.keyOutliers.begin() + first);
            const std::vector<std::int64_t> registerTokens(acc.keyOutlierTokens.begin() + 1,
                                                           acc.keyOutlierTokens.begin() + first);
            writer.writeInt64(group + "/register_outliers", registers.data(), {o.registers});
            writer.writeInt64(group + "/register_outlier_occurrences", registerTokens.data(), {o.registers});
        }
    }
}

void DatasetStatistics::writeHeads(Hdf5Writer& writer, const std::string& group, const HeadAccumulator& acc,
                                   const std::vector<std::size_t>& order) const
{
    const StatisticsOptions& o = m_options;
    const auto H = std::size_t(o.numHeads);
    const std::int64_t heads = o.numHeads;
    writeScalar(writer, group + "/keys_examined", acc.keysExamined);
    writer.writeInt64(group + "/attention_outliers", acc.attentionOutliers.data(), {heads});

    // [H, keys] in file key order: the sum over queries per occurrence of the key.
    const bool text = o.kind == InputKind::Text;
    const std::vector<std::size_t> fileKeys =
        text ? order
             : std::vector<std::size_t>(order.begin() + 1 + o.registers, order.end()); // image: patches only
    std::vector<double> meanAttention;
    std::vector<std::int64_t> attentionOutliers;
    for (std::size_t head = 0; head < H; ++head) {
        for (std::size_t k : fileKeys) {
            meanAttention.push_back(ratio(acc.cumulativeAttention[k * H + head], keyOccurrences(k)));
            attentionOutliers.push_back(acc.attentionOutliersByKey[k * H + head]);
        }
    }
    if (text) {
        const std::vector<std::int64_t> shape = {heads, std::int64_t(fileKeys.size())};
        writer.writeFloat64(group + "/mean_cumulative_attention", meanAttention.data(), shape);
        writer.writeInt64(group + "/attention_outliers_by_token", attentionOutliers.data(), shape);
    } else {
        const std::vector<std::int64_t> shape = {heads, o.gridRows, o.gridCols};
        writer.writeFloat64(group + "/mean_cumulative_attention", meanAttention.data(), shape);
        writer.writeInt64(group + "/attention_outliers_by_patch", attentionOutliers.data(), shape);
        std::vector<double> clsAttention;
        std::vector<std::int64_t> clsOutliers;
        for (std::size_t head = 0; head < H; ++head) {
            clsAttention.push_back(ratio(acc.cumulativeAttention[head], m_samples));
            clsOutliers.push_back(acc.attentionOutliersByKey[head]);
        }
        writer.writeFloat64(group + "/cls_mean_cumulative_attention", clsAttention.data(), {heads});
        writer.writeInt64(group + "/cls_attention_outliers", clsOutliers.data(), {heads});
        if (o.registers > 0) { // [H, registers]
            std::vector<double> registerAttention;
            std::vector<std::int64_t> registerOutliers;
            for (std::size_t head = 0; head < H; ++head)
                for (std::size_t k = 1; k <= std::size_t(o.registers); ++k) {
                    registerAttention.push_back(ratio(acc.cumulativeAttention[k * H + head], m_samples));
                    registerOutliers.push_back(acc.attentionOutliersByKey[k * H + head]);
                }
            writer.writeFloat64(group + "/register_mean_cumulative_attention", registerAttention.data(),
                                {heads, o.registers});
            writer.writeInt64(group + "/register_attention_outliers", registerOutliers.data(),
                              {heads, o.registers});
        }
    }

    writeScalar(writer, group + "/outlier_keys", acc.outlierKeys);
    writeScalar(writer, group + "/other_keys", acc.otherKeys);
    std::vector<double> outlierValue, otherValue;
    for (std::size_t head = 0; head < H; ++head) {
        outlierValue.push_back(ratio(acc.absValueOutlierKeys[head], acc.outlierKeys));
        otherValue.push_back(ratio(acc.absValueOtherKeys[head], acc.otherKeys));
    }
    writer.writeFloat64(group + "/mean_abs_value_outlier_keys", outlierValue.data(), {heads});
    writer.writeFloat64(group + "/mean_abs_value_other_keys", otherValue.data(), {heads});

    if (acc.gateTokens > 0) {
        std::vector<double> gate;
        for (std::size_t head = 0; head < H; ++head)
            gate.push_back(acc.gateSum[head] / double(acc.gateTokens));
        writer.writeFloat64(group + "/mean_gate", gate.data(), {heads});
        writeScalar(writer, group + "/gate_tokens", acc.gateTokens);
    }
}

void DatasetStatistics::writeNorms(Hdf5Writer& writer, const std::string& group,
                                   const NormAccumulator& acc) const
{
    const auto keys = std::int64_t(acc.sumNorm.size()); // CLS, registers, patches
    std::vector<double> mean;
    for (double sum : acc.sumNorm)
        mean.push_back(ratio(sum, m_samples));
    writer.writeFloat64(group + "/mean_token_norm", mean.data(), {keys});
    writer.writeInt64(group + "/high_norm_tokens", acc.highNorm.data(), {keys});
    const std::vector<double> edges = normBinEdges();
    writer.writeFloat64(group + "/norm_bin_edges", edges.data(), {std::int64_t(edges.size())});
    writer.writeInt64(group + "/norm_histogram", acc.histogram.data(), {std::int64_t(acc.histogram.size())});
    writer.writeInt64(group + "/norm_histogram_high_norm", acc.histogramHigh.data(),
                      {std::int64_t(acc.histogramHigh.size())});
    writer.setAttribute(group + "/high_norm_tokens", "rule", highNormRuleText());
}

void DatasetStatistics::writeSummary(Hdf5Writer& writer) const
{
    const StatisticsOptions& kind = m_options;
    const std::size_t infSlot = tensorSlot(infNormPoint(kind));
    std::vector<std::int64_t> layers;
    std::vector<double> infNorms, kurtoses;
    double maxInfNorm = -1, maxKurtosis = -1, kurtosisSum = 0;
    std::int64_t maxInfNormLayer = -1, kurtosisCount = 0;
    std::vector<std::string> kurtosisNames;
    for (CapturePoint p : kurtosisPoints(kind))
        kurtosisNames.push_back(pointName(p));
    for (const auto& layer : m_layers) {
        layers.push_back(layer.layer);
        const double inf = layer.tensors[infSlot].sumMaxInfNorm / double(m_samples);
        infNorms.push_back(inf);
        if (inf > maxInfNorm) {
            maxInfNorm = inf;
            maxInfNormLayer = layer.layer;
        }
        double layerKurtosis = 0;
        for (CapturePoint p : kurtosisPoints(kind)) {
            const double k = layer.tensors[tensorSlot(p)].sumKurtosis / double(m_samples);
            layerKurtosis += k;
            kurtosisSum += k;
            ++kurtosisCount;
            maxKurtosis = std::max(maxKurtosis, k);
        }
        kurtoses.push_back(layerKurtosis / double(kurtosisPoints(kind).size()));
    }
    const std::vector<std::int64_t> shape = {std::int64_t(layers.size())};
    writer.writeInt64("summary/layers", layers.data(), shape);
    writer.writeFloat64("summary/mean_max_inf_norm", infNorms.data(), shape);
    writer.writeFloat64("summary/mean_kurtosis", kurtoses.data(), shape);
    writeScalar(writer, "summary/max_inf_norm", maxInfNorm);
    writeScalar(writer, "summary/max_inf_norm_layer", maxInfNormLayer);
    writeScalar(writer, "summary/avg_kurtosis", kurtosisSum / double(kurtosisCount));
    writeScalar(writer, "summary/max_kurtosis", maxKurtosis);
    writer.setAttribute("summary", "inf_norm_tensor", pointName(infNormPoint(kind)));
    writer.setAttribute("summary", "kurtosis_tensors", joined(kurtosisNames));
}

} // namespace outlierlens
