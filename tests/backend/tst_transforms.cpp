// Transforms that keep a model's function (backend/quant/transforms.h): SmoothQuant's migration on the
// fixture checkpoints of every family it applies to, and the models it refuses. Also which sites the
// linear-inputs placement quantizes.

#include "../common/expect_error.h"
#include "../common/tensor_compare.h"

#include "model/bert_network.h"
#include "model/decoder_network.h"
#include "model/norm_readers.h"
#include "model/vit_network.h"
#include "quant/evaluation.h"
#include "quant/quantizer.h"
#include "quant/transforms.h"

#include <QtTest>

#include <torch/torch.h>

#include <functional>
#include <map>

using namespace outlierlens;
using outlierlens::test::expectError;
using outlierlens::test::fixture;

namespace {

/// A model under test: its module, and one fixed forward pass returning what the model outputs.
struct Subject
{
    std::string name;
    std::function<torch::nn::Module&()> module;
    std::function<torch::Tensor(ActivationSink*)> run;
};

Subject decoderSubject(const std::string& dir, std::shared_ptr<DecoderNetwork> net)
{
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(5);
    const torch::Tensor ids = torch::randint(net->config().vocabSize, {2, 12}, gen, torch::kLong);
    return {dir, [net]() -> torch::nn::Module& { return net->module(); },
            [net, ids](ActivationSink* sink) {
                torch::NoGradGuard noGrad;
                return net->forward(ids, {}, sink).logits;
            }};
}

Subject vitSubject(const std::string& dir, std::shared_ptr<VitNetwork> net)
{
    const VitConfig& c = net->module()->config;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(6);
    const torch::Tensor pixels = torch::randn({2, c.numChannels, c.imageSize, c.imageSize}, gen);
    return {dir, [net]() -> torch::nn::Module& { return *net->module(); },
            [net, pixels](ActivationSink* sink) {
                torch::NoGradGuard noGrad;
                const VitOutputs out = net->forward(pixels, sink);
                return out.logits.defined() ? out.logits : out.normed;
            }};
}

/// Every fixture checkpoint with pre-norm blocks: each decoder layout (and the families sharing one), a
/// gated OPT (per-head gates read slices of the normed input), timm's ViT, DINOv2 with registers
/// (LayerScale) and CLIP's vision tower (a pre-encoder norm).
std::vector<Subject> preNormSubjects()
{
    std::vector<Subject> out;
    for (const char* dir :
         {"decoders/gpt2-seed0/hf", "decoders/opt-seed0/hf", "decoders/llama-seed0/hf",
          "decoders/opt-oft-gated-linear-seed0/hf", "families/llama3/hf", "families/qwen2/hf",
          "families/qwen3/hf", "families/mistral/hf", "families/gemma2/hf", "families/phi/hf",
          "families/gpt-neox/hf", "families/falcon-7b/hf", "families/falcon-40b/hf"})
        out.push_back(
            decoderSubject(dir, std::make_shared<DecoderNetwork>(DecoderNetwork::load(fixture(dir)))));
    for (const char* dir : {"vit/timm", "families/dinov2-reg/timm", "families/clip-vision/timm"})
        out.push_back(vitSubject(dir, std::make_shared<VitNetwork>(VitNetwork::load(fixture(dir)))));
    return out;
}

double relativeDiff(const torch::Tensor& a, const torch::Tensor& b)
{
    return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>() /
           b.to(torch::kDouble).abs().max().item<double>();
}

/// Runs `transform` on the subject (with the per-channel maxima of one pass) and checks that its output
/// stays within 1e-4 (relative) while its normed activations do change.
void checkKeepsTheFunction(Subject& s, const std::function<void(const ChannelMaxSink&)>& transform)
{
    const torch::Tensor before = s.run(nullptr);
    ChannelMaxSink maxima;
    s.run(&maxima);
    transform(maxima);
    const double diff = relativeDiff(s.run(nullptr), before);
    QVERIFY2(diff < 1e-4, qPrintable(QString("%1: relative difference %2").arg(s.name.c_str()).arg(diff)));
    ChannelMaxSink again;
    s.run(&again);
    QVERIFY2(std::abs(again.overallMax() - maxima.overallMax()) > 1e-3 * maxima.overallMax(), s.name.c_str());
}

} // namespace

