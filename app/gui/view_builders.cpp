#include "view_builders.h"

#include "analysis/figure_tensor.h"
#include "analysis/high_norm.h"
#include "analysis/showcase.h"
#include "analysis/statistics_file.h"
#include "chart_support.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

namespace outlierlens {
namespace {

MatrixData matrix(const float* data, int rows, int cols, const QStringList& rowLabels,
                  const QStringList& colLabels, const QString& rowTitle, const QString& colTitle,
                  const QString& valueTitle)
{
    MatrixData m;
    m.rows = rows, m.cols = cols;
    m.values = QVector<float>(data, data + std::size_t(rows) * cols);
    m.rowLabels = rowLabels, m.colLabels = colLabels;
    m.rowTitle = rowTitle, m.colTitle = colTitle, m.valueTitle = valueTitle;
    return m;
}

/// The same sharing `data` (no copy: a 2,048-token attention matrix is 16 MB).
MatrixData matrix(const QVector<float>& data, int rows, int cols, const QStringList& rowLabels,
                  const QStringList& colLabels, const QString& rowTitle, const QString& colTitle,
                  const QString& valueTitle)
{
    MatrixData m;
    m.rows = rows, m.cols = cols;
    m.values = data;
    m.rowLabels = rowLabels, m.colLabels = colLabels;
    m.rowTitle = rowTitle, m.colTitle = colTitle, m.valueTitle = valueTitle;
    return m;
}

QStringList dimensionLabels(int n)
{
    QStringList labels;
    for (int i = 0; i < n; ++i)
        labels << QString::number(i);
    return labels;
}

double meanAbs(const float* v, int n)
{
    double sum = 0;
    for (int i = 0; i < n; ++i)
        sum += std::abs(v[i]);
    return n ? sum / n : 0.0;
}

BarData topTokens(const QStringList& names, const QVector<double>& counts, int top, const QString& title)
{
    std::vector<int> order(std::size_t(names.size()));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return counts[a] > counts[b]; });
    BarData bars;
    bars.title = title;
    bars.axisTitle = QStringLiteral("outlier values");
    for (int i = 0; i < std::min<int>(top, int(order.size())); ++i) {
        if (counts[order[std::size_t(i)]] <= 0) break;
        bars.labels << names[order[std::size_t(i)]];
        bars.values << counts[order[std::size_t(i)]];
    }
    return bars;
}

} // namespace

QString sinkTokensDescription(const ModelInfo& model)
{
    return model.family ? QString::fromStdString(model.family->sinkTokens) : QString();
}

double sinkShare(const InspectionSnapshot& s, const float* probabilities, int keys)
{
    double mass = 0;
    for (int j = 0; j < std::min(keys, int(s.sinkToken.size())); ++j)
        if (s.sinkToken[j]) mass += probabilities[j];
    return mass;
}

const QStringList& systematicCategoryNames()
{
    static const QStringList kNames = {QStringLiteral("initial token"), QStringLiteral("strong delimiter"),
                                       QStringLiteral("weak semantic"), QStringLiteral("other"),
                                       QStringLiteral("register")};
    return kNames;
}

