// The desktop app as a user drives it, offscreen: open a model, pick an MNLI pair, step through
// layers and heads and check the head view shows the backend's numbers for that head, click a
// hidden dimension and land on its head, start and cancel a real training job, export a view and
// read it back, and survive a bad checkpoint.

#include "../common/gui_test_home.h"
#include "../common/tensor_compare.h"

#include "analysis/decoder_inspection.h"
#include "analysis/recording_sink.h"
#include "analysis/showcase.h"
#include "colormap.h"
#include "compare_page.h"
#include "head_view.h"
#include "heatmap_view.h"
#include "image_view.h"
#include "input_panel.h"
#include "inspection_controller.h"
#include "io/safetensors.h"
#include "job_manager.h"
#include "jobs_page.h"
#include "main_window.h"
#include "mnli_table_model.h"
#include "model/bert_network.h"
#include "model/decoder_network.h"
#include "model/precision.h"
#include "model_catalog.h"
#include "outlier_dashboard.h"
#include "outliers_page.h"
#include "teaching_page.h"
#include "teaching_view.h"
#include "text/decoder_tokenizer.h"
#include "text/wordpiece.h"
#include "train/run_folder.h"

#include <QApplication>
#include <QChartView>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QImageReader>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTimer>
#include <QToolButton>
#include <QtTest>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>

using namespace outlierlens;
using outlierlens::test::fixture;

namespace {

const QString kModel = QString::fromStdString(fixture("bert/hf"));
const QString kPairs = QStringLiteral(OUTLIERLENS_TEST_DATA "/text/mnli_sample.jsonl");
const QString kImages = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/images");
const QString kSamplePairs =
    QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/mnli/mnli_dev_matched.jsonl");

/// The sample input a demo decoder opens on: its showcase.json's line of sample_inputs.txt.
QString showcaseInput(const QString& model)
{
    const QString dir = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/") + model;
    const std::optional<Showcase> s = readShowcase(dir.toStdString());
    return ModelCatalog::sampleInput(dir, s ? s->input : 0);
}

/// Live `outlierlens train` processes writing `folder`, from /proc.
int trainersOn(const QString& folder)
{
    int count = 0;
    for (const QString& pid : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
        QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(pid));
        if (!pid.front().isDigit() || !cmdline.open(QIODevice::ReadOnly)) continue;
        const QList<QByteArray> args = cmdline.readAll().split('\0');
        if (args.contains("train") && args.contains(folder.toUtf8())) ++count;
    }
    return count;
}

} // namespace

class TstGui : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_home;
    std::unique_ptr<JobManager> m_jobs;
    std::unique_ptr<MainWindow> m_window;

    /// Waits until the window shows a snapshot whose input contains `text`.
    void waitForInput(const QString& text)
    {
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() &&
                                     m_window->controller()->snapshot()->input.contains(text),
                                 60000);
    }

    /// Opens the BERT fixture on a sentence and returns its snapshot.
    SnapshotPtr openBertOnText()
    {
        if (m_window->controller()->model().dir != kModel) {
            m_window->openModel(kModel);
            [&] { QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, kModel, 60000); }();
        }
        m_window->inputPanel()->runText(QStringLiteral("The sink takes the attention of the head."));
        waitForInput(QStringLiteral("The sink takes"));
        [&] { QTRY_VERIFY_WITH_TIMEOUT(!m_window->controller()->loadingOrInspecting(), 60000); }();
        return m_window->controller()->snapshot();
    }

    /// Toggles fast mode and waits for the input to have run again.
    SnapshotPtr toggleFastMode(bool on)
    {
        const SnapshotPtr before = m_window->controller()->snapshot();
        QAction* fast = m_window->fastModeAction();
        if (fast->isChecked() != on) fast->trigger();
        [&] {
            QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() != before &&
                                         !m_window->controller()->loadingOrInspecting(),
                                     60000);
        }();
        return m_window->controller()->snapshot();
    }

