// The Jobs page's training form (offscreen): An et al.'s attention variants are offered for the decoder
// task only, the one chosen reaches the queued run's configuration, and "Compare variants" draws the
// finished runs' largest and median |h| per layer from the statistics it queues (their Figs 10/11).

#include "analysis/statistics_file.h"
#include "job_manager.h"
#include "jobs_page.h"
#include "layer_series_chart.h"
#include "variant_comparison.h"

#include <QComboBox>
#include <QFileInfo>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <fstream>

using namespace outlierlens;

class TstJobsPage : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        qputenv("XDG_DATA_HOME", QFile::encodeName(m_home.path()));
        qputenv("OUTLIERLENS_DATA_DIR", OUTLIERLENS_SOURCE_DIR "/sample_data");
        QCoreApplication::setOrganizationName(QStringLiteral("OutlierLensTest"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_jobs_page"));
        QSettings().clear(); // the job list of an earlier run (test mode: ~/.qttest/config)
    }

    void anEtAlVariantsTrainAndCompare()
    {
        JobManager jobs(QStringLiteral(OUTLIERLENS_BINARY_DIR "/app/outlierlens"), m_home.path() + "/jobs");
        JobsPage page(&jobs);
        auto* task = page.findChild<QComboBox*>(QStringLiteral("task"));
        auto* attention = page.findChild<QComboBox*>(QStringLiteral("attention"));
        QVERIFY(task && attention);
        const int scale = attention->findData(QStringLiteral("context-scale"));
        QVERIFY(scale > 0);
        auto* items = qobject_cast<QStandardItemModel*>(attention->model());

        task->setCurrentIndex(task->findText(QStringLiteral("Synthetic no-op task (minutes)")));
        QVERIFY(!items->item(scale)->isEnabled()); // BERT tasks: not offered
        const int decoder = task->findText(QStringLiteral("Decoder causal LM on Wikipedia text"));
        QVERIFY(decoder >= 0);
        task->setCurrentIndex(decoder);
        QVERIFY(items->item(scale)->isEnabled());
        attention->setCurrentIndex(scale);
        // Leaving the decoder task falls back to vanilla rather than keep a variant BERT lacks.
        task->setCurrentIndex(0);
        QCOMPARE(attention->currentIndex(), 0);
        task->setCurrentIndex(decoder);
        attention->setCurrentIndex(scale);

        page.findChild<QSpinBox*>(QStringLiteral("steps"))->setValue(2);
        // Two processes: one job (the launcher) whose run records the group.
        auto* processes = page.findChild<QSpinBox*>(QStringLiteral("processes"));
        QVERIFY(processes);
        QCOMPARE(processes->value(), 1);
        processes->setValue(2);
        QTest::mouseClick(page.startButton(), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(jobs.jobs().size(), 1, 5000);
        const QString id = jobs.jobs().first().id;
        // Issue #40.14: the job list names the run (its folder) first.
        QVERIFY2(
            jobs.job(id)->title.startsWith(QFileInfo(jobs.job(id)->folder).fileName() + QStringLiteral(": ")),
            qPrintable(jobs.job(id)->title));
        QVERIFY(jobs.job(id)->arguments.join(QLatin1Char(' ')).endsWith(QLatin1String("--nproc-per-node 2")));
        QTRY_VERIFY_WITH_TIMEOUT(jobs.job(id)->state == QLatin1String("finished"), 120000);
        std::ifstream run((jobs.job(id)->folder + QStringLiteral("/final/config.json")).toStdString());
        const nlohmann::json config = nlohmann::json::parse(run);
        QCOMPARE(config["outlierlens"]["context_scale"].get<bool>(), true);
        std::ifstream runJson((jobs.job(id)->folder + QStringLiteral("/run.json")).toStdString());
        QCOMPARE(nlohmann::json::parse(runJson)["world_size"].get<int>(), 2);
        processes->setValue(1);

        // A vanilla run beside it, then their comparison (An et al.'s Figs 10/11): the dialog queues the
        // statistics of both runs over the sample text and draws each run's largest and median |h|.
        attention->setCurrentIndex(attention->findData(QStringLiteral("softmax")));
        QTest::mouseClick(page.startButton(), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(jobs.jobs().size(), 2, 5000);
        const QString vanilla = jobs.jobs().last().id;
        QTRY_VERIFY_WITH_TIMEOUT(jobs.job(vanilla)->state == QLatin1String("finished"), 120000);
        QCOMPARE(finishedDecoderRuns(jobs.jobs()).size(), 2);
        auto* compare = page.findChild<QPushButton*>(QStringLiteral("compareVariants"));
        QVERIFY(compare);
        QTest::mouseClick(compare, Qt::LeftButton);
        auto* dialog = page.findChild<VariantComparisonDialog*>();
        QVERIFY(dialog);
        // The files are read off the GUI thread: the dialog says so once the reading is done.
        QTRY_VERIFY2(dialog->status().contains(QStringLiteral("Waiting for the statistics")),
                     qPrintable(dialog->status()));
        QCOMPARE(jobs.jobs().size(), 4); // two statistics jobs queued, once each
        dialog->reload();
        QTRY_VERIFY(!dialog->busy());
        QCOMPARE(jobs.jobs().size(), 4);
        QTRY_VERIFY_WITH_TIMEOUT(jobs.jobs().last().state == QLatin1String("finished"), 180000);
        QTRY_COMPARE_WITH_TIMEOUT(dialog->chart()->data().series.size(), 4, 10000);
        const LayerSeriesData& shown = dialog->chart()->data();
        int k = 0;
        for (const VariantRun& run : finishedDecoderRuns(jobs.jobs())) {
            const StatisticsFile stats = readStatisticsFile(run.stats.toStdString());
            QVERIFY(stats.systematic);
            QCOMPARE(shown.names[k], run.name + QStringLiteral(": top 1"));
            for (const SystematicLayerData& l : stats.systematic->layers) {
                QCOMPARE(shown.series[k][l.layer], l.out.meanTop[0]);
                QCOMPARE(shown.series[k + 1][l.layer], l.out.meanMedian);
                QVERIFY(l.out.meanTop[0] > l.out.meanMedian);
            }
            k += 2;
        }
        QVERIFY(dialog->chart()->figureCsv().startsWith(QStringLiteral("layer (1-based),")));
        dialog->close();
    }

    /// Issue #40.3: Open result on a stopped run opens the checkpoint the trainer wrote last (status.json's),
    /// not the oldest one (the list used to be sorted by name and its first entry taken), and never a
    /// folder still being written.
    void openResultTakesTheLatestCheckpoint()
    {
        QTemporaryDir run;
        QDir dir(run.path());
        for (const char* step : {"step-000000050", "step-000000060", "step-000000070.tmp"})
            QVERIFY(dir.mkpath(QStringLiteral("checkpoints/") + QLatin1String(step)));
        QCOMPARE(JobsPage::latestCheckpoint(run.path()),
                 dir.absoluteFilePath(QStringLiteral("checkpoints/step-000000060")));
        QFile status(dir.filePath(QStringLiteral("status.json")));
        QVERIFY(status.open(QIODevice::WriteOnly));
        status.write(R"({"state": "stopped", "step": 50, "last_checkpoint": "checkpoints/step-000000050"})");
        status.close();
        QCOMPARE(JobsPage::latestCheckpoint(run.path()),
                 dir.absoluteFilePath(QStringLiteral("checkpoints/step-000000050")));
        QTemporaryDir empty;
        QCOMPARE(JobsPage::latestCheckpoint(empty.path()), QString());
    }

private:
    QTemporaryDir m_home;
};

QTEST_MAIN(TstJobsPage)
#include "tst_jobs_page.moc"