namespace {

/// The bars of the categories; the register category only for a model with registers.
BarData categoryBars(const CategoryCounts& counts, const QString& title, const QString& axis, bool registers)
{
    BarData b;
    b.title = title, b.axisTitle = axis;
    b.labels = systematicCategoryNames();
    for (std::int64_t c : counts)
        b.values << double(c);
    if (!registers) b.labels.removeLast(), b.values.removeLast();
    return b;
}

/// The per-layer charts, per-category bars and head table shared by both sources.
void fillSystematicNumbers(SystematicViewData& v, const SystematicData& d, int numLayers, int layer,
                           const SystematicSnapshot* weights)
{
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const auto series = [&](const QString& title, const QString& axis, const QStringList& names,
                            const std::function<double(const SystematicLayerData&, int)>& value) {
        LayerSeriesData out;
        out.title = title, out.axisTitle = axis, out.names = names;
        for (int k = 0; k < names.size(); ++k) {
            QVector<double> values(numLayers, nan);
            for (const SystematicLayerData& l : d.layers)
                if (l.layer < numLayers) values[l.layer] = value(l, k);
            out.series << values;
        }
        return out;
    };
    const QStringList top3 = {QStringLiteral("top 1"), QStringLiteral("top 2"), QStringLiteral("top 3"),
                              QStringLiteral("median")};
    const auto activation = [](const SystematicActivationData& a, int k) {
        return k < 3 ? a.meanTop[std::size_t(k)] : a.meanMedian;
    };
    v.hiddenPerLayer =
        series(QStringLiteral("Layer outputs h: largest and median |h|"), QStringLiteral("|h|"), top3,
               [&](const SystematicLayerData& l, int k) { return activation(l.out, k); });
    v.downPerLayer = series(QStringLiteral("Down projection inputs x_down: largest and median |x|"),
                            QStringLiteral("|x_down|"), top3,
                            [&](const SystematicLayerData& l, int k) { return activation(l.downIn, k); });
    v.attentionPerLayer =
        series(QStringLiteral("Attention received per key (head mean, summed over queries)"),
               QStringLiteral("attention received"),
               {QStringLiteral("top 1"), QStringLiteral("top 2"), QStringLiteral("median")},
               [](const SystematicLayerData& l, int k) {
                   return k < 2 ? l.attention.meanTop[std::size_t(k)] : l.attention.meanMedian;
               });
    if (weights && weights->weightRatioMax.size() == numLayers) {
        v.weightPerLayer.title = QStringLiteral("W_down: column extremal ratio max|W[:,j]| / mean|W[:,j]|");
        v.weightPerLayer.axisTitle = QStringLiteral("ratio");
        v.weightPerLayer.names = {QStringLiteral("max"), QStringLiteral("median")};
        v.weightPerLayer.series = {weights->weightRatioMax, weights->weightRatioMedian};
    }
    const SystematicLayerData* l = d.layerData(layer);
    if (!l) return;
    const bool registers = l->tokens[std::size_t(TokenCategory::Register)] > 0;
    v.heavyByCategory =
        categoryBars(l->out.heavy, QStringLiteral("heavy tokens of h"), QStringLiteral("tokens"), registers);
    v.downHeavyByCategory = categoryBars(l->downIn.heavy, QStringLiteral("heavy tokens of x_down"),
                                         QStringLiteral("tokens"), registers);
    v.outlierKeysByCategory = categoryBars(l->attention.outlierKeys, QStringLiteral("attention outlier keys"),
                                           QStringLiteral("keys"), registers);
    v.tokensByCategory =
        categoryBars(l->tokens, QStringLiteral("all tokens"), QStringLiteral("tokens"), registers);
    const SystematicAttentionData& a = l->attention;
    for (std::size_t h = 0; h < a.outlierKeyShare.size(); ++h)
        v.heads << SystematicHeadRow{a.outlierKeyShare[h], a.headOutlierKeys.at(h), a.consistency.at(h)};
    v.consistencySamples = a.consistencySamples;
}

QString systematicRule(const SystematicData& d)
{
    return QStringLiteral("An et al.'s code rule: a token is heavy when its largest |x| exceeds %1 × the "
                          "input's mean |x|; a key is an attention outlier when it receives ≥ %2 T of the "
                          "head-mean attention (T tokens)")
        .arg(charts::displayNumber(d.tau), charts::displayNumber(d.attentionFraction));
}

} // namespace

