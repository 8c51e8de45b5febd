// Simulated quantization: the grid, the range estimators, the model hooks and a whole experiment.

#include "analysis/recording_sink.h"
#include "model/bert_network.h"
#include "model/decoder_network.h"
#include "model/vit_network.h"
#include "quant/evaluation.h"
#include "quant/quantizer.h"
#include "train/trainer.h"

#include <QTemporaryDir>
#include <QtTest>

#include <torch/torch.h>

#include <atomic>

using namespace outlierlens;

namespace {

BertNetwork tinyBert(BertHead head)
{
    BertConfig c = BertConfig::preset("bert-tiny");
    c.vocabSize = 50;
    c.numLayers = 2;
    c.maxPositions = 32;
    if (head == BertHead::SequenceClassification) c.id2label = {"a", "b", "c"};
    return BertNetwork::create(c, head, 7);
}

struct TextBatch
{
    torch::Tensor ids, types, mask;
};

TextBatch textBatch(std::uint64_t seed)
{
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    TextBatch b;
    b.ids = torch::randint(5, 50, {4, 12}, gen, torch::kLong);
    b.types = torch::zeros_like(b.ids);
    b.mask = torch::ones_like(b.ids);
    b.mask.index_put_({0, torch::indexing::Slice(8, torch::indexing::None)}, 0); // padding in one row
    return b;
}

torch::Tensor logitsOf(BertNetwork& net, const TextBatch& b, ActivationSink* sink = nullptr)
{
    c10::InferenceMode guard;
    return net.forward(b.ids, b.types, b.mask, sink).logits;
}

double relativeChange(const torch::Tensor& a, const torch::Tensor& b)
{
    return ((a - b).norm() / b.norm()).item<double>();
}

/// An independent fake-quant in plain loops: asymmetric b-bit grid over [lo, hi] widened to contain 0,
/// scale (hi - lo) / (2^b - 1), zero point round(-lo / scale) (ties to even), clamp to [0, 2^b - 1].
double fakeQuant(double x, double lo, double hi, int bits)
{
    lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
    const double qmax = std::ldexp(1.0, bits) - 1;
    double scale = (hi - lo) / qmax;
    if (!(scale > 0)) scale = 1e-8;
    const double zero = std::nearbyint(-lo / scale);
    const double q = std::min(std::max(std::nearbyint(x / scale) + zero, 0.0), qmax);
    return (q - zero) * scale;
}

} // namespace

class TestQuant : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void asymmetricGridRoundTrips();
    void symmetricGridRoundTrips();
    void estimators();
    void percentileAndMseClipTails();
    void weightsPerTensorAndPerChannel();
    void disabledQuantizersChangeNothing();
    void sixteenBitsBarelyChangeAModel();
    void eightBitsDoChangeAModel();
    void calibrationIsReproducible();
    void experimentOnASyntheticModel();
    void perTokenAndPerChannelActivations();
    void keepFpTokensStayExactAndOutOfTheRange();
    void interventionEqualsEditedWeights();
    void interventionOnTokensAndMeans();
    void removingAKeyEqualsMaskingIt();
    void ablatingAHeadEqualsZeroingItsOutputColumns();
    void settingAGateEqualsAGateThatIgnoresItsInput();
    void keysAndValuesTakeTheirOwnBits();
};

void TestQuant::asymmetricGridRoundTrips()
{
    // [-1, 3] on 8 bits: s = 4 / 255, z = round(255 / 4) = 64; grid points map onto themselves.
    const QuantGrid g = QuantGrid::asymmetric(-1.0, 3.0, 8);
    QCOMPARE(g.qmin, 0.0);
    QCOMPARE(g.qmax, 255.0);
    QVERIFY(qFuzzyCompare(g.scale, 4.0 / 255.0));
    QCOMPARE(g.zeroPoint, 64.0);
    const torch::Tensor ints = torch::arange(0, 256, torch::kDouble);
    const torch::Tensor points = (ints - g.zeroPoint) * g.scale;
    QVERIFY(torch::allclose(g.apply(points), points, 0, 1e-12));
    // Zero is exact; inside the range the error is at most half a step; outside it clamps.
    QCOMPARE(g.apply(torch::zeros({1}, torch::kDouble)).item<double>(), 0.0);
    const torch::Tensor x = torch::linspace(-1.0, 2.9, 1001, torch::kDouble);
    QVERIFY((g.apply(x) - x).abs().max().item<double>() <= g.scale / 2 + 1e-12);
    QVERIFY(
        qFuzzyCompare(g.apply(torch::full({1}, 10.0, torch::kDouble)).item<double>(), (255 - 64) * g.scale));
    QVERIFY(qFuzzyCompare(g.apply(torch::full({1}, -10.0, torch::kDouble)).item<double>(), -64 * g.scale));
    // A range that does not contain 0 is widened to contain it.
    const QuantGrid positive = QuantGrid::asymmetric(2.0, 4.0, 4);
    QCOMPARE(positive.zeroPoint, 0.0);
    QVERIFY(qFuzzyCompare(positive.scale, 4.0 / 15.0));
}

