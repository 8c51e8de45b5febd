// DatasetStatistics on hand-built samples of different lengths: every statistic is checked against
// values computed by hand, through write() and readStatisticsFile() (so the file layout is covered
// too), plus merge() against sequential accumulation and bounded memory.

#include "../common/tensor_compare.h"

#include "analysis/dataset_statistics.h"
#include "analysis/metrics.h"
#include "common/error.h"
#include "io/hdf5_store.h"

#include <QFileInfo>
#include <QTemporaryDir>
#include <QtTest>

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace outlierlens;

namespace {

constexpr int kLayers = 2;
constexpr int kHeads = 2;
constexpr int kHidden = 8;
constexpr int kHeadDim = 2;

/// Tau rule with tau = 2: on the flat background below (|x| in {0.01, 0.02}) a spike of tens is an
/// outlier as long as a tensor holds more than 2 * (number of spikes) values, which keeps hand
/// computations exact.
OutlierCriterion handCriterion()
{
    OutlierCriterion c;
    c.rule = OutlierRule::Tau;
    c.tau = 2;
    return c;
}

StatisticsOptions textOptions(std::vector<int> layers = {0, 1})
{
    StatisticsOptions o;
    o.kind = InputKind::Text;
    o.layers = std::move(layers);
    o.numLayers = kLayers;
    o.numHeads = kHeads;
    o.hiddenSize = kHidden;
    o.headDim = kHeadDim;
    o.criterion = handCriterion();
    return o;
}

StatisticsOptions imageOptions()
{
    StatisticsOptions o = textOptions();
    o.kind = InputKind::Image;
    o.gridRows = 2;
    o.gridCols = 3;
    return o;
}

/// One sample's captures: a flat background everywhere, uniform attention, |v| = 1.
struct Sample
{
    std::int64_t T;
    std::map<std::string, torch::Tensor> captures;
    std::vector<std::string> tokens;