SystematicViewData buildSystematic(const InspectionSnapshot& s, int layer)
{
    SystematicViewData v;
    const SystematicSnapshot& y = s.systematic;
    v.layer = layer, v.headDim = s.dh();
    v.sourceDescription = QStringLiteral("current input: %1").arg(s.input.left(120));
    v.provenance = provenanceOf(s, QStringLiteral("layer %1").arg(layer + 1));
    if (y.isEmpty() || layer < 0 || layer >= s.L()) return v;
    v.rule = systematicRule(y.stats);
    const int T = s.T, d = s.d(), K = y.channels;
    // |h| of the layer output.
    QVector<float> h(T * d);
    const float* out = s.out.constData() + std::size_t(layer) * T * d;
    for (int i = 0; i < T * d; ++i)
        h[i] = std::abs(out[i]);
    v.hidden = matrix(h, T, d, s.tokens, {}, QStringLiteral("token"), QStringLiteral("channel (0-based)"),
                      QStringLiteral("|h|"));
    v.heavyTokens = y.heavyTokens.value(layer);
    v.heavyDownTokens = y.heavyDownTokens.value(layer);
    v.outlierKeys = y.outlierKeys.value(layer);
    for (int t : v.heavyTokens) { // the channel of each heavy token's largest |h|
        const float* row = h.constData() + std::size_t(t) * d;
        const int c = int(std::max_element(row, row + d) - row);
        if (!v.outlierChannels.contains(c)) v.outlierChannels << c;
    }
    std::sort(v.outlierChannels.begin(), v.outlierChannels.end());
    QStringList channels, weightRows;
    for (int k = 0; k < K; ++k) {
        const int c = y.downChannels.value(layer * K + k);
        channels << QString::number(c);
        weightRows << (y.downColumnRatio.isEmpty()
                           ? QString::number(c)
                           : QStringLiteral("%1 (ratio %2)")
                                 .arg(c)
                                 .arg(charts::displayNumber(y.downColumnRatio[layer * K + k])));
    }
    v.downInput = matrix(y.downValues.constData() + std::size_t(layer) * T * K, T, K, s.tokens, channels,
                         QStringLiteral("token"), QStringLiteral("x_down channel (largest |x| first)"),
                         QStringLiteral("|x_down|"));
    if (!y.downWeight.isEmpty())
        v.downWeight = matrix(y.downWeight.constData() + std::size_t(layer) * K * y.hidden, K, y.hidden,
                              weightRows, {}, QStringLiteral("W_down column (input channel)"),
                              QStringLiteral("output channel (0-based)"), QStringLiteral("|W_down|"));
    // Head-mean attention.
    QVector<float> mean(T * T, 0.0f);
    for (int hd = 0; hd < s.H(); ++hd) {
        const float* p = s.probsOf(layer, hd);
        for (int i = 0; i < T * T; ++i)
            mean[i] += p[i] / float(s.H());
    }
    v.attention = matrix(mean, T, T, s.tokens, s.tokens, QStringLiteral("query token"),
                         QStringLiteral("key token"), QStringLiteral("head-mean attention"));
    v.attention.causal = s.model.isDecoder();
    v.attention.window = s.model.windowOf(layer);
    fillSystematicNumbers(v, y.stats, s.L(), layer, &y);
    return v;
}

SystematicViewData buildSystematic(const StatisticsFile& stats, const QString& path, int layer,
                                   const SystematicSnapshot* weights)
{
    SystematicViewData v;
    v.layer = layer, v.headDim = stats.headDim;
    v.provenance.model =
        QString::fromStdString(stats.provenance.count("model") ? stats.provenance.at("model") : "");
    v.provenance.checkpointSha256 = QString::fromStdString(
        stats.provenance.count("checkpoint_sha256") ? stats.provenance.at("checkpoint_sha256") : "");
    v.provenance.input = path;
    v.provenance.selection = QStringLiteral("layer %1").arg(layer + 1);
    if (!stats.systematic) {
        v.sourceDescription =
            QStringLiteral("statistics file %1: no systematic-outlier group (not a decoder's)").arg(path);
        return v;
    }
    v.sourceDescription =
        QStringLiteral("statistics file %1 (%2 text chunks)").arg(path).arg(stats.systematic->samples);
    v.rule = systematicRule(*stats.systematic);
    fillSystematicNumbers(v, *stats.systematic, stats.numLayers, layer, weights);
    return v;
}