class TestTransforms : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void smoothQuantKeepsTheFunction();
    void smoothQuantAtAlphaOneEvensTheChannels();
    void smoothQuantRefusesPostNormModels();
    void linearInputsPlacementQuantizesOnlyWhatMatmulsRead();
    void hadamardMatricesMatchTheirDefinition();
    void rotationKeepsTheFunction();
    void rotationSpreadsTheDemoModelsOutliers();
    void rotationRefusesWhatItCannotPassThrough();
    void checkingATransformChangesNothing();
    void docsTablesComeFromTheCommands();
};

void TestTransforms::smoothQuantKeepsTheFunction()
{
    for (Subject& s : preNormSubjects())
        checkKeepsTheFunction(s, [&](const ChannelMaxSink& maxima) {
            const std::vector<NormReaders> norms = preNormsOf(s.module());
            QVERIFY2(!norms.empty(), s.name.c_str());
            // Every pre-norm reached by the pass, and only those.
            QCOMPARE(maxima.maxima().size(), norms.size());
            smoothQuant(norms, maxima.maxima(), 0.5);
        });
}

void TestTransforms::smoothQuantAtAlphaOneEvensTheChannels()
{
    // alpha 1: s_j = max|X_j|, so every channel of every normed input then peaks at exactly 1.
    for (Subject& s : preNormSubjects()) {
        ChannelMaxSink maxima;
        s.run(&maxima);
        smoothQuant(preNormsOf(s.module()), maxima.maxima(), 1.0);
        ChannelMaxSink after;
        s.run(&after);
        for (const auto& [key, m] : after.maxima()) {
            const torch::Tensor original = maxima.maxima().at(key);
            const torch::Tensor live = original > 1e-5;
            const double worst = (m.masked_select(live) - 1.0).abs().max().item<double>();
            QVERIFY2(worst < 1e-4, qPrintable(QString("%1 layer %2: a channel peaks at 1 +- %3")
                                                  .arg(s.name.c_str())
                                                  .arg(key.first + 1)
                                                  .arg(worst)));
        }
    }
}

void TestTransforms::smoothQuantRefusesPostNormModels()
{
    DecoderNetwork postLn = DecoderNetwork::load(fixture("decoders/opt-postln-proj-seed0/hf"));
    expectError([&] { preNormsOf(postLn.module()); }, QStringList{"normalise after the residual sum"});
    BertNetwork bert = BertNetwork::load(fixture("bert/hf"));
    expectError([&] { preNormsOf(bert.module()); }, QStringList{"BERT"});
}

void TestTransforms::linearInputsPlacementQuantizesOnlyWhatMatmulsRead()
{
    DecoderNetwork net = DecoderNetwork::load(fixture("decoders/llama-seed0/hf"));
    QuantOptions options;
    options.placement = ActivationPlacement::LinearInputs;
    QuantizationSink sink(options);
    sink.setCalibrating(true);
    torch::NoGradGuard noGrad;
    net.forward(torch::arange(10).view({1, 10}), {}, &sink);
    QStringList sites;
    for (const auto& entry : sink.ranges()) {
        const QString name = QString::fromStdString(entry.first);
        sites << name.mid(name.indexOf('/') + 1);
    }
    sites.removeDuplicates();
    sites.sort();
    QCOMPARE(sites,
             (QStringList{"attn_context", "attn_norm", "ffn_intermediate", "ffn_norm", "key", "value"}));
}

