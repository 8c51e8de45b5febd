// The trainer's numerics: AdamW and gradient clipping against PyTorch's own (golden file written by
// torch.optim.AdamW and torch.nn.utils.clip_grad_norm_, see fixtures/train_core/), exact state
// round trips (also through safetensors), the weight-decay split on real BERT and ViT modules, and the
// learning-rate schedules against LambdaLR with Hugging Face's lambdas. TrainConfig: tst_train_config.

#include "../common/expect_error.h"
#include "common/error.h"
#include "io/safetensors.h"
#include "model/bert.h"
#include "model/vit.h"
#include "tasks/config/lr_schedule.h"
#include "train/adamw.h"

#include <torch/nn/module.h>
#include <torch/torch.h>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <set>

using namespace outlierlens;
using outlierlens::test::expectError;

namespace {

QJsonObject golden()
{
    static const QJsonObject root = [] {
        QFile file(QStringLiteral(OUTLIERLENS_TEST_DATA "/train_core/golden.json"));
        if (!file.open(QIODevice::ReadOnly)) qFatal("cannot open %s", qPrintable(file.fileName()));
        return QJsonDocument::fromJson(file.readAll()).object();
    }();
    return root;
}

std::vector<std::int64_t> shapeOf(const QJsonValue& v)
{
    std::vector<std::int64_t> shape;
    for (const QJsonValue& d : v.toArray())
        shape.push_back(d.toInteger());
    return shape;
}

/// A float32 tensor of the given shape from a JSON list (exact: the numbers are float32 values).
torch::Tensor tensorOf(const QJsonValue& values, const std::vector<std::int64_t>& shape)
{
    std::vector<float> data;
    for (const QJsonValue& x : values.toArray())
        data.push_back(float(x.toDouble()));
    return torch::tensor(data, torch::kFloat).reshape(shape).clone();
}

/// Empty if every |a - e| <= 1e-6 |e| + 1e-12, else a description of the worst element.
QString relativeMismatch(const torch::Tensor& actual, const torch::Tensor& expected)
{
    if (actual.sizes() != expected.sizes()) return QStringLiteral("shape differs");
    const torch::Tensor a = actual.to(torch::kDouble).reshape(-1);
    const torch::Tensor e = expected.to(torch::kDouble).reshape(-1);
    const torch::Tensor excess = (a - e).abs() - (e.abs() * 1e-6 + 1e-12);
    if (excess.numel() == 0 || excess.max().item<double>() <= 0) return {};
    const std::int64_t i = excess.argmax().item<std::int64_t>();
    return QStringLiteral("element %1: %2, expected %3")
        .arg(i)
        .arg(a[i].item<double>(), 0, 'g', 17)
        .arg(e[i].item<double>(), 0, 'g', 17);
}

#define OL_COMPARE_RELATIVE(what, actual, expected)                                                          \
    do {                                                                                                     \
        const QString m_ = relativeMismatch((actual), (expected));                                           \
        if (!m_.isEmpty()) QFAIL(qPrintable(QString(what) + ": " + m_));                                     \
    } while (false)

/// A module with plain parameters p0, p1, ... (for clipping).
struct PlainModule : torch::nn::Module
{
    explicit PlainModule(const std::vector<std::vector<std::int64_t>>& shapes)
    {
        for (std::size_t i = 0; i < shapes.size(); ++i)
            params.push_back(register_parameter("p" + std::to_string(i), torch::zeros(shapes[i])));
    }
    std::vector<torch::Tensor> params;
};

struct GoldenProblem
{
    std::vector<std::string> names;
    std::map<std::string, torch::Tensor> params;
    std::vector<ParamGroup> groups;
};

/// The parameters of a golden AdamW case, grouped by weight decay as the generator did.
GoldenProblem goldenProblem(const QJsonObject& c)
{
    GoldenProblem p;
    std::map<double, ParamGroup> byDecay;
    for (const QJsonValue& v : c.value("params").toArray()) {
        const QJsonObject o = v.toObject();
        const std::string name = o.value("name").toString().toStdString();
        torch::Tensor t = tensorOf(o.value("values"), shapeOf(o.value("shape"))).requires_grad_(true);
        p.names.push_back(name);
        p.params[name] = t;
        ParamGroup& g = byDecay[o.value("weight_decay").toDouble()];
        g.weightDecay = o.value("weight_decay").toDouble();
        g.params.emplace_back(name, t);
    }
    for (auto& item : byDecay)
        p.groups.push_back(item.second);
    return p;
}

void setGrads(GoldenProblem& p, const QJsonObject& grads)
{
    for (const std::string& name : p.names) {
        const QJsonValue g = grads.value(QString::fromStdString(name));
        p.params[name].mutable_grad() =
            g.isNull() ? torch::Tensor() : tensorOf(g, p.params[name].sizes().vec());
    }
}

/// Two parameters and deterministic gradients per step, for state round trips.
struct SmallProblem
{
    torch::Tensor w = torch::linspace(-1, 1, 12).reshape({3, 4}).requires_grad_(true);
    torch::Tensor b = torch::linspace(0.1f, 0.4f, 4).requires_grad_(true);