void TestQuant::symmetricGridRoundTrips()
{
    const QuantGrid g = QuantGrid::symmetric(1.27, 8);
    QCOMPARE(g.qmin, -128.0);
    QCOMPARE(g.qmax, 127.0);
    QVERIFY(qFuzzyCompare(g.scale, 0.01));
    const torch::Tensor x = torch::tensor({-1.27, -0.5, 0.0, 0.004, 0.006, 1.27, 5.0}, torch::kDouble);
    const torch::Tensor q = g.apply(x);
    const double expected[] = {-1.27, -0.5, 0.0, 0.0, 0.01, 1.27, 1.27};
    for (int i = 0; i < 7; ++i)
        QVERIFY2(std::abs(q[i].item<double>() - expected[i]) < 1e-12, qPrintable(QString::number(i)));
}

void TestQuant::estimators()
{
    const torch::Tensor a = torch::tensor({-1.0, 0.5, 1.0}), b = torch::tensor({-2.0, 0.0, 3.0});
    const auto range = [](RangeEstimator e, const std::vector<torch::Tensor>& batches) {
        ActivationQuantizer q(e, 8, 99.999);
        for (const torch::Tensor& x : batches)
            q.calibrate(x);
        return *q.range();
    };
    // Current min-max: the last batch only.
    QVERIFY(range(RangeEstimator::CurrentMinMax, {a, b}) == std::make_pair(-2.0, 3.0));
    // Running min-max, momentum 0.9: the first batch starts it, then 0.9 old + 0.1 new.
    const auto running = range(RangeEstimator::RunningMinMax, {a, b});
    QVERIFY(qFuzzyCompare(running.first, 0.9 * -1.0 + 0.1 * -2.0));
    QVERIFY(qFuzzyCompare(running.second, 0.9 * 1.0 + 0.1 * 3.0));
    QVERIFY(range(RangeEstimator::RunningMinMax, {b}) == std::make_pair(-2.0, 3.0));
    QVERIFY(parseRangeEstimator("running_minmax") == RangeEstimator::RunningMinMax);
    QVERIFY_THROWS_EXCEPTION(std::exception, parseRangeEstimator("max"));
    // After calibration the quantizer applies the fixed range: values beyond it clamp.
    ActivationQuantizer q(RangeEstimator::CurrentMinMax, 8, 99.999);
    q.calibrate(a);
    QVERIFY(std::abs(q.apply(torch::tensor({10.0f})).item<double>() - 1.0) < 2.0 / 255);
}

void TestQuant::percentileAndMseClipTails()
{
    // 100,000 values uniform in [0, 1) and one outlier of 1000.
    torch::Tensor x =
        torch::cat({torch::arange(0, 100000, torch::kFloat) / 100000.0f, torch::tensor({1000.0f})});
    const auto minmax = batchRange(x, RangeEstimator::CurrentMinMax, 8);
    QCOMPARE(minmax.second, 1000.0);
    const auto p99 = batchRange(x, RangeEstimator::Percentile, 8, 99.0);
    QVERIFY2(std::abs(p99.second - 0.99) < 1e-3, qPrintable(QString::number(p99.second)));
    QVERIFY(std::abs(p99.first - 0.01) < 1e-3);
    // MSE: on 4 bits a Gaussian is best quantized with its tails clipped (about 2.5 sigma, not its
    // min-max of about 4.4 sigma), and the search finds a range with a smaller error than min-max.
    const torch::Tensor g = torch::randn({100000}, at::make_generator<at::CPUGeneratorImpl>(9));
    const auto gaussMinmax = batchRange(g, RangeEstimator::CurrentMinMax, 4);
    const auto mse = batchRange(g, RangeEstimator::Mse, 4);
    QVERIFY2(mse.second < 0.8 * gaussMinmax.second && mse.first > 0.8 * gaussMinmax.first,
             qPrintable(QString("%1 %2").arg(mse.first).arg(mse.second)));
    const auto errorOf = [&](std::pair<double, double> r) {
        return (QuantGrid::asymmetric(r.first, r.second, 4).apply(g) - g).pow(2).mean().item<double>();
    };
    QVERIFY(errorOf(mse) < errorOf(gaussMinmax));
    // Weights (symmetric): likewise below max|w| on 4 bits.
    QVERIFY(mseSymmetricMax(g, 4) < 0.8 * g.abs().max().item<double>());
}

