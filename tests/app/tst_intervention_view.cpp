// Issue #43: interventions from the app. A right click on a hidden dimension of the Outliers dashboard or
// on a key column of the Head page offers them; the chosen one reruns the input with it (its activations
// against the backend's own forward pass with the same intervention), the intervened tensor beside the
// original in the panel above the pages, and an `intervene` job measures it over the model's data (the
// panel shows the job's numbers; a mean comes from that job). Clearing it gives the model's own numbers.

#include "../common/gui_window_fixture.h"

#include "analysis/decoder_inspection.h"
#include "head_page.h"
#include "intervention_panel.h"
#include "model/decoder_network.h"
#include "outlier_dashboard.h"
#include "outliers_page.h"
#include "quant/intervention.h"
#include "text/decoder_tokenizer.h"

#include <QChartView>
#include <QJsonArray>
#include <QLegend>
#include <QLegendMarker>
#include <QMenu>
#include <QTableWidget>
#include <QtTest>

#include <torch/torch.h>

using namespace outlierlens;

namespace {

torch::Tensor layers(const InspectionSnapshot& s, const QVector<float>& values)
{
    return torch::from_blob(const_cast<float*>(values.constData()), {s.L(), s.T, s.d()}, torch::kFloat)
        .clone();
}

/// The menu's action whose text starts with `text`.
QAction* actionStartingWith(QMenu* menu, const QString& text)
{
    for (QAction* a : menu->actions())
        if (a->text().startsWith(text)) return a;
    return nullptr;
}

} // namespace

class TstInterventionView : public QObject, public test::MainWindowFixture
{
    Q_OBJECT

    const QString kBackcopy = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/backcopy-vanilla");

    /// Waits for a snapshot that is not `before`, with the intervention `describing` (empty: none).
    SnapshotPtr waitForSnapshot(const SnapshotPtr& before, bool intervened)
    {
        [&] {
            QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() != before &&
                                         m_window->controller()->snapshot()->intervention.isEmpty() !=
                                             intervened &&
                                         !m_window->controller()->loadingOrInspecting(),
                                     60000);
        }();
        return m_window->controller()->snapshot();
    }

    /// The same forward pass in the backend: the decoder, its tokenizer and an InterventionSink.
    RecordingSink backendForward(const QString& text, const Intervention& intervention)
    {
        DecoderNetwork net = DecoderNetwork::load(kBackcopy.toStdString());
        const auto tokenizer = DecoderTokenizer::fromModelDir(kBackcopy.toStdString());
        InterventionSink sink(intervention, interventionSite(intervention.tensor, false));
        return inspectDecoder(net, *tokenizer, text.toStdString(), 0, true, {}, 5, &sink).activations;
    }