private Q_SLOTS:
    void initTestCase()
    {
        m_jobs = test::startGuiTest(m_home.path(), QStringLiteral("tst_gui"));
        m_window = std::make_unique<MainWindow>(kModel, kPairs, kImages, m_jobs.get());
        m_window->resize(1300, 850);
        m_window->show();
        QVERIFY(QTest::qWaitForWindowExposed(m_window.get()));
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, kModel, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->inputPanel()->pairsModel()->rowCount() > 3, 30000);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() != nullptr, 60000);
    }

    void pickPairAndHeadShowsBackendNumbers()
    {
        // Click the third pair in the table, as a user would.
        QTableView* table = m_window->inputPanel()->pairsView();
        const QModelIndex index = table->model()->index(2, MnliTableModel::Premise);
        table->scrollTo(index);
        QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, table->visualRect(index).center());
        const QString premise = m_window->inputPanel()->pairsModel()->premises()[2];
        const QString hypothesis = m_window->inputPanel()->pairsModel()->hypotheses()[2];
        waitForInput(premise);
        if (QTest::currentTestFailed()) return;

        // Layer 2, head 2 (1-based) with the keyboard: Alt+Down, Alt+Right from layer 1, head 1.
        m_window->pages()->setCurrentWidget(m_window->headView());
        m_window->setSelection(0, 0);
        m_window->activateWindow();
        QTest::keyClick(m_window.get(), Qt::Key_Down, Qt::AltModifier);
        QTest::keyClick(m_window.get(), Qt::Key_Right, Qt::AltModifier);
        QCOMPARE(m_window->layerBox()->value(), 2);
        QCOMPARE(m_window->headBox()->value(), 2);
        const HeadViewData shown = m_window->headView()->data();
        QCOMPARE(shown.layer, 1);
        QCOMPARE(shown.head, 1);

        // The backend, run directly on the same pair.
        BertNetwork net = BertNetwork::load(kModel.toStdString());
        const Encoding e = BertTokenizer::fromModelDir(kModel.toStdString())
                               .encode(premise.toStdString(), hypothesis.toStdString(), 512);
        const auto T = std::int64_t(e.inputIds.size());
        const torch::Tensor ids = torch::tensor(e.inputIds, torch::kLong).view({1, T});
        const torch::Tensor types = torch::tensor(e.tokenTypeIds, torch::kLong).view({1, T});
        RecordingSink sink;
        {
            c10::InferenceMode guard;
            net.forward(ids, types, torch::ones_like(ids), &sink);
        }
        QCOMPARE(shown.probabilities.rows, int(T));
        const torch::Tensor probs = sink.at("layer1/attn_probs")[0][1].contiguous();
        const torch::Tensor values = sink.at("layer1/attn_values")[0][1].contiguous();
        const torch::Tensor context = sink.at("layer1/attn_context")[0][1].contiguous();
        auto asTensor = [](const MatrixData& m) {
            return torch::from_blob(const_cast<float*>(m.values.constData()), {m.rows, m.cols}, torch::kFloat)
                .clone();
        };
        OL_COMPARE_TENSORS("probabilities", asTensor(shown.probabilities), probs, 1e-6);
        OL_COMPARE_TENSORS("values", asTensor(shown.values), values, 1e-6);
        OL_COMPARE_TENSORS("product", asTensor(shown.product), context, 1e-6);
        QCOMPARE(shown.tokens.first(), QStringLiteral("[CLS]"));
    }

    void clickDimensionLandsOnItsHead()
    {
        m_window->setSelection(0, 0);
        m_window->pages()->setCurrentWidget(m_window->outliersPage());
        OutlierDashboard* dashboard = m_window->outliersPage()->dashboard();
        QTRY_VERIFY(!dashboard->data().perDimension.values.isEmpty());
        // The fixture model has d = 128, d_head = 64: dimension 70 belongs to head 2 (1-based).
        const int dimension = 70;
        QChartView* chart = dashboard->dimensionChartView();
        QTest::mouseClick(chart->viewport(), Qt::LeftButton, {}, dashboard->dimensionBarCenter(dimension));
        QTRY_COMPARE(m_window->layerBox()->value(), 2);
        QCOMPARE(m_window->headBox()->value(), 2);
        QVERIFY(m_window->pages()->currentWidget() == m_window->headView());
    }

    void exportViewAndReadItBack()
    {
        m_window->pages()->setCurrentWidget(m_window->headView());
        QTemporaryDir dir;
        QString error;
        const QString png = dir.path() + QStringLiteral("/head.png");
        QVERIFY2(m_window->exportCurrent(png, QSize(1200, 700), 150, &error), qPrintable(error));
        const QImage image(png);
        QCOMPARE(image.size(), QSize(1200, 700));
        QVERIFY2(image.text(QStringLiteral("Source")).contains(kModel),
                 qPrintable(image.text(QStringLiteral("Source"))));
        QVERIFY(image.text(QStringLiteral("Comment")).contains(QStringLiteral("numbered from 1")));
        const QString csv = dir.path() + QStringLiteral("/head.csv");
        QVERIFY2(m_window->exportCurrent(csv, {}, 0, &error), qPrintable(error));
        QFile file(csv);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QString text = QString::fromUtf8(file.readAll());
        QVERIFY(text.startsWith(QStringLiteral("# ")));
        QVERIFY(text.contains(kModel));
    }

    void badCheckpointShowsErrorAndWindowKeepsWorking()
    {
        QTemporaryDir dir;
        std::filesystem::copy_file(fixture("bert/hf/config.json"),
                                   (dir.path() + "/config.json").toStdString());
        std::filesystem::copy_file(fixture("bert/hf/vocab.txt"), (dir.path() + "/vocab.txt").toStdString());
        std::ofstream((dir.path() + "/model.safetensors").toStdString()) << "not a checkpoint at all";
        m_window->openModel(dir.path());
        QMessageBox* box = nullptr;
        QTRY_VERIFY_WITH_TIMEOUT(
            (box = m_window->findChild<QMessageBox*>(QStringLiteral("errorMessage"))) != nullptr, 30000);
        QVERIFY2(box->text().contains(QStringLiteral("model.safetensors")), qPrintable(box->text()));
        box->close();
        // The label above the pages names the model still open, not "Loading …".
        QTRY_VERIFY(
            m_window->modelLabel()->text().startsWith(QFileInfo(kModel).fileName() + QLatin1Char(':')));
        // The previous model is still loaded and still answers.
        QCOMPARE(m_window->controller()->model().dir, kModel);
        m_window->inputPanel()->selectPair(1);
        waitForInput(m_window->inputPanel()->pairsModel()->premises()[1]);
    }

    /// Issue #14.8: the table's 9,815 predictions start where the user looks, show their progress
    /// and can be stopped.
    void pairPredictionsFollowTheViewAndStop()
    {
        openBertOnText();
        MnliTableModel* pairs = m_window->inputPanel()->pairsModel();
        const auto predicted = [pairs](int row) {
            return !pairs->data(pairs->index(row, MnliTableModel::Predicted), Qt::DisplayRole)
                        .toString()
                        .isEmpty();
        };
        m_window->inputPanel()->loadPairs(kSamplePairs);
        QTRY_COMPARE_WITH_TIMEOUT(pairs->rowCount(), 9815, 30000);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->pairProgressLabel()->isVisible(), 30000);
        QVERIFY2(m_window->pairProgressLabel()->text().endsWith(QStringLiteral(" of 9,815")),
                 qPrintable(m_window->pairProgressLabel()->text()));

        // Scroll to row 6000: it is predicted before the rows above it that nobody looks at.
        QTableView* view = m_window->inputPanel()->pairsView();
        auto* proxy = qobject_cast<QSortFilterProxyModel*>(view->model());
        QVERIFY(proxy);
        view->scrollTo(proxy->mapFromSource(pairs->index(6000, 0)), QAbstractItemView::PositionAtTop);
        QElapsedTimer clock;
        clock.start();
        QTRY_VERIFY_WITH_TIMEOUT(predicted(6000), 30000);
        qInfo("row 6000 predicted %lld ms after the scroll", static_cast<long long>(clock.elapsed()));
        QVERIFY2(!predicted(5990), "rows out of view came first");

        QTest::mouseClick(m_window->stopPredictionsButton(), Qt::LeftButton);
        QVERIFY(!m_window->pairProgressLabel()->isVisible());
        QVERIFY(m_window->statusBar()->currentMessage().startsWith(QStringLiteral("Stopped predicting")));
        QTest::qWait(500); // a batch under way may still land
        int done = 0;
        for (int r = 0; r < pairs->rowCount(); ++r)
            done += predicted(r);
        QTest::qWait(1500);
        int later = 0;
        for (int r = 0; r < pairs->rowCount(); ++r)
            later += predicted(r);
        QCOMPARE(later, done);
        QVERIFY2(done < 9815, "stopped before the end");

        m_window->inputPanel()->loadPairs(kPairs); // the small table of the other tests
        QTRY_VERIFY_WITH_TIMEOUT(pairs->rowCount() < 100, 30000);
    }

    /// Issue #15.4: NaN in the output is a warning in red where the prediction would be, never a label.
    void nanOutputIsAWarningNotAPrediction()
    {
        QTemporaryDir dir;
        for (const char* file : {"config.json", "vocab.txt"})
            std::filesystem::copy_file(fixture("bert/hf/") + file, (dir.path() + "/" + file).toStdString());
        StateDict weights = readSafetensors(fixture("bert/hf/model.safetensors"));
        weights.at("classifier.weight").fill_(std::numeric_limits<float>::infinity());
        writeSafetensors((dir.path() + "/model.safetensors").toStdString(), weights);
        m_window->openModel(dir.path());
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, dir.path(), 60000);
        m_window->inputPanel()->runText(QStringLiteral("An infinite classifier."));
        waitForInput(QStringLiteral("An infinite classifier."));
        const SnapshotPtr s = m_window->controller()->snapshot();
        QVERIFY2(s->outputNotice.contains(QStringLiteral("infinite values")), qPrintable(s->outputNotice));
        QVERIFY(s->prediction.isEmpty());
        QCOMPARE(m_window->predictionLabel()->text(),
                 QStringLiteral("No prediction: NaN or Inf in the output"));
        QVERIFY(m_window->statusBar()->currentMessage().startsWith(
            QStringLiteral("Warning: the model's output")));
        openBertOnText();
        QVERIFY(m_window->predictionLabel()->text().startsWith(QStringLiteral("Prediction: ")));
    }

    /// Issue #14.7: a long text is cut with a word, Run without text says why it is off, and the Image
    /// page is offered only to models that take images.
    void silentBehaviourSpeaksUp()
    {
        openBertOnText();
        QStringList words;
        for (int i = 0; i < 600; ++i)
            words << QStringLiteral("word");
        m_window->inputPanel()->runText(words.join(QLatin1Char(' ')));
        waitForInput(QStringLiteral("word word"));
        const SnapshotPtr s = m_window->controller()->snapshot();
        const int limit = s->T;
        QVERIFY2(
            s->inputNotice.contains(QStringLiteral("the input has 602 tokens; only the first %1").arg(limit)),
            qPrintable(s->inputNotice));
        QVERIFY2(m_window->statusBar()->currentMessage().startsWith(QStringLiteral("Input cut:")),
                 qPrintable(m_window->statusBar()->currentMessage()));
        // Issue #40.4: a short input after it takes the message away, and the prediction is seen again.
        m_window->inputPanel()->runText(QStringLiteral("A short sentence."));
        waitForInput(QStringLiteral("A short sentence."));
        QVERIFY2(m_window->statusBar()->currentMessage().isEmpty(),
                 qPrintable(m_window->statusBar()->currentMessage()));
        QVERIFY(m_window->predictionLabel()->isVisible());
        QVERIFY(m_window->predictionLabel()->text().startsWith(QStringLiteral("Prediction: ")));

        auto* premise = m_window->inputPanel()->findChild<QPlainTextEdit*>();
        QPushButton* run = nullptr;
        for (QPushButton* b : m_window->inputPanel()->findChildren<QPushButton*>())
            if (b->text().startsWith(QStringLiteral("Run"))) run = b;
        QVERIFY(premise && run);
        premise->setPlainText(QStringLiteral("   "));
        QVERIFY(!run->isEnabled());
        QCOMPARE(run->toolTip(), QStringLiteral("Type a text first"));
        premise->setPlainText(QStringLiteral("A sentence."));
        QVERIFY(run->isEnabled());

        const int imageTab = m_window->pages()->indexOf(m_window->imageView());
        QVERIFY(!m_window->pages()->isTabVisible(imageTab)); // BERT takes no images
        const QString vit = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/vit-fmnist-gated");
        m_window->openModel(vit);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, vit, 60000);
        QVERIFY(m_window->pages()->isTabVisible(imageTab));
        openBertOnText();
    }

    void startAndCancelATrainingJob()
    {
        m_window->pages()->setCurrentWidget(m_window->jobsPage());
        JobsPage* page = m_window->jobsPage();
        page->findChild<QSpinBox*>(QStringLiteral("steps"))->setValue(400); // the synthetic task, bert-tiny
        QTest::mouseClick(page->startButton(), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(m_jobs->jobs().size(), 1, 5000);
        const QString id = m_jobs->jobs().first().id;
        QTRY_VERIFY_WITH_TIMEOUT(
            m_jobs->job(id)->state == QLatin1String("running") && m_jobs->job(id)->step > 0, 120000);
        // The new job is selected, and its row says how long it has left (issue #14.9).
        QTRY_VERIFY_WITH_TIMEOUT(m_jobs->job(id)->secondsLeft >= 0, 60000);
        QVERIFY(!page->table()->selectedItems().isEmpty());
        QTRY_VERIFY(page->table()->item(0, 3)->text().contains(QStringLiteral("left")));
        QCOMPARE(JobsPage::durationText(40), QStringLiteral("40 s"));
        QCOMPARE(JobsPage::durationText(725), QStringLiteral("12 min"));
        QCOMPARE(JobsPage::durationText(7500), QStringLiteral("2 h 5 min"));
        m_jobs->cancel(id);
        QTRY_COMPARE_WITH_TIMEOUT(m_jobs->job(id)->state, QStringLiteral("stopped"), 120000);
        // Stopping saved a checkpoint the run can resume from.
        QDir checkpoints(m_jobs->job(id)->folder + QStringLiteral("/checkpoints"));
        QVERIFY(!checkpoints.entryList(QDir::Dirs | QDir::NoDotAndDotDot).isEmpty());
        QVERIFY(!m_jobs->curves(id).steps.isEmpty());

        // Issue #14.2: Resume, Resume again at once: one trainer on the folder, shown as running.
        const QString folder = m_jobs->job(id)->folder;
        const qint64 stoppedAt = m_jobs->job(id)->step;
        page->selectJob(id);
        QVERIFY(page->resumeButton()->isEnabled());
        QTest::mouseClick(page->resumeButton(), Qt::LeftButton);
        QVERIFY(!page->resumeButton()->isEnabled());
        QTest::mouseClick(page->resumeButton(), Qt::LeftButton); // disabled: nothing happens
        QCOMPARE(m_jobs->resume(id), QString());                 // already queued or running: no-op
        QTRY_VERIFY_WITH_TIMEOUT(runFolderOwner(folder.toStdString()) > 0, 60000);
        QVERIFY(!m_jobs->resume(id).isEmpty()); // the folder's owner refuses a second trainer
        QTRY_VERIFY_WITH_TIMEOUT(m_jobs->job(id)->step > stoppedAt, 120000);
        for (int i = 0; i < 3; ++i) { // several polls: the row stays what the folder says
            QCOMPARE(m_jobs->job(id)->state, QStringLiteral("running"));
            QCOMPARE(m_jobs->job(id)->pid, qint64(runFolderOwner(folder.toStdString())));
            QCOMPARE(trainersOn(folder), 1);
            QTest::qWait(1100);
        }
        m_jobs->cancel(id);
        QTRY_COMPARE_WITH_TIMEOUT(m_jobs->job(id)->state, QStringLiteral("stopped"), 120000);
        QCOMPARE(trainersOn(folder), 0);
        // The metrics log has every logged step once, in order, through the stop.
        QFile metrics(folder + QStringLiteral("/metrics.jsonl"));
        QVERIFY(metrics.open(QIODevice::ReadOnly));
        qint64 last = 0;
        for (const QByteArray& line : metrics.readAll().split('\n')) {
            const QJsonObject o = QJsonDocument::fromJson(line).object();
            if (!o.contains(QStringLiteral("loss")) || o[QStringLiteral("type")] == QLatin1String("eval"))
                continue;
            const qint64 step = o[QStringLiteral("step")].toInteger();
            QVERIFY2(step > last, qPrintable(QStringLiteral("step %1 after %2").arg(step).arg(last)));
            last = step;
        }
        QVERIFY2(last > stoppedAt && last <= m_jobs->job(id)->step, qPrintable(QString::number(last)));
    }

    /// Issue #18: a statistics job reports progress as JSON lines (`stats --json-progress`), read by the
    /// same parser as a training run's: the finished job says how many inputs it went through.
    void statisticsJobReportsItsProgress()
    {
        const QString vit = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/vit-fmnist-vanilla");
        const QString out = m_home.path() + QStringLiteral("/job-stats.h5");
        const QString id =
            m_jobs->queueStatistics(QStringLiteral("statistics job"),
                                    {QStringLiteral("--model"), vit, QStringLiteral("--data"),
                                     QStringLiteral("images:") + kImages + QStringLiteral(":5"),
                                     QStringLiteral("--batch"), QStringLiteral("2")},
                                    out);
        QVERIFY(m_jobs->job(id)->arguments.contains(QStringLiteral("--json-progress")));
        QTRY_COMPARE_WITH_TIMEOUT(m_jobs->job(id)->state, QStringLiteral("finished"), 180000);
        QCOMPARE(m_jobs->job(id)->total, qint64(5));
        QCOMPARE(m_jobs->job(id)->step, qint64(5));
        QVERIFY2(m_jobs->job(id)->message.startsWith(QStringLiteral("wrote ") + out),
                 qPrintable(m_jobs->job(id)->message));
        QVERIFY(QFile::exists(out));
    }

    void demoModelsOpenWithTheirOwnInputs()
    {
        // The app opens the Bigram-Backcopy decoder by default, and every demo trio is complete.
        QVERIFY2(ModelCatalog::defaultModel().endsWith(QStringLiteral("/models/backcopy-vanilla")),
                 qPrintable(ModelCatalog::defaultModel()));
        for (const QString& kind :
             {QStringLiteral("bert-mnli"), QStringLiteral("vit-fmnist"), QStringLiteral("synthetic")})
            QCOMPARE(ModelCatalog::demoTrio(kind).size(), 3);
        QCOMPARE(ModelCatalog::demoTrio(QStringLiteral("backcopy")).size(), 3);
        const QString backcopyInput = ModelCatalog::sampleInput(
            QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/backcopy-vanilla"));
        QCOMPARE(backcopyInput.size(), 63);
        // Each family starts on an input of its own kind: an MNLI pair, a Fashion-MNIST image, a
        // generated example of the synthetic task, a held-out Bigram-Backcopy sequence (BOS + 63).
        const struct
        {
            QString model, inputContains;
            int tokens;
        } cases[] = {
            {QStringLiteral("vit-fmnist-gated"), QStringLiteral("fmnist_boot.png"), 50},
            {QStringLiteral("synthetic-clipped"), QStringLiteral("synthetic example"), 64},
            // The gated model's showcase input (showcase.json), not the first line.
            {QStringLiteral("backcopy-gated"), showcaseInput(QStringLiteral("backcopy-gated")).left(20), 64},
            {QStringLiteral("bert-mnli-vanilla"), QString(), -1}};
        for (const auto& c : cases) {
            const QString dir = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/") + c.model;
            m_window->openModel(dir);
            QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, dir, 60000);
            QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() &&
                                         m_window->controller()->snapshot()->model.dir == dir,
                                     60000);
            const SnapshotPtr s = m_window->controller()->snapshot();
            QVERIFY2(s->input.contains(c.inputContains), qPrintable(s->input));
            if (c.tokens > 0) QCOMPARE(s->T, c.tokens);
        }
        QCOMPARE(m_window->controller()->model().classNames.size(), 3);
        // The decoder's sample sequence did not follow to BERT, which starts on an MNLI pair.
        QVERIFY(!m_window->controller()->snapshot()->input.contains(backcopyInput.left(20)));

        // A model whose showcase head is in layer 1 (its input is the embeddings): the Outliers page
        // shows layer 1's out, with a note, and the per-layer chart, not an empty page.
        const QString perQuery =
            QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/backcopy-clipped-per-query");
        m_window->openModel(perQuery);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() &&
                                     m_window->controller()->snapshot()->model.dir == perQuery,
                                 60000);
        QCOMPARE(m_window->layer(), 0);
        m_window->pages()->setCurrentWidget(m_window->outliersPage());
        QTRY_COMPARE(m_window->outliersPage()->dashboard()->data().perDimension.values.size(),
                     m_window->controller()->snapshot()->d());
        QCOMPARE(m_window->outliersPage()->dashboard()->data().layer, 0);
        QCOMPARE(m_window->outliersPage()->dashboard()->data().maxInfNormPerLayer.size(),
                 m_window->controller()->snapshot()->L());
        const QString note = m_window->outliersPage()->findChild<QLabel*>(QStringLiteral("note"))->text();
        QVERIFY2(note.contains(QStringLiteral("Layer 1 reads the embeddings")), qPrintable(note));
    }

    /// Issue #14.1: statistics of one model never show on another. Steps: statistics for
    /// vit-fmnist-vanilla, switch to backcopy-vanilla (its dashboard, layers and tokens only), back to
    /// the ViT (its file again), and a file opened on the wrong model says so.
    void outliersPageShowsOnlyTheCurrentModelsStatistics()
    {
        const QString models = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/");
        const QString vit = models + QStringLiteral("vit-fmnist-vanilla");
        const QString decoder = models + QStringLiteral("backcopy-vanilla");
        const QString statsPath = m_home.path() + QStringLiteral("/vit-stats.h5");
        QProcess stats;
        stats.start(QStringLiteral(OUTLIERLENS_BINARY_DIR "/app/outlierlens"),
                    {QStringLiteral("stats"), QStringLiteral("--model"), vit, QStringLiteral("--data"),
                     QStringLiteral("images:") + kImages + QStringLiteral(":4"), QStringLiteral("--out"),
                     statsPath});
        QVERIFY(stats.waitForFinished(120000));
        QVERIFY2(stats.exitCode() == 0, stats.readAllStandardError().constData());

        InspectionController* controller = m_window->controller();
        OutliersPage* page = m_window->outliersPage();
        const auto open = [&](const QString& dir) {
            m_window->openModel(dir);
            QTRY_VERIFY_WITH_TIMEOUT(controller->model().dir == dir && controller->snapshot() &&
                                         controller->snapshot()->model.dir == dir &&
                                         !controller->loadingOrInspecting(),
                                     60000);
        };
        open(vit);
        m_window->pages()->setCurrentWidget(page);
        controller->loadStatistics(statsPath);
        QTRY_VERIFY_WITH_TIMEOUT(controller->statistics() != nullptr, 30000);
        QCOMPARE(page->sourceBox()->count(), 2);
        QCOMPARE(page->sourceBox()->currentIndex(), 1);
        QCOMPARE(page->dashboard()->data().maxInfNormPerLayer.size(), controller->model().layers);
        QVERIFY2(page->note().isEmpty(), qPrintable(page->note()));

        open(decoder);
        QVERIFY(controller->statistics() == nullptr);
        QCOMPARE(page->sourceBox()->count(), 1);
        QTRY_COMPARE(page->dashboard()->data().maxInfNormPerLayer.size(), 3);
        QVERIFY(page->dashboard()->data().sourceDescription.contains(QStringLiteral("current input")));
        // Every token the chart names is a token of this input.
        const QStringList tokens = controller->snapshot()->tokens;
        for (const QString& shown : page->dashboard()->shownTokens()) {
            const bool found = std::any_of(tokens.begin(), tokens.end(), [&](const QString& t) {
                return shown == t || shown.startsWith(t.left(20)) ||
                       shown.section(QLatin1Char(' '), 0, 0) == t;
            });
            QVERIFY2(found, qPrintable(shown));
        }

        // The ViT's file is the ViT's again; opened on the decoder, it says whose it is.
        open(vit);
        QVERIFY(controller->statistics() != nullptr);
        QCOMPARE(controller->statisticsPath(), statsPath);
        QCOMPARE(page->sourceBox()->count(), 2);
        open(decoder);
        controller->loadStatistics(statsPath);
        QTRY_COMPARE_WITH_TIMEOUT(page->sourceBox()->currentIndex(), 1, 30000);
        QVERIFY2(page->note().contains(QStringLiteral("another checkpoint")), qPrintable(page->note()));
        page->sourceBox()->setCurrentIndex(0);

        // Each family opens on its figure tensor (DESIGN.md): the block output for ViT and decoders,
        // BERT's FFN output; a demo decoder (showcase.json) on the input of its sink head's layer.
        QCOMPARE(page->tensor(), QStringLiteral("in"));
        open(QString::fromStdString(fixture("decoders/gpt2-seed0/hf")));
        QCOMPARE(page->tensor(), QStringLiteral("out"));
        open(vit);
        QCOMPARE(page->tensor(), QStringLiteral("out"));
        open(models + QStringLiteral("bert-mnli-vanilla"));
        QCOMPARE(page->tensor(), QStringLiteral("ffn_out"));
        QTRY_COMPARE(page->dashboard()->data().tensor, QStringLiteral("ffn_out"));
    }

    /// Issue #14.3: a file that is no image, dropped on a ViT while the Compare page shows: one error
    /// message, and every page stays on the last good image.
    void badImageIsReportedOnceAndPagesKeepTheGoodInput()
    {
        const QString vit = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/vit-fmnist-vanilla");
        InspectionController* controller = m_window->controller();
        m_window->openModel(vit);
        QTRY_VERIFY_WITH_TIMEOUT(controller->snapshot() && controller->snapshot()->model.dir == vit &&
                                     !controller->loadingOrInspecting(),
                                 60000);
        const QString good = controller->snapshot()->input;
        m_window->pages()->setCurrentWidget(m_window->comparePage());
        QTRY_COMPARE_WITH_TIMEOUT(m_window->comparePage()->input().path, good, 30000);
        const auto errorTexts = [&] {
            QStringList shown;
            for (QMessageBox* box : m_window->findChildren<QMessageBox*>(QStringLiteral("errorMessage")))
                if (box->isVisible()) shown << box->text();
            return shown;
        };
        const auto errorBoxes = [&] { return errorTexts().size(); };
        for (QMessageBox* box : m_window->findChildren<QMessageBox*>(QStringLiteral("errorMessage")))
            box->close();
        QTRY_COMPARE(errorBoxes(), 0);

        const QString bad = m_home.path() + QStringLiteral("/not-an-image.png");
        QFile file(bad);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write("this is text, not a PNG\n");
        file.close();
        Q_EMIT m_window->imageView()->imageDropped(bad);
        QTRY_VERIFY2_WITH_TIMEOUT(errorBoxes() == 1, qPrintable(errorTexts().join(QStringLiteral(" | "))),
                                  30000);
        QTest::qWait(3000); // the compared models would report the same error by now
        QVERIFY2(errorBoxes() == 1, qPrintable(errorTexts().join(QStringLiteral(" | "))));
        QCOMPARE(controller->snapshot()->input, good);
        QCOMPARE(m_window->comparePage()->input().path, good);
        m_window->pages()->setCurrentWidget(m_window->teachingPage());
        QCOMPARE(m_window->teachingPage()->input().path, good);
        // A rerun of the good input (fast mode) is not taken for the failed one.
        toggleFastMode(true);
        QCOMPARE(m_window->comparePage()->input().path, good);
        QCOMPARE(controller->snapshot()->input, good);
        toggleFastMode(false);
        for (QMessageBox* box : m_window->findChildren<QMessageBox*>(QStringLiteral("errorMessage")))
            box->close();
    }

    /// Issue #14.5: the Teaching page's caption follows from the numbers: the vanilla decoder's sink
    /// carries the outliers, the gated one's attention lands on a token without any.
    void teachingCaptionsFollowTheNumbers()
    {
        const QString models = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/");
        m_window->pages()->setCurrentWidget(m_window->teachingPage());
        const struct
        {
            QString model, says;
        } cases[] = {{QStringLiteral("backcopy-vanilla"), QStringLiteral("those are the outliers")},
                     {QStringLiteral("backcopy-gated"), QStringLiteral("No outlier at")}};
        for (const auto& c : cases) {
            m_window->openModel(models + c.model);
            // The model opens where its showcase.json says its sink is largest.
            const std::optional<Showcase> showcase = readShowcase((models + c.model).toStdString());
            QVERIFY(showcase);
            QTRY_VERIFY_WITH_TIMEOUT(
                m_window->teachingPage()->view()->data().provenance.model.endsWith(c.model) &&
                    m_window->teachingPage()->view()->data().layer == showcase->layer &&
                    m_window->teachingPage()->view()->data().head == showcase->head,
                60000);
            QCOMPARE(m_window->layer(), showcase->layer);
            const QString caption = m_window->teachingPage()->view()->caption();
            QVERIFY2(caption.contains(c.says), qPrintable(caption));
        }
    }

    /// Issue #13: on a demo decoder's first screen the Outliers page shows what the sink head reads,
    /// the previous layer's out: the vanilla model's outliers sit on BOS in a few dimensions (the
    /// layer's own out has the large values of ordinary characters, which are not the mechanism), the
    /// gated model's layer has none. BOS ("</s>") is named in the token chart, not swallowed as markup.
    void outliersPageShowsWhatTheSinkHeadReads()
    {
        const QString models = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/");
        OutliersPage* page = m_window->outliersPage();
        m_window->pages()->setCurrentWidget(page);
        for (const QString& name : {QStringLiteral("backcopy-vanilla"), QStringLiteral("backcopy-gated")}) {
            m_window->openModel(models + name);
            const std::optional<Showcase> showcase = readShowcase((models + name).toStdString());
            QVERIFY(showcase && showcase->layer > 0);
            QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, models + name, 60000);
            QCOMPARE(page->tensor(), QStringLiteral("in"));
            QTRY_VERIFY_WITH_TIMEOUT(page->dashboard()->data().provenance.model.endsWith(name) &&
                                         m_window->layer() == showcase->layer,
                                     60000);
            const OutlierDashboardData& d = page->dashboard()->data();
            QCOMPARE(d.layer, showcase->layer - 1);
            QCOMPARE(d.tensor, QStringLiteral("out"));
            QVERIFY2(page->note().contains(
                         QStringLiteral("which the heads of layer %1 read").arg(showcase->layer + 1)),
                     qPrintable(page->note()));
            const auto dims = std::count_if(d.perDimension.values.begin(), d.perDimension.values.end(),
                                            [](double v) { return v > 0; });
            if (name.endsWith(QStringLiteral("vanilla"))) {
                QVERIFY2(dims >= 1 && dims <= 4, qPrintable(QString::number(dims)));
                QCOMPARE(page->dashboard()->shownTokens().value(0), QStringLiteral("</s> (0)"));
            } else {
                QCOMPARE(dims, 0);
            }
        }
        // Layer 1 reads the embeddings: said, and layer 1's out shown instead of an empty page (#40.9).
        m_window->setSelection(0, 0);
        QTRY_VERIFY(page->note().contains(QStringLiteral("reads the embeddings")));
        QCOMPARE(page->dashboard()->data().layer, 0);
        QCOMPARE(page->dashboard()->data().tensor, QStringLiteral("out"));
        QVERIFY(!page->dashboard()->data().perDimension.values.isEmpty());
    }

    /// No signal handler may run on a thread that computes (oneDNN's GEMM, model/linear.h): the
    /// inspection thread and the OpenMP threads it starts have the asynchronous signals blocked.
    void computingThreadsTakeNoSignals()
    {
        // The worker has run a model (the window's first input), so its OpenMP threads exist.
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot(), 60000);
        const std::uint64_t mask = (std::uint64_t(1) << (SIGCHLD - 1)) | (std::uint64_t(1) << (SIGTERM - 1)) |
                                   (std::uint64_t(1) << (SIGINT - 1));
        int computing = 0;
        for (const QFileInfo& task :
             QDir(QStringLiteral("/proc/self/task")).entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot)) {
            QFile comm(task.filePath() + QStringLiteral("/comm"));
            QFile status(task.filePath() + QStringLiteral("/status"));
            if (!comm.open(QIODevice::ReadOnly) || !status.open(QIODevice::ReadOnly)) continue;
            if (comm.readAll().trimmed() != "inspection") continue; // its OpenMP threads inherit the name
            ++computing;
            for (const QByteArray& line : status.readAll().split('\n'))
                if (line.startsWith("SigBlk:"))
                    QVERIFY2((line.mid(7).trimmed().toULongLong(nullptr, 16) & mask) == mask,
                             line.constData());
        }
        QVERIFY(computing >= 1);
    }

    void colourMapsAreRememberedAndRedraw()
    {
        m_window->pages()->setCurrentWidget(m_window->headView());
        const QImage before = m_window->headView()->grab().toImage();
        QAction* grayscale = nullptr;
        for (QAction* a : m_window->findChildren<QAction*>())
            if (a->text() == QStringLiteral("grayscale")) grayscale = a;
        QVERIFY(grayscale);
        grayscale->trigger();
        QCOMPARE(QSettings().value(QStringLiteral("view/sequentialColormap")).toString(),
                 QStringLiteral("grayscale"));
        QCOMPARE(ColorMap::sequential(0.0), QColor(Qt::white));
        QVERIFY(m_window->headView()->grab().toImage() != before);
        // Back to the default for whatever runs next.
        for (QAction* a : m_window->findChildren<QAction*>())
            if (a->text() == QStringLiteral("viridis")) a->trigger();
        QCOMPARE(QSettings().value(QStringLiteral("view/sequentialColormap")).toString(),
                 QStringLiteral("viridis"));
    }

    /// Issue #38: a decoder folder without tokenizer files opens; its input is token ids, run as given,
    /// and the head view shows the backend's numbers on them.
    void decoderWithoutTokenizerTakesIds()
    {
        const QString dir = QString::fromStdString(fixture("families/qwen3/hf"));
        m_window->openModel(dir);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, dir, 60000);
        QVERIFY(m_window->controller()->model().takesTokenIds());
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() &&
                                     m_window->controller()->snapshot()->model.dir == dir,
                                 60000);
        const SnapshotPtr s = m_window->controller()->snapshot();
        const std::vector<std::int64_t> ids = parseTokenIds(s->input.toStdString());
        QCOMPARE(s->T, int(ids.size()));
        for (int t = 0; t < s->T; ++t)
            QCOMPARE(s->tokens[t], QString::number(ids[std::size_t(t)]));
        QVERIFY2(s->prediction.value(0).startsWith(QLatin1Char('#')), qPrintable(s->prediction.join(", ")));
        m_window->pages()->setCurrentWidget(m_window->headView());
        m_window->setSelection(1, 3);
        const HeadViewData shown = m_window->headView()->data();
        DecoderNetwork net = DecoderNetwork::load(dir.toStdString());
        RecordingSink sink;
        {
            c10::InferenceMode guard;
            const auto T = std::int64_t(ids.size());
            net.forward(torch::tensor(ids, torch::kLong).view({1, T}), {}, &sink);
        }
        const torch::Tensor probs = sink.at("layer1/attn_probs")[0][3].contiguous();
        const torch::Tensor shownProbs =
            torch::from_blob(const_cast<float*>(shown.probabilities.values.constData()), {s->T, s->T},
                             torch::kFloat)
                .clone();
        OL_COMPARE_TENSORS("qwen3 without tokenizer", shownProbs, probs, 1e-6);
        // Text that is not ids is an error that says what to type, and the last snapshot stays.
        m_window->inputPanel()->runText(QStringLiteral("Summer is warm."));
        QTRY_VERIFY_WITH_TIMEOUT(!m_window->controller()->loadingOrInspecting(), 60000);
        QCOMPARE(m_window->controller()->snapshot()->input, s->input);
    }

    void decoderModelsOpenWithCausalAttention()
    {
        // The newer families (issue #38), GPT-2, OPT and LLaMA 2 as a user's folder holds them: the family
        // fixtures' weights with the 384-token tokenizer made for them.
        QTemporaryDir families;
        QStringList dirs;
        for (const char* family : {"qwen2", "qwen3", "mistral", "llama3", "gemma2", "phi", "gpt-neox",
                                   "falcon-7b", "falcon-40b"}) {
            const std::filesystem::path dir = std::filesystem::path(families.path().toStdString()) / family;
            std::filesystem::create_directories(dir);
            const std::filesystem::path model = fixture(std::string("families/") + family + "/hf");
            const std::filesystem::path tokenizer = fixture("tokenizers/bytelevel-384");
            for (const std::filesystem::path& file : {model / "config.json", model / "model.safetensors",
                                                      tokenizer / "vocab.json", tokenizer / "merges.txt"})
                std::filesystem::copy_file(file, dir / file.filename());
            dirs << QString::fromStdString(dir.string());
        }
        // LLaMA 2 last: the text-file checks below expect its 64 positions.
        for (const char* name : {"gpt2-seed0", "opt-seed0", "llama-seed0"})
            dirs << QString::fromStdString(fixture(std::string("decoders/") + name + "/hf"));
        for (const QString& dir : dirs) {
            const QByteArray nameBytes = QFileInfo(dir).fileName() == QStringLiteral("hf")
                                             ? QFileInfo(QFileInfo(dir).path()).fileName().toUtf8()
                                             : QFileInfo(dir).fileName().toUtf8();
            const char* name = nameBytes.constData();
            m_window->openModel(dir);
            QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, dir, 60000);
            QVERIFY(m_window->controller()->model().isDecoder());
            // A decoder starts on free text (An et al.'s probe sentence): no MNLI table.
            QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() &&
                                         m_window->controller()->snapshot()->model.dir == dir,
                                     60000);
            const SnapshotPtr s = m_window->controller()->snapshot();
            QVERIFY2(s->input.contains(QStringLiteral("Summer is warm")), qPrintable(s->input));
            QVERIFY(!m_window->inputPanel()->pairsView()->isVisible());
            QVERIFY(!s->prediction.isEmpty()); // the most likely next tokens

            // The head view shows the backend's numbers, with the future keys masked.
            m_window->pages()->setCurrentWidget(m_window->headView());
            m_window->setSelection(1, 2);
            const HeadViewData shown = m_window->headView()->data();
            QCOMPARE(shown.layer, 1);
            QCOMPARE(shown.head, 2);
            QVERIFY(shown.probabilities.causal);
            DecoderNetwork net = DecoderNetwork::load(dir.toStdString());
            const auto tokenizer = DecoderTokenizer::fromModelDir(dir.toStdString());
            const Encoding e = tokenizer->encode(s->input.toStdString());
            const auto T = std::int64_t(e.inputIds.size());
            QCOMPARE(s->T, int(T));
            qInfo("%s (%s): %d tokens, head view = backend", name, qPrintable(s->model.head), int(T));
            RecordingSink sink;
            {
                c10::InferenceMode guard;
                net.forward(torch::tensor(e.inputIds, torch::kLong).view({1, T}), {}, &sink);
            }
            const torch::Tensor probs = sink.at("layer1/attn_probs")[0][2].contiguous();
            const torch::Tensor shownProbs =
                torch::from_blob(const_cast<float*>(shown.probabilities.values.constData()), {T, T},
                                 torch::kFloat)
                    .clone();
            OL_COMPARE_TENSORS(name, shownProbs, probs, 1e-6);
            QVERIFY(shown.probabilities.isMasked(0, 1));
            QVERIFY(!shown.probabilities.isMasked(1, 0));
            // Layer 1 (odd): Mistral's window applies, Gemma 2's does not (its even layers slide).
            const DecoderConfig& dc = net.config();
            const int window = dc.slidingWindow > 0 && !dc.slidingWindowAlternates ? dc.slidingWindow : 0;
            QCOMPARE(shown.probabilities.window, window);
            if (window > 0) {
                QVERIFY(T > window);
                QVERIFY(shown.probabilities.isMasked(int(T) - 1, 0));
                QCOMPARE(probs[T - 1][0].item<float>(), 0.0f);
                QVERIFY(!shown.probabilities.isMasked(int(T) - 1, int(T) - window));
            }
            HeatmapView* panel = m_window->headView()->panel(HeadView::ProbabilitiesPanel);
            QVERIFY(panel);
            QVERIFY2(panel->cellToolTip(0, int(T) - 1).contains(QStringLiteral("masked")),
                     qPrintable(panel->cellToolTip(0, int(T) - 1)));
            if (window > 0)
                QVERIFY2(panel->cellToolTip(int(T) - 1, 0).contains(QStringLiteral("sliding window")),
                         qPrintable(panel->cellToolTip(int(T) - 1, 0)));

            // Every page opens with it and draws.
            for (int i = 0; i < m_window->pages()->count(); ++i) {
                m_window->pages()->setCurrentIndex(i);
                QWidget* page = m_window->pages()->currentWidget();
                QVERIFY2(page && !page->grab().isNull(), qPrintable(m_window->pages()->tabText(i)));
            }
            m_window->pages()->setCurrentWidget(m_window->outliersPage());
            QTRY_VERIFY(!m_window->outliersPage()->dashboard()->data().perDimension.values.isEmpty());
        }

        // A text file of one's own runs as the input.
        QTemporaryDir dir;
        const QString path = dir.path() + QStringLiteral("/note.txt");
        {
            QFile file(path);
            QVERIFY(file.open(QIODevice::WriteOnly));
            file.write("Attention sinks live on the first token.\nThe rest is text.\n");
        }
        m_window->inputPanel()->openTextFile(path);
        waitForInput(QStringLiteral("Attention sinks"));
        // A long file is cut to what the model (here 64 positions) and the app (512 tokens) allow.
        const QString longPath = dir.path() + QStringLiteral("/long.txt");
        {
            QFile file(longPath);
            QVERIFY(file.open(QIODevice::WriteOnly));
            for (int i = 0; i < 200; ++i)
                file.write("Summer follows spring, and the days grow long. ");
        }
        m_window->inputPanel()->openTextFile(longPath);
        waitForInput(QStringLiteral("first 64 tokens"));
        QCOMPARE(m_window->controller()->snapshot()->T, 64);
        m_window->inputPanel()->openTextFile(path);
        waitForInput(QStringLiteral("Attention sinks"));
        // A binary file is refused with one message, and the last input stays.
        const QString binary = dir.path() + QStringLiteral("/blob.txt");
        {
            QFile file(binary);
            QVERIFY(file.open(QIODevice::WriteOnly));
            file.write(QByteArray::fromHex("fffe0001") + QByteArray("binary"));
        }
        QSignalSpy failed(m_window->inputPanel(), &InputPanel::failed);
        m_window->inputPanel()->openTextFile(binary);
        QCOMPARE(failed.size(), 1);
        QVERIFY2(failed.first().first().toString().contains(QStringLiteral("not UTF-8")),
                 qPrintable(failed.first().first().toString()));
        QVERIFY(m_window->controller()->snapshot()->input.contains(QStringLiteral("Attention sinks")));
        if (auto* box = m_window->findChild<QMessageBox*>(QStringLiteral("errorMessage"))) box->close();

        // A BERT model opened on the decoder's text runs that text, and the panel shows it: the text
        // tab with the text in its box, no MNLI row selected.
        m_window->openModel(kModel);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, kModel, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() &&
                                     m_window->controller()->snapshot()->model.dir == kModel,
                                 60000);
        QVERIFY(m_window->controller()->snapshot()->input.contains(QStringLiteral("Attention sinks")));
        QCOMPARE(m_window->inputPanel()->currentTab(), m_window->inputPanel()->textTab());
        QVERIFY(!m_window->inputPanel()->pairsView()->selectionModel()->hasSelection());
        const QString shownText = m_window->inputPanel()->premiseEdit()->toPlainText();
        QVERIFY2(shownText.contains(QStringLiteral("Attention sinks")), qPrintable(shownText));
    }

    void fastModeRerunsInBf16()
    {
        qunsetenv("OUTLIERLENS_NO_BF16");
        QAction* fast = m_window->fastModeAction();
        QVERIFY(fast);
        QVERIFY(fast->isCheckable());
        QVERIFY(!fast->isChecked()); // off by default
        QVERIFY2(fast->toolTip().contains(QStringLiteral("third significant digit")),
                 qPrintable(fast->toolTip()));
        const SnapshotPtr fp32 = openBertOnText();
        QCOMPARE(fp32->precision, QStringLiteral("fp32"));
        QVERIFY(m_window->precisionLabel()->text().isEmpty());

        const SnapshotPtr bf16 = toggleFastMode(true); // the input runs again by itself
        QVERIFY(QSettings().value(QStringLiteral("view/fastMode")).toBool());
        QCOMPARE(bf16->input, fp32->input);
        QCOMPARE(bf16->T, fp32->T);
        const bool supported = cpuSupportsBf16();
        QCOMPARE(bf16->precision, supported ? QStringLiteral("bf16") : QStringLiteral("fp32"));
        QCOMPARE(m_window->precisionLabel()->text().contains(QStringLiteral("bf16")), supported);
        // Within bf16's tolerance of float32 (8 significant bits: relative error ~0.4% per rounding,
        // a few roundings deep), and, where bf16 runs, not identical.
        double changed = 0;
        const auto compare = [&](const char* what, const float* a, const float* b, qsizetype n,
                                 double tolerance) {
            double largest = 0, diff = 0;
            for (qsizetype i = 0; i < n; ++i) {
                largest = std::max(largest, double(std::abs(a[i])));
                diff = std::max(diff, double(std::abs(a[i] - b[i])));
            }
            QVERIFY2(
                diff <= tolerance * largest,
                qPrintable(
                    QStringLiteral("%1: max |bf16 - fp32| %2 of max %3").arg(what).arg(diff).arg(largest)));
            changed += diff;
        };
        for (int l = 0; l < fp32->L(); ++l)
            for (int h = 0; h < fp32->H(); ++h) {
                compare("probabilities", fp32->probsOf(l, h), bf16->probsOf(l, h),
                        qsizetype(fp32->T) * fp32->T, 0.05);
                compare("P.V", fp32->contextOf(l, h), bf16->contextOf(l, h), qsizetype(fp32->T) * fp32->dh(),
                        0.05);
            }
        compare("block outputs", fp32->out.constData(), bf16->out.constData(), fp32->out.size(), 0.05);
        if (supported)
            QVERIFY(changed > 0);
        else
            QCOMPARE(changed, 0.0);
        // The head view shows the bf16 numbers, as float32.
        m_window->pages()->setCurrentWidget(m_window->headView());
        m_window->setSelection(1, 1);
        const MatrixData shown = m_window->headView()->data().probabilities;
        QCOMPARE(shown.values, bf16->probsVector(1, 1));

        // Off again: float32 numbers as before.
        const SnapshotPtr again = toggleFastMode(false);
        QCOMPARE(again->precision, QStringLiteral("fp32"));
        QVERIFY(!QSettings().value(QStringLiteral("view/fastMode")).toBool());
        QVERIFY(m_window->precisionLabel()->text().isEmpty());
        compare("probabilities again", fp32->probsOf(1, 1), again->probsOf(1, 1),
                qsizetype(fp32->T) * fp32->T, 1e-6);
    }

    void fastModeFallsBackOnceWithoutBf16()
    {
        qputenv("OUTLIERLENS_NO_BF16", "1"); // a CPU without bf16 instructions
        // A new window: on a CPU without bf16 the earlier tests' fast mode has already said it once in the
        // old one (it is said once per window).
        m_window = std::make_unique<MainWindow>(kModel, kPairs, kImages, m_jobs.get());
        m_window->resize(1300, 850);
        m_window->show();
        QVERIFY(QTest::qWaitForWindowExposed(m_window.get()));
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, kModel, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() != nullptr, 60000);
        openBertOnText();
        m_window->statusBar()->clearMessage();
        const SnapshotPtr first = toggleFastMode(true);
        QCOMPARE(first->precision, QStringLiteral("fp32"));
        QVERIFY(!first->precisionNotice.isEmpty());
        const QString message = m_window->statusBar()->currentMessage();
        QVERIFY2(message.contains(QStringLiteral("bfloat16")) && message.contains(QStringLiteral("fp32")),
                 qPrintable(message));
        QVERIFY(m_window->precisionLabel()->text().isEmpty()); // not in effect
        // Said once: the next runs in fast mode stay quiet.
        m_window->statusBar()->clearMessage();
        toggleFastMode(false);
        const SnapshotPtr second = toggleFastMode(true);
        QCOMPARE(second->precision, QStringLiteral("fp32"));
        QVERIFY2(!m_window->statusBar()->currentMessage().contains(QStringLiteral("bfloat16")),
                 qPrintable(m_window->statusBar()->currentMessage()));
        toggleFastMode(false);
        qunsetenv("OUTLIERLENS_NO_BF16");
    }

    /// Help -> About: the version, the library versions and where the licences of the bundled data are.
    void aboutNamesVersionsAndLicences()
    {
        QAction* about = nullptr;
        for (QAction* action : m_window->findChildren<QAction*>())
            if (action->text() == QStringLiteral("&About OutlierLens")) about = action;
        QVERIFY(about);
        QString text;
        QTimer::singleShot(0, this, [&] {
            auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
            if (!box) return;
            text = box->text();
            if (const QByteArray shot = qgetenv("OUTLIERLENS_TEST_SHOT_DIR"); !shot.isEmpty())
                box->grab().save(QString::fromLocal8Bit(shot) + QStringLiteral("/about.png"));
            box->accept();
        });
        about->trigger(); // modal: returns once the timer above has closed it
        QVERIFY2(text.contains(QStringLiteral("OutlierLens " OUTLIERLENS_VERSION)), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("LibTorch 1.")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("Qt " QT_VERSION_STR)), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/SOURCES.md")),
                 qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("CC BY-SA 3.0")), qPrintable(text));
    }
};

QTEST_MAIN(TstGui)
#include "tst_gui.moc"