void TestQuant::weightsPerTensorAndPerChannel()
{
    BertNetwork net = tinyBert(BertHead::MaskedLM);
    const torch::Tensor before =
        net.module().named_parameters()["bert.encoder.layer.0.attention.self.query.weight"].clone();
    const torch::Tensor gateless =
        net.module().named_parameters()["cls.predictions.transform.dense.weight"].clone();
    QuantOptions o;
    o.weightBits = 4;
    const std::vector<std::string> names = quantizeWeights(net.module(), o, {"cls."});
    QVERIFY(std::find(names.begin(), names.end(), "bert.encoder.layer.0.attention.self.query.weight") !=
            names.end());
    QVERIFY(std::find(names.begin(), names.end(), "bert.embeddings.word_embeddings.weight") != names.end());
    QVERIFY(std::none_of(names.begin(), names.end(),
                         [](const std::string& n) { return n.rfind("cls.", 0) == 0; }));
    const torch::Tensor after =
        net.module().named_parameters()["bert.encoder.layer.0.attention.self.query.weight"];
    // Per tensor, 4 bits: at most 16 distinct values, each within half a step of the original.
    QVERIFY(std::get<0>(torch::_unique(after)).numel() <= 16);
    const double step = before.abs().max().item<double>() / 7;
    QVERIFY((after - before).abs().max().item<double>() <= step / 2 + 1e-6);
    QVERIFY(
        torch::equal(net.module().named_parameters()["cls.predictions.transform.dense.weight"], gateless));

    // Per channel: each output row has its own scale, so every row keeps its largest weight exactly.
    BertNetwork other = tinyBert(BertHead::MaskedLM);
    const torch::Tensor rowBefore =
        other.module().named_parameters()["bert.encoder.layer.1.output.dense.weight"].clone();
    o.perChannelWeights = true;
    quantizeWeights(other.module(), o, {});
    const torch::Tensor rowAfter =
        other.module().named_parameters()["bert.encoder.layer.1.output.dense.weight"];
    QVERIFY(
        torch::allclose(std::get<0>(rowAfter.abs().max(1)), std::get<0>(rowBefore.abs().max(1)), 1e-6, 1e-7));
}

void TestQuant::disabledQuantizersChangeNothing()
{
    BertNetwork net = tinyBert(BertHead::SequenceClassification);
    const TextBatch b = textBatch(1);
    const torch::Tensor reference = logitsOf(net, b);
    QuantOptions off;
    off.quantizeActivations = false;
    off.quantizeWeights = false;
    QuantizationSink sink(off);
    QVERIFY(torch::equal(logitsOf(net, b, &sink), reference));
    // The same for a ViT.
    VitConfig c = VitConfig::preset("vit-fmnist");
    c.numLayers = 2;
    VitNetwork vit = VitNetwork::create(c, 5);
    const torch::Tensor pixels = torch::randn({2, c.numChannels, c.imageSize, c.imageSize});
    c10::InferenceMode guard;
    QVERIFY(torch::equal(vit.forward(pixels, &sink).logits, vit.forward(pixels).logits));
}

void TestQuant::sixteenBitsBarelyChangeAModel()
{
    BertNetwork net = tinyBert(BertHead::SequenceClassification);
    const TextBatch calibration = textBatch(2), test = textBatch(3);
    const torch::Tensor reference = logitsOf(net, test);
    QuantOptions o;
    o.weightBits = o.activationBits = 16;
    o.estimator = RangeEstimator::CurrentMinMax;
    quantizeWeights(net.module(), o, {".alpha."});
    QuantizationSink sink(o);
    logitsOf(net, calibration, &sink);
    logitsOf(net, test, &sink); // calibrating on the test batch too: no clipping
    sink.setCalibrating(false);
    const double change = relativeChange(logitsOf(net, test, &sink), reference);
    QVERIFY2(change < 1e-3, qPrintable(QString::number(change)));
    QVERIFY(change > 0);
    // Every site of every layer got a quantizer.
    const auto ranges = sink.ranges();
    QVERIFY(ranges.count("layer1/attn_scores") && ranges.count("layer0/ffn_intermediate") &&
            ranges.count("embedding_sum") && ranges.count("pooler") && ranges.count("logits"));
    QCOMPARE(ranges.at("layer0/attn_probs").first, 0.0);
}

void TestQuant::eightBitsDoChangeAModel()
{
    BertNetwork net = tinyBert(BertHead::SequenceClassification);
    const TextBatch b = textBatch(4);
    const torch::Tensor reference = logitsOf(net, b);
    QuantOptions o;
    o.activationBits = 4;
    QuantizationSink sink(o);
    logitsOf(net, b, &sink);
    sink.setCalibrating(false);
    QVERIFY(relativeChange(logitsOf(net, b, &sink), reference) > 1e-3);
}

void TestQuant::calibrationIsReproducible()
{
    const auto calibrated = [](std::uint64_t seed) {
        BertNetwork net = tinyBert(BertHead::SequenceClassification);
        QuantizationSink sink(QuantOptions{});
        for (int i = 0; i < 3; ++i)
            logitsOf(net, textBatch(seed * 10 + std::uint64_t(i)), &sink);
        return sink.ranges();
    };
    QVERIFY(calibrated(1) == calibrated(1));
    QVERIFY(calibrated(1) != calibrated(2));
}