QStringList compareCaptionLines(const InspectionSnapshot& s, int layer, int head)
{
    QStringList lines{s.model.variant};
    if (layer > 0) {
        const QString tensor = outlierTensorRead(s.model);
        const OutlierDashboardData d = buildDashboard(s, layer - 1, tensor);
        double values = 0;
        int dims = 0;
        for (double v : d.perDimension.values) {
            values += v;
            dims += v > 0 ? 1 : 0;
        }
        lines
            << QStringLiteral(
                   "read by layer %1: layer %2 %3, max |x| %4, kurtosis %5, %6 outliers (over %8) in %7 dims")
                   .arg(layer + 1)
                   .arg(layer)
                   .arg(tensor)
                   .arg(d.maxInfNormPerLayer.value(layer - 1), 0, 'f', 1)
                   .arg(d.kurtosisPerLayer.value(layer - 1), 0, 'f', 1)
                   .arg(values)
                   .arg(dims)
                   .arg(QString::fromStdString(s.outlierRule.shortText()));
    } else {
        lines << QStringLiteral("layer 1 reads the embeddings");
    }
    // The key the head favours, averaged over the queries (a sink when it takes most of it).
    const float* p = s.probsOf(layer, head);
    int best = 0;
    double bestMean = -1;
    for (int k = 0; k < s.T; ++k) {
        double sum = 0;
        for (int q = 0; q < s.T; ++q)
            sum += p[std::size_t(q) * s.T + k];
        if (sum / s.T > bestMean) {
            bestMean = sum / s.T;
            best = k;
        }
    }
    if (s.T > 0 && bestMean <= 0)
        lines << QStringLiteral("head %1: switched off (every probability exactly 0)").arg(head + 1);
    else if (s.T > 0)
        lines << QStringLiteral("head %1: %2 of its attention on token %3 ‘%4’ (mean over queries)")
                     .arg(head + 1)
                     .arg(bestMean, 0, 'f', 2)
                     .arg(best)
                     .arg(s.tokens.value(best));
    if (s.T > 0 && bestMean > 0) {
        double sink = 0; // the no-op score of the Overview, with the same sink tokens
        for (int q = 0; q < s.T; ++q)
            sink += sinkShare(s, p + std::size_t(q) * s.T, s.T);
        lines << QStringLiteral("head %1: %2 on sink tokens (%3)")
                     .arg(head + 1)
                     .arg(sink / s.T, 0, 'f', 2)
                     .arg(sinkTokensDescription(s.model));
    }
    if (!s.prediction.isEmpty()) lines << QStringLiteral("prediction: ") + s.prediction.first();
    return lines;
}

Provenance provenanceOf(const InspectionSnapshot& s, const QString& selection)
{
    return Provenance{s.model.dir, s.model.sha256, s.input,
                      s.transform.isEmpty()
                          ? selection
                          : QStringLiteral("%1; seen through %2").arg(selection, s.transform)};
}

HeadViewData buildHeadView(const InspectionSnapshot& s, int layer, int head)
{
    HeadViewData v;
    v.layer = layer, v.head = head;
    v.tokens = s.tokens;
    const QStringList dims = dimensionLabels(s.dh());
    v.probabilities =
        matrix(s.probsVector(layer, head), s.T, s.T, s.tokens, s.tokens, QStringLiteral("query token"),
               QStringLiteral("key token"), QStringLiteral("attention probability"));
    v.values = matrix(s.valuesOf(layer, head), s.T, s.dh(), s.tokens, dims, QStringLiteral("token"),
                      QStringLiteral("dimension (0-based)"), QStringLiteral("value V"));
    v.product = matrix(s.contextOf(layer, head), s.T, s.dh(), s.tokens, dims, QStringLiteral("query token"),
                       QStringLiteral("dimension (0-based)"),
                       s.gates.isEmpty() ? QStringLiteral("P.V") : QStringLiteral("P.V (before the gate)"));
    if (const float* g = s.gatesOf(layer, head)) v.gate = QVector<float>(g, g + s.T);
    v.clippedSoftmax = s.model.clipped;
    v.causal = s.model.isDecoder();
    v.probabilities.causal = s.model.isDecoder();
    v.probabilities.window = s.model.windowOf(layer);
    v.provenance = provenanceOf(s, QStringLiteral("layer %1, head %2").arg(layer + 1).arg(head + 1));
    return v;
}

OverviewData buildOverview(const InspectionSnapshot& s)
{
    OverviewData o;
    o.layers = s.L(), o.heads = s.H();
    o.tokens = s.tokens;
    const bool decoder = s.model.isDecoder();
    o.scoreDescription =
        QStringLiteral("share of attention on the sink tokens: ") + sinkTokensDescription(s.model);
    for (int l = 0; l < s.L(); ++l)
        for (int h = 0; h < s.H(); ++h) {
            const float* p = s.probsOf(l, h);
            o.probabilities << matrix(s.probsVector(l, h), s.T, s.T, s.tokens, s.tokens,
                                      QStringLiteral("query token"), QStringLiteral("key token"),
                                      QStringLiteral("attention probability"));
            o.probabilities.last().causal = decoder;
            o.probabilities.last().window = s.model.windowOf(l);
            double mass = 0; // masked (future) keys hold no mass
            for (int i = 0; i < s.T; ++i)
                mass += sinkShare(s, p + std::size_t(i) * s.T, s.T);
            o.noopScore << float(mass / s.T);
        }
    o.provenance = provenanceOf(s, QStringLiteral("all layers and heads"));
    return o;
}