    std::vector<ParamGroup> groups() { return {{{{"w", w}}, 0.1}, {{{"b", b}}, 0.0}}; }
    void setGrads(int step)
    {
        torch::NoGradGuard noGrad;
        w.mutable_grad() = torch::sin(torch::arange(12, torch::kFloat) * (0.3 + 0.1 * step)).reshape({3, 4});
        b.mutable_grad() = step == 2 ? torch::Tensor() : torch::cos(torch::arange(4, torch::kFloat) + step);
    }
};

} // namespace

class TstTrainCore : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { QVERIFY(!golden().isEmpty()); }

    // ---- AdamW ---------------------------------------------------------------------------------

    void adamwMatchesPyTorch_data()
    {
        QTest::addColumn<int>("index");
        const QJsonArray cases = golden().value("adamw").toArray();
        for (int i = 0; i < cases.size(); ++i)
            QTest::newRow(qPrintable(cases[i].toObject().value("name").toString())) << i;
    }

    void adamwMatchesPyTorch()
    {
        QFETCH(int, index);
        const QJsonObject c = golden().value("adamw").toArray()[index].toObject();
        GoldenProblem p = goldenProblem(c);
        AdamW optimizer(p.groups, c.value("beta1").toDouble(), c.value("beta2").toDouble(),
                        c.value("eps").toDouble());
        const QJsonArray steps = c.value("steps").toArray();
        for (int s = 0; s < steps.size(); ++s) {
            const QJsonObject step = steps[s].toObject();
            setGrads(p, step.value("grads").toObject());
            optimizer.step(step.value("lr").toDouble());
            for (const std::string& name : p.names) {
                const torch::Tensor expected =
                    tensorOf(step.value("params").toObject().value(QString::fromStdString(name)),
                             p.params[name].sizes().vec());
                OL_COMPARE_RELATIVE(QStringLiteral("step %1, %2").arg(s).arg(QString::fromStdString(name)),
                                    p.params[name].detach(), expected);
            }
        }
        QCOMPARE(optimizer.steps(), std::int64_t(steps.size()));

        const auto state = optimizer.state();
        const QJsonObject expectedState = c.value("state").toObject();
        for (const std::string& name : p.names) {
            const QJsonObject e = expectedState.value(QString::fromStdString(name)).toObject();
            const auto shape = p.params[name].sizes().vec();
            OL_COMPARE_RELATIVE(QString::fromStdString(name + ".exp_avg"), state.at(name + ".exp_avg"),
                                tensorOf(e.value("exp_avg"), shape));
            OL_COMPARE_RELATIVE(QString::fromStdString(name + ".exp_avg_sq"), state.at(name + ".exp_avg_sq"),
                                tensorOf(e.value("exp_avg_sq"), shape));
            QCOMPARE(state.at(name + ".step").item<std::int64_t>(), std::int64_t(e.value("step").toInt()));
        }
        QCOMPARE(state.at("step").item<std::int64_t>(), std::int64_t(steps.size()));
        QCOMPARE(state.size(), 3 * p.names.size() + 1);
    }

    /// The one-pass update (contiguous float32) against LibTorch's per-tensor ops (the same parameter
    /// laid out column-major), over steps with gradients of very different sizes.
    void adamwOnePassMatchesPerTensorOps()
    {
        torch::manual_seed(3);
        const torch::Tensor init = torch::randn({64, 48});
        torch::Tensor rowMajor = init.clone().requires_grad_(true);
        torch::Tensor columnMajor = init.t().contiguous().t().requires_grad_(true);
        QVERIFY(!columnMajor.is_contiguous());
        AdamW onePass({{{{"w", rowMajor}}, 0.01}}, 0.9, 0.98, 1e-6);
        AdamW perTensor({{{{"w", columnMajor}}, 0.01}}, 0.9, 0.98, 1e-6);
        for (int step = 0; step < 20; ++step) {
            const torch::Tensor g = torch::randn({64, 48}) * (step % 3 == 0 ? 1e-5 : 1.0);
            rowMajor.mutable_grad() = g.clone();
            columnMajor.mutable_grad() = g.t().contiguous().t();
            onePass.step(1e-3 * (step + 1));
            perTensor.step(1e-3 * (step + 1));
        }
        QCOMPARE(perTensor.onePassUpdates(), std::int64_t(0));
        if (onePass.onePassUpdates() == 0)
            QSKIP("this CPU has no AVX2 and FMA: every update takes LibTorch's ops");
        QCOMPARE(onePass.onePassUpdates(), std::int64_t(20));
        OL_COMPARE_RELATIVE(QStringLiteral("parameter"), rowMajor.detach(), columnMajor.detach());
        const auto a = onePass.state(), b = perTensor.state();
        OL_COMPARE_RELATIVE(QStringLiteral("exp_avg"), a.at("w.exp_avg"), b.at("w.exp_avg"));
        OL_COMPARE_RELATIVE(QStringLiteral("exp_avg_sq"), a.at("w.exp_avg_sq"), b.at("w.exp_avg_sq"));
        QVERIFY(!torch::equal(rowMajor.detach(), init));
    }
    void adamwStateRoundTripIsExact_data()
    {
        QTest::addColumn<bool>("throughSafetensors");
        QTest::newRow("in memory") << false;
        QTest::newRow("through optimizer.safetensors") << true;
    }

    void adamwStateRoundTripIsExact()
    {
        QFETCH(bool, throughSafetensors);
        SmallProblem a;
        AdamW first(a.groups(), 0.9, 0.98, 1e-6);
        for (int step = 0; step < 3; ++step) {
            a.setGrads(step);
            first.step(1e-2);
        }
        std::map<std::string, torch::Tensor> saved = first.state();
        if (throughSafetensors) {
            QTemporaryDir dir;
            const std::string path = dir.filePath("optimizer.safetensors").toStdString();
            writeSafetensors(path, saved);
            saved = readSafetensors(path);
        }

        // A resumed run: parameters restored from the checkpoint, a fresh optimizer, loadState.
        SmallProblem b;
        {
            torch::NoGradGuard noGrad;
            b.w.copy_(a.w);
            b.b.copy_(a.b);
        }
        AdamW second(b.groups(), 0.9, 0.98, 1e-6);
        second.loadState(saved);
        QCOMPARE(second.steps(), std::int64_t(3));
        for (int step = 3; step < 7; ++step) {
            a.setGrads(step);
            b.setGrads(step);
            first.step(1e-2 / step);
            second.step(1e-2 / step);
        }
        QVERIFY(torch::equal(a.w, b.w));
        QVERIFY(torch::equal(a.b, b.b));
        const auto s1 = first.state(), s2 = second.state();
        for (const auto& [name, t] : s1)
            QVERIFY2(torch::equal(t, s2.at(name)), name.c_str());
        QCOMPARE(s1.at("b.step").item<std::int64_t>(), std::int64_t(6)); // b had no gradient at step 2
        QCOMPARE(s1.at("w.step").item<std::int64_t>(), std::int64_t(7));
    }

    void adamwSkipsParametersWithoutGradient()
    {
        SmallProblem p;
        AdamW optimizer(p.groups());
        p.setGrads(0);
        p.b.mutable_grad() = torch::Tensor();
        const torch::Tensor before = p.b.detach().clone();
        optimizer.step(0.1);
        QVERIFY(torch::equal(p.b.detach(), before)); // no decay, no update
        QVERIFY(!torch::equal(p.w.detach(), torch::linspace(-1, 1, 12).reshape({3, 4})));
        optimizer.zeroGrad();
        QVERIFY(!p.w.grad().defined());
        optimizer.step(0.1); // nothing has a gradient: nothing changes
        QCOMPARE(optimizer.state().at("w.step").item<std::int64_t>(), std::int64_t(1));
    }

    void adamwRejectsBadInput()
    {
        torch::Tensor t = torch::zeros({2}, torch::requires_grad());
        expectError([&] { AdamW({{{{"a", t}, {"a", torch::zeros({2})}}, 0.0}}); }, {"'a'", "given twice"});
        expectError([&] { AdamW({{{{"a", t}}, 0.0}, {{{"b", t}}, 0.1}}); }, {"'a'", "'b'", "same tensor"});
        expectError([&] { AdamW({{{{"a", torch::Tensor()}}, 0.0}}); }, {"'a'", "undefined"});
        expectError([&] { AdamW({{{{"a", t}}, 0.0}}, 1.0); }, {"beta1"});
        expectError([&] { AdamW({{{{"a", t}}, -0.1}}); }, {"weight decay"});

        SmallProblem p;
        AdamW optimizer(p.groups());
        const auto good = optimizer.state();
        auto without = good;
        without.erase("w.exp_avg_sq");
        expectError([&] { optimizer.loadState(without); }, {"missing tensor 'w.exp_avg_sq'"});
        auto extra = good;
        extra["v.exp_avg"] = torch::zeros({2});
        expectError([&] { optimizer.loadState(extra); }, {"unexpected tensor 'v.exp_avg'"});
        auto reshaped = good;
        reshaped["w.exp_avg"] = torch::zeros({4, 3});
        expectError([&] { optimizer.loadState(reshaped); }, {"'w.exp_avg'", "[4, 3]", "expected [3, 4]"});
        auto integral = good;
        integral["b.exp_avg"] = torch::zeros({4}, torch::kLong);
        expectError([&] { optimizer.loadState(integral); }, {"'b.exp_avg'", "floating point"});
        auto negative = good;
        negative["b.step"] = torch::scalar_tensor(-1, torch::kLong);
        expectError([&] { optimizer.loadState(negative); }, {"'b.step'", ">= 0"});
        auto ahead = good;
        ahead["w.step"] = torch::scalar_tensor(5, torch::kLong);
        expectError([&] { optimizer.loadState(ahead); }, {"'w.step'", "exceeds 'step'"});
        QCOMPARE(optimizer.steps(), std::int64_t(0)); // a failed load changes nothing
    }

    // ---- Gradient clipping -----------------------------------------------------------------------

    void clipMatchesPyTorch_data()
    {
        QTest::addColumn<int>("index");
        const QJsonArray cases = golden().value("clip").toArray();
        for (int i = 0; i < cases.size(); ++i)
            QTest::newRow(qPrintable(cases[i].toObject().value("name").toString())) << i;
    }

    void clipMatchesPyTorch()
    {
        QFETCH(int, index);
        const QJsonObject c = golden().value("clip").toArray()[index].toObject();
        std::vector<std::vector<std::int64_t>> shapes;
        for (const QJsonValue& s : c.value("shapes").toArray())
            shapes.push_back(shapeOf(s));
        PlainModule module(shapes);
        const QJsonArray grads = c.value("grads").toArray();
        for (std::size_t i = 0; i < shapes.size(); ++i)
            if (!grads[int(i)].isNull()) module.params[i].mutable_grad() = tensorOf(grads[int(i)], shapes[i]);
        const double norm = clipGradNorm(module, c.value("max_norm").toDouble());
        OL_COMPARE_RELATIVE("total norm", torch::tensor(norm, torch::kDouble),
                            torch::tensor(c.value("total_norm").toDouble(), torch::kDouble));
        const QJsonArray clipped = c.value("clipped").toArray();
        for (std::size_t i = 0; i < shapes.size(); ++i) {
            if (clipped[int(i)].isNull()) {
                QVERIFY(!module.params[i].grad().defined());
                continue;
            }
            OL_COMPARE_RELATIVE(QStringLiteral("gradient %1").arg(i), module.params[i].grad(),
                                tensorOf(clipped[int(i)], shapes[i]));
        }
    }

    void clipEdgeCases()
    {
        PlainModule module(std::vector<std::vector<std::int64_t>>{{3}});
        QCOMPARE(clipGradNorm(module, 1.0), 0.0); // no gradients
        expectError([&] { clipGradNorm(module, 0.0); }, {"maximum norm must be positive"});
        module.params[0].mutable_grad() = torch::tensor({3.0f, 4.0f, 0.0f});
        QCOMPARE(float(clipGradNorm(module, 1.0)), 5.0f);
        QVERIFY(std::abs(module.params[0].grad().norm().item<double>() - 1.0) < 1e-6);
    }

    // ---- Weight-decay groups ---------------------------------------------------------------------

    void decayGroupsOnBert_data()
    {
        QTest::addColumn<bool>("decayLayerNorm");
        QTest::newRow("BERT split") << false;
        QTest::newRow("LayerNorm weights decayed too") << true;
    }

    void decayGroupsOnBert()
    {
        QFETCH(bool, decayLayerNorm);
        BertConfig c = BertConfig::preset("bert-tiny");
        c.vocabSize = 50;
        c.variant.gate = GateKind::Linear;
        BertForMaskedLM model(c);
        const std::vector<ParamGroup> groups = decayGroups(*model, 0.01, decayLayerNorm);
        QCOMPARE(groups.size(), std::size_t(2));
        QCOMPARE(groups[0].weightDecay, 0.01);
        QCOMPARE(groups[1].weightDecay, 0.0);
        std::set<std::string> decayed, free;
        for (const auto& [name, t] : groups[0].params)
            decayed.insert(name);
        for (const auto& [name, t] : groups[1].params)
            free.insert(name);
        QCOMPARE(decayed.size() + free.size(), model->named_parameters().size());
        for (const auto& item : model->named_parameters()) {
            const std::string& name = item.key();
            const bool bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
            const bool layerNormWeight = name.find("LayerNorm.weight") != std::string::npos;
            const bool expectFree = bias || (layerNormWeight && !decayLayerNorm);
            QVERIFY2(expectFree ? free.count(name) : decayed.count(name), name.c_str());
        }
        // The gates (Qualcomm's "alpha" names): weights decay, biases do not.
        QVERIFY(decayed.count("bert.encoder.layer.0.attention.self.alpha.0.weight"));
        QVERIFY(free.count("bert.encoder.layer.1.attention.self.alpha.1.bias"));
        QVERIFY(free.count("cls.predictions.bias"));
        QVERIFY(decayed.count("bert.embeddings.word_embeddings.weight"));
        QCOMPARE(free.count("bert.embeddings.LayerNorm.weight"), std::size_t(decayLayerNorm ? 0 : 1));
        QVERIFY(free.count("bert.embeddings.LayerNorm.bias"));
    }

    void decayGroupsOnVit()
    {
        VitConfig c = VitConfig::preset("vit-fmnist");
        c.numLayers = 2;
        VisionTransformer model(c);
        const auto groups = decayGroups(*model, 0.05);
        std::set<std::string> free;
        for (const auto& [name, t] : groups[1].params)
            free.insert(name);
        const std::set<std::string> expected = {"patch_embed.proj.bias",
                                                "blocks.0.norm1.weight",
                                                "blocks.0.norm1.bias",
                                                "blocks.0.attn.qkv.bias",
                                                "blocks.0.attn.proj.bias",
                                                "blocks.0.norm2.weight",
                                                "blocks.0.norm2.bias",
                                                "blocks.0.mlp.fc1.bias",
                                                "blocks.0.mlp.fc2.bias",
                                                "blocks.1.norm1.weight",
                                                "blocks.1.norm1.bias",
                                                "blocks.1.attn.qkv.bias",
                                                "blocks.1.attn.proj.bias",
                                                "blocks.1.norm2.weight",
                                                "blocks.1.norm2.bias",
                                                "blocks.1.mlp.fc1.bias",
                                                "blocks.1.mlp.fc2.bias",
                                                "norm.weight",
                                                "norm.bias",
                                                "head.bias"};
        QCOMPARE(free, expected);
        QCOMPARE(groups[0].params.size() + groups[1].params.size(), model->named_parameters().size());
    }

    // ---- Learning-rate schedule ------------------------------------------------------------------

    void scheduleMatchesLambdaLr_data()
    {
        QTest::addColumn<int>("index");
        const QJsonArray cases = golden().value("schedule").toArray();
        for (int i = 0; i < cases.size(); ++i) {
            const QJsonObject c = cases[i].toObject();
            QTest::newRow(qPrintable(QStringLiteral("%1, warmup %2 of %3")
                                         .arg(c.value("kind").toString())
                                         .arg(c.value("warmup").toInt())
                                         .arg(c.value("total").toInt())))
                << i;
        }
    }

    void scheduleMatchesLambdaLr()
    {
        QFETCH(int, index);
        const QJsonObject c = golden().value("schedule").toArray()[index].toObject();
        const DecayKind kind = parseDecayKind(c.value("kind").toString().toStdString());
        const QJsonArray lrs = c.value("lrs").toArray();
        for (int step = 0; step < lrs.size(); ++step) {
            const double lr = learningRate(c.value("peak").toDouble(), step, c.value("warmup").toInt(),
                                           c.value("total").toInt(), kind);
            const double expected = lrs[step].toDouble();
            QVERIFY2(lr == expected, qPrintable(QStringLiteral("step %1: %2, expected %3")
                                                    .arg(step)
                                                    .arg(lr, 0, 'g', 17)
                                                    .arg(expected, 0, 'g', 17)));
        }
    }

    void scheduleFormulas()
    {
        // Hugging Face's formulas, by hand: warm-up lr * s / warmup, then decay.
        QCOMPARE(learningRate(1e-3, 0, 10, 110, DecayKind::Linear), 0.0);
        QCOMPARE(learningRate(1e-3, 5, 10, 110, DecayKind::Linear), 5e-4);
        QCOMPARE(learningRate(1e-3, 10, 10, 110, DecayKind::Linear), 1e-3);
        QCOMPARE(learningRate(1e-3, 60, 10, 110, DecayKind::Linear), 5e-4);
        QCOMPARE(learningRate(1e-3, 110, 10, 110, DecayKind::Linear), 0.0);
        QCOMPARE(learningRate(1e-3, 60, 10, 110, DecayKind::Cosine), 1e-3 * 0.5 * (1 + std::cos(M_PI * 0.5)));
        QCOMPARE(learningRate(1e-3, 110, 10, 110, DecayKind::Cosine), 0.0);
        QCOMPARE(learningRate(1e-3, 100, 10, 110, DecayKind::Constant), 1e-3);
        QCOMPARE(learningRate(2e-4, 0, 0, 5, DecayKind::Constant), 2e-4);
        for (DecayKind k : {DecayKind::Linear, DecayKind::Cosine, DecayKind::Constant})
            QVERIFY(parseDecayKind(toString(k)) == k);
        expectError([] { parseDecayKind("exponential"); }, {"'exponential'", "linear, cosine or constant"});
    }
};

QTEST_APPLESS_MAIN(TstTrainCore)
#include "tst_train_core.moc"