void TestQuant::experimentOnASyntheticModel()
{
    // Train a tiny model on the synthetic task for a few steps, then run the whole experiment twice.
    QTemporaryDir dir;
    TrainConfig t;
    t.task = TrainTask::Synthetic;
    t.output = dir.filePath("run").toStdString();
    t.preset = "bert-tiny";
    t.numLayers = 2;
    t.steps = 4;
    t.warmupSteps = 1;
    t.batchSize = 8;
    t.evalEvery = 4;
    t.checkpointEvery = 4;
    t.evalBatches = 1;
    t.logEvery = 4;
    t.threads = 1;
    std::atomic<bool> stop{false};
    const TrainResult trained = runTraining(t, false, stop, [](const std::string&) {});
    QCOMPARE(int(trained.outcome), int(TrainOutcome::Finished));

    QuantExperiment e;
    e.modelDir = t.output + "/final";
    e.data = "synthetic";
    e.calibBatches = 2;
    e.seeds = 2;
    e.batchSize = 8;
    e.evalBatches = 2;
    e.sensitivity = true;
    std::vector<std::string> messages;
    const QuantResult a = runQuantExperiment(e, [&](const std::string& m) { messages.push_back(m); });
    const QuantResult b = runQuantExperiment(e, [](const std::string&) {});
    QVERIFY(a.metricName == "accuracy");
    QCOMPARE(int(a.quantMetrics.size()), 2);
    QVERIFY(a.quantMetrics == b.quantMetrics); // same seeds, same calibration batches, same numbers
    QCOMPARE(a.floatMetric, b.floatMetric);
    QVERIFY(a.ranges == b.ranges);
    QCOMPARE(int(a.maxInfNormPerLayer.size()), 2);
    QVERIFY(a.maxInfNorm > 0 && a.avgKurtosis > 0);
    QCOMPARE(int(a.sensitivity.size()), 3); // embeddings+head and the two layers
    for (std::size_t i = 1; i < a.sensitivity.size(); ++i)
        QVERIFY(a.sensitivity[i - 1].damage >= a.sensitivity[i].damage);
    QVERIFY(!messages.empty());

    e.data = "text:nowhere.txt";
    QVERIFY_THROWS_EXCEPTION(std::exception, runQuantExperiment(e, [](const std::string&) {}));
    e.data = "pictures";
    QVERIFY_THROWS_EXCEPTION(std::exception, runQuantExperiment(e, [](const std::string&) {}));
}

void TestQuant::perTokenAndPerChannelActivations()
{
    const torch::Tensor x = torch::randn({2, 5, 7}, torch::kFloat) * 3 + torch::arange(7).to(torch::kFloat);
    const auto at = [](const torch::Tensor& t, int b, int i, int j) {
        return double(t[b][i][j].item<float>());
    };
    // Per token (dynamic, 4 bits): each row's own min and max.
    ActivationQuantizer token(RangeEstimator::RunningMinMax, 4, 99.999, ActivationGranularity::Token);
    const torch::Tensor qt = token.calibrate(x);
    for (int b = 0; b < 2; ++b)
        for (int i = 0; i < 5; ++i) {
            double lo = at(x, b, i, 0), hi = lo;
            for (int j = 0; j < 7; ++j)
                lo = std::min(lo, at(x, b, i, j)), hi = std::max(hi, at(x, b, i, j));
            for (int j = 0; j < 7; ++j)
                QVERIFY(std::abs(at(qt, b, i, j) - fakeQuant(at(x, b, i, j), lo, hi, 4)) < 1e-5);
        }
    QVERIFY(!token.range());
    // Per channel (static, running min-max over two batches, momentum 0.9), then applied to a third.
    ActivationQuantizer channel(RangeEstimator::RunningMinMax, 8, 99.999, ActivationGranularity::Channel);
    const torch::Tensor y = torch::randn({3, 4, 7}, torch::kFloat) * 5;
    channel.calibrate(x);
    channel.calibrate(y);
    const torch::Tensor z = torch::randn({1, 6, 7}, torch::kFloat) * 4;
    const torch::Tensor qc = channel.apply(z);
    for (int j = 0; j < 7; ++j) {
        double lo1 = 1e30, hi1 = -1e30, lo2 = 1e30, hi2 = -1e30;
        for (int b = 0; b < 2; ++b)
            for (int i = 0; i < 5; ++i)
                lo1 = std::min(lo1, at(x, b, i, j)), hi1 = std::max(hi1, at(x, b, i, j));
        for (int b = 0; b < 3; ++b)
            for (int i = 0; i < 4; ++i)
                lo2 = std::min(lo2, at(y, b, i, j)), hi2 = std::max(hi2, at(y, b, i, j));
        const double lo = 0.9 * lo1 + 0.1 * lo2, hi = 0.9 * hi1 + 0.1 * hi2;
        for (int i = 0; i < 6; ++i)
            QVERIFY2(std::abs(at(qc, 0, i, j) - fakeQuant(at(z, 0, i, j), lo, hi, 8)) < 1e-5,
                     qPrintable(QStringLiteral("channel %1 token %2").arg(j).arg(i)));
    }
    QVERIFY_THROWS_EXCEPTION(Error, channel.apply(torch::zeros({1, 2, 5})));
    QVERIFY_THROWS_EXCEPTION(
        Error, ActivationQuantizer(RangeEstimator::Mse, 8, 99.999, ActivationGranularity::Channel));
    QVERIFY(parseActivationGranularity("token") == ActivationGranularity::Token);
    QVERIFY_THROWS_EXCEPTION(Error, parseActivationGranularity("row"));
}