OutlierDashboardData buildDashboard(const InspectionSnapshot& s, int layer, const QString& tensor,
                                    const InspectionSnapshot* original)
{
    OutlierDashboardData d;
    d.sourceDescription = QStringLiteral("current input: %1").arg(s.input.left(120));
    d.layer = layer, d.tensor = tensor, d.headDim = s.dh();
    d.criterion = ((s.outlierRule.rule == OutlierRule::Tau)
                       ? QStringLiteral("|x| > %1 mean|X| over the input's %2 x %3 values")
                       : QStringLiteral("|x - mean| > %1 std over the input's %2 x %3 values"))
                      .arg((s.outlierRule.rule == OutlierRule::Tau) ? s.outlierRule.tau : s.outlierRule.k)
                      .arg(s.T)
                      .arg(s.d());
    const TensorOutliers& o = s.outliersOf(tensor, layer);
    d.perDimension.title =
        QStringLiteral("Outliers per hidden dimension (layer %1, %2)").arg(layer + 1).arg(tensor);
    d.perDimension.axisTitle = QStringLiteral("outlier values");
    d.perDimension.labels = dimensionLabels(s.d());
    for (int j = 0; j < s.d(); ++j)
        d.perDimension.values << double(o.perDimension.value(j));
    QStringList labels;
    QVector<double> perToken;
    for (int t = 0; t < s.T; ++t) {
        labels << QStringLiteral("%1 (%2)").arg(s.tokens[t]).arg(t);
        perToken << double(o.perToken.value(t));
    }
    d.perToken = topTokens(labels, perToken, 20, QStringLiteral("Tokens carrying the most outliers"));
    for (int l = 0; l < s.L(); ++l) {
        d.maxInfNormPerLayer << s.outliersOf(tensor, l).maxInfNorm;
        d.kurtosisPerLayer << s.outliersOf(tensor, l).kurtosis;
        const QVector<int>& perDimension = s.outliersOf(tensor, l).perDimension;
        d.outliersPerLayer << double(std::accumulate(perDimension.begin(), perDimension.end(), 0LL));
        if (original) {
            d.originalMaxInfNormPerLayer << original->outliersOf(tensor, l).maxInfNorm;
            d.originalKurtosisPerLayer << original->outliersOf(tensor, l).kurtosis;
        }
    }
    d.provenance = provenanceOf(s, QStringLiteral("layer %1, %2").arg(layer + 1).arg(tensor));
    return d;
}

