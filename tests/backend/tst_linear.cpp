// model/linear.h, the linear layers' products on oneDNN: in float32 its sgemm must give
// torch::linear's result and gradients (checked against float64), and its fused ReLU those of the ReLU
// after the layer; in bf16 autocast inference its bf16 x bf16 -> float32 product must equal the exact
// product of the bf16-rounded operands and be closer to the float32 product than autocast's bf16 result,
// and with one sample's tokens per [T, in] slice, each sample's mean output must be the float32 one;
// the other modes keep LibTorch's own route.
//
// model/onednn_ops.h, the attention's products and softmax on oneDNN: results and gradients against
// float64, for the permuted and transposed views the attention passes, and the layouts they promise.

#include "../common/tensor_compare.h"

#include "model/linear.h"
#include "model/onednn_ops.h"
#include "model/precision.h"
#include "model/runtime.h"

#include <torch/torch.h>

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

using namespace outlierlens;

namespace {

double relativeError(const torch::Tensor& actual, const torch::Tensor& expected)
{
    return test::maxAbsDiff(actual.to(torch::kDouble), expected) / expected.abs().max().item<double>();
}

/// The rounding a float32 sum of `terms` terms is expected to make, relative to its scale: sqrt(terms)
/// units of float32's epsilon, at least 1e-6 (the bound of the other tests here).
double roundingOfSum(int terms)
{
    return std::max(1e-6, std::sqrt(double(terms)) * double(std::numeric_limits<float>::epsilon()));
}

} // namespace