void TestQuant::keepFpTokensStayExactAndOutOfTheRange()
{
    // A sink at position 0 with a huge value: kept in floating point, it leaves the others a fine grid.
    torch::Tensor x = torch::randn({2, 6, 4}, torch::kFloat);
    x.select(1, 0).fill_(500.0f);
    ActivationQuantizer keep(RangeEstimator::CurrentMinMax, 8, 99.999, ActivationGranularity::Tensor, 1);
    const torch::Tensor q = keep.calibrate(x);
    QVERIFY(torch::equal(q.select(1, 0), x.select(1, 0)));
    const torch::Tensor rest = x.narrow(1, 1, 5);
    const double lo = rest.min().item<double>(), hi = rest.max().item<double>();
    QCOMPARE(keep.range()->first, lo);
    QCOMPARE(keep.range()->second, hi);
    for (int b = 0; b < 2; ++b)
        for (int i = 1; i < 6; ++i)
            for (int j = 0; j < 4; ++j)
                QVERIFY(std::abs(q[b][i][j].item<float>() - fakeQuant(x[b][i][j].item<float>(), lo, hi, 8)) <
                        1e-5);
    // Without keeping it, the sink sets the range and the rest lose their precision.
    ActivationQuantizer all(RangeEstimator::CurrentMinMax, 8, 99.999);
    const double errorAll = (all.calibrate(x) - x).narrow(1, 1, 5).abs().max().item<double>();
    const double errorKept = (q - x).narrow(1, 1, 5).abs().max().item<double>();
    QVERIFY2(errorKept * 20 < errorAll, qPrintable(QStringLiteral("%1 vs %2").arg(errorKept).arg(errorAll)));
    // A 2-D tensor (logits) has no token axis: nothing is kept.
    ActivationQuantizer flat(RangeEstimator::CurrentMinMax, 8, 99.999, ActivationGranularity::Tensor, 1);
    const torch::Tensor l = torch::randn({3, 5});
    flat.calibrate(l);
    QCOMPARE(flat.range()->second, l.max().item<double>());
}

/// Zeroing hidden dimensions of a layer's FFN output for every token is what a model whose FFN output
/// projection has those rows (and bias entries) zeroed computes: the logits agree.
void TestQuant::interventionEqualsEditedWeights()
{
    BertNetwork net = tinyBert(BertHead::SequenceClassification);
    const TextBatch b = textBatch(4);
    Intervention i;
    i.layer = 1, i.tensor = "ffn_out", i.dims = {3, 7, 40};
    InterventionSink sink(i, interventionSite("ffn_out", true));
    const torch::Tensor intervened = logitsOf(net, b, &sink);
    const torch::Tensor original = logitsOf(net, b);
    QVERIFY(relativeChange(intervened, original) > 1e-4); // it does something
    BertNetwork edited = tinyBert(BertHead::SequenceClassification);
    {
        torch::NoGradGuard noGrad;
        int found = 0;
        for (auto& p : edited.module().named_parameters(true)) {
            const std::string& name = p.key();
            const bool weight =
                name.size() > 26 && name.find("layer.1.output.dense.weight") != std::string::npos;
            const bool bias = name.find("layer.1.output.dense.bias") != std::string::npos;
            if (!weight && !bias) continue;
            for (std::int64_t d : i.dims)
                p.value()[d].zero_();
            ++found;
        }
        QCOMPARE(found, 2);
    }
    const torch::Tensor reference = logitsOf(edited, b);
    QVERIFY2((intervened - reference).abs().max().item<double>() < 1e-5,
             qPrintable(QString::number((intervened - reference).abs().max().item<double>())));

    // A ViT: its MLP's fc2 rows.
    VitConfig c = VitConfig::preset("vit-fmnist");
    c.numLayers = 2;
    VitNetwork vit = VitNetwork::create(c, 5), vitEdited = VitNetwork::create(c, 5);
    {
        torch::NoGradGuard noGrad;
        for (auto& p : vitEdited.module()->named_parameters(true))
            if (p.key().find("blocks.0.mlp.fc2") != std::string::npos ||
                p.key().find("blocks.0.fc2") != std::string::npos)
                for (std::int64_t d : {std::int64_t(5), std::int64_t(9)})
                    p.value()[d].zero_();
    }
    Intervention v;
    v.layer = 0, v.tensor = "ffn_out", v.dims = {5, 9};
    InterventionSink vitSink(v, interventionSite("ffn_out", false));
    const torch::Tensor pixels = torch::randn({2, c.numChannels, c.imageSize, c.imageSize});
    c10::InferenceMode guard;
    const torch::Tensor a = vit.forward(pixels, &vitSink).logits, e = vitEdited.forward(pixels).logits;
    QVERIFY(relativeChange(a, vit.forward(pixels).logits) > 1e-4);
    QVERIFY2((a - e).abs().max().item<double>() < 1e-5,
             qPrintable(QString::number((a - e).abs().max().item<double>())));
}