OutlierDashboardData buildDashboard(const StatisticsFile& stats, const QString& path, int layer,
                                    const QString& tensor, int headDim)
{
    OutlierDashboardData d;
    d.sourceDescription = QStringLiteral("statistics file %1 (%2 inputs)").arg(path).arg(stats.samples);
    d.layer = layer, d.tensor = tensor, d.headDim = headDim;
    d.criterion = QString::fromStdString(stats.criterion);
    const auto found = std::find_if(stats.layers.begin(), stats.layers.end(),
                                    [&](const LayerStatisticsData& l) { return l.layer == layer; });
    if (found == stats.layers.end() || !found->tensors.count(tensor.toStdString())) return d;
    const TensorStatisticsData& t = found->tensors.at(tensor.toStdString());
    d.perDimension.title = QStringLiteral("Outliers per hidden dimension over the data set (layer %1, %2)")
                               .arg(layer + 1)
                               .arg(tensor);
    d.perDimension.axisTitle = QStringLiteral("outlier values");
    d.perDimension.labels = dimensionLabels(int(t.outliersPerDim.size()));
    for (auto v : t.outliersPerDim)
        d.perDimension.values << double(v);
    QStringList names;
    QVector<double> counts;
    if (stats.kind == "text") {
        for (std::size_t i = 0; i < stats.tokens.size() && i < t.tokenOutliers.size(); ++i) {
            names << QString::fromStdString(stats.tokens[i]);
            counts << double(t.tokenOutliers[i]);
        }
    } else {
        names << QStringLiteral("[CLS]");
        counts << double(t.clsOutliers);
        for (std::size_t i = 0; i < t.patchOutliers.size(); ++i) {
            names << QStringLiteral("patch %1,%2").arg(int(i) / stats.gridCols).arg(int(i) % stats.gridCols);
            counts << double(t.patchOutliers[i]);
        }
    }
    d.perToken =
        topTokens(names, counts, 20, QStringLiteral("Tokens carrying the most outliers over the data set"));
    // Per-layer summary: every analysed layer, NaN-free gaps for layers not analysed.
    d.maxInfNormPerLayer = QVector<double>(stats.numLayers, 0.0);
    d.kurtosisPerLayer = QVector<double>(stats.numLayers, 0.0);
    // Layers not analysed count as unknown: the per-layer outlier totals are only given when all are.
    QVector<double> outliers(stats.numLayers, -1.0);
    for (const LayerStatisticsData& l : stats.layers)
        if (l.tensors.count(tensor.toStdString()) && l.layer < stats.numLayers) {
            const auto& t = l.tensors.at(tensor.toStdString());
            d.maxInfNormPerLayer[l.layer] = t.meanMaxInfNorm;
            d.kurtosisPerLayer[l.layer] = t.meanKurtosis;
            outliers[l.layer] =
                double(std::accumulate(t.outliersPerDim.begin(), t.outliersPerDim.end(), 0.0));
        }
    if (!outliers.contains(-1.0)) d.outliersPerLayer = outliers;
    const auto model = stats.provenance.find("model");
    d.provenance = Provenance{
        model == stats.provenance.end() ? QString() : QString::fromStdString(model->second),
        stats.provenance.count("checkpoint_sha256")
            ? QString::fromStdString(stats.provenance.at("checkpoint_sha256"))
            : QString(),
        stats.provenance.count("data") ? QString::fromStdString(stats.provenance.at("data")) : path,
        QStringLiteral("layer %1, %2").arg(layer + 1).arg(tensor)};
    return d;
}

QVector<int> tokensWithOutliersIn(const InspectionSnapshot& s, int layer, const QString& tensor,
                                  int dimension)
{
    QVector<int> tokens;
    for (int p : s.outliersOf(tensor, layer).positions) // ascending: tokens come in order, once each
        if (p % s.d() == dimension) tokens << p / s.d();
    return tokens;
}

ImageViewData buildImageView(const InspectionSnapshot& s, int layer, int head)
{
    ImageViewData v;
    v.image = s.image;
    v.credit = s.imageCredit;
    v.gridRows = v.gridCols = s.model.gridSize;
    v.layer = layer, v.head = head;
    const int next = std::min(layer + 1, s.L() - 1);
    const int first = s.model.firstPatchToken(); // [CLS], the registers, then the patches
    const QVector<int>& perToken = s.outliersOf(QStringLiteral("out"), layer).perToken;
    v.patchOutliers = QVector<float>(v.gridRows * v.gridCols, 0.0f);
    std::vector<bool> outlierToken(std::size_t(s.T), false);
    for (int t = 0; t < s.T; ++t) {
        outlierToken[std::size_t(t)] = perToken.value(t) > 0;
        if (t >= first && t - first < v.patchOutliers.size())
            v.patchOutliers[t - first] = float(perToken.value(t));
    }
    const float* p = s.probsOf(next, head);
    v.cumulativeAttention = QVector<float>(v.gridRows * v.gridCols, 0.0f);
    v.registerCumulativeAttention = QVector<float>(first - 1, 0.0f);
    for (int i = 0; i < s.T; ++i)
        for (int j = 0; j < s.T; ++j) {
            const float pij = p[std::size_t(i) * s.T + j];
            if (j == 0)
                v.clsCumulativeAttention += pij;
            else if (j < first)
                v.registerCumulativeAttention[j - 1] += pij;
            else if (j - first < v.cumulativeAttention.size())
                v.cumulativeAttention[j - first] += pij;
        }
    v.attention = matrix(p, s.T, s.T, s.tokens, s.tokens, QStringLiteral("query"), QStringLiteral("key"),
                         QStringLiteral("attention probability"));
    // Figure 3e: mean |V| of the patches (not [CLS] or registers) with and without outliers.
    double outlierSum = 0, otherSum = 0;
    int outlierCount = 0, otherCount = 0;
    for (int j = first; j < s.T; ++j) {
        const double m = meanAbs(s.valuesOf(next, head) + std::size_t(j) * s.dh(), s.dh());
        if (outlierToken[std::size_t(j)])
            outlierSum += m, ++outlierCount;
        else
            otherSum += m, ++otherCount;
    }
    v.meanAbsValueOutlierPatches = outlierCount ? outlierSum / outlierCount : std::nan("");
    v.meanAbsValueOtherPatches = otherCount ? otherSum / otherCount : std::nan("");
    v.provenance = provenanceOf(s, QStringLiteral("outliers of layer %1, head %2 of layer %3")
                                       .arg(layer + 1)
                                       .arg(head + 1)
                                       .arg(next + 1));
    return v;
}

