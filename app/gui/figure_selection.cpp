#include "figure_selection.h"

#include "analysis/statistics_file.h"

#include <QFileInfo>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace outlierlens {

DatasetOutlierData buildDatasetOutliers(const StatisticsFile& stats, const QString& path, int layer,
                                        const QString& tensor, int headDim)
{
    DatasetOutlierData d;
    const std::string name = tensor.toStdString();
    const QString data =
        QString::fromStdString(stats.provenance.count("data") ? stats.provenance.at("data") : std::string());
    d.title = QStringLiteral("Outliers over %1 inputs%2")
                  .arg(stats.samples)
                  .arg(data.isEmpty() ? QString() : QStringLiteral(" of ") + data);
    d.tensor = tensor;
    d.layer = layer;
    d.headDim = headDim;
    d.criterion = QString::fromStdString(stats.criterion);
    d.infNormPerLayer = QVector<double>(stats.numLayers, std::nan(""));
    for (const LayerStatisticsData& l : stats.layers) {
        const auto t = l.tensors.find(name);
        if (t == l.tensors.end()) continue;
        if (l.layer >= 0 && l.layer < stats.numLayers) d.infNormPerLayer[l.layer] = t->second.meanMaxInfNorm;
        if (l.layer != layer) continue;
        for (std::int64_t c : t->second.outliersPerDim)
            d.perDimension << double(c);
        if (std::int64_t(t->second.patchOutliers.size()) == std::int64_t(stats.gridRows) * stats.gridCols) {
            d.gridRows = stats.gridRows, d.gridCols = stats.gridCols;
            for (std::int64_t c : t->second.patchOutliers)
                d.perPatch << double(c);
        }
        d.clsCount = double(t->second.clsOutliers);
    }
    d.provenance.model = QString::fromStdString(stats.provenance.count("model") ? stats.provenance.at("model")
                                                                                : std::string());
    d.provenance.checkpointSha256 = QString::fromStdString(stats.provenance.count("checkpoint_sha256")
                                                               ? stats.provenance.at("checkpoint_sha256")
                                                               : std::string());
    d.provenance.input =
        QStringLiteral("statistics file %1 (%2 inputs)").arg(QFileInfo(path).fileName()).arg(stats.samples);
    d.provenance.selection = QStringLiteral("%1 of every layer; layer %2").arg(tensor).arg(layer + 1);
    return d;
}

OutlierHeads headsOwningOutliers(const QVector<double>& perDimension, int headDim, int heads,
                                 int contrastCount)
{
    OutlierHeads r;
    if (headDim <= 0 || heads <= 0) return r;
    const int d = std::min<int>(int(perDimension.size()), heads * headDim);
    QVector<int> order(d);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return perDimension[a] > perDimension[b]; });
    for (int k : order) {
        if (perDimension[k] <= 0) break;
        const int head = k / headDim;
        if (r.first < 0) {
            r.first = head, r.firstDim = k, r.firstCount = perDimension[k];
        } else if (head != r.first) {
            r.second = head, r.secondDim = k, r.secondCount = perDimension[k];
            break;
        }
    }
    // Outliers each head owns; the contrast set owns none, else the fewest (never the two above).
    QVector<double> owned(heads, 0.0);
    for (int k = 0; k < d; ++k)
        owned[k / headDim] += std::max(0.0, perDimension[k]);
    QVector<int> candidates;
    for (int h = 0; h < heads; ++h)
        if (h != r.first && h != r.second) candidates << h;
    std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) { return owned[a] < owned[b]; });
    for (int h : candidates) {
        if (int(r.contrast.size()) >= contrastCount) break;
        if (owned[h] > 0) r.contrastOwnsNone = false;
        r.contrast << h;
    }
    std::sort(r.contrast.begin(), r.contrast.end());
    return r;
}

QVector<int> inputsByNumber(const QVector<int>& numbers, int available)
{
    QVector<int> indices;
    const bool all =
        std::all_of(numbers.begin(), numbers.end(), [&](int n) { return n >= 1 && n <= available; });
    for (int i = 0; i < numbers.size(); ++i) {
        const int index = all ? numbers[i] - 1 : i;
        if (index < available) indices << index;
    }
    return indices;
}

} // namespace outlierlens