/// A value set on chosen tokens and dimensions reaches the next layer exactly there; the collected mean is
/// the mean of those entries (torch on a recorded capture); bad requests are errors.
void TestQuant::interventionOnTokensAndMeans()
{
    BertNetwork net = tinyBert(BertHead::SequenceClassification);
    const TextBatch b = textBatch(5);
    RecordingSink record({"layer0/out", "layer1/attn_out"});
    logitsOf(net, b, &record);
    const torch::Tensor out0 = record.at("layer0/out");

    Intervention mean;
    mean.layer = 0, mean.tensor = "out", mean.dims = {2, 11}, mean.tokens = {0, 5};
    mean.value = Intervention::Value::Mean;
    InterventionSink collect(mean, interventionSite("out", true));
    collect.setCollecting(true);
    QVERIFY(torch::equal(logitsOf(net, b, &collect), logitsOf(net, b))); // collecting changes nothing
    const torch::Tensor want = out0.index_select(1, torch::tensor({0, 5}, torch::kLong))
                                   .index_select(2, torch::tensor({2, 11}, torch::kLong))
                                   .to(torch::kDouble)
                                   .mean(std::vector<std::int64_t>{0, 1});
    QVERIFY(torch::allclose(collect.means(), want, 1e-6, 1e-6));

    // A constant on token 0, dims 2 and 11 of layer 1's output: the recorded input of the next layer's
    // attention output differs, and rerunning with that tensor edited by hand gives the same logits.
    Intervention set;
    set.layer = 0, set.tensor = "out", set.dims = {2, 11}, set.tokens = {0};
    set.value = Intervention::Value::Constant, set.constant = 7.5;
    RecordingSink after({"layer1/attn_out"});
    InterventionSink sink(set, interventionSite("out", true), &after);
    logitsOf(net, b, &sink);
    QVERIFY(!torch::equal(after.at("layer1/attn_out"), record.at("layer1/attn_out")));
    Intervention all = set;
    all.tokens = {};
    InterventionSink everywhere(all, interventionSite("out", true));
    QVERIFY(!torch::equal(logitsOf(net, b, &everywhere), logitsOf(net, b, &sink)));

    Intervention bad = set;
    bad.dims = {1000};
    InterventionSink beyond(bad, interventionSite("out", true));
    QVERIFY_THROWS_EXCEPTION(Error, logitsOf(net, b, &beyond));
    bad = set;
    bad.tensor = "residual";
    QVERIFY_THROWS_EXCEPTION(Error, bad.validate());
    QCOMPARE(set.describe(), std::string("layer 1 out, dims 2,11, token 0: set to 7.500000"));
}