    explicit Sample(std::vector<std::string> tokenStrings, std::int64_t length = -1)
        : T(length >= 0 ? length : std::int64_t(tokenStrings.size()))
        , tokens(std::move(tokenStrings))
    {
        const torch::Tensor flat =
            (torch::arange(T * kHidden, torch::kFloat).remainder(2) + 1).view({T, kHidden}) * 0.01f;
        captures["embeddings"] = flat.clone();
        for (int l = 0; l < kLayers; ++l) {
            const std::string p = "layer" + std::to_string(l) + "/";
            for (const char* name : {"attn_out", "ffn_out", "residual", "out"})
                captures[p + name] = flat.clone();
            captures[p + "attn_probs"] = torch::full({kHeads, T, T}, 1.0f / float(T));
            captures[p + "attn_values"] = torch::ones({kHeads, T, kHeadDim});
        }
    }
    Sample& spike(const std::string& name, std::int64_t token, std::int64_t dim, float value)
    {
        captures.at(name)[token][dim] = value;
        return *this;
    }
    void addTo(DatasetStatistics& stats) const { stats.addSample(captures, tokens); }
};

StatisticsFile roundTrip(const DatasetStatistics& stats,
                         const std::map<std::string, std::string>& provenance = {})
{
    QTemporaryDir dir;
    const std::string path = dir.filePath("stats.h5").toStdString();
    {
        Hdf5Writer writer(path);
        stats.write(writer);
        for (const auto& [name, value] : provenance)
            writer.setAttribute("/", name, value);
        writer.commit();
    }
    return readStatisticsFile(path);
}

std::size_t tokenIndex(const StatisticsFile& f, const std::string& token)
{
    const auto it = std::find(f.tokens.begin(), f.tokens.end(), token);
    if (it == f.tokens.end()) qFatal("token '%s' missing from the statistics file", token.c_str());
    return std::size_t(it - f.tokens.begin());
}

const LayerStatisticsData& layerOf(const StatisticsFile& f, int layer)
{
    for (const auto& l : f.layers)
        if (l.layer == layer) return l;
    qFatal("layer %d missing from the statistics file", layer);
}

bool close(double a, double b, double tolerance = 1e-6)
{
    return std::abs(a - b) <= tolerance * std::max(1.0, std::abs(b));
}

/// Random samples with random token strings from a small vocabulary and a few spikes. A lone spike
/// can exceed 6 sigma only in a tensor of at least 38 values, hence T >= 6.
std::vector<Sample> randomSamples(int count, std::uint64_t seed)
{
    torch::manual_seed(seed);
    const std::vector<std::string> vocab = {"[CLS]", "[SEP]", "the", ".", ",", "cat", "sat", "##s", "on"};
    std::vector<Sample> samples;
    for (int i = 0; i < count; ++i) {
        const std::int64_t T = 6 + torch::randint(6, {1}).item<std::int64_t>(); // T * d >= 48
        std::vector<std::string> tokens;
        for (std::int64_t t = 0; t < T; ++t)
            tokens.push_back(
                vocab[std::size_t(torch::randint(std::int64_t(vocab.size()), {1}).item<std::int64_t>())]);
        Sample s(tokens);
        for (auto& [name, tensor] : s.captures) {
            if (name.find("attn_probs") != std::string::npos) {
                tensor = torch::softmax(torch::randn({kHeads, T, T}) * 3, -1);
            } else {
                tensor = torch::randn(tensor.sizes());
                if (tensor.dim() == 2 && torch::rand({1}).item<float>() < 0.5f)
                    tensor[torch::randint(T, {1}).item<std::int64_t>()][3] = 100.0f;
            }
        }
        s.captures["layer1/attn_gate"] = torch::rand({kHeads, T});
        samples.push_back(std::move(s));
    }
    return samples;
}

void compareFiles(const StatisticsFile& a, const StatisticsFile& b)
{
    QCOMPARE(a.samples, b.samples);
    QCOMPARE(a.tokens, b.tokens);
    QCOMPARE(a.tokenOccurrences, b.tokenOccurrences);
    QCOMPARE(a.layers.size(), b.layers.size());
    auto closeAll = [](const std::vector<double>& x, const std::vector<double>& y) {
        if (x.size() != y.size()) return false;
        for (std::size_t i = 0; i < x.size(); ++i)
            if (!(close(x[i], y[i], 1e-5) || (std::isnan(x[i]) && std::isnan(y[i])))) return false;
        return true;
    };
    for (std::size_t i = 0; i < a.layers.size(); ++i) {
        QCOMPARE(a.layers[i].tensors.size(), b.layers[i].tensors.size());
        for (const auto& [name, x] : a.layers[i].tensors) {
            const TensorStatisticsData& y = b.layers[i].tensors.at(name);
            QCOMPARE(x.outliersPerDim, y.outliersPerDim);
            QCOMPARE(x.outliers, y.outliers);
            QCOMPARE(x.valuesExamined, y.valuesExamined);
            QCOMPARE(x.tokenOutliers, y.tokenOutliers);
            QCOMPARE(x.tokenOutlierOccurrences, y.tokenOutlierOccurrences);
            QCOMPARE(x.delimiterOutliers, y.delimiterOutliers);
            QVERIFY(close(x.meanMaxInfNorm, y.meanMaxInfNorm, 1e-5));
            QVERIFY(close(x.meanKurtosis, y.meanKurtosis, 1e-5));
        }
        const HeadStatisticsData& x = a.layers[i].heads;
        const HeadStatisticsData& y = b.layers[i].heads;
        QCOMPARE(x.attentionOutliers, y.attentionOutliers);
        QCOMPARE(x.attentionOutliersByKey, y.attentionOutliersByKey);
        QCOMPARE(x.keysExamined, y.keysExamined);
        QCOMPARE(x.outlierKeys, y.outlierKeys);
        QCOMPARE(x.otherKeys, y.otherKeys);
        QCOMPARE(x.gateTokens, y.gateTokens);
        QVERIFY(closeAll(x.meanCumulativeAttention, y.meanCumulativeAttention));
        QVERIFY(closeAll(x.meanAbsValueOutlierKeys, y.meanAbsValueOutlierKeys));
        QVERIFY(closeAll(x.meanAbsValueOtherKeys, y.meanAbsValueOtherKeys));
        QVERIFY(closeAll(x.meanGate, y.meanGate));
    }
    QVERIFY(close(a.summary.maxInfNorm, b.summary.maxInfNorm, 1e-5));
    QVERIFY(close(a.summary.avgKurtosis, b.summary.avgKurtosis, 1e-5));
}

} // namespace

