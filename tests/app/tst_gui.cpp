// The desktop app as a user drives it, offscreen: open a model, pick an MNLI pair, step through
// layers and heads and check the head view shows the backend's numbers for that head, click a
// hidden dimension and land on its head, start and cancel a real training job, export a view and
// read it back, and survive a bad checkpoint. Decoders and fast mode: tst_gui_decoders.

#include "../common/gui_window_fixture.h"

#include "analysis/recording_sink.h"
#include "analysis/showcase.h"
#include "colormap.h"
#include "compare_page.h"
#include "head_view.h"
#include "image_view.h"
#include "input_panel.h"
#include "inspection_controller.h"
#include "io/safetensors.h"
#include "job_manager.h"
#include "jobs_page.h"
#include "main_window.h"
#include "mnli_table_model.h"
#include "model/bert_network.h"
#include "model_catalog.h"
#include "outlier_dashboard.h"
#include "outliers_page.h"
#include "teaching_page.h"
#include "teaching_view.h"
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

class TstGui : public QObject, public test::MainWindowFixture
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { openWindow(QStringLiteral("tst_gui")); }

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
            // A synthetic-task model: its showcase pair when it ships sample pairs, else a generated example.
            {QStringLiteral("synthetic-clipped"),
             showcaseInput(QStringLiteral("synthetic-clipped")).isEmpty()
                 ? QStringLiteral("synthetic example")
                 : showcaseInput(QStringLiteral("synthetic-clipped"))
                       .section(QLatin1Char('\t'), 0, 0)
                       .left(20),
             64},
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
