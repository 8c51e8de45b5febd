// The analysis pages as a user opens them on a demo decoder, offscreen. Systematic outliers: its Figure 1
// panels against plain loops over the backend's own forward pass and the checkpoint's W_down, the click
// from a channel or a key to the head view, the statistics file of `outlierlens stats` as its source, the
// outlier rule of the View menu, and BERT and ViT. Layer: every head of the layer, each the Head page's
// numbers, and a click that opens the head.

#include "../common/gui_test_home.h"
#include "analysis/recording_sink.h"
#include "analysis/statistics_file.h"
#include "compare_page.h"
#include "compare_view.h"
#include "figures_page.h"
#include "head_view.h"
#include "heatmap_view.h"
#include "input_panel.h"
#include "inspection_controller.h"
#include "io/safetensors.h"
#include "job_manager.h"
#include "jobs_page.h"
#include "last_folder.h"
#include "layer_page.h"
#include "main_window.h"
#include "model/decoder_network.h"
#include "model_catalog.h"
#include "outlier_dashboard.h"
#include "outliers_page.h"
#include "statistics_dialog.h"
#include "systematic_page.h"
#include "systematic_view.h"
#include "text/decoder_tokenizer.h"

#include <QAbstractButton>
#include <QAction>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QFile>
#include <QFileDialog>
#include <QInputDialog>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QProcess>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

using namespace outlierlens;

namespace {

const QString kModel = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/backcopy-vanilla");
const QString kText = QStringLiteral("Summer is warm. Winter is cold.\n");

} // namespace

class TstPages : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_home;
    std::unique_ptr<JobManager> m_jobs;
    std::unique_ptr<MainWindow> m_window;

    SnapshotPtr runText(const QString& text)
    {
        m_window->inputPanel()->runText(text);
        [&] {
            QTRY_VERIFY_WITH_TIMEOUT(
                m_window->controller()->snapshot() &&
                    m_window->controller()->snapshot()->input.startsWith(text.left(10)) &&
                    !m_window->controller()->loadingOrInspecting(),
                60000);
        }();
        return m_window->controller()->snapshot();
    }