class TstDatasetStatistics : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void requiredCapturesNameEverything()
    {
        const std::set<std::string> names = requiredCaptures(textOptions({1}));
        const std::set<std::string> expected = {"layer1/attn_out",  "layer1/ffn_out",    "layer1/residual",
                                                "layer1/out",       "layer1/attn_probs", "layer1/attn_values",
                                                "layer1/attn_gate", "layer0/out"};
        QCOMPARE(names, expected);
        QVERIFY(requiredCaptures(textOptions({0})).count("embeddings"));
        // Everything a sample carries for both layers is enough.
        DatasetStatistics stats(textOptions());
        Sample s({"[CLS]", "a", "[SEP]"});
        std::map<std::string, torch::Tensor> only;
        for (const auto& name : requiredCaptures(stats.options()))
            if (s.captures.count(name)) only[name] = s.captures[name];
        stats.addSample(only, s.tokens);
        QCOMPARE(stats.samples(), std::int64_t(1));
    }

    void outliersPerDimAndToken()
    {
        DatasetStatistics stats(textOptions());
        Sample({"[CLS]", "the", ".", "[SEP]"})
            .spike("layer1/ffn_out", 3, 2, 50.0f)
            .spike("layer1/ffn_out", 2, 2, -40.0f)
            .addTo(stats);
        Sample({"[CLS]", "a", "the", "cat", "[SEP]"})
            .spike("layer1/ffn_out", 1, 5, 30.0f)
            .spike("layer1/ffn_out", 4, 2, 60.0f)
            .addTo(stats);
        Sample({"[CLS]", "the", "the", "[SEP]"}).addTo(stats); // no outliers at all
        QCOMPARE(stats.samples(), std::int64_t(3));

        const StatisticsFile f = roundTrip(stats);
        QCOMPARE(f.kind, std::string("text"));
        QCOMPARE(f.samples, std::int64_t(3));
        QVERIFY(!f.systematic); // only decoders' files have An et al.'s group
        // Tokens sorted by occurrences (then string); occurrences count every position.
        QCOMPARE(f.tokens, (std::vector<std::string>{"the", "[CLS]", "[SEP]", ".", "a", "cat"}));
        QCOMPARE(f.tokenOccurrences, (std::vector<std::int64_t>{4, 3, 3, 1, 1, 1}));

        const TensorStatisticsData& ffn = layerOf(f, 1).tensors.at("ffn_out");
        QCOMPARE(ffn.outliersPerDim, (std::vector<std::int64_t>{0, 0, 3, 0, 0, 1, 0, 0}));
        QCOMPARE(ffn.outliers, std::int64_t(4));
        QCOMPARE(ffn.valuesExamined, std::int64_t((4 + 5 + 4) * kHidden));
        QCOMPARE(ffn.tokenOutliers[tokenIndex(f, "[SEP]")], std::int64_t(2));
        QCOMPARE(ffn.tokenOutliers[tokenIndex(f, ".")], std::int64_t(1));
        QCOMPARE(ffn.tokenOutliers[tokenIndex(f, "a")], std::int64_t(1));
        QCOMPARE(ffn.tokenOutliers[tokenIndex(f, "the")], std::int64_t(0));
        QCOMPARE(ffn.tokenOutlierOccurrences[tokenIndex(f, "[SEP]")], std::int64_t(2));
        // 3 of the 4 outlier values sit on delimiters; so do 3 of the 4 token occurrences carrying one.
        QCOMPARE(ffn.delimiterOutliers, std::int64_t(3));
        QVERIFY(close(ffn.delimiterShare, 0.75));
        QVERIFY(close(ffn.delimiterOccurrenceShare, 0.75));
        // Mean over samples of the per-sample max |x| (50, 60, 0.02), not the maximum.
        QVERIFY2(close(ffn.meanMaxInfNorm, (50.0 + 60.0 + 0.02) / 3.0),
                 qPrintable(QString::number(ffn.meanMaxInfNorm)));

        // Untouched tensors: no outliers, shares undefined (NaN), inf norm of the background.
        const TensorStatisticsData& attn = layerOf(f, 1).tensors.at("attn_out");
        QCOMPARE(attn.outliers, std::int64_t(0));
        QVERIFY(std::isnan(attn.delimiterShare));
        QVERIFY(close(attn.meanMaxInfNorm, 0.02));
        QCOMPARE(layerOf(f, 0).tensors.size(), std::size_t(4));
    }

    void kurtosisIsAveragedOverSamples()
    {
        DatasetStatistics stats(textOptions({1}));
        Sample a({"x", "y", "z"});
        a.spike("layer1/out", 0, 0, 10.0f);
        Sample b({"x", "y"});
        a.addTo(stats);
        b.addTo(stats);
        const StatisticsFile f = roundTrip(stats);
        const double expected =
            (pearsonKurtosis(a.captures.at("layer1/out")) + pearsonKurtosis(b.captures.at("layer1/out"))) / 2;
        QVERIFY(close(layerOf(f, 1).tensors.at("out").meanKurtosis, expected, 1e-5));
        QVERIFY(expected > 10); // the spike makes it heavy-tailed; the flat sample is ~1
    }

    void patchesAndCls()
    {
        DatasetStatistics stats(imageOptions());
        QCOMPARE(stats.distinctKeys(), std::size_t(7));
        // T = 1 + 2 x 3; token 0 is CLS, token 1 + r * 3 + c is patch (r, c).
        Sample(std::vector<std::string>{}, 7)
            .spike("layer0/out", 0, 1, 50.0f)
            .spike("layer0/out", 1 + 1 * 3 + 2, 3, 40.0f)
            .addTo(stats);
        Sample(std::vector<std::string>{}, 7)
            .spike("layer0/out", 1, 3, 30.0f)
            .spike("layer0/out", 1, 4, 35.0f)
            .addTo(stats);

        const StatisticsFile f = roundTrip(stats);
        QCOMPARE(f.kind, std::string("image"));
        QCOMPARE(f.gridRows, 2);
        QCOMPARE(f.gridCols, 3);
        QVERIFY(f.tokens.empty());
        const TensorStatisticsData& out = layerOf(f, 0).tensors.at("out");
        QCOMPARE(out.patchOutliers, (std::vector<std::int64_t>{2, 0, 0, 0, 0, 1}));
        QCOMPARE(out.patchOutlierOccurrences, (std::vector<std::int64_t>{1, 0, 0, 0, 0, 1}));
        QCOMPARE(out.clsOutliers, std::int64_t(1));
        QCOMPARE(out.clsOutlierOccurrences, std::int64_t(1));
        QCOMPARE(out.outliersPerDim, (std::vector<std::int64_t>{0, 1, 0, 2, 1, 0, 0, 0}));
        QCOMPARE(out.outliers, std::int64_t(4));
        // Image summary: max inf norm and kurtosis of the block output "out".
        QCOMPARE(f.summary.infNormTensor, std::string("out"));
        QCOMPARE(f.summary.kurtosisTensors, std::vector<std::string>{"out"});
        QVERIFY(close(f.summary.maxInfNorm, (50.0 + 35.0) / 2));
        QCOMPARE(f.summary.maxInfNormLayer, 0);

        // Uniform attention over 7 keys: every key's cumulative attention is 1 in every head.
        const HeadStatisticsData& heads = layerOf(f, 0).heads;
        QCOMPARE(heads.meanCumulativeAttention.size(), std::size_t(kHeads * 6));
        for (double v : heads.meanCumulativeAttention)
            QVERIFY(close(v, 1.0));
        QCOMPARE(heads.clsMeanCumulativeAttention.size(), std::size_t(kHeads));
        QVERIFY(close(heads.clsMeanCumulativeAttention[1], 1.0));
        QCOMPARE(heads.attentionOutliers, (std::vector<std::int64_t>{14, 14})); // 1 >= 0.7 for all

        QVERIFY_THROWS_EXCEPTION(Error, stats.addSample(Sample({}, 6).captures, {}));
    }

    /// Issue #42: register tokens between CLS and the patches are their own keys, and the block output's
    /// token norms (Darcet et al.) are recorded per position and as histograms.
    void registersAndTokenNorms()
    {
        StatisticsOptions o = imageOptions();
        o.registers = 2;
        DatasetStatistics stats(o);
        QCOMPARE(stats.distinctKeys(), std::size_t(9));
        // T = 1 + 2 + 2 x 3: CLS, [REG1], [REG2], then patch (r, c) at 3 + r * 3 + c.
        Sample(std::vector<std::string>{}, 9)
            .spike("layer0/out", 2, 1, 50.0f)             // [REG2]
            .spike("layer0/out", 3 + 1 * 3 + 2, 3, 40.0f) // patch 1,2
            .addTo(stats);
        Sample(std::vector<std::string>{}, 9).spike("layer0/out", 3, 3, 30.0f).addTo(stats); // patch 0,0
        const StatisticsFile f = roundTrip(stats);
        QCOMPARE(f.registers, 2);
        const TensorStatisticsData& out = layerOf(f, 0).tensors.at("out");
        QCOMPARE(out.patchOutliers, (std::vector<std::int64_t>{1, 0, 0, 0, 0, 1}));
        QCOMPARE(out.registerOutliers, (std::vector<std::int64_t>{0, 1}));
        QCOMPARE(out.registerOutlierOccurrences, (std::vector<std::int64_t>{0, 1}));
        QCOMPARE(out.clsOutliers, std::int64_t(0));
        const HeadStatisticsData& heads = layerOf(f, 0).heads;
        QCOMPARE(heads.meanCumulativeAttention.size(), std::size_t(kHeads * 6));
        QCOMPARE(heads.registerMeanCumulativeAttention.size(), std::size_t(kHeads * 2));
        QVERIFY(close(heads.registerMeanCumulativeAttention[3], 1.0)); // uniform over 9 keys, 9 queries

        // Norms by hand: the flat rows are 0.01, 0.02, ... alternating, so every token's norm is the same
        // sqrt(4 * (0.01^2 + 0.02^2)) unless it carries a spike, where the spiked entry replaces its value.
        const double flatSq = 4 * (0.01 * 0.01 + 0.02 * 0.02), flat = std::sqrt(flatSq);
        const auto spiked = [&](std::int64_t dim, double v) {
            const double old = dim % 2 == 0 ? 0.01 : 0.02;
            return std::sqrt(flatSq - old * old + v * v);
        };
        QCOMPARE(out.meanTokenNorm.size(), std::size_t(9));
        QVERIFY(close(out.meanTokenNorm[0], flat));
        QVERIFY(close(out.meanTokenNorm[2], (spiked(1, 50) + flat) / 2));
        QVERIFY(close(out.meanTokenNorm[3], (flat + spiked(3, 30)) / 2));
        QVERIFY(close(out.meanTokenNorm[8], (spiked(3, 40) + flat) / 2));
        // High-norm: above 3 x the median patch norm (flat): the spiked tokens, once each.
        QCOMPARE(out.highNormTokens, (std::vector<std::int64_t>{0, 0, 1, 1, 0, 0, 0, 0, 1}));
        QCOMPARE(out.normBinEdges.size(), out.normHistogram.size() + 1);
        const std::int64_t total =
            std::accumulate(out.normHistogram.begin(), out.normHistogram.end(), std::int64_t(0));
        const std::int64_t high = std::accumulate(out.normHistogramHighNorm.begin(),
                                                  out.normHistogramHighNorm.end(), std::int64_t(0));
        QCOMPARE(total, std::int64_t(18));
        QCOMPARE(high, std::int64_t(3));
        // The bin of the flat norm holds the other 15 tokens, its edges around it.
        for (std::size_t b = 0; b < out.normHistogram.size(); ++b)
            if (out.normBinEdges[b] <= flat && flat < out.normBinEdges[b + 1])
                QCOMPARE(out.normHistogram[b], std::int64_t(15));
        // Text files have no norms; another register count is another key layout.
        QVERIFY(layerOf(f, 0).tensors.at("ffn_out").meanTokenNorm.empty());
        StatisticsOptions none = imageOptions();
        DatasetStatistics other(none);
        QVERIFY_THROWS_EXCEPTION(Error, stats.merge(other));
        QVERIFY_THROWS_EXCEPTION(Error, stats.addSample(Sample({}, 7).captures, {}));
        StatisticsOptions bad = textOptions();
        bad.registers = 1;
        QVERIFY_THROWS_EXCEPTION(Error, DatasetStatistics{bad});
    }

    void cumulativeAttentionByToken()
    {
        DatasetStatistics stats(textOptions({1}));
        // Sample 1, tokens A B A: head 0 puts every query on key 0 (cumulative 3, 0, 0); head 1 is
        // uniform (1, 1, 1). Sample 2, tokens B A: head 0 on key 1 (0, 2); head 1 uniform (1, 1).
        Sample s1({"A", "B", "A"});
        s1.captures["layer1/attn_probs"][0].zero_();
        s1.captures["layer1/attn_probs"][0].index_put_({torch::indexing::Slice(), 0}, 1.0f);
        Sample s2({"B", "A"});
        s2.captures["layer1/attn_probs"][0].zero_();
        s2.captures["layer1/attn_probs"][0].index_put_({torch::indexing::Slice(), 1}, 1.0f);
        s1.addTo(stats);
        s2.addTo(stats);

        const StatisticsFile f = roundTrip(stats);
        const HeadStatisticsData& h = layerOf(f, 1).heads;
        const std::size_t n = f.tokens.size();
        QCOMPARE(f.tokens, (std::vector<std::string>{"A", "B"}));
        QCOMPARE(f.tokenOccurrences, (std::vector<std::int64_t>{3, 2}));
        // Mean per occurrence: head 0 A (3 + 0 + 2) / 3, B 0 / 2; head 1 A 3 / 3, B 2 / 2.
        QVERIFY(close(h.meanCumulativeAttention[0 * n + 0], 5.0 / 3.0));
        QVERIFY(close(h.meanCumulativeAttention[0 * n + 1], 0.0));
        QVERIFY(close(h.meanCumulativeAttention[1 * n + 0], 1.0));
        QVERIFY(close(h.meanCumulativeAttention[1 * n + 1], 1.0));
        // Attention outliers (>= 0.1 T): head 0 one key per sample, head 1 every key.
        QCOMPARE(h.attentionOutliers, (std::vector<std::int64_t>{2, 5}));
        QCOMPARE(h.attentionOutliersByKey, (std::vector<std::int64_t>{2, 0, 3, 2}));
        QCOMPARE(h.keysExamined, std::int64_t(5));
    }

    void valueMagnitudeByPreviousOutliers()
    {
        DatasetStatistics stats(textOptions());
        // Sample 1 (T = 3): key 1 has an outlier in layer 0's output, key 2 in the embeddings.
        Sample s1({"a", "b", "c"});
        s1.spike("layer0/out", 1, 0, 50.0f).spike("embeddings", 2, 6, 45.0f);
        s1.captures["layer1/attn_values"] =
            torch::tensor({1.f, 3.f, .5f, -.5f, -4.f, 0.f, 1.f, 1.f, 2.f, -2.f, 0.f, 0.f}).view({2, 3, 2});
        // Sample 2 (T = 2): no outliers anywhere.
        Sample s2({"a", "b"});
        s2.captures["layer1/attn_values"] =
            torch::tensor({1.f, 1.f, 1.f, -1.f, 3.f, 3.f, -3.f, 3.f}).view({2, 2, 2});
        s1.addTo(stats);
        s2.addTo(stats);

        const StatisticsFile f = roundTrip(stats);
        const HeadStatisticsData& h1 = layerOf(f, 1).heads;
        QCOMPARE(h1.previousOutput, std::string("layer0/out"));
        QCOMPARE(h1.outlierKeys, std::int64_t(1));
        QCOMPARE(h1.otherKeys, std::int64_t(4));
        // Per key mean over d_head of |v|: head 0 sample 1: 2, 0.5, 2; sample 2: 1, 1.
        //                                   head 1 sample 1: 1, 2, 0;   sample 2: 3, 3.
        QVERIFY(close(h1.meanAbsValueOutlierKeys[0], 0.5));
        QVERIFY(close(h1.meanAbsValueOutlierKeys[1], 2.0));
        QVERIFY(close(h1.meanAbsValueOtherKeys[0], (2.0 + 2.0 + 1.0 + 1.0) / 4));
        QVERIFY(close(h1.meanAbsValueOtherKeys[1], (1.0 + 0.0 + 3.0 + 3.0) / 4));

        // Layer 0 splits its keys by the embeddings: key 2 of sample 1; values are all ones.
        const HeadStatisticsData& h0 = layerOf(f, 0).heads;
        QCOMPARE(h0.previousOutput, std::string("embeddings"));
        QCOMPARE(h0.outlierKeys, std::int64_t(1));
        QCOMPARE(h0.otherKeys, std::int64_t(4));
        QVERIFY(close(h0.meanAbsValueOutlierKeys[0], 1.0));

        // No key with an outlier at all: the mean is undefined (NaN), the count says why.
        DatasetStatistics none(textOptions({1}));
        s2.addTo(none);
        const StatisticsFile g = roundTrip(none);
        QCOMPARE(layerOf(g, 1).heads.outlierKeys, std::int64_t(0));
        QVERIFY(std::isnan(layerOf(g, 1).heads.meanAbsValueOutlierKeys[0]));
    }

    void gateMeans()
    {
        DatasetStatistics stats(textOptions());
        Sample s1({"a", "b", "c"});
        s1.captures["layer1/attn_gate"] = torch::tensor({.1f, .2f, .3f, 1.f, 1.f, 1.f}).view({2, 3});
        Sample s2({"a", "b"});
        s2.captures["layer1/attn_gate"] = torch::tensor({.5f, .5f, 0.f, 0.f}).view({2, 2});
        s1.addTo(stats);
        s2.addTo(stats);
        const StatisticsFile f = roundTrip(stats);
        const HeadStatisticsData& h = layerOf(f, 1).heads;
        QCOMPARE(h.gateTokens, std::int64_t(5));
        QCOMPARE(h.meanGate.size(), std::size_t(2));
        QVERIFY(close(h.meanGate[0], (0.1 + 0.2 + 0.3 + 0.5 + 0.5) / 5, 1e-6));
        QVERIFY(close(h.meanGate[1], 3.0 / 5, 1e-6));
        QVERIFY(layerOf(f, 0).heads.meanGate.empty()); // no gate captured there
        QCOMPARE(layerOf(f, 0).heads.gateTokens, std::int64_t(0));

        Sample bad({"a", "b"});
        bad.captures["layer1/attn_gate"] = torch::ones({2, 3});
        QVERIFY_THROWS_EXCEPTION(Error, bad.addTo(stats));
    }

    void summaryAndProvenance()
    {
        DatasetStatistics stats(textOptions());
        Sample({"[CLS]", "x", "[SEP]"})
            .spike("layer0/ffn_out", 1, 1, 20.0f)
            .spike("layer1/ffn_out", 2, 1, 70.0f)
            .spike("layer1/out", 2, 1, 9.0f)
            .spike("layer1/attn_out", 2, 1, 500.0f) // not part of the summary
            .addTo(stats);
        Sample({"[CLS]", "y", "y", "[SEP]"}).spike("layer1/ffn_out", 3, 1, 30.0f).addTo(stats);
        const StatisticsFile f = roundTrip(stats, {{"model", "models/bert"}, {"checkpoint_sha256", "abc"}});

        QCOMPARE(f.provenance.at("model"), std::string("models/bert"));
        QCOMPARE(f.provenance.at("checkpoint_sha256"), std::string("abc"));
        QCOMPARE(f.provenance.count("data"), std::size_t(0));
        QVERIFY(f.outlierRule.rule == OutlierRule::Tau);
        QCOMPARE(f.outlierRule.tau, 2.0);
        QCOMPARE(f.outlierRule.k, 6.0);
        QCOMPARE(f.criterion, handCriterion().describe());
        QCOMPARE(f.numHeads, kHeads);
        QCOMPARE(f.hiddenSize, kHidden);
        QCOMPARE(f.delimiters, (std::vector<std::string>{"[SEP]", ".", ","}));

        const StatisticsSummaryData& s = f.summary;
        QCOMPARE(s.infNormTensor, std::string("ffn_out"));
        QCOMPARE(s.kurtosisTensors, (std::vector<std::string>{"ffn_out", "out"}));
        QCOMPARE(s.layers, (std::vector<int>{0, 1}));
        // ffn_out per-layer means: layer 0 (20 + 0.02) / 2, layer 1 (70 + 30) / 2.
        QVERIFY(close(s.meanMaxInfNorm[0], 10.01));
        QVERIFY(close(s.meanMaxInfNorm[1], 50.0));
        QVERIFY(close(s.maxInfNorm, 50.0));
        QCOMPARE(s.maxInfNormLayer, 1);
        // avg kurtosis: mean over layers and over {ffn_out, out}.
        double sum = 0, maximum = 0;
        for (const auto& layer : f.layers)
            for (const char* name : {"ffn_out", "out"}) {
                sum += layer.tensors.at(name).meanKurtosis;
                maximum = std::max(maximum, layer.tensors.at(name).meanKurtosis);
            }
        QVERIFY(close(s.avgKurtosis, sum / 4, 1e-5));
        QVERIFY(close(s.maxKurtosis, maximum, 1e-5));
        QVERIFY(close(s.meanKurtosis[1],
                      (layerOf(f, 1).tensors.at("ffn_out").meanKurtosis +
                       layerOf(f, 1).tensors.at("out").meanKurtosis) /
                          2,
                      1e-5));
    }

    void mergeEqualsSequential()
    {
        const std::vector<Sample> samples = randomSamples(8, 42);
        StatisticsOptions options = textOptions();
        options.criterion = OutlierCriterion(); // the default sigma rule on random data
        DatasetStatistics sequential(options);
        DatasetStatistics first(options);
        DatasetStatistics second(options);
        for (std::size_t i = 0; i < samples.size(); ++i) {
            samples[i].addTo(sequential);
            // Workers see different samples, so their token tables are in different orders.
            samples[i].addTo(i % 3 == 0 ? first : second);
        }
        second.merge(first);
        QCOMPARE(second.samples(), sequential.samples());
        QCOMPARE(second.distinctKeys(), sequential.distinctKeys());
        const StatisticsFile a = roundTrip(sequential);
        const StatisticsFile b = roundTrip(second);
        compareFiles(a, b);

        // Cross-check the per-dimension counts against outlierMask() summed by hand.
        std::vector<std::int64_t> perDim(kHidden, 0);
        for (const auto& s : samples) {
            const torch::Tensor counts =
                outlierMask(s.captures.at("layer1/residual"), options.criterion).sum(0);
            for (int j = 0; j < kHidden; ++j)
                perDim[std::size_t(j)] += counts[j].item<std::int64_t>();
        }
        QCOMPARE(layerOf(a, 1).tensors.at("residual").outliersPerDim, perDim);
        QVERIFY(std::accumulate(perDim.begin(), perDim.end(), std::int64_t(0)) > 0);

        // Different options cannot be merged.
        DatasetStatistics other(textOptions());
        QVERIFY_THROWS_EXCEPTION(Error, other.merge(first));
        DatasetStatistics otherLayers(textOptions({1}));
        QVERIFY_THROWS_EXCEPTION(Error, otherLayers.merge(sequential));
    }

    void layerByLayerEqualsWholeSamples()
    {
        // The runner's streaming form (beginSample, one addSampleLayer per layer with only that layer's
        // captures and its previous output, endSample) counts exactly what addSample() counts.
        const std::vector<Sample> samples = randomSamples(6, 7);
        const StatisticsOptions options = textOptions();
        DatasetStatistics whole(options), streamed(options);
        for (const Sample& s : samples) {
            s.addTo(whole);
            const DatasetStatistics::SampleKeys keys = streamed.beginSample(s.T, s.tokens);
            for (int layer : options.layers) {
                std::map<std::string, torch::Tensor> only;
                for (const auto& [name, tensor] : s.captures)
                    if (name.rfind("layer" + std::to_string(layer) + "/", 0) == 0 ||
                        name == (layer == 0 ? std::string("embeddings")
                                            : "layer" + std::to_string(layer - 1) + "/out"))
                        only.emplace(name, tensor);
                streamed.addSampleLayer(keys, layer, only);
            }
            streamed.endSample();
        }
        compareFiles(roundTrip(whole), roundTrip(streamed));
        QVERIFY_THROWS_EXCEPTION(Error,
                                 streamed.addSampleLayer(streamed.beginSample(6, samples[0].tokens), 1, {}));
    }

    void reducedPrecisionCapturesAreReadInPlace()
    {
        // bf16 captures (autocast) give the statistics of their float32 values, accumulated in float64;
        // a strided view gives those of its contiguous copy.
        const std::vector<Sample> samples = randomSamples(3, 11);
        DatasetStatistics reduced(textOptions()), widened(textOptions());
        for (const Sample& s : samples) {
            Sample bf16 = s, asFloat = s;
            for (auto& [name, tensor] : bf16.captures) {
                tensor = tensor.to(torch::kBFloat16);
                asFloat.captures[name] = tensor.to(torch::kFloat);
            }
            bf16.addTo(reduced);
            asFloat.addTo(widened);
        }
        compareFiles(roundTrip(reduced), roundTrip(widened));

        // Transposed storage: the same values read through strides.
        DatasetStatistics contiguous(textOptions()), strided(textOptions());
        for (const Sample& s : samples) {
            Sample t = s;
            for (auto& [name, tensor] : t.captures)
                if (tensor.dim() == 2) tensor = tensor.t().contiguous().t(); // same values, column-major
            s.addTo(contiguous);
            t.addTo(strided);
        }
        compareFiles(roundTrip(contiguous), roundTrip(strided));
    }

    void memoryDoesNotGrowWithSamples()
    {
        const std::vector<std::string> vocab = {"[CLS]", "[SEP]", "a", "b", "c", ".", ","};
        DatasetStatistics stats(textOptions({1}));
        for (int i = 0; i < 400; ++i) {
            std::vector<std::string> tokens;
            const int T = 2 + i % 7;
            for (int t = 0; t < T; ++t)
                tokens.push_back(vocab[std::size_t((i * 3 + t * 5) % 7)]);
            Sample(tokens).addTo(stats);
            QVERIFY(stats.distinctKeys() <= vocab.size());
        }
        QCOMPARE(stats.samples(), std::int64_t(400));
        QCOMPARE(stats.distinctKeys(), vocab.size());
        const StatisticsFile f = roundTrip(stats);
        QCOMPARE(f.tokens.size(), vocab.size());
        QCOMPARE(layerOf(f, 1).heads.meanCumulativeAttention.size(), std::size_t(kHeads) * vocab.size());

        DatasetStatistics images(imageOptions());
        for (int i = 0; i < 50; ++i)
            Sample({}, 7).addTo(images);
        QCOMPARE(images.distinctKeys(), std::size_t(7));
    }

    void badInputIsAnErrorAndChangesNothing()
    {
        DatasetStatistics stats(textOptions());
        Sample good({"a", "b", "c"});
        good.addTo(stats);

        Sample missing({"a", "b"});
        missing.captures.erase("layer1/attn_values");
        try {
            missing.addTo(stats);
            QFAIL("a missing capture was accepted");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find("layer1/attn_values") != std::string::npos, e.what());
        }
        Sample wrongShape({"a", "b"});
        wrongShape.captures["layer0/attn_probs"] = torch::ones({kHeads, 2, 3});
        try {
            wrongShape.addTo(stats);
            QFAIL("a wrong shape was accepted");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find(
                         "layer0/attn_probs: expected shape [2, 2, 2], found [2, 2, 3]") != std::string::npos,
                     e.what());
        }
        Sample wrongTokens({"a", "b"});
        QVERIFY_THROWS_EXCEPTION(Error, stats.addSample(wrongTokens.captures, {"a"}));
        Sample newToken({"never", "seen"});
        newToken.captures["layer1/out"] = torch::zeros({2, 5});
        QVERIFY_THROWS_EXCEPTION(Error, newToken.addTo(stats));

        // The failed samples left no trace: one sample, three tokens, no "never".
        QCOMPARE(stats.samples(), std::int64_t(1));
        QCOMPARE(stats.distinctKeys(), std::size_t(3));
        const StatisticsFile f = roundTrip(stats);
        QCOMPARE(f.tokenOccurrences, (std::vector<std::int64_t>{1, 1, 1}));
        QCOMPARE(layerOf(f, 0).heads.keysExamined, std::int64_t(3));

        // Options and empty accumulators.
        QVERIFY_THROWS_EXCEPTION(Error, (void)DatasetStatistics(textOptions({2})));
        QVERIFY_THROWS_EXCEPTION(Error, (void)DatasetStatistics(textOptions({})));
        StatisticsOptions noGrid = imageOptions();
        noGrid.gridRows = 0;
        QVERIFY_THROWS_EXCEPTION(Error, (void)DatasetStatistics(noGrid));
        QTemporaryDir dir;
        Hdf5Writer writer(dir.filePath("empty.h5").toStdString());
        QVERIFY_THROWS_EXCEPTION(Error, DatasetStatistics(textOptions()).write(writer));
        QVERIFY_THROWS_EXCEPTION(Error, readStatisticsFile(dir.filePath("missing.h5").toStdString()));
    }

    // A file of a few kilobytes can declare a dataset of a trillion elements (chunked storage that was
    // never written): the reader refuses it from the declared size instead of trying to allocate it.
    void datasetLargerThanItsFileIsRefused()
    {
        QTemporaryDir dir;
        const std::string path = dir.filePath("huge.h5").toStdString();
        {
            const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
            const hsize_t dims[2] = {1u << 20, 1u << 20};
            const hsize_t chunk[2] = {64, 64};
            const hid_t space = H5Screate_simple(2, dims, nullptr);
            const hid_t props = H5Pcreate(H5P_DATASET_CREATE);
            H5Pset_chunk(props, 2, chunk);
            const hid_t set =
                H5Dcreate2(file, "values", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, props, H5P_DEFAULT);
            const hid_t strType = H5Tcopy(H5T_C_S1);
            H5Tset_size(strType, H5T_VARIABLE);
            const hid_t names = H5Dcreate2(file, "names", strType, space, H5P_DEFAULT, props, H5P_DEFAULT);
            QVERIFY(file >= 0 && set >= 0 && names >= 0);
            H5Dclose(names);
            H5Tclose(strType);
            H5Dclose(set);
            H5Pclose(props);
            H5Sclose(space);
            H5Fclose(file);
        }
        QVERIFY(QFileInfo(QString::fromStdString(path)).size() < 100'000);
        const Hdf5Reader reader(path);
        QCOMPARE(reader.shape("values"), (std::vector<std::int64_t>{1 << 20, 1 << 20}));
        for (const auto& read : {+[](const Hdf5Reader& r) { (void)r.readTensor("values"); },
                                 +[](const Hdf5Reader& r) { (void)r.readStrings("names"); }}) {
            try {
                read(reader);
                QFAIL("a dataset larger than its file was read");
            } catch (const Error& e) {
                QVERIFY2(std::string(e.what()).find("declares 1099511627776 elements, more than a file of") !=
                             std::string::npos,
                         e.what());
            }
        }
    }
};

QTEST_APPLESS_MAIN(TstDatasetStatistics)
#include "tst_dataset_statistics.moc"
