// Issue #43: the Outliers and Systematic pages show the activations as a transform sees them. On a demo
// decoder and a demo ViT, "Seen through" reruns the input on the transformed model: a rotation keeps the
// predictions and turns every residual-stream tensor by the randomized Hadamard matrix (out' = out Q,
// against a matrix the test builds); SmoothQuant keeps the stream, divides each channel of the normed input
// by one scale and evens the channels' ranges. A post-LN BERT refuses both: the choices are disabled with
// the reason, and opening it while a transform is chosen shows it as trained.

#include "../common/gui_window_fixture.h"

#include "outliers_page.h"
#include "quant/transforms.h"
#include "systematic_page.h"
#include "transform_box.h"
#include "view_builders.h"

#include <QStandardItemModel>
#include <QtTest>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

using namespace outlierlens;

namespace {

/// [L, T, d] float64 of a snapshot's per-layer tensor.
torch::Tensor layers(const InspectionSnapshot& s, const QVector<float>& values)
{
    return torch::from_blob(const_cast<float*>(values.constData()), {s.L(), s.T, s.d()}, torch::kFloat)
        .to(torch::kDouble);
}

} // namespace

class TstTransformView : public QObject, public test::MainWindowFixture
{
    Q_OBJECT

    /// Opens `dir` and waits for its first input.
    SnapshotPtr openModel(const QString& dir)
    {
        m_window->openModel(dir);
        [&] {
            QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() &&
                                         m_window->controller()->snapshot()->model.dir == dir &&
                                         !m_window->controller()->loadingOrInspecting(),
                                     60000);
        }();
        return m_window->controller()->snapshot();
    }

    /// Chooses entry `index` of the Outliers page's "Seen through" as a user does and waits for the rerun.
    SnapshotPtr seeThrough(int index)
    {
        const SnapshotPtr before = m_window->controller()->snapshot();
        TransformBox* box = m_window->outliersPage()->transformBox();
        box->setCurrentIndex(index);
        Q_EMIT box->activated(index);
        [&] {
            QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() != before &&
                                         !m_window->controller()->loadingOrInspecting(),
                                     60000);
        }();
        return m_window->controller()->snapshot();
    }