/// Removing key 0 from every query of every head (renormalised) is what BERT computes when its attention
/// mask hides key 0; without renormalisation, what it computes when token 0's value vector is 0.
void TestQuant::removingAKeyEqualsMaskingIt()
{
    BertConfig c = BertConfig::preset("bert-tiny");
    c.vocabSize = 50, c.numLayers = 1, c.maxPositions = 32, c.id2label = {"a", "b", "c"};
    BertNetwork net = BertNetwork::create(c, BertHead::SequenceClassification, 11);
    const TextBatch b = textBatch(6);
    Intervention remove;
    remove.layer = 0, remove.tensor = "attn_probs", remove.keys = {0};
    InterventionSink sink(remove, interventionSite("attn_probs", true));
    const torch::Tensor removed = logitsOf(net, b, &sink);
    TextBatch masked = b;
    masked.mask = b.mask.clone();
    masked.mask.select(1, 0).zero_();
    const torch::Tensor reference = logitsOf(net, masked);
    QVERIFY(relativeChange(removed, logitsOf(net, b)) > 1e-4);
    QVERIFY2((removed - reference).abs().max().item<double>() < 1e-5,
             qPrintable(QString::number((removed - reference).abs().max().item<double>())));

    remove.renormalize = false;
    InterventionSink raw(remove, QuantSite::AttnProbs);
    Intervention zeroValue;
    zeroValue.layer = 0, zeroValue.tensor = "out", zeroValue.tokens = {0};
    InterventionSink value(zeroValue, QuantSite::Value); // v_0 = 0 in every head
    const torch::Tensor a = logitsOf(net, b, &raw), e = logitsOf(net, b, &value);
    QVERIFY(relativeChange(a, removed) > 1e-4);
    QVERIFY2((a - e).abs().max().item<double>() < 1e-5,
             qPrintable(QString::number((a - e).abs().max().item<double>())));

    // One head only changes less than all of them; bad requests are errors.
    remove.renormalize = true, remove.heads = {1};
    InterventionSink oneHead(remove, QuantSite::AttnProbs);
    QVERIFY(relativeChange(logitsOf(net, b, &oneHead), removed) > 1e-6);
    remove.heads = {40};
    InterventionSink noSuchHead(remove, QuantSite::AttnProbs);
    QVERIFY_THROWS_EXCEPTION(Error, logitsOf(net, b, &noSuchHead));
    Intervention noKeys;
    noKeys.tensor = "attn_probs";
    QVERIFY_THROWS_EXCEPTION(Error, noKeys.validate());
    Intervention described;
    described.tensor = "attn_probs", described.keys = {0}, described.heads = {1};
    QCOMPARE(described.describe(),
             std::string("layer 1 attention, head 2: key 0 removed from every query, renormalised"));
}

namespace {

/// Zeroes the input columns [h * dh, (h + 1) * dh) of every parameter whose name contains `name` (a
/// [out, in] weight): what the output projection reads of head h.
int zeroHeadColumns(torch::nn::Module& module, const std::string& name, std::int64_t h, std::int64_t dh)
{
    torch::NoGradGuard noGrad;
    int found = 0;
    for (auto& p : module.named_parameters(true))
        if (p.key().find(name) != std::string::npos && p.value().dim() == 2) {
            p.value().narrow(1, h * dh, dh).zero_();
            ++found;
        }
    return found;
}

} // namespace

/// attn_context: a head's output set to 0 gives what a model whose output projection ignores that head
/// gives (its columns zeroed), in BERT, in a gated BERT (the gate shut) and in an OPT decoder (where the
/// heads' outputs are handed over per head, before the gate); one query only changes less.
void TestQuant::ablatingAHeadEqualsZeroingItsOutputColumns()
{
    for (const bool gated : {false, true}) {
        BertConfig c = BertConfig::preset("bert-tiny");
        c.vocabSize = 50, c.numLayers = 2, c.maxPositions = 32, c.id2label = {"a", "b", "c"};
        if (gated) c.variant.gate = GateKind::Linear;
        BertNetwork net = BertNetwork::create(c, BertHead::SequenceClassification, 13);
        BertNetwork edited = BertNetwork::create(c, BertHead::SequenceClassification, 13);
        const TextBatch b = textBatch(8);
        Intervention ablate;
        ablate.layer = 0, ablate.tensor = "attn_context", ablate.heads = {1};
        InterventionSink sink(ablate, interventionSite("attn_context", true));
        const torch::Tensor ablated = logitsOf(net, b, &sink);
        QCOMPARE(zeroHeadColumns(edited.module(), "layer.0.attention.output.dense.weight", 1, c.headDim()),
                 1);
        const torch::Tensor reference = logitsOf(edited, b);
        QVERIFY(relativeChange(ablated, logitsOf(net, b)) > 1e-4);
        QVERIFY2((ablated - reference).abs().max().item<double>() < 1e-5,
                 qPrintable(QString::number((ablated - reference).abs().max().item<double>())));
        ablate.tokens = {2};
        InterventionSink oneQuery(ablate, QuantSite::AttnContext);
        const torch::Tensor one = logitsOf(net, b, &oneQuery);
        QVERIFY(relativeChange(one, logitsOf(net, b)) > 1e-7 && relativeChange(one, ablated) > 1e-6);
    }

    DecoderConfig d = DecoderConfig::preset("opt-tiny");
    d.variant.gate = GateKind::Linear;
    DecoderNetwork decoder = DecoderNetwork::create(d, 4), editedDecoder = DecoderNetwork::create(d, 4);
    const torch::Tensor ids = torch::randint(0, d.vocabSize, {2, 10});
    Intervention ablate;
    ablate.layer = 1, ablate.tensor = "attn_context", ablate.heads = {0};
    InterventionSink sink(ablate, interventionSite("attn_context", false));
    const std::int64_t dh = d.hiddenSize / d.numHeads;
    QCOMPARE(zeroHeadColumns(editedDecoder.module(), "layers.1.self_attn.out_proj.weight", 0, dh), 1);
    c10::InferenceMode guard;
    const torch::Tensor a = decoder.forward(ids, {}, &sink).logits, e = editedDecoder.forward(ids).logits;
    QVERIFY(relativeChange(a, decoder.forward(ids).logits) > 1e-4);
    QVERIFY2((a - e).abs().max().item<double>() < 1e-5,
             qPrintable(QString::number((a - e).abs().max().item<double>())));

    Intervention bad = ablate;
    bad.dims = {1};
    QVERIFY_THROWS_EXCEPTION(Error, bad.validate());
    ablate.heads = {9};
    InterventionSink noSuchHead(ablate, QuantSite::AttnContext);
    QVERIFY_THROWS_EXCEPTION(Error, decoder.forward(ids, {}, &noSuchHead));
    Intervention described;
    described.tensor = "attn_context", described.heads = {0, 2}, described.tokens = {5};
    QCOMPARE(described.describe(), std::string("layer 1 attention, heads 1,3: output set to 0 at query 5"));
}