class TestLinear : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        configureTorchThreads();
        torch::manual_seed(7);
    }

    void float32MatchesTorchWithGradients_data()
    {
        QTest::addColumn<bool>("bias");
        QTest::addColumn<bool>("inByOut");
        QTest::addColumn<bool>("strided");
        QTest::addColumn<int>("in");
        QTest::addColumn<int>("out");
        // The weight's gradient is computed in the orientation whose rows are the smaller of in and out
        // (at most 256), else in the weight's own layout.
        QTest::newRow("weight [out, in], bias") << true << false << false << 96 << 160;
        QTest::newRow("weight [out, in], no bias") << false << false << false << 96 << 160;
        QTest::newRow("weight [in, out] (Conv1D), bias") << true << true << false << 96 << 160;
        QTest::newRow("transposed input") << true << false << true << 96 << 160;
        QTest::newRow("weight [out, in], fewer outputs") << true << false << false << 160 << 96;
        QTest::newRow("weight [in, out] (Conv1D), fewer outputs") << true << true << false << 160 << 96;
        QTest::newRow("weight [out, in], wide") << true << false << false << 288 << 320;
        QTest::newRow("weight [in, out] (Conv1D), wide") << true << true << false << 288 << 320;
        // Widths that are no multiple of 16: the column blocks of the split (model/linear.cpp) end short.
        QTest::newRow("odd widths") << true << false << false << 97 << 161;
        QTest::newRow("odd widths, [in, out]") << true << true << false << 161 << 203;
    }

    void float32MatchesTorchWithGradients()
    {
        QFETCH(bool, bias);
        QFETCH(bool, inByOut);
        QFETCH(bool, strided);
        QFETCH(int, in);
        QFETCH(int, out);
        torch::Tensor x = strided ? torch::randn({5, in, 37}).transpose(1, 2) : torch::randn({5, 37, in});
        QCOMPARE(x.is_contiguous(), !strided);
        x.requires_grad_(true);
        torch::Tensor w = (inByOut ? torch::randn({in, out}) : torch::randn({out, in})).requires_grad_(true);
        torch::Tensor b = bias ? torch::randn({out}).requires_grad_(true) : torch::Tensor();
        QCOMPARE(QString(linearRoute(x, w)), QString("onednn-sgemm"));

        const torch::Tensor y = linearLayer(x, w, b, inByOut);
        QCOMPARE(y.sizes().vec(), (std::vector<std::int64_t>{5, 37, out}));
        QVERIFY(y.scalar_type() == torch::kFloat);
        const torch::Tensor upstream = torch::randn({5, 37, out});
        (y * upstream).sum().backward();

        // The same in float64 through LibTorch's own ops.
        const torch::Tensor xd = x.detach().to(torch::kDouble).requires_grad_(true);
        const torch::Tensor wd = w.detach().to(torch::kDouble).requires_grad_(true);
        const torch::Tensor bd = bias ? b.detach().to(torch::kDouble).requires_grad_(true) : torch::Tensor();
        torch::Tensor yd = torch::matmul(xd, inByOut ? wd : wd.t());
        if (bias) yd = yd + bd;
        (yd * upstream.to(torch::kDouble)).sum().backward();

        QVERIFY2(relativeError(y.detach(), yd.detach()) < 1e-6, "output");
        QVERIFY2(relativeError(x.grad(), xd.grad()) < 1e-6, "input gradient");
        QVERIFY2(relativeError(w.grad(), wd.grad()) < 1e-6, "weight gradient");
        if (bias) QVERIFY2(relativeError(b.grad(), bd.grad()) < 1e-6, "bias gradient");
        torch::Tensor viaTorch = inByOut ? torch::matmul(x, w) : torch::linear(x, w, b);
        if (inByOut && bias) viaTorch = viaTorch + b;
        QVERIFY2(relativeError(y.detach(), viaTorch.detach().to(torch::kDouble)) < 1e-6,
                 "against torch::linear");
    }

    void reluEqualsReluAfterTheLayer_data()
    {
        QTest::addColumn<bool>("inByOut");
        QTest::addColumn<bool>("tracked");
        QTest::newRow("weight [out, in], with gradients") << false << true;
        QTest::newRow("weight [in, out] (Conv1D), with gradients") << true << true;
        QTest::newRow("no gradients") << false << false;
    }

    /// linearRelu applies the ReLU in place and folds its backward into the layer's: the same sgemms on
    /// the same numbers, so values and gradients equal relu(linearLayer(...)) to the bit, including
    /// outputs that are exactly 0 (their gradient is 0, as torch's threshold_backward gives).
    void reluEqualsReluAfterTheLayer()
    {
        QFETCH(bool, inByOut);
        QFETCH(bool, tracked);
        const int in = 64, out = 96;
        torch::Tensor x = torch::randn({3, 41, in});
        x.index_put_({0, 0}, 0.0); // a row of zeros: its outputs are the bias
        const torch::Tensor w = inByOut ? torch::randn({in, out}) : torch::randn({out, in});
        torch::Tensor b = torch::randn({out});
        b.index_put_({torch::indexing::Slice(0, 8)}, 0.0); // with the zero row: outputs exactly 0
        const torch::Tensor upstream = torch::randn({3, 41, out});
        auto run = [&](bool fused) {
            const torch::Tensor xi = x.clone().requires_grad_(tracked),
                                wi = w.clone().requires_grad_(tracked),
                                bi = b.clone().requires_grad_(tracked);
            const torch::Tensor y =
                fused ? linearRelu(xi, wi, bi, inByOut) : torch::relu(linearLayer(xi, wi, bi, inByOut));
            if (tracked) (y * upstream).sum().backward();
            return std::vector<torch::Tensor>{y.detach(), xi.grad(), wi.grad(), bi.grad()};
        };
        torch::GradMode::set_enabled(tracked);
        const auto fused = run(true), separate = run(false);
        torch::GradMode::set_enabled(true);
        QCOMPARE(fused[0].sizes().vec(), (std::vector<std::int64_t>{3, 41, out}));
        QVERIFY((fused[0] == 0).sum().item<std::int64_t>() > 0);
        QVERIFY2(torch::equal(fused[0], separate[0]), "output");
        if (!tracked) return;
        QVERIFY2(torch::equal(fused[1], separate[1]), "input gradient");
        QVERIFY2(torch::equal(fused[2], separate[2]), "weight gradient");
        QVERIFY2(torch::equal(fused[3], separate[3]), "bias gradient");
        QVERIFY(fused[1].abs().sum().item<double>() > 0);
    }

    /// With more than one thread, sgemm splits the output's larger dimension in one block per thread,
    /// each a one-thread product: the values and gradients on 1, 2 and 3 threads against float64, for T = 1
    /// and for widths that are no multiple of the blocks' 16.
    void float32OnAnyThreadCount_data()
    {
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("in");
        QTest::addColumn<int>("out");
        QTest::newRow("one token") << 1 << 768 << 3072;
        QTest::newRow("bert-base up") << 128 << 768 << 3072;
        QTest::newRow("odd widths") << 37 << 203 << 333;
        QTest::newRow("more rows than outputs (split by rows)") << 301 << 203 << 97;
    }

    void float32OnAnyThreadCount()
    {
        QFETCH(int, rows);
        QFETCH(int, in);
        QFETCH(int, out);
        const torch::Tensor x0 = torch::randn({rows, in}), w0 = torch::randn({out, in}) * 0.05,
                            b0 = torch::randn({out}), upstream = torch::randn({rows, out});
        const torch::Tensor xd = x0.to(torch::kDouble).requires_grad_(true),
                            wd = w0.to(torch::kDouble).requires_grad_(true);
        (torch::linear(xd, wd, b0.to(torch::kDouble)) * upstream.to(torch::kDouble)).sum().backward();
        const torch::Tensor yd = torch::linear(xd, wd, b0.to(torch::kDouble)).detach();
        const int before = torch::get_num_threads();
        for (int threads : {1, 2, 3}) {
            torch::set_num_threads(threads);
            const torch::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
            const torch::Tensor y = linearLayer(x, w, b0);
            (y * upstream).sum().backward();
            const QByteArray where = QByteArray::number(threads) + " threads";
            // A float32 sum of k terms rounds by about sqrt(k) units of float32's epsilon: oneDNN's
            // one-row product (T = 1) sums its 3,072 terms in one sequence (1.7e-6 of the largest input
            // gradient here; OpenBLAS's blocked sums 0.4e-6).
            QVERIFY2(relativeError(y.detach(), yd) < roundingOfSum(in), where + ": output");
            QVERIFY2(relativeError(x.grad(), xd.grad()) < roundingOfSum(out), where + ": input gradient");
            QVERIFY2(relativeError(w.grad(), wd.grad()) < roundingOfSum(rows), where + ": weight gradient");
        }
        torch::set_num_threads(before);
    }

    /// A worker thread (the GUI's, a statistics worker) gets the same numbers as the main thread.
    void float32FromAnotherThread()
    {
        torch::NoGradGuard noGrad;
        const torch::Tensor x = torch::randn({300, 128}), w = torch::randn({256, 128}),
                            b = torch::randn({256});
        const torch::Tensor here = linearLayer(x, w, b);
        torch::Tensor there;
        std::thread([&] { there = linearLayer(x, w, b); }).join();
        QVERIFY(there.defined());
        QVERIFY(relativeError(there, here.to(torch::kDouble)) < 1e-6);
    }

    void bf16InferenceKeepsFloat32Outputs()
    {
        if (!cpuSupportsBf16()) QSKIP("this CPU has no bf16 instructions: the app runs float32 instead");
        // Rows that are not one sample's tokens ([M, in]): no correction by the samples' mean rows.
        const torch::Tensor x = torch::randn({200, 256}) * 3, w = torch::randn({512, 256}) * 0.05,
                            b = torch::randn({512});
        const torch::Tensor exact = torch::matmul(x.to(torch::kBFloat16).to(torch::kDouble),
                                                  w.to(torch::kBFloat16).to(torch::kDouble).t()) +
                                    b.to(torch::kDouble);
        const torch::Tensor full =
            torch::matmul(x.to(torch::kDouble), w.to(torch::kDouble).t()) + b.to(torch::kDouble);
        torch::Tensor ours, autocastOwn;
        {
            const AutocastScope autocast(Precision::Bf16);
            torch::NoGradGuard noGrad;
            QCOMPARE(QString(linearRoute(x, w)), QString("onednn-bf16-f32"));
            ours = linearLayer(x, w, b);
            autocastOwn = torch::linear(x, w, b);
        }
        QVERIFY(ours.scalar_type() == torch::kFloat);
        QVERIFY(autocastOwn.scalar_type() == torch::kBFloat16);
        // Float32 accumulation of the bf16 operands: the exact product up to float32 sums.
        QVERIFY2(relativeError(ours, exact) < 1e-5, qPrintable(QString::number(relativeError(ours, exact))));
        // And nearer the float32 layer than autocast's result rounded to bf16 (measured: 0.78 x its error;
        // the rest is the rounding of the inputs, which both share).
        const double oursToFull = (ours.to(torch::kDouble) - full).abs().mean().item<double>();
        const double autocastToFull = (autocastOwn.to(torch::kDouble) - full).abs().mean().item<double>();
        QVERIFY2(
            oursToFull < 0.9 * autocastToFull,
            qPrintable(QString("mean |error| %1 against autocast's %2").arg(oursToFull).arg(autocastToFull)));
    }

    void bf16InferenceCorrectsEachSamplesMeanRow_data()
    {
        QTest::addColumn<bool>("inByOut");
        QTest::addColumn<bool>("bias");
        QTest::addColumn<int>("tokens");
        QTest::newRow("weight [out, in], bias") << false << true << 50;
        QTest::newRow("weight [in, out] (Conv1D), no bias") << true << false << 50;
        QTest::newRow("one token") << false << true << 1;
        QTest::newRow("one input of 333 tokens, 1000 features: its rows summed in chunks")
            << false << true << 333;
    }

    /// [B, T, in]: each sample's rows get the bf16 route's error on their mean row taken off, so that
    /// their mean output is the float32 one; the error that differs from token to token stays.
    void bf16InferenceCorrectsEachSamplesMeanRow()
    {
        if (!cpuSupportsBf16()) QSKIP("this CPU has no bf16 instructions: the app runs float32 instead");
        QFETCH(bool, inByOut);
        QFETCH(bool, bias);
        QFETCH(int, tokens);
        const std::int64_t in = tokens == 333 ? 1000 : 256, out = 384, samples = tokens == 333 ? 1 : 3;
        // Tokens sharing a large common part, as after the attention's averaging or a GELU.
        const torch::Tensor x =
            torch::randn({samples, 1, in}) * 3 + torch::randn({samples, tokens, in}) * 0.5;
        const torch::Tensor w =
            torch::randn(inByOut ? std::vector<std::int64_t>{in, out} : std::vector<std::int64_t>{out, in}) *
            0.05;
        const torch::Tensor b = bias ? torch::randn({out}) : torch::Tensor();
        const torch::Tensor wd = inByOut ? w.to(torch::kDouble) : w.to(torch::kDouble).t(); // [in, out]
        auto float64Layer = [&](const torch::Tensor& input) {
            const torch::Tensor y = torch::matmul(input.to(torch::kDouble), wd);
            return bias ? y + b.to(torch::kDouble) : y;
        };
        auto bf16Layer = [&](const torch::Tensor& input, bool asSamples) {
            const AutocastScope autocast(Precision::Bf16);
            torch::NoGradGuard noGrad;
            return asSamples
                       ? linearLayer(input, w, b, inByOut)
                       : linearLayer(input.reshape({-1, in}), w, b, inByOut).view({samples, tokens, out});
        };
        const torch::Tensor full = float64Layer(x), ours = bf16Layer(x, true),
                            rowsAlone = bf16Layer(x, false);
        QCOMPARE(ours.sizes().vec(), (std::vector<std::int64_t>{samples, tokens, out}));
        // Each sample's mean output row is the float32 (here float64) one, up to the float32 sums and
        // the bf16 parts the mean rows are carried in.
        const double scale = full.abs().max().item<double>();
        const double meanErr = (ours.to(torch::kDouble).mean(1) - full.mean(1)).abs().max().item<double>();
        const double meanErrAlone =
            (rowsAlone.to(torch::kDouble).mean(1) - full.mean(1)).abs().max().item<double>();
        QVERIFY2(meanErr < 1e-5 * scale && meanErr < 0.02 * meanErrAlone,
                 qPrintable(QString("%1 against %2 uncorrected").arg(meanErr).arg(meanErrAlone)));
        // The correction is one row per sample, added to each of its tokens: what differs between the
        // tokens is the uncorrected route's.
        const torch::Tensor shift = (ours - rowsAlone).to(torch::kDouble);
        QVERIFY((shift - shift.mean(1, true)).abs().max().item<double>() < 1e-5 * scale);
        QVERIFY(shift.abs().max().item<double>() > 1e-4 * scale);
        // With inputs bf16 holds exactly, what is left is the weights' rounding times each token's own
        // part (a sixth of the common one here): far smaller than the whole of it.
        const torch::Tensor exactInputs = x.to(torch::kBFloat16).to(torch::kFloat);
        const torch::Tensor fullExact = float64Layer(exactInputs);
        const double corrected =
            (bf16Layer(exactInputs, true).to(torch::kDouble) - fullExact).abs().mean().item<double>();
        const double uncorrected =
            (bf16Layer(exactInputs, false).to(torch::kDouble) - fullExact).abs().mean().item<double>();
        QVERIFY2(corrected < 0.4 * uncorrected,
                 qPrintable(QString("mean |error| %1 against %2").arg(corrected).arg(uncorrected)));
    }

    /// A sample holding a value that is not finite is left as the uncorrected route gives it; the other
    /// samples are corrected.
    void bf16InferenceLeavesNonFiniteSamplesUncorrected()
    {
        if (!cpuSupportsBf16()) QSKIP("this CPU has no bf16 instructions: the app runs float32 instead");
        torch::Tensor x = torch::randn({2, 20, 64}) * 3 + 5;
        x[1][3][7] = std::numeric_limits<float>::infinity();
        const torch::Tensor w = torch::randn({32, 64}) * 0.05, b = torch::randn({32});
        torch::Tensor ours, rowsAlone;
        {
            const AutocastScope autocast(Precision::Bf16);
            torch::NoGradGuard noGrad;
            ours = linearLayer(x, w, b);
            rowsAlone = linearLayer(x.reshape({-1, 64}), w, b).view({2, 20, 32});
        }
        QVERIFY(torch::equal(ours[1].isfinite(), rowsAlone[1].isfinite()));
        QVERIFY(torch::equal(ours[1].isnan(), rowsAlone[1].isnan()));
        const torch::Tensor finite = rowsAlone[1].isfinite();
        const double scale = rowsAlone[0].abs().max().item<double>();
        // Equal up to the order in which the bias is added; the finite sample moves by its correction.
        QVERIFY((ours[1] - rowsAlone[1]).masked_select(finite).abs().max().item<double>() < 1e-6 * scale);
        QVERIFY((ours[0] - rowsAlone[0]).abs().max().item<double>() > 1e-4 * scale);
        QVERIFY(ours[0].isfinite().all().item<bool>());
    }

    /// Q K^T / sqrt(d) and P V as multiHeadAttention calls them: heads as permuted views of one
    /// [B, T, 3, H, dh] tensor (and K transposed), the context laid out [B, T, H, dh].
    void attentionProductsMatchFloat64WithGradients_data()
    {
        QTest::addColumn<int>("B");
        QTest::addColumn<int>("T");
        QTest::addColumn<int>("H");
        QTest::addColumn<int>("dh");
        QTest::newRow("3 x 17 tokens, 4 heads") << 3 << 17 << 4 << 8;
        QTest::newRow("one input, one token, one head") << 1 << 1 << 1 << 8;
        QTest::newRow("one token, 3 heads") << 2 << 1 << 3 << 4;
        QTest::newRow("one input, 2 tokens") << 1 << 2 << 2 << 16;
    }

    void attentionProductsMatchFloat64WithGradients()
    {
        QFETCH(int, B);
        QFETCH(int, T);
        QFETCH(int, H);
        QFETCH(int, dh);
        const torch::Tensor qkv = torch::randn({B, T, 3, H * dh}).requires_grad_(true);
        auto heads = [&](int i) { return qkv.select(2, i).view({B, T, H, dh}).permute({0, 2, 1, 3}); };
        const torch::Tensor q = heads(0), k = heads(1), v = heads(2);
        QVERIFY(onednn::canMultiply(q, k.transpose(-1, -2)));
        const torch::Tensor scores = activationProduct(q, k.transpose(-1, -2), std::sqrt(double(dh)));
        const torch::Tensor probs = onednn::softmax(scores);
        const torch::Tensor context = activationProduct(probs, v, 1.0, true);
        QCOMPARE(context.sizes().vec(), (std::vector<std::int64_t>{B, H, T, dh}));
        QVERIFY2(context.permute({0, 2, 1, 3}).is_contiguous(), "context laid out [B, T, H, dh]");
        const torch::Tensor upstream = torch::randn({B, T, H * dh});
        (context.permute({0, 2, 1, 3}).reshape({B, T, H * dh}) * upstream).sum().backward();

        const torch::Tensor qkvd = qkv.detach().to(torch::kDouble).requires_grad_(true);
        auto headsd = [&](int i) { return qkvd.select(2, i).view({B, T, H, dh}).permute({0, 2, 1, 3}); };
        const torch::Tensor scoresd =
            torch::matmul(headsd(0), headsd(1).transpose(-1, -2)) / std::sqrt(double(dh));
        const torch::Tensor probsd = torch::softmax(scoresd, -1);
        const torch::Tensor contextd = torch::matmul(probsd, headsd(2));
        (contextd.permute({0, 2, 1, 3}).reshape({B, T, H * dh}) * upstream.to(torch::kDouble))
            .sum()
            .backward();

        QVERIFY2(relativeError(scores.detach(), scoresd.detach()) < 1e-6, "scores");
        QVERIFY2(relativeError(probs.detach(), probsd.detach()) < 1e-6, "probabilities");
        QVERIFY2(relativeError(context.detach(), contextd.detach()) < 1e-6, "context");
        // With one token the softmax is constant and Q's and K's gradients are 0: compare absolutely there.
        for (int i = 0; i < 3; ++i) {
            const torch::Tensor expected = qkvd.grad().select(2, i);
            const double scale = std::max(expected.abs().max().item<double>(), 1.0);
            QVERIFY2(test::maxAbsDiff(qkv.grad().select(2, i).to(torch::kDouble), expected) < 1e-5 * scale,
                     qPrintable(QString("gradient of %1").arg("qkv"[i])));
        }
    }

    /// Operands oneDNN cannot read as they lie (a broadcast dimension, 3-D batches) are copied first;
    /// other types and mismatched batches keep torch::matmul.
    void attentionProductsOtherOperands()
    {
        const torch::Tensor a = torch::randn({2, 5, 7}), b = torch::randn({7, 3}).expand({2, 7, 3});
        QVERIFY(onednn::canMultiply(a, b));
        const torch::Tensor expected = torch::matmul(a.to(torch::kDouble), b.to(torch::kDouble)) / 2.0;
        QVERIFY(relativeError(activationProduct(a, b, 2.0), expected) < 1e-6);
        QVERIFY(!onednn::canMultiply(a.to(torch::kDouble), b.to(torch::kDouble)));
        QVERIFY(relativeError(activationProduct(a.to(torch::kDouble), b.to(torch::kDouble), 2.0), expected) <
                1e-12);
        QVERIFY(!onednn::canMultiply(a, torch::randn({1, 7, 3})));
        QVERIFY(!onednn::canMultiply(torch::randn({2, 3, 5, 7}), torch::randn({2, 3, 6, 3})));
    }

    /// The softmax of masked scores (the most negative float on padding keys) and its gradient.
    void softmaxMatchesFloat64WithGradients()
    {
        torch::Tensor x = (torch::randn({3, 2, 9, 11}) * 4).requires_grad_(true);
        torch::Tensor mask = torch::zeros({3, 1, 1, 11});
        mask.index_put_({0, 0, 0, torch::indexing::Slice(8, 11)}, std::numeric_limits<float>::lowest());
        QVERIFY(onednn::canSoftmax(x));
        const torch::Tensor y = onednn::softmax(x + mask);
        const torch::Tensor upstream = torch::randn({3, 2, 9, 11});
        (y * upstream).sum().backward();
        const torch::Tensor xd = x.detach().to(torch::kDouble).requires_grad_(true);
        const torch::Tensor yd = torch::softmax(xd + mask.to(torch::kDouble), -1);
        (yd * upstream.to(torch::kDouble)).sum().backward();
        QVERIFY2(relativeError(y.detach(), yd.detach()) < 1e-6, "softmax");
        QCOMPARE(y.index({0, 0, 0, torch::indexing::Slice(8, 11)}).abs().max().item<float>(), 0.0f);
        QVERIFY2(relativeError(x.grad(), xd.grad()) < 1e-5, "gradient");
        QVERIFY(!onednn::canSoftmax(x.to(torch::kDouble)));
    }

    void otherModesKeepTorchsRoute()
    {
        const torch::Tensor x = torch::randn({8, 32}), w = torch::randn({16, 32}).requires_grad_(true);
        QCOMPARE(QString(linearRoute(x.to(torch::kBFloat16), w.to(torch::kBFloat16))), QString("torch"));
        QCOMPARE(QString(linearRoute(x.to(torch::kDouble), w.to(torch::kDouble))), QString("torch"));
        QCOMPARE(QString(linearRoute(torch::randn({0, 32}), w)), QString("torch"));
        if (!cpuSupportsBf16()) return;
        const AutocastScope autocast(Precision::Bf16);
        // Autocast training: autocast's bf16 products, recorded for its backward pass.
        QCOMPARE(QString(linearRoute(x, w)), QString("torch"));
        const torch::Tensor y = linearLayer(x, w, torch::Tensor());
        QVERIFY(y.scalar_type() == torch::kBFloat16);
        QVERIFY(y.requires_grad());
    }
};

QTEST_APPLESS_MAIN(TestLinear)
#include "tst_linear.moc"