void addDatasetPatches(ImageViewData& view, const StatisticsFile& stats, int layer)
{
    for (const LayerStatisticsData& l : stats.layers)
        if (l.layer == layer && l.tensors.count("out") && stats.gridRows == view.gridRows) {
            view.datasetPatchOutliers.clear();
            for (auto c : l.tensors.at("out").patchOutliers)
                view.datasetPatchOutliers << float(c);
            view.datasetDescription =
                QStringLiteral("outliers per patch over %1 images (layer %2 block output)")
                    .arg(stats.samples)
                    .arg(layer + 1);
        }
}

TokenNormData buildTokenNorms(const InspectionSnapshot& s, int layer)
{
    TokenNormData v;
    v.model = s.model.name;
    v.image = s.image;
    v.gridRows = v.gridCols = s.model.gridSize;
    v.layer = layer;
    const int first = s.model.firstPatchToken();
    const std::vector<double> norms =
        tokenNorms(s.out.constData() + std::size_t(layer) * s.T * s.d(), s.T, s.d());
    v.cutoff = highNormCutoff(norms, first);
    v.rule = QString::fromStdString(highNormRuleText());
    for (int t = 0; t < s.T; ++t) {
        if (t < first) {
            v.prefixLabels << s.tokens.value(t);
            v.prefixNorms << float(norms[std::size_t(t)]);
        } else {
            v.patchNorms << float(norms[std::size_t(t)]);
        }
    }
    // Darcet et al.'s attention maps: the class token's query in the last layer, per head.
    v.attentionLayer = s.L() - 1;
    for (int h = 0; h < s.H(); ++h) {
        const float* row = s.probsOf(v.attentionLayer, h); // query 0 = [CLS]
        v.clsPrefixAttention << QVector<float>(row, row + first);
        v.clsAttention << QVector<float>(row + first, row + s.T);
    }
    v.provenance = provenanceOf(s, QStringLiteral("token norms of layer %1, [CLS] attention of layer %2")
                                       .arg(layer + 1)
                                       .arg(v.attentionLayer + 1));
    return v;
}

void addDatasetNorms(TokenNormData& view, const StatisticsFile& stats, int layer)
{
    for (const LayerStatisticsData& l : stats.layers) {
        const auto out = l.tensors.find("out");
        if (l.layer != layer || out == l.tensors.end() || out->second.normHistogram.empty() ||
            stats.gridRows != view.gridRows || stats.gridCols != view.gridCols)
            continue;
        const TensorStatisticsData& t = out->second;
        view.datasetBinEdges = QVector<double>(t.normBinEdges.begin(), t.normBinEdges.end());
        view.datasetHistogram.clear(), view.datasetHistogramHighNorm.clear(),
            view.datasetHighNormPatches.clear();
        for (std::int64_t c : t.normHistogram)
            view.datasetHistogram << double(c);
        for (std::int64_t c : t.normHistogramHighNorm)
            view.datasetHistogramHighNorm << double(c);
        const std::size_t first = std::size_t(1 + stats.registers);
        for (std::size_t k = first; k < t.highNormTokens.size(); ++k)
            view.datasetHighNormPatches << float(t.highNormTokens[k]);
        std::int64_t tokens = 0, high = 0;
        for (std::int64_t c : t.normHistogram)
            tokens += c;
        for (std::int64_t c : t.normHistogramHighNorm)
            high += c;
        view.datasetDescription = QStringLiteral("%1 images, %2 of %3 tokens high-norm (red)")
                                      .arg(stats.samples)
                                      .arg(high)
                                      .arg(tokens);
    }
}

QString outlierTensorRead(const ModelInfo& model)
{
    const InputKind kind = model.takesText() ? InputKind::Text : InputKind::Image;
    return QString::fromStdString(pointName(figureTensor(kind, model.isDecoder())));
}