/// --bits-kv: the Key and Value sites (the KV cache) quantize with their own bits, every other site with
/// the activations' bits: at most 2^bits distinct values per tensor.
void TestQuant::keysAndValuesTakeTheirOwnBits()
{
    QuantOptions o;
    o.activationBits = 8, o.kvBits = 3, o.estimator = RangeEstimator::CurrentMinMax;
    QuantizationSink sink(o);
    const torch::Tensor x = torch::randn({2, 16, 32});
    const auto distinct = [](const torch::Tensor& t) {
        return std::get<0>(at::_unique(t.flatten())).numel();
    };
    for (QuantSite site : {QuantSite::Key, QuantSite::Value}) {
        const torch::Tensor q = sink.transform(site, 0, x);
        QVERIFY2(distinct(q) <= 8, qPrintable(QString::number(distinct(q))));
        QVERIFY(distinct(q) >= 6); // a Gaussian spreads over most of the 8 levels
    }
    const torch::Tensor q = sink.transform(QuantSite::Query, 0, x);
    QVERIFY(distinct(q) > 8 && distinct(q) <= 256);
    QuantOptions same;
    same.activationBits = 4, same.estimator = RangeEstimator::CurrentMinMax;
    QuantizationSink four(same);
    QVERIFY(distinct(four.transform(QuantSite::Key, 0, x)) <= 16);
}

void TestQuant::settingAGateEqualsAGateThatIgnoresItsInput()
{
    // A gate forced to c equals a gate whose weights are 0 and whose bias is logit(c): sigmoid gives c
    // whatever it reads (c = 1: bias 40, sigmoid(40) rounds to 1 in float32).
    for (const double c : {1.0, 0.3}) {
        DecoderConfig d = DecoderConfig::preset("opt-tiny");
        d.variant.gate = GateKind::Linear;
        DecoderNetwork decoder = DecoderNetwork::create(d, 4), edited = DecoderNetwork::create(d, 4);
        const torch::Tensor ids = torch::randint(0, d.vocabSize, {2, 10});
        Intervention open;
        open.layer = 1, open.tensor = "attn_gate", open.heads = {2};
        open.value = Intervention::Value::Constant, open.constant = c;
        InterventionSink sink(open, interventionSite("attn_gate", false));
        int edits = 0;
        {
            torch::NoGradGuard noGrad;
            for (auto& p : edited.module().named_parameters()) {
                if (p.key().find("layers.1.self_attn.alpha.2.weight") != std::string::npos)
                    p.value().zero_(), ++edits;
                if (p.key().find("layers.1.self_attn.alpha.2.bias") != std::string::npos)
                    p.value().fill_(c == 1.0 ? 40.0 : std::log(c / (1 - c))), ++edits;
            }
        }
        QCOMPARE(edits, 2);
        c10::InferenceMode guard;
        const torch::Tensor a = decoder.forward(ids, {}, &sink).logits, e = edited.forward(ids).logits;
        QVERIFY(relativeChange(a, decoder.forward(ids).logits) > 1e-5);
        QVERIFY2((a - e).abs().max().item<double>() < 1e-5,
                 qPrintable(QString::number((a - e).abs().max().item<double>())));
    }
    Intervention described;
    described.tensor = "attn_gate", described.heads = {0}, described.value = Intervention::Value::Constant;
    described.constant = 1;
    QCOMPARE(described.describe(), std::string("layer 1 attention, head 1: gate set to 1 at every query"));
    described.value = Intervention::Value::Mean;
    QVERIFY_THROWS_EXCEPTION(Error, described.validate());
    // The quantizers leave the gates in floating point.
    QuantizationSink quant{QuantOptions{}};
    const torch::Tensor pi = torch::rand({1, 2, 3});
    QVERIFY(torch::equal(quant.transform(QuantSite::AttnGate, 0, pi), pi));
}

QTEST_GUILESS_MAIN(TestQuant)
#include "tst_quant.moc"