void TestTransforms::hadamardMatricesMatchTheirDefinition()
{
    for (std::int64_t n : {1, 2, 8, 64}) {
        const torch::Tensor h = sylvesterHadamard(n);
        auto a = h.accessor<double, 2>();
        for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t j = 0; j < n; ++j) // H_ij = (-1)^popcount(i & j)
                QCOMPARE(a[i][j], __builtin_popcountll(std::uint64_t(i & j)) % 2 ? -1.0 : 1.0);
    }
    expectError([] { sylvesterHadamard(12); }, QStringList{"power of 2"});
    // Orthogonal for any size; for a power of 2 every entry is +-1/sqrt(d), so no coordinate keeps its
    // weight: one outlier dimension is spread evenly over all of them.
    for (std::int64_t d : {64, 96, 100, 7, 1}) {
        const torch::Tensor q = randomizedHadamard(d, 3);
        QCOMPARE(q.sizes(), (torch::IntArrayRef{d, d}));
        const double offIdentity =
            (q.matmul(q.t()) - torch::eye(d, torch::kDouble)).abs().max().item<double>();
        QVERIFY2(offIdentity < 1e-12, qPrintable(QString("d %1: |Q Q^T - I| %2").arg(d).arg(offIdentity)));
        QVERIFY(torch::equal(q, randomizedHadamard(d, 3)));
        QVERIFY(!torch::equal(q, randomizedHadamard(d, 4)) || d == 1);
    }
    const torch::Tensor q = randomizedHadamard(64, 0);
    QVERIFY((q.abs() - 1.0 / 8.0).abs().max().item<double>() < 1e-15);
}

void TestTransforms::rotationKeepsTheFunction()
{
    // Every decoder layout but Gemma 2, and the ViTs but CLIP's (a norm before the first block); the gated
    // OPT's per-head gates are widened, DINOv2's LayerScale folded into the layers it scales.
    QStringList refused;
    for (Subject& s : preNormSubjects()) {
        const ResidualStream stream = residualStreamOf(s.module());
        if (!stream.refusal.empty()) { // rotationRefusesWhatItCannotPassThrough()
            refused << QString::fromStdString(s.name);
            continue;
        }
        checkKeepsTheFunction(s, [&](const ChannelMaxSink&) { rotateResidualStream(stream, 11); });
    }
    QCOMPARE(refused, (QStringList{"families/gemma2/hf", "families/clip-vision/timm"}));
}

namespace {

/// The Pearson kurtosis of every layer's block output, over all its values.
class KurtosisSink : public ActivationSink
{
public:
    bool wants(CapturePoint point, int) const override { return point == CapturePoint::Out; }
    void put(CapturePoint, int layer, const at::Tensor& batched) override
    {
        const torch::Tensor x = batched.to(torch::kDouble).flatten();
        const torch::Tensor c = x - x.mean();
        kurtosis[layer] = (c.pow(4).mean() / c.pow(2).mean().pow(2)).item<double>();
        maxAbs[layer] = x.abs().max().item<double>();
    }
    std::map<int, double> kurtosis, maxAbs;
};

} // namespace

void TestTransforms::rotationSpreadsTheDemoModelsOutliers()
{
    // backcopy-vanilla's stream carries outliers of several hundred in a few dimensions
    // (docs/demo-models.md); rotated, the same values spread over all of them.
    DecoderNetwork net = DecoderNetwork::load(OUTLIERLENS_SOURCE_DIR "/sample_data/models/backcopy-vanilla");
    net.module().to(torch::kFloat); // stored in float16: rotated in float32, as `quantize` loads it
    const torch::Tensor ids = torch::randint(net.config().vocabSize, {4, 64},
                                             at::make_generator<at::CPUGeneratorImpl>(9), torch::kLong);
    torch::NoGradGuard noGrad;
    KurtosisSink before, after;
    const torch::Tensor logits = net.forward(ids, {}, &before).logits;
    rotateResidualStream(residualStreamOf(net.module()), 0);
    QVERIFY(relativeDiff(net.forward(ids, {}, &after).logits, logits) < 1e-4);
    QCOMPARE(after.kurtosis.size(), before.kurtosis.size());
    double largest = 0;
    for (const auto& [layer, kurtosis] : before.kurtosis) {
        largest = std::max(largest, kurtosis);
        // Measured: kurtosis 9 / 186 / 94 -> 4.2 / 32 / 12.5, max |x| 26 / 468 / 781 -> 10 / 246 / 368.
        QVERIFY2(after.kurtosis[layer] < kurtosis / 2, qPrintable(QString("layer %1 kurtosis %2 -> %3")
                                                                      .arg(layer + 1)
                                                                      .arg(kurtosis)
                                                                      .arg(after.kurtosis[layer])));
        QVERIFY(after.maxAbs[layer] < 0.6 * before.maxAbs[layer]);
    }
    QVERIFY2(largest > 50, qPrintable(QString("largest kurtosis %1").arg(largest)));
}