private Q_SLOTS:
    void initTestCase() { openWindow(QStringLiteral("tst_transform_view")); }

    void rotationTurnsTheStreamAndKeepsThePrediction()
    {
        const SnapshotPtr trained = openModel(kBackcopy);
        QVERIFY(trained->transform.isEmpty());
        QCOMPARE(trained->attnIn.size(), trained->out.size()); // pre-LN: the normed input is recorded
        const SnapshotPtr rotated = seeThrough(2);
        QCOMPARE(rotated->transform, QStringLiteral("hadamard rotation"));
        QCOMPARE(rotated->input, trained->input);
        QCOMPARE(rotated->prediction.size(), trained->prediction.size());
        for (int i = 0; i < trained->prediction.size(); ++i) // "token (probability to 3 places)"
            QCOMPARE(rotated->prediction[i], trained->prediction[i]);
        // float32 rounding grows with the largest values the stream carries (its outliers): the bound is
        // relative to the trained stream's max |out|.
        const torch::Tensor q = randomizedHadamard(trained->d(), 0);
        const double stream = layers(*trained, trained->out).abs().max().item<double>();
        for (const QString& name :
             {QStringLiteral("attn_out"), QStringLiteral("ffn_out"), QStringLiteral("out")}) {
            const torch::Tensor expected = torch::matmul(layers(*trained, trained->perLayer(name)), q);
            const double error =
                (layers(*rotated, rotated->perLayer(name)) - expected).abs().max().item<double>();
            qInfo("%s: max error %.3g, stream max %.4g", qPrintable(name), error, stream);
            QVERIFY2(error <= 2e-6 * stream, qPrintable(name));
        }
        // The flattening the page shows: in the layer with the heaviest tail, the rotated stream's kurtosis
        // and max |x| are lower.
        int worst = 0;
        for (int l = 1; l < trained->L(); ++l)
            if (trained->outliersOf(QStringLiteral("out"), l).kurtosis >
                trained->outliersOf(QStringLiteral("out"), worst).kurtosis)
                worst = l;
        const TensorOutliers& before = trained->outliersOf(QStringLiteral("out"), worst);
        const TensorOutliers& after = rotated->outliersOf(QStringLiteral("out"), worst);
        QVERIFY2(after.kurtosis < before.kurtosis / 2,
                 qPrintable(QStringLiteral("%1 -> %2").arg(before.kurtosis).arg(after.kurtosis)));
        QVERIFY(after.maxInfNorm < before.maxInfNorm);

        // Both pages say what they show, the exported figure too, and the Systematic page's box follows.
        m_window->setSelection(worst, 0);
        m_window->pages()->setCurrentWidget(m_window->outliersPage());
        QVERIFY2(m_window->outliersPage()->note().contains(QStringLiteral("Seen through hadamard rotation")),
                 qPrintable(m_window->outliersPage()->note()));
        m_window->pages()->setCurrentWidget(m_window->systematicPage());
        QVERIFY2(
            m_window->systematicPage()->note().contains(QStringLiteral("Seen through hadamard rotation")),
            qPrintable(m_window->systematicPage()->note()));
        QCOMPARE(m_window->systematicPage()->transformBox()->currentIndex(), 2);
        QVERIFY(provenanceOf(*rotated, QStringLiteral("layer 1"))
                    .selection.contains(QStringLiteral("seen through")));
        // Back to the model as trained: its own numbers again.
        const SnapshotPtr again = seeThrough(0);
        QVERIFY(again->transform.isEmpty());
        QCOMPARE((layers(*again, again->out) - layers(*trained, trained->out)).abs().max().item<double>(),
                 0.0);
    }

    void smoothQuantRescalesEachChannelOfTheNormedInput()
    {
        const SnapshotPtr trained = openModel(kBackcopy);
        QVERIFY(trained->transform.isEmpty());
        const SnapshotPtr smoothed = seeThrough(1);
        QCOMPARE(smoothed->transform, QStringLiteral("smoothquant 0.5"));
        QCOMPARE(smoothed->prediction, trained->prediction);
        // The stream is the trained model's ...
        const torch::Tensor out = layers(*trained, trained->out);
        const double error = (layers(*smoothed, smoothed->out) - out).abs().max().item<double>();
        qInfo("out: max error %.3g, stream max %.4g", error, out.abs().max().item<double>());
        QVERIFY(error <= 2e-6 * out.abs().max().item<double>());
        // ... and each channel j of the normed input is divided by one scale s_j > 0, the same for every
        // token: x = s_j y, with s_j fitted by least squares per channel and the residual at float32's level.
        const torch::Tensor x = layers(*trained, trained->attnIn), y = layers(*smoothed, smoothed->attnIn);
        for (int l = 0; l < trained->L(); ++l) {
            const torch::Tensor xl = x[l], yl = y[l];
            const torch::Tensor s = (xl * yl).sum(0) / (yl * yl).sum(0).clamp_min(1e-30);
            const double residual = (xl - s.unsqueeze(0) * yl).abs().max().item<double>();
            QVERIFY2(residual <= 1e-5 * xl.abs().max().item<double>(),
                     qPrintable(QStringLiteral("layer %1: %2").arg(l + 1).arg(residual)));
            QVERIFY((s > 0).all().item<bool>());
            QVERIFY((s - 1).abs().max().item<double>() > 0.1); // the scales did change
            // The channels' ranges even out: the largest channel maximum over the smallest shrinks.
            const auto evenness = [](const torch::Tensor& t) {
                const torch::Tensor m = t.abs().amax(0);
                return (m.max() / m.clamp_min(1e-12).min()).item<double>();
            };
            QVERIFY2(
                evenness(yl) < evenness(xl),
                qPrintable(
                    QStringLiteral("layer %1: %2 -> %3").arg(l + 1).arg(evenness(xl)).arg(evenness(yl))));
        }
        seeThrough(0);
    }

    void vitRotationKeepsTheClassProbabilities()
    {
        const QString dir = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/vit-fmnist-vanilla");
        const SnapshotPtr trained = openModel(dir);
        QVERIFY(!trained->attnIn.isEmpty());
        const SnapshotPtr rotated = seeThrough(3); // SmoothQuant, then the rotation
        QCOMPARE(rotated->transform, QStringLiteral("smoothquant 0.5, hadamard rotation"));
        QCOMPARE(rotated->probabilities.size(), trained->probabilities.size());
        for (int k = 0; k < trained->probabilities.size(); ++k)
            QVERIFY(std::abs(rotated->probabilities[k] - trained->probabilities[k]) < 1e-6);
        const torch::Tensor expected =
            torch::matmul(layers(*trained, trained->out), randomizedHadamard(trained->d(), 0));
        QVERIFY((layers(*rotated, rotated->out) - expected).abs().max().item<double>() <=
                2e-6 * expected.abs().max().item<double>());
    }

    void postLayerNormBertRefusesAndOpensAsTrained()
    {
        openModel(kBackcopy);
        seeThrough(2);
        const SnapshotPtr bert = openModel(kModel);
        QVERIFY(bert->transform.isEmpty());
        QVERIFY(!m_window->controller()->transform().any());
        QVERIFY(bert->attnIn.isEmpty());
        for (TransformBox* box :
             {m_window->outliersPage()->transformBox(), m_window->systematicPage()->transformBox()}) {
            QCOMPARE(box->currentIndex(), 0);
            auto* items = qobject_cast<QStandardItemModel*>(box->model());
            QVERIFY(items->item(0)->isEnabled());
            for (int i = 1; i < box->count(); ++i) {
                QVERIFY(!items->item(i)->isEnabled());
                QVERIFY2(items->item(i)->toolTip().contains(QStringLiteral("LN")) ||
                             items->item(i)->toolTip().contains(QStringLiteral("norm")),
                         qPrintable(items->item(i)->toolTip()));
            }
        }
    }

private:
    const QString kBackcopy = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/backcopy-vanilla");
};

QTEST_MAIN(TstTransformView)
#include "tst_transform_view.moc"