private Q_SLOTS:
    void initTestCase() { openWindow(QStringLiteral("tst_intervention_view")); }

    void zeroingTheSinkDimensionFromTheOutliersPage()
    {
        m_window->openModel(kBackcopy);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() &&
                                     m_window->controller()->snapshot()->model.dir == kBackcopy &&
                                     !m_window->controller()->loadingOrInspecting(),
                                 60000);
        const SnapshotPtr trained = m_window->controller()->snapshot();
        // Layer 1's out: the dimension with the most outliers, and the tokens carrying them.
        const TensorOutliers& o = trained->outliersOf(QStringLiteral("out"), 0);
        const int dim =
            int(std::max_element(o.perDimension.begin(), o.perDimension.end()) - o.perDimension.begin());
        QVERIFY(o.perDimension[dim] > 0);
        std::vector<std::int64_t> tokens;
        for (int p : o.positions)
            if (p % trained->d() == dim) tokens.push_back(p / trained->d());

        InterventionPanel* panel = m_window->interventionPanel();
        QVERIFY(!panel->isVisibleTo(m_window.get()));
        std::unique_ptr<QMenu> menu(
            panel->dimensionMenu(*trained, 0, QStringLiteral("out"), dim, m_window.get()));
        QAction* zero = actionStartingWith(
            menu.get(),
            QStringLiteral("Set dimension %1 of layer 1's out to 0 at its outlier tokens").arg(dim));
        QVERIFY(zero);
        zero->trigger();
        const SnapshotPtr zeroed = waitForSnapshot(trained, true);
        QVERIFY(panel->isVisibleTo(m_window.get()));
        QVERIFY2(zeroed->intervention.contains(QStringLiteral("set to 0")), qPrintable(zeroed->intervention));

        // The set values show as set, and every activation equals the backend's forward pass with the
        // same intervention.
        Intervention i;
        i.layer = 0;
        i.tensor = "out";
        i.dims = {dim};
        i.tokens = tokens;
        const RecordingSink backend = backendForward(trained->input, i);
        const torch::Tensor out = layers(*zeroed, zeroed->out);
        for (std::int64_t t : tokens)
            QCOMPARE(out[0][t][dim].item<float>(), 0.0f);
        for (int l = 0; l < zeroed->L(); ++l) {
            // The backend records a site's tensor before its edit (as quantizers see it); the app shows it
            // edited.
            torch::Tensor expected =
                backend.at(captureName(CapturePoint::Out, l))[0].to(torch::kFloat).clone();
            if (l == i.layer)
                for (std::int64_t t : tokens)
                    expected[t][dim] = 0;
            QVERIFY2(torch::allclose(out[l], expected, 1e-5, 1e-4),
                     qPrintable(QStringLiteral("layer %1").arg(l + 1)));
        }
        // ... and it travels: the next layer's output differs from the model's own.
        QVERIFY((out[1] - layers(*trained, trained->out)[1]).abs().max().item<double>() > 1e-3);

        // Beside the original: the panel's rows are the layers from the intervention's on.
        QTableWidget* table = panel->comparison();
        QCOMPARE(table->rowCount(), zeroed->L());
        QCOMPARE(table->item(0, 1)->text(),
                 QString::number(trained->outliersOf(QStringLiteral("out"), 0).maxInfNorm, 'g', 4));
        QCOMPARE(table->item(0, 2)->text(),
                 QString::number(zeroed->outliersOf(QStringLiteral("out"), 0).maxInfNorm, 'g', 4));

        // The Outliers page draws the per-layer curves of the run without the intervention beside.
        m_window->pages()->setCurrentWidget(m_window->outliersPage());
        m_window->setSelection(0, 0);
        const OutlierDashboardData& shown = m_window->outliersPage()->dashboard()->data();
        QCOMPARE(shown.originalMaxInfNormPerLayer.size(), trained->L());
        for (int l = 0; l < trained->L(); ++l) {
            QCOMPARE(shown.originalMaxInfNormPerLayer[l], trained->outliersOf(shown.tensor, l).maxInfNorm);
            QCOMPARE(shown.maxInfNormPerLayer[l], zeroed->outliersOf(shown.tensor, l).maxInfNorm);
        }
        QVERIFY(m_window->outliersPage()->dashboard()->figureCsv().contains(
            QStringLiteral("max inf norm without the intervention")));
        // With the panel open at 1280 x 800 the charts keep their room (the page scrolls), and the legend
        // names the dotted curves in its row.
        m_window->resize(1280, 800);
        QChartView* layerView =
            m_window->outliersPage()->findChild<QChartView*>(QStringLiteral("layerChart"));
        QVERIFY(layerView);
        QTRY_VERIFY2(
            layerView->chart()->plotArea().height() >= 100,
            qPrintable(QStringLiteral("plot area %1 px high").arg(layerView->chart()->plotArea().height())));
        QStringList legend;
        for (QLegendMarker* marker : layerView->chart()->legend()->markers())
            if (marker->isVisible()) legend << marker->label();
        QVERIFY2(legend.contains(QStringLiteral("before (dotted)")),
                 qPrintable(legend.join(QStringLiteral(", "))));

        // Over the model's data: the intervene job's numbers.
        QTRY_VERIFY_WITH_TIMEOUT(!panel->result().isEmpty(), 120000);
        const QJsonObject r = panel->result();
        QCOMPARE(r[QStringLiteral("metric")].toString(), QStringLiteral("perplexity"));
        QVERIFY(r[QStringLiteral("intervened")].toDouble() > r[QStringLiteral("fp")].toDouble());
        QTRY_VERIFY(
            panel->text().contains(QString::number(r[QStringLiteral("intervened")].toDouble(), 'f', 3)));

        // Its mean over the model's data: the job collects it, then the input reruns with it.
        std::unique_ptr<QMenu> again(
            panel->dimensionMenu(*trained, 0, QStringLiteral("out"), dim, m_window.get()));
        actionStartingWith(
            again.get(),
            QStringLiteral(
                "Set dimension %1 of layer 1's out to its mean over the model's data at its outlier tokens")
                .arg(dim))
            ->trigger();
        [&] {
            QTRY_VERIFY_WITH_TIMEOUT(
                m_window->controller()->snapshot()->intervention.contains(QStringLiteral("mean")) &&
                    !m_window->controller()->loadingOrInspecting(),
                120000);
        }();
        const SnapshotPtr meaned = m_window->controller()->snapshot();
        const QJsonArray means = panel->result()[QStringLiteral("means")].toArray();
        QCOMPARE(means.size(), 1);
        const torch::Tensor meanedOut = layers(*meaned, meaned->out);
        for (std::int64_t t : tokens)
            QVERIFY(std::abs(meanedOut[0][t][dim].item<double>() - means[0].toDouble()) <=
                    1e-5 * std::abs(means[0].toDouble()));

        // Cleared: the model's own numbers again, the panel gone.
        panel->clear();
        const SnapshotPtr cleared = waitForSnapshot(meaned, false);
        QVERIFY(!panel->isVisibleTo(m_window.get()));
        QCOMPARE((layers(*cleared, cleared->out) - layers(*trained, trained->out)).abs().max().item<double>(),
                 0.0);
    }

    void removingTheSinkKeyFromTheHeadPage()
    {
        const SnapshotPtr before = m_window->controller()->snapshot();
        QCOMPARE(before->model.dir, kBackcopy);
        const int layer = 1, head = 0;
        m_window->setSelection(layer, head);
        std::unique_ptr<QMenu> menu(
            m_window->interventionPanel()->headMenu(*before, layer, head, 0, m_window.get()));
        QVERIFY(actionStartingWith(menu.get(), QStringLiteral("Ablate head 1")));
        QVERIFY(!actionStartingWith(menu.get(), QStringLiteral("Force head"))); // vanilla: no gates
        QVERIFY(actionStartingWith(menu.get(), QStringLiteral("Set token")));
        actionStartingWith(menu.get(), QStringLiteral("Remove key"))->trigger();
        const SnapshotPtr removed = waitForSnapshot(before, true);
        // The head's attention as the intervention left it: key 0 at 0, every row that had another key
        // visible summing to 1 again.
        const QVector<float>& p = removed->probsVector(layer, head);
        for (int q = 1; q < removed->T; ++q) {
            QCOMPARE(p[q * removed->T + 0], 0.0f);
            double sum = 0;
            for (int k = 0; k < removed->T; ++k)
                sum += p[q * removed->T + k];
            QVERIFY2(std::abs(sum - 1) < 1e-5, qPrintable(QStringLiteral("query %1: %2").arg(q).arg(sum)));
        }
        // The head page draws the snapshot's attention.
        m_window->pages()->setCurrentWidget(m_window->headView());
        QCOMPARE(m_window->headView()->data().probabilities.values[1 * removed->T], 0.0f);
        m_window->interventionPanel()->clear();
        waitForSnapshot(removed, false);
    }

    /// Seen through a transform the dimensions are the transformed model's, which `intervene` does not have:
    /// no job, no mean; changing the view ends an intervention.
    void aTransformEndsTheInterventionAndHasNoJob()
    {
        InterventionPanel* panel = m_window->interventionPanel();
        const SnapshotPtr before = m_window->controller()->snapshot();
        std::unique_ptr<QMenu> menu(panel->headMenu(*before, 1, 0, 0, m_window.get()));
        actionStartingWith(menu.get(), QStringLiteral("Ablate head 1"))->trigger();
        const SnapshotPtr ablated = waitForSnapshot(before, true);
        ModelTransform rotation;
        rotation.rotate = true;
        m_window->controller()->setTransform(rotation);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() != ablated &&
                                     !m_window->controller()->loadingOrInspecting(),
                                 60000);
        const SnapshotPtr rotated = m_window->controller()->snapshot();
        QCOMPARE(rotated->transform, QStringLiteral("hadamard rotation"));
        QVERIFY(rotated->intervention.isEmpty());
        QVERIFY(!m_window->controller()->intervention());
        QVERIFY(!panel->isVisibleTo(m_window.get()));

        std::unique_ptr<QMenu> dims(
            panel->dimensionMenu(*rotated, 0, QStringLiteral("out"), 5, m_window.get()));
        QAction* mean =
            actionStartingWith(dims.get(), QStringLiteral("Set dimension 5 of layer 1's out to its mean"));
        QVERIFY(mean && !mean->isEnabled());
        actionStartingWith(dims.get(), QStringLiteral("Set dimension 5 of layer 1's out to 0 at every token"))
            ->trigger();
        const SnapshotPtr zeroed = waitForSnapshot(rotated, true);
        QCOMPARE(zeroed->transform, QStringLiteral("hadamard rotation"));
        QCOMPARE(layers(*zeroed, zeroed->out)[0].select(1, 5).abs().max().item<float>(), 0.0f);
        QVERIFY2(panel->text().contains(QStringLiteral("runs the model as trained")),
                 qPrintable(panel->text()));
        panel->clear();
        waitForSnapshot(zeroed, false);
        m_window->controller()->setTransform({});
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot()->transform.isEmpty() &&
                                     !m_window->controller()->loadingOrInspecting(),
                                 60000);
    }

    void tensorsWithoutInterventionsSaySo()
    {
        const SnapshotPtr s = m_window->controller()->snapshot();
        std::unique_ptr<QMenu> menu(m_window->interventionPanel()->dimensionMenu(
            *s, 0, QStringLiteral("residual"), 3, m_window.get()));
        QCOMPARE(menu->actions().size(), 1);
        QVERIFY(!menu->actions()[0]->isEnabled());
    }
};

QTEST_MAIN(TstInterventionView)
#include "tst_intervention_view.moc"
