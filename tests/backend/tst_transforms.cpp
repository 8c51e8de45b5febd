// Transforms that keep a model's function (backend/quant/transforms.h): SmoothQuant's migration on the
// fixture checkpoints of every family it applies to, and the models it refuses. Also which sites the
// linear-inputs placement quantizes.

#include "../common/expect_error.h"
#include "../common/tensor_compare.h"

#include "model/bert_network.h"
#include "model/decoder_network.h"
#include "model/norm_readers.h"
#include "model/vit_network.h"
#include "quant/quantizer.h"
#include "quant/transforms.h"

#include <QtTest>

#include <torch/torch.h>

#include <functional>

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

} // namespace

class TestTransforms : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void smoothQuantKeepsTheFunction();
    void smoothQuantAtAlphaOneEvensTheChannels();
    void smoothQuantRefusesPostNormModels();
    void linearInputsPlacementQuantizesOnlyWhatMatmulsRead();
};

void TestTransforms::smoothQuantKeepsTheFunction()
{
    for (Subject& s : preNormSubjects()) {
        const torch::Tensor before = s.run(nullptr);
        ChannelMaxSink maxima;
        s.run(&maxima);
        const std::vector<NormReaders> norms = preNormsOf(s.module());
        QVERIFY2(!norms.empty(), s.name.c_str());
        // Every pre-norm reached by the pass, and only those.
        QCOMPARE(maxima.maxima().size(), norms.size());
        smoothQuant(norms, maxima.maxima(), 0.5);
        const torch::Tensor after = s.run(nullptr);
        const double diff = relativeDiff(after, before);
        QVERIFY2(diff < 1e-4,
                 qPrintable(QString("%1: relative difference %2").arg(s.name.c_str()).arg(diff)));
        // ... while the normed activations did change.
        ChannelMaxSink again;
        s.run(&again);
        QVERIFY2(std::abs(again.overallMax() - maxima.overallMax()) > 1e-3 * maxima.overallMax(),
                 s.name.c_str());
    }
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

QTEST_GUILESS_MAIN(TestTransforms)
#include "tst_transforms.moc"