OutlierTensorRef resolveOutlierTensor(const QString& choice, int layer)
{
    if (choice == QLatin1String(kLayerInputChoice))
        return layer > 0 ? OutlierTensorRef{QStringLiteral("out"), layer - 1}
                         : OutlierTensorRef{QStringLiteral("out"), 0, true};
    return {choice, layer};
}

QString defaultOutlierTensor(const ModelInfo& model)
{
    if (model.isDecoder()) {
        try {
            if (readShowcase(model.dir.toStdString())) return QString::fromLatin1(kLayerInputChoice);
        } catch (const std::exception&) {
            // Unreadable: the model opens at the default layer (ModelCatalog says why), so does this page.
        }
    }
    return outlierTensorRead(model);
}

TeachingData buildTeaching(const InspectionSnapshot& s, int token, int layer, int head)
{
    TeachingData t;
    t.modelDescription = s.model.variant;
    t.token = s.tokens.value(token);
    t.layer = layer, t.head = head;
    t.clipped = s.model.clipped;
    t.gated = s.model.gated;
    const int d = s.d();
    // The block input: the previous layer's output (BERT: already LayerNorm-ed), and the FFN
    // output that fed its residual sum.
    const float* input = layer > 0 ? s.out.constData() + (std::size_t(layer - 1) * s.T + token) * d
                                   : s.embeddings.constData() + std::size_t(token) * d;
    t.layerNormMin = *std::min_element(input, input + d);
    t.layerNormMax = *std::max_element(input, input + d);
    if (layer > 0) {
        const float* ffn = s.ffnOut.constData() + (std::size_t(layer - 1) * s.T + token) * d;
        for (int j = 0; j < d; ++j)
            t.ffnOutputMax = std::max(t.ffnOutputMax, double(std::abs(ffn[j])));
    }
    t.preLayerNorm = s.model.preLayerNorm;
    // Causal attention: the keys after the query are masked, so they are no softmax input.
    const int keys = s.model.isDecoder() ? token + 1 : s.T;
    const auto [lowest, highest] = s.scoreRange(layer, head, token);
    t.softmaxInputMin = lowest;
    t.softmaxInputMax = highest;
    const float* probs = s.probsOf(layer, head) + std::size_t(token) * s.T;
    const int best = int(std::max_element(probs, probs + keys) - probs);
    t.largestProbability = probs[best];
    t.largestProbabilityKey = s.tokens.value(best);
    t.largestKeyIsSink = s.sinkToken.value(best);
    t.sinkProbability = sinkShare(s, probs, keys);
    t.sinkTokens = sinkTokensDescription(s.model);
    const float* context = s.contextOf(layer, head) + std::size_t(token) * s.dh();
    double squares = 0;
    for (int j = 0; j < s.dh(); ++j)
        squares += double(context[j]) * context[j];
    t.contextNorm = std::sqrt(squares);
    if (const float* g = s.gatesOf(layer, head)) t.gate = g[token];
    t.visibleKeys = keys;
    t.exactZeros = int(std::count(probs, probs + keys, 0.0f));
    // Outliers in what the head reads, by the snapshot's sigma rule over the previous layer's [T x d]
    // tensor (the FFN output for BERT, the block output for ViT and decoders, as in the figures).
    t.outlierRule = QString::fromStdString(s.outlierRule.shortText());
    t.outlierTensor = outlierTensorRead(s.model);
    if (layer > 0) {
        const std::size_t n = std::size_t(s.T) * d;
        const float* x = s.perLayer(t.outlierTensor).constData() + std::size_t(layer - 1) * n;
        const QVector<int>& perToken = s.outliersOf(t.outlierTensor, layer - 1).perToken;
        t.keyOutliers = perToken.value(best);
        t.tokenOutliers = perToken.value(token);
        for (int j = 0; j < d; ++j)
            t.keyInputMax = std::max(t.keyInputMax, double(std::abs(x[std::size_t(best) * d + j])));
    }
    t.provenance = provenanceOf(s, QStringLiteral("token %1 (%2), layer %3, head %4")
                                       .arg(token)
                                       .arg(t.token)
                                       .arg(layer + 1)
                                       .arg(head + 1));
    return t;
}

} // namespace outlierlens