private Q_SLOTS:
    void initTestCase()
    {
        m_jobs = test::startGuiTest(m_home.path(), QStringLiteral("tst_pages"));
        m_window = std::make_unique<MainWindow>(kModel, QString(), QString(), m_jobs.get());
        m_window->resize(1280, 800);
        m_window->show();
        QVERIFY(QTest::qWaitForWindowExposed(m_window.get()));
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, kModel, 60000);
    }

    /// Figure 1 of the current input: |h|, the largest x_down channels and their W_down columns, and
    /// the head-mean attention with its outlier keys, each against the backend run here and plain loops.
    void figureOneOfTheCurrentInput()
    {
        const SnapshotPtr s = runText(kText);
        QVERIFY(s);
        QTabWidget* pages = m_window->pages();
        SystematicPage* page = m_window->systematicPage();
        QVERIFY(pages->isTabVisible(pages->indexOf(page)));
        pages->setCurrentWidget(page);
        const int layer = 1;
        m_window->setSelection(layer, 0);
        const SystematicViewData& v = page->view()->data();
        QCOMPARE(v.layer, layer);
        const int T = s->T, d = s->d();
        QCOMPARE(v.hidden.rows, T);
        QCOMPARE(v.hidden.cols, d);

        // The backend, run directly on the same text (as the app runs it: with BOS).
        DecoderNetwork net = DecoderNetwork::load(kModel.toStdString());
        const auto tok = DecoderTokenizer::fromModelDir(kModel.toStdString());
        const std::vector<std::int64_t> ids = tok->encode(kText.toStdString()).inputIds;
        QCOMPARE(int(ids.size()), T);
        RecordingSink sink;
        {
            c10::InferenceMode guard;
            net.forward(torch::tensor(ids, torch::kLong).view({1, T}), {}, &sink);
        }
        const std::string l = std::to_string(layer);
        const torch::Tensor h = sink.at("layer" + l + "/out")[0].to(torch::kDouble).contiguous();
        const torch::Tensor x = sink.at("layer" + l + "/down_in")[0].to(torch::kDouble).contiguous();
        const torch::Tensor p = sink.at("layer" + l + "/attn_probs")[0].to(torch::kDouble).contiguous();
        const int F = int(x.size(1)), H = int(p.size(0));

        // |h| cell by cell; heavy tokens: max_c |h_tc| > 1000 x mean |h|.
        double meanAbs = 0;
        for (int t = 0; t < T; ++t)
            for (int c = 0; c < d; ++c) {
                const double a = std::fabs(h[t][c].item<double>());
                meanAbs += a / (double(T) * d);
                QVERIFY(std::fabs(v.hidden.at(t, c) - a) <= 1e-5 * std::max(1.0, a));
            }
        QVector<int> heavy;
        for (int t = 0; t < T; ++t) {
            double m = 0;
            for (int c = 0; c < d; ++c)
                m = std::max(m, std::fabs(h[t][c].item<double>()));
            if (m > 1000 * meanAbs) heavy << t;
        }
        QCOMPARE(v.heavyTokens, heavy);

        // The K channels of x_down with the largest max_t |x|, largest first, and their W_down columns.
        std::vector<std::pair<double, int>> channels;
        for (int c = 0; c < F; ++c) {
            double m = 0;
            for (int t = 0; t < T; ++t)
                m = std::max(m, std::fabs(x[t][c].item<double>()));
            channels.push_back({m, c});
        }
        std::stable_sort(channels.begin(), channels.end(), [](auto a, auto b) { return a.first > b.first; });
        QCOMPARE(v.downInput.rows, T);
        QVERIFY(v.downInput.cols >= 2);
        const StateDict w = readSafetensors((kModel + QStringLiteral("/model.safetensors")).toStdString());
        const torch::Tensor down =
            w.at("model.decoder.layers." + l + ".fc2.weight").to(torch::kDouble); // [d, F]
        QCOMPARE(v.downWeight.rows, v.downInput.cols);
        QCOMPARE(v.downWeight.cols, d);
        for (int k = 0; k < v.downInput.cols; ++k) {
            const int c = v.downInput.colLabels[k].toInt();
            QCOMPARE(channels[std::size_t(k)].second, c);
            for (int t = 0; t < T; ++t)
                QVERIFY(std::fabs(v.downInput.at(t, k) - std::fabs(x[t][c].item<double>())) <= 1e-5);
            for (int i = 0; i < d; ++i)
                QVERIFY(std::fabs(v.downWeight.at(k, i) - std::fabs(down[i][c].item<double>())) <= 1e-6);
        }

        // Head-mean attention and its outlier keys (receiving >= 0.1 T summed over queries).
        QVERIFY(v.attention.causal);
        QVector<int> keys;
        for (int j = 0; j < T; ++j) {
            double received = 0;
            for (int i = 0; i < T; ++i) {
                double mean = 0;
                for (int hd = 0; hd < H; ++hd)
                    mean += p[hd][i][j].item<double>() / H;
                QVERIFY(std::fabs(v.attention.at(i, j) - mean) <= 1e-5);
                received += mean;
            }
            if (received >= 0.1 * T) keys << j;
        }
        QCOMPARE(v.outlierKeys, keys);
        QVERIFY2(!keys.isEmpty(), "the vanilla demo decoder's sink should receive >= 0.1 T");
        QCOMPARE(int(v.heads.size()), H);
        QCOMPARE(v.hiddenPerLayer.series.size(), 4);
        QCOMPARE(v.hiddenPerLayer.series[0].size(), s->L());
        QCOMPARE(v.weightPerLayer.series.size(), 2);
    }

    /// The Layer page: one row per head of the chosen layer, each with the snapshot's attention of that
    /// head; clicking the second head opens it on the Head page.
    void layerPageShowsEveryHead()
    {
        const SnapshotPtr s = m_window->controller()->snapshot();
        QVERIFY(s && s->H() >= 2);
        LayerPage* page = m_window->layerPage();
        m_window->pages()->setCurrentWidget(page);
        m_window->setSelection(1, 0);
        QCOMPARE(int(page->heads().size()), s->H());
        for (int h = 0; h < s->H(); ++h) {
            const MatrixData& p = page->view(h)->panel(HeadView::ProbabilitiesPanel)->data();
            QCOMPARE(page->heads()[h].head, h);
            QCOMPARE(p.rows, s->T);
            for (int i = 0; i < s->T * s->T; i += 7)
                QCOMPARE(p.values[i], s->probsOf(1, h)[i]);
        }
        HeatmapView* second = page->view(1)->panel(HeadView::ProbabilitiesPanel);
        page->view(1)->fitToWindow();
        QTRY_VERIFY(second->isVisible() && second->viewport()->rect().contains(second->cellArea().topLeft()));
        const QRect area = second->cellArea();
        QTest::mouseClick(
            second->viewport(), Qt::LeftButton, {},
            QPoint(int(area.left() + second->cellWidth() / 2), int(area.top() + second->cellHeight() / 2)));
        QCOMPARE(m_window->pages()->currentWidget(), static_cast<QWidget*>(m_window->headView()));
        QCOMPARE(m_window->headBox()->value(), 2);
        QCOMPARE(m_window->layerBox()->value(), 2);
    }

    /// A channel of h leads to the head of the next layer that reads it; a key to the head view with
    /// the key marked.
    void clickThroughToTheHeadView()
    {
        const SnapshotPtr s = m_window->controller()->snapshot();
        QVERIFY(s && s->dh() > 0);
        SystematicPage* page = m_window->systematicPage();
        m_window->pages()->setCurrentWidget(page);
        m_window->setSelection(0, 0);
        const int channel = s->dh() + 3; // head 2 (1-based)
        Q_EMIT page->view()->channelClicked(channel);
        QCOMPARE(m_window->pages()->currentWidget(), static_cast<QWidget*>(m_window->headView()));
        QCOMPARE(m_window->layerBox()->value(), 2);
        QCOMPARE(m_window->headBox()->value(), channel / s->dh() + 1);

        m_window->pages()->setCurrentWidget(page);
        Q_EMIT page->view()->keyClicked(0);
        QCOMPARE(m_window->pages()->currentWidget(), static_cast<QWidget*>(m_window->headView()));
        QCOMPARE(m_window->headView()->panel(HeadView::ProbabilitiesPanel)->highlightedColumns(),
                 QVector<int>{0});
    }

    /// `outlierlens stats` over text chunks: the page reads its `systematic` group; Figure 1 stays empty.
    void statisticsFileAsSource()
    {
        QTemporaryDir dir;
        const QString out = dir.path() + QStringLiteral("/stats.h5");
        QProcess stats;
        stats.start(QStringLiteral(OUTLIERLENS_BINARY_DIR "/app/outlierlens"),
                    {QStringLiteral("stats"), QStringLiteral("--model"), kModel, QStringLiteral("--data"),
                     QStringLiteral("text:" OUTLIERLENS_SOURCE_DIR "/sample_data/text/wiki_en_valid.txt:4"),
                     QStringLiteral("--seq-len"), QStringLiteral("32"), QStringLiteral("--out"), out});
        QVERIFY(stats.waitForFinished(120000));
        QVERIFY2(stats.exitCode() == 0, stats.readAllStandardError().constData());
        const StatisticsFile file = readStatisticsFile(out.toStdString());
        QVERIFY(file.systematic);

        SystematicPage* page = m_window->systematicPage();
        m_window->pages()->setCurrentWidget(page);
        m_window->setSelection(2, 0);
        m_window->controller()->loadStatistics(out);
        QTRY_COMPARE_WITH_TIMEOUT(page->sourceBox()->currentIndex(), 1, 30000);
        const SystematicViewData& v = page->view()->data();
        QVERIFY(v.sourceDescription.contains(QStringLiteral("4 text chunks")));
        QVERIFY(v.hidden.isEmpty() && v.attention.isEmpty());
        QVERIFY(page->note().contains(QStringLiteral("current input only")));
        const SystematicLayerData* l = file.systematic->layerData(2);
        QVERIFY(l);
        for (int layer = 0; layer < file.numLayers; ++layer)
            QCOMPARE(v.hiddenPerLayer.series[0][layer], file.systematic->layerData(layer)->out.meanTop[0]);
        QCOMPARE(v.heavyByCategory.values.size(), 4);
        QCOMPARE(v.tokensByCategory.values[0], double(l->tokens[0]));
        QCOMPARE(v.tokensByCategory.values[0], 4.0); // every chunk's first token is its initial token
        QCOMPARE(int(v.heads.size()), file.numHeads);
        for (int hd = 0; hd < file.numHeads; ++hd)
            QCOMPARE(v.heads[hd].outlierKeyShare, l->attention.outlierKeyShare[std::size_t(hd)]);

        // Back to the current input: Figure 1 returns.
        page->sourceBox()->setCurrentIndex(0);
        QVERIFY(!page->view()->data().hidden.isEmpty());
    }

    /// View > Outlier rule: τ × mean|X| with τ = 3 counts every view's outliers by |x| > 3 mean|X| (the
    /// Outliers page's counts against plain loops) and sets the heavy-token threshold of this page; the
    /// attention fraction 0.05 its outlier keys.
    void outlierRuleFromTheViewMenu()
    {
        QAction* tauRule = nullptr;
        for (QAction* a : m_window->findChildren<QAction*>())
            if (a->text().startsWith(QStringLiteral("&τ × mean|X|"))) tauRule = a;
        QVERIFY(tauRule);
        OutlierCriterion rule = m_window->controller()->outlierRule();
        QVERIFY(rule.rule == OutlierRule::Sigma); // the default: 6σ
        rule.tau = 3;
        rule.attentionFraction = 0.05;
        m_window->controller()->setOutlierRule(
            rule); // as Set τ… and Set … fraction… do, then the menu's choice
        const SnapshotPtr before = m_window->controller()->snapshot();
        tauRule->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() != before &&
                                     !m_window->controller()->loadingOrInspecting(),
                                 60000);
        const SnapshotPtr s = m_window->controller()->snapshot();
        QVERIFY((s->outlierRule.rule == OutlierRule::Tau));
        QCOMPARE(s->outlierRule.tau, 3.0);
        QCOMPARE(QSettings().value(QStringLiteral("view/outlierRule")).toString(), QStringLiteral("tau"));

        const int layer = 1, T = s->T, d = s->d();
        const float* out = s->out.constData() + std::size_t(layer) * T * d;
        double meanAbs = 0;
        for (int i = 0; i < T * d; ++i)
            meanAbs += std::fabs(out[i]) / (double(T) * d);
        QVector<int> perToken(T, 0);
        QVector<int> heavy;
        int total = 0;
        for (int t = 0; t < T; ++t) {
            double m = 0;
            for (int c = 0; c < d; ++c) {
                const double a = std::fabs(out[t * d + c]);
                m = std::max(m, a);
                if (a > 3 * meanAbs) ++perToken[t], ++total;
            }
            if (m > 3 * meanAbs) heavy << t;
        }
        QVERIFY2(total > 0, "tau 3 should find outliers in the demo decoder's block output");
        QCOMPARE(s->outliersOf(QStringLiteral("out"), layer).perToken, perToken);

        m_window->pages()->setCurrentWidget(m_window->outliersPage());
        m_window->outliersPage()->sourceBox()->setCurrentIndex(0); // the statistics file opened above
        m_window->setSelection(layer, 0);
        QVERIFY(m_window->outliersPage()->dashboard()->data().criterion.contains(
            QStringLiteral("|x| > 3 mean|X|")));
        m_window->pages()->setCurrentWidget(m_window->systematicPage());
        m_window->systematicPage()->sourceBox()->setCurrentIndex(0);
        QCOMPARE(m_window->systematicPage()->view()->data().heavyTokens, heavy);
        QVERIFY(m_window->systematicPage()->view()->data().rule.contains(QStringLiteral("3 ×")));
        QVERIFY(m_window->systematicPage()->view()->data().rule.contains(QStringLiteral("0.05 T")));
        QVector<int> keys; // received >= 0.05 T, head mean
        for (int j = 0; j < T; ++j) {
            double received = 0;
            for (int hd = 0; hd < s->H(); ++hd)
                for (int i = 0; i < T; ++i)
                    received += s->probsOf(layer, hd)[i * T + j] / s->H();
            if (received >= 0.05 * T) keys << j;
        }
        QCOMPARE(m_window->systematicPage()->view()->data().outlierKeys, keys);
    }

    /// Issue #40.1: the rule of View > Outlier rule (here τ = 3, fraction 0.05, from the test above) reaches
    /// a statistics job started from the Outliers page: the dialog names it, the job passes it, the file
    /// records it; and with another rule chosen, the Outliers page says that the file counted with its own.
    void outlierRuleReachesTheStatisticsJob()
    {
        const OutlierCriterion chosen = m_window->controller()->outlierRule();
        QVERIFY(chosen.rule == OutlierRule::Tau && chosen.tau == 3.0 && chosen.attentionFraction == 0.05);
        const int before = m_jobs->jobs().size();
        QString label, suggested;
        bool browseButtons = false, startWhenEmpty = true;
        QTimer::singleShot(0, this, [&] {
            for (QWidget* w : QApplication::topLevelWidgets())
                if (auto* dialog = qobject_cast<StatisticsDialog*>(w); dialog && dialog->isVisible()) {
                    label = dialog->ruleText();
                    auto* data = dialog->findChild<QLineEdit*>(QStringLiteral("data"));
                    suggested = data->text();
                    browseButtons = dialog->browseButton(StatisticsDialog::DataKind::Mnli)->isVisible() &&
                                    dialog->browseButton(StatisticsDialog::DataKind::Images)->isVisible() &&
                                    dialog->browseButton(StatisticsDialog::DataKind::Text)->isVisible();
                    data->clear(); // nothing to start on
                    auto* start = dialog->findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok);
                    startWhenEmpty = start->isEnabled();
                    // What the Text file button does once its file dialog returns.
                    dialog->choose(
                        StatisticsDialog::DataKind::Text,
                        QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/text/wiki_en_valid.txt"));
                    data->setText(data->text() + QStringLiteral(":4"));
                    start->click();
                }
        });
        Q_EMIT m_window->outliersPage()->statisticsRequested();
        QVERIFY2(label.contains(QStringLiteral("|x| > 3 mean|x|")), qPrintable(label));
        QVERIFY(!suggested.isEmpty());
        QVERIFY(browseButtons);
        QVERIFY(!startWhenEmpty);
        QCOMPARE(m_jobs->jobs().size(), before + 1);
        const JobInfo job = m_jobs->jobs().last();
        QCOMPARE(job.kind, QStringLiteral("stats"));
        QCOMPARE(job.arguments.value(job.arguments.indexOf(QStringLiteral("--rule")) + 1),
                 QStringLiteral("tau"));
        QCOMPARE(job.arguments.value(job.arguments.indexOf(QStringLiteral("--data")) + 1),
                 QStringLiteral("text:" OUTLIERLENS_SOURCE_DIR "/sample_data/text/wiki_en_valid.txt:4"));
        QTRY_VERIFY_WITH_TIMEOUT(m_jobs->job(job.id)->state != QLatin1String("queued") &&
                                     m_jobs->job(job.id)->state != QLatin1String("running"),
                                 120000);
        QVERIFY2(m_jobs->job(job.id)->state == QLatin1String("finished"),
                 qPrintable(m_jobs->job(job.id)->message));
        const StatisticsFile file = readStatisticsFile(job.output.toStdString());
        QVERIFY(file.outlierRule == chosen);
        QVERIFY(file.systematic);
        QCOMPARE(file.systematic->tau, 3.0);
        QCOMPARE(file.systematic->attentionFraction, 0.05);

        // The file as the Outliers page's source, then the 6σ rule chosen: the page says whose counts it
        // shows.
        m_window->controller()->loadStatistics(job.output);
        OutliersPage* page = m_window->outliersPage();
        m_window->pages()->setCurrentWidget(page);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->statisticsPath(), job.output, 30000);
        QTRY_COMPARE_WITH_TIMEOUT(page->sourceBox()->count(), 2, 30000);
        page->sourceBox()->setCurrentIndex(1);
        QVERIFY2(!page->note().contains(QStringLiteral("counted outliers over")), qPrintable(page->note()));
        QAction* sigmaAction = nullptr;
        QAction* tauAction = nullptr;
        for (QAction* a : m_window->findChildren<QAction*>()) {
            if (a->text().startsWith(QStringLiteral("&6σ"))) sigmaAction = a;
            if (a->text().startsWith(QStringLiteral("&τ × mean|X|"))) tauAction = a;
        }
        QVERIFY(sigmaAction && tauAction);
        sigmaAction->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot()->outlierRule.rule == OutlierRule::Sigma &&
                                     !m_window->controller()->loadingOrInspecting(),
                                 60000);
        QTRY_VERIFY2(
            page->note().contains(QStringLiteral("This file counted outliers over 3 × mean|X|, not the "
                                                 "6σ of View > Outlier rule")),
            qPrintable(page->note()));
        tauAction->trigger(); // back to τ = 3, as the later tests expect
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot()->outlierRule == chosen &&
                                     !m_window->controller()->loadingOrInspecting(),
                                 60000);
        page->sourceBox()->setCurrentIndex(0);
    }

    /// Any family: BERT (bidirectional attention, WordPiece categories) and ViT (timm names) show the
    /// same figures; the W_down columns are their checkpoints' own and the attention is not masked.
    void bertAndVit_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("weight"); // the down projection of layer 1 in the checkpoint
        QTest::newRow("bert") << QStringLiteral(OUTLIERLENS_TEST_DATA "/bert/hf")
                              << QStringLiteral("bert.encoder.layer.1.output.dense.weight");
        QTest::newRow("vit") << QStringLiteral(OUTLIERLENS_TEST_DATA "/vit/timm")
                             << QStringLiteral("blocks.1.mlp.fc2.weight");
    }
    void bertAndVit()
    {
        QFETCH(QString, model);
        QFETCH(QString, weight);
        m_window->openModel(model);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, model, 60000);
        const SnapshotPtr before = m_window->controller()->snapshot();
        if (m_window->controller()->model().takesImages())
            m_window->controller()->inspectImage(
                QStringLiteral(OUTLIERLENS_TEST_DATA "/vit/images/chelsea_cat.png"), {});
        else
            m_window->controller()->inspectText(QStringLiteral("The cat sat on the mat."),
                                                QStringLiteral("A cat is sitting."));
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() != before &&
                                     m_window->controller()->snapshot()->model.dir == model &&
                                     !m_window->controller()->loadingOrInspecting(),
                                 60000);
        const SnapshotPtr s = m_window->controller()->snapshot();
        SystematicPage* page = m_window->systematicPage();
        QVERIFY(m_window->pages()->isTabVisible(m_window->pages()->indexOf(page)));
        m_window->pages()->setCurrentWidget(page);
        page->sourceBox()->setCurrentIndex(0);
        m_window->setSelection(1, 0);
        const SystematicViewData& v = page->view()->data();
        QCOMPARE(v.hidden.rows, s->T);
        QVERIFY(!v.attention.causal);
        QCOMPARE(v.tokensByCategory.values[0], 1.0); // [CLS]: the initial token
        const StateDict w = readSafetensors((model + QStringLiteral("/model.safetensors")).toStdString());
        const torch::Tensor down = w.at(weight.toStdString()).to(torch::kDouble); // [d, F]
        QCOMPARE(v.downWeight.cols, s->d());
        QVERIFY(v.downWeight.rows > 0);
        for (int k = 0; k < v.downWeight.rows; ++k) {
            const int c = v.downInput.colLabels[k].toInt();
            for (int i = 0; i < s->d(); ++i)
                QVERIFY(std::fabs(v.downWeight.at(k, i) - std::fabs(down[i][c].item<double>())) <= 1e-6);
        }
        // Outlier keys: head-mean attention received >= fraction * T (the fraction the test before set),
        // from the snapshot's own probabilities.
        QVector<int> keys;
        for (int j = 0; j < s->T; ++j) {
            double received = 0;
            for (int hd = 0; hd < s->H(); ++hd)
                for (int i = 0; i < s->T; ++i)
                    received += s->probsOf(1, hd)[i * s->T + j] / s->H();
            if (received >= s->outlierRule.attentionFraction * s->T) keys << j;
        }
        QCOMPARE(v.outlierKeys, keys);
    }

    /// The Figures page: Export all figures runs `outlierlens figures` as a job (with the demo siblings to
    /// compare), the figures appear with thumbnails (those not drawn disabled, with the reason), and
    /// activating one opens its view at the layer, head and input that made it.
    void figuresPageMakesAndOpensFigures()
    {
        m_window->openModel(kModel); // earlier tests opened others
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, kModel, 60000);
        QTabWidget* pages = m_window->pages();
        FiguresPage* page = m_window->figuresPage();
        QDir(page->folder()).removeRecursively(); // Qt's test mode keeps data under ~/.qttest across runs
        page->reload();
        pages->setCurrentWidget(page);
        QTRY_VERIFY2(page->status()->text().contains(QStringLiteral("No figures of backcopy-vanilla yet")),
                     qPrintable(page->status()->text()));
        QCOMPARE(page->list()->count(), 0);
        const int before = m_jobs->jobs().size();
        QSignalSpy loaded(page, &FiguresPage::indexLoaded);
        page->makeFigures();
        QCOMPARE(m_jobs->jobs().size(), before + 1);
        const JobInfo job = m_jobs->jobs().last();
        QCOMPARE(job.kind, QStringLiteral("figures"));
        const QString compare = job.arguments.value(job.arguments.indexOf(QStringLiteral("--compare")) + 1);
        QVERIFY2(compare.contains(QStringLiteral("backcopy-gated")) &&
                     compare.contains(QStringLiteral("backcopy-clipped")),
                 qPrintable(compare));
        QTRY_VERIFY_WITH_TIMEOUT(m_jobs->job(job.id)->state == QLatin1String("finished"), 180000);
        QTRY_VERIFY_WITH_TIMEOUT(!loaded.isEmpty() && loaded.last().value(0).toInt() > 0, 20000);
        // Issue #40.1: the job counted with View > Outlier rule (τ = 3 since the rule test), and says so.
        QCOMPARE(job.arguments.value(job.arguments.indexOf(QStringLiteral("--tau")) + 1),
                 QStringLiteral("3"));
        QFile indexFile(page->folder() + QStringLiteral("/index.json"));
        QVERIFY(indexFile.open(QIODevice::ReadOnly));
        QCOMPARE(QJsonDocument::fromJson(indexFile.readAll()).object()[QStringLiteral("rule")].toString(),
                 QStringLiteral("3 × mean|X|"));
        QVERIFY2(page->status()->text().contains(QStringLiteral("Outliers over 3 × mean|X|.")),
                 qPrintable(page->status()->text()));
        // Figures 1, 2, 4, 5, 10-15, An et al.'s 1, 3, 7, 8, 10 and 11 and the table are drawn; the ViT and
        // sweep ones not, nor An et al.'s 9 (under this rule token 0 keeps outlier values to the last layer).
        QCOMPARE(loaded.last().value(1).toInt(), 17);
        QCOMPARE(page->list()->count(), loaded.last().value(0).toInt());
        QListWidgetItem* figure2 = nullptr;
        for (int i = 0; i < page->list()->count(); ++i) {
            QListWidgetItem* item = page->list()->item(i);
            const bool drawn = item->flags().testFlag(Qt::ItemIsEnabled);
            QCOMPARE(drawn, !item->text().endsWith(QStringLiteral("not drawn")));
            QVERIFY(drawn ? !item->icon().isNull()
                          : item->toolTip().startsWith(QStringLiteral("Not drawn: ")));
            if (item->text() == QLatin1String("Figure 2")) figure2 = item;
        }
        QVERIFY(figure2);
        m_window->setSelection(0, 1);
        Q_EMIT page->list()->itemActivated(figure2);
        // The showcase head (layer 2, head 1) on the model's showcase input, in the head view.
        QCOMPARE(pages->currentIndex(), pages->indexOf(m_window->headView()));
        QCOMPARE(m_window->layer(), 1);
        QCOMPARE(m_window->head(), 0);
        const QString sample = ModelCatalog::sampleInput(kModel, 0);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot()->input == sample, 30000);

        // Issue #40.9: An et al.'s Figure 3 (from the statistics file) opens the Systematic page on the file;
        // their Figure 1 (from the first input) then opens it on that input, with its four panels filled,
        // not on the file, whose Figure 1 panels are empty.
        QListWidgetItem *an1 = nullptr, *an3 = nullptr;
        for (int i = 0; i < page->list()->count(); ++i) {
            QListWidgetItem* item = page->list()->item(i);
            if (item->text() == QLatin1String("An et al. Figure 1")) an1 = item;
            if (item->text() == QLatin1String("An et al. Figures 3-6 and Table 1")) an3 = item;
        }
        QVERIFY(an1 && an3);
        SystematicPage* systematic = m_window->systematicPage();
        QFile index(page->folder() + QStringLiteral("/index.json"));
        QVERIFY(index.open(QIODevice::ReadOnly));
        const QString statistics = QDir(page->folder())
                                       .filePath(QJsonDocument::fromJson(index.readAll())
                                                     .object()[QStringLiteral("statistics")]
                                                     .toString());
        Q_EMIT page->list()->itemActivated(an3);
        QCOMPARE(pages->currentIndex(), pages->indexOf(systematic));
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->statisticsPath(), statistics, 30000);
        QTRY_COMPARE_WITH_TIMEOUT(systematic->sourceBox()->currentIndex(), 1, 30000);
        Q_EMIT page->list()->itemActivated(an1);
        QCOMPARE(pages->currentIndex(), pages->indexOf(systematic));
        QCOMPARE(systematic->sourceBox()->currentIndex(), 0);
        QTRY_VERIFY_WITH_TIMEOUT(!m_window->controller()->loadingOrInspecting(), 30000);
        const SystematicViewData shown = systematic->view()->data();
        QVERIFY2(!shown.hidden.values.isEmpty() && !shown.attention.values.isEmpty(),
                 qPrintable(systematic->note() + QStringLiteral(" | ") + shown.sourceDescription));
        QVERIFY(!shown.downInput.values.isEmpty());
        QVERIFY2(shown.sourceDescription.startsWith(QStringLiteral("current input")),
                 qPrintable(shown.sourceDescription));
    }

    /// A figures job that fails (here: a model folder that is not there) says so on the page, with the
    /// command's own message, instead of waiting for its figures forever.
    void figuresJobThatFailsSaysSo()
    {
        FiguresPage page(m_jobs.get());
        ModelInfo missing;
        missing.dir = m_home.path() + QStringLiteral("/no-such-model");
        missing.name = QStringLiteral("no-such-model");
        missing.sha256 = QStringLiteral("0123456789abcdef");
        page.setModel(missing);
        QTRY_VERIFY(page.status()->text().contains(QStringLiteral("No figures of no-such-model yet")));
        page.makeFigures();
        QVERIFY(page.status()->text().startsWith(QStringLiteral("Making the figures of no-such-model")));
        QTRY_VERIFY_WITH_TIMEOUT(page.status()->text().contains(QStringLiteral("no-such-model failed: ")),
                                 60000);
        QVERIFY2(page.status()->text().contains(QStringLiteral("no-such-model")),
                 qPrintable(page.status()->text()));
        QCOMPARE(page.list()->count(), 0);
    }

    /// Issue #14.4: the Compare page on a 512-token BERT input in a 1280x800 window shows all three
    /// models whole (the gated column is not cut off), quickly, and leaves the input dock's width alone.
    void compareAt512Tokens()
    {
        const QString bert = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/bert-mnli-vanilla");
        m_window->openModel(bert);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, bert, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(!m_window->controller()->loadingOrInspecting(), 60000);
        m_window->resize(1280, 800);
        QTest::qWait(50);
        const auto* dock = m_window->findChild<QDockWidget*>(QStringLiteral("inputDock"));
        QVERIFY(dock);
        const int dockWidth = dock->width();
        InputRequest input;
        input.kind = InputRequest::Kind::Text;
        input.text = QStringLiteral("the dog ran far away . ").repeated(60); // cut to 512 wordpieces
        input.pair = QStringLiteral("a cat sat still here . ").repeated(60);
        m_window->runInput(input);
        QTRY_VERIFY_WITH_TIMEOUT(
            m_window->controller()->snapshot() && m_window->controller()->snapshot()->T == 512, 60000);
        QTabWidget* pages = m_window->pages();
        pages->setCurrentWidget(m_window->comparePage());
        auto* view = m_window->comparePage()->findChild<CompareView*>();
        QVERIFY(view);
        QElapsedTimer clock;
        clock.start();
        QTRY_VERIFY_WITH_TIMEOUT(
            view->entries().size() == 3 &&
                std::all_of(view->entries().begin(), view->entries().end(),
                            [](const CompareEntry& e) { return e.head.tokens.size() == 512; }),
            60000);
        qInfo("Compare page, three models at 512 tokens: %lld ms", static_cast<long long>(clock.elapsed()));
        QTest::qWait(100); // layout
        for (int i = 0; i < 3; ++i) {
            HeatmapView* probabilities = view->headView(i)->panel(HeadView::ProbabilitiesPanel);
            QVERIFY(probabilities->isVisible());
            const QRect inView(probabilities->mapTo(view, QPoint(0, 0)), probabilities->size());
            QVERIFY2(view->rect().contains(inView),
                     qPrintable(QStringLiteral("model %1: panel at %2,%3 %4x%5 in a view of %6x%7")
                                    .arg(i)
                                    .arg(inView.x())
                                    .arg(inView.y())
                                    .arg(inView.width())
                                    .arg(inView.height())
                                    .arg(view->width())
                                    .arg(view->height())));
        }
        QCOMPARE(dock->width(), dockWidth);
        // Figure 14's per-row distributions fit beside every model's probabilities too.
        auto* distribution =
            m_window->comparePage()->findChild<QCheckBox*>(QStringLiteral("distributionCheck"));
        QVERIFY(distribution);
        distribution->click();
        QVERIFY(view->distributionPanelsVisible());
        QTest::qWait(100); // layout
        for (int i = 0; i < 3; ++i) {
            HeatmapView* panel = view->headView(i)->panel(HeadView::DistributionPanel);
            QVERIFY(panel->isVisible());
            QCOMPARE(panel->data().rows, 512);
            const QRect inView(panel->mapTo(view, QPoint(0, 0)), panel->size());
            QVERIFY2(view->rect().contains(inView), qPrintable(QStringLiteral("model %1").arg(i)));
        }
        QCOMPARE(dock->width(), dockWidth);
        if (qEnvironmentVariableIsSet("OUTLIERLENS_SAVE_FIGURES")) // for a look at the 1280x800 layout
            m_window->grab().save(qEnvironmentVariable("OUTLIERLENS_SAVE_FIGURES") +
                                  QStringLiteral("/compare-distribution-1280x800.png"));
        distribution->click();
    }

    /// Issue #40.12: at 1280x800 the Jobs page's training charts have room for their axes (a chart cut to
    /// a 50 px plot had every label elided to "..."); the page scrolls instead.
    void jobsChartsHaveRoomAt1280x800()
    {
        m_window->resize(1280, 800);
        m_window->pages()->setCurrentWidget(m_window->jobsPage());
        QTest::qWait(100);
        for (const char* name : {"lossChart", "infNormChart", "kurtosisChart"}) {
            auto* view = m_window->jobsPage()->findChild<QChartView*>(QLatin1String(name));
            QVERIFY2(view, name);
            QTRY_VERIFY2(view->chart()->plotArea().height() >= 100,
                         qPrintable(QStringLiteral("%1: plot area %2 px high")
                                        .arg(QLatin1String(name))
                                        .arg(view->chart()->plotArea().height())));
        }
    }

    /// Issue #40.11 and #40.13: a window that fits 1280 x 800 (minimum height at most 700, the status bar
    /// and every page reachable), menus File, View, Help in that order whose Alt keys no page steals, and F10
    /// opening the menu bar.
    void desktopConventions()
    {

        QVERIFY2(m_window->minimumSizeHint().height() <= 700 && m_window->minimumSize().height() <= 700,
                 qPrintable(QStringLiteral("minimum height %1").arg(m_window->minimumSizeHint().height())));
        QVERIFY2(m_window->minimumSizeHint().width() <= 1280,
                 qPrintable(QStringLiteral("minimum width %1").arg(m_window->minimumSizeHint().width())));
        QStringList menus;
        for (QAction* a : m_window->menuBar()->actions())
            menus << a->text();
        QCOMPARE(menus, (QStringList{"&File", "&View", "&Help"}));
        // Mnemonics of the page tabs and of every button and box of the window: none takes Alt+F, V or H.
        const auto mnemonic = [](const QString& text) {
            const int i = text.indexOf(QRegularExpression(QStringLiteral("&[^&]")));
            return i < 0 ? QChar() : text.at(i + 1).toLower();
        };
        QStringList stealing;
        for (int i = 0; i < m_window->pages()->count(); ++i)
            if (QStringLiteral("fvh").contains(mnemonic(m_window->pages()->tabText(i))))
                stealing << m_window->pages()->tabText(i);
        for (QAbstractButton* b : m_window->findChildren<QAbstractButton*>())
            if (!b->text().isEmpty() && QStringLiteral("fvh").contains(mnemonic(b->text())))
                stealing << b->text();
        QVERIFY2(stealing.isEmpty(), qPrintable(stealing.join(QStringLiteral(", "))));
        QAction* f10 = nullptr;
        for (QAction* a : m_window->actions())
            if (a->shortcut() == QKeySequence(Qt::Key_F10)) f10 = a;
        QVERIFY2(f10, "no action takes F10");
        f10->trigger();
        QTRY_VERIFY(m_window->menuBar()->activeAction() == m_window->menuBar()->actions().value(0));
        QTest::keyClick(m_window->menuBar(), Qt::Key_Escape);
    }

    /// Issue #40.14: a file dialog starts in the folder of its last choice (here File > Open statistics file,
    /// after a statistics file was chosen from a folder), and quitting with queued jobs asks first.
    void fileDialogsAndQuitting()
    {
        QTemporaryDir folder;
        rememberFolder(QStringLiteral("statistics"), folder.path() + QStringLiteral("/stats.h5"));
        QAction* open = nullptr;
        for (QAction* a : m_window->findChildren<QAction*>())
            if (a->text() == QStringLiteral("Open &statistics file…")) open = a;
        QVERIFY(open);
        QString shown;
        QTimer::singleShot(0, this, [&] {
            for (QWidget* w : QApplication::topLevelWidgets())
                if (auto* dialog = qobject_cast<QFileDialog*>(w); dialog && dialog->isVisible()) {
                    shown = dialog->directory().absolutePath();
                    dialog->reject();
                }
        });
        open->trigger();
        QCOMPARE(shown, QDir(folder.path()).absolutePath());

        // Two statistics jobs: the second waits for the first. Closing the window asks; No keeps it open.
        const QString data =
            QStringLiteral("text:" OUTLIERLENS_SOURCE_DIR "/sample_data/text/wiki_en_valid.txt:2");
        const QString a =
            m_jobs->queueStatistics(QStringLiteral("first"), {"--model", kModel, "--data", data},
                                    folder.path() + QStringLiteral("/a.h5"));
        const QString b =
            m_jobs->queueStatistics(QStringLiteral("second"), {"--model", kModel, "--data", data},
                                    folder.path() + QStringLiteral("/b.h5"));
        QCOMPARE(m_jobs->job(b)->state, QStringLiteral("queued"));
        bool asked = false;
        QTimer::singleShot(0, this, [&] {
            for (QWidget* w : QApplication::topLevelWidgets())
                if (auto* box = qobject_cast<QMessageBox*>(w);
                    box && box->objectName() == QLatin1String("quitWithQueuedJobs")) {
                    asked = box->text().contains(QStringLiteral("queued"));
                    box->button(QMessageBox::No)->click();
                }
        });
        QVERIFY(!m_window->close());
        QVERIFY(asked);
        QVERIFY(m_window->isVisible());
        m_jobs->cancel(b);
        m_jobs->cancel(a);
        QTRY_VERIFY_WITH_TIMEOUT(m_jobs->job(a)->state != QLatin1String("running"), 60000);
    }

    void cleanupTestCase() { m_window.reset(); }
};

QTEST_MAIN(TstPages)
#include "tst_pages.moc"