void TestTransforms::rotationRefusesWhatItCannotPassThrough()
{
    DecoderNetwork gemma = DecoderNetwork::load(fixture("families/gemma2/hf"));
    QVERIFY(residualStreamOf(gemma.module()).refusal.find("post-attention") != std::string::npos);
    expectError([&] { rotateResidualStream(residualStreamOf(gemma.module()), 0); }, QStringList{"Gemma 2"});
    BertNetwork bert = BertNetwork::load(fixture("bert/hf"));
    QVERIFY(residualStreamOf(bert.module()).refusal.find("post-LN") != std::string::npos);
    VitNetwork clip = VitNetwork::load(fixture("families/clip-vision/timm"));
    QVERIFY(residualStreamOf(*clip.module()).refusal.find("CLIP") != std::string::npos);
}

/// The app asks every model it opens whether each transform applies (checkTransformApplies): the model it
/// then shows must be untouched, LayerScale included (DINOv2's attn_out is captured before it).
void TestTransforms::checkingATransformChangesNothing()
{
    for (Subject& s : preNormSubjects()) {
        std::map<std::string, torch::Tensor> before;
        for (const auto& p : s.module().named_parameters(true))
            before[p.key()] = p.value().detach().clone();
        ModelTransform both;
        both.smoothQuantAlpha = 0.5;
        both.rotate = true;
        try {
            checkTransformApplies(s.module(), both);
        } catch (const std::exception&) {
            // Refused (Gemma 2, CLIP): the same question, the same answer for the model.
        }
        for (const auto& p : s.module().named_parameters(true))
            QVERIFY2(torch::equal(p.value(), before.at(p.key())),
                     qPrintable(QString::fromStdString(s.name + ": " + p.key())));
    }
}

void TestTransforms::docsTablesComeFromTheCommands()
{
    // One cell of each table in docs/quantization.md ("Transforms on the demo decoders") and
    // docs/interventions.md (gates forced open), re-run as the documented commands run them.
    QuantExperiment e;
    e.modelDir = OUTLIERLENS_SOURCE_DIR "/sample_data/models/backcopy-vanilla";
    e.data = "backcopy:" OUTLIERLENS_SOURCE_DIR "/sample_data/text/wiki_en_train.txt";
    e.seqLength = 64;
    e.seeds = 1;
    e.quant.activationBits = 6;
    const auto quiet = [](const std::string&) {};
    const QuantResult plain = runQuantExperiment(e, quiet);
    e.transform.rotate = true;
    const QuantResult rotated = runQuantExperiment(e, quiet);
    QVERIFY2(std::abs(rotated.transformedFloatMetric - rotated.floatMetric) < 1e-4 * rotated.floatMetric,
             qPrintable(QString("FP %1 -> %2").arg(rotated.floatMetric).arg(rotated.transformedFloatMetric)));
    // The table (3 seeds): W8A6 per tensor 15.14 +- 0.57, rotated 3.28 +- 0.01; kurtosis 51.4 -> 6.5.
    QVERIFY2(plain.quantMean > 13 && plain.quantMean < 17, qPrintable(QString::number(plain.quantMean)));
    QVERIFY2(std::abs(rotated.quantMean - 3.28) < 0.05, qPrintable(QString::number(rotated.quantMean)));
    QVERIFY2(std::abs(rotated.transformedAvgKurtosis - 6.53) < 0.05,
             qPrintable(QString::number(rotated.transformedAvgKurtosis)));

    QuantExperiment g = e;
    g.modelDir = OUTLIERLENS_SOURCE_DIR "/sample_data/models/backcopy-gated";
    g.transform = {};
    Intervention open;
    open.layer = 0, open.tensor = "attn_gate", open.value = Intervention::Value::Constant, open.constant = 1;
    const InterventionResult r = runInterventionExperiment(g, open, quiet);
    // docs/interventions.md: 3.079 as it is, 290.9 with layer 1's gates forced open.
    QVERIFY2(std::abs(r.floatMetric - 3.079) < 0.001, qPrintable(QString::number(r.floatMetric)));
    QVERIFY2(std::abs(r.intervenedMetric - 290.9) < 0.5, qPrintable(QString::number(r.intervenedMetric)));
}

QTEST_GUILESS_MAIN(TestTransforms)
#include "tst_transforms.moc"
