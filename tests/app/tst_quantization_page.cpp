// The Quantization page (offscreen): its rows are `outlierlens quantize` jobs on the current model; each
// row shows what its result file says, the transforms keep the floating-point metric, the per-layer
// sensitivity becomes a chart, and reopening the model shows the results again without new jobs.

#include "../common/gui_test_home.h"

#include "job_manager.h"
#include "quantization_page.h"

#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

using namespace outlierlens;

class TstQuantizationPage : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        m_jobs = test::startGuiTest(m_home.path(), QStringLiteral("tst_quantization_page"));
    }

    void rowsComeFromQuantizeJobs()
    {
        JobManager& jobs = *m_jobs;
        QuantizationPage page(&jobs);
        // Small rows: one seed, 2 calibration and 4 evaluation batches of 8 sequences of 32 characters (the
        // documented tables use 3 seeds, 16 and 32 batches of 32 sequences of 64).
        page.setExtraArguments({"--seeds", "1", "--calib-batches", "2", "--eval-batches", "4", "--batch-size",
                                "8", "--seq-length", "32"});
        ModelInfo model;
        model.dir = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/backcopy-vanilla");
        model.name = QStringLiteral("backcopy-vanilla");
        page.setModel(model);
        QTableWidget* table = page.table();
        const int rows = int(QuantizationPage::rows().size());
        QCOMPARE(table->rowCount(), rows);
        const int state = table->columnCount() - 1;
        QCOMPARE(table->item(0, state)->text(), QStringLiteral("not computed"));

        page.compute();
        QCOMPARE(jobs.jobs().size(), rows);
        // The model's own data, from its run configuration (backcopy sequences of 64 tokens).
        QVERIFY2(jobs.jobs().first().arguments.join(' ').contains(QLatin1String("--data backcopy:")),
                 qPrintable(jobs.jobs().first().arguments.join(' ')));
        page.compute(); // nothing queued twice
        QCOMPARE(jobs.jobs().size(), rows);
        const auto ended = [&] {
            for (const JobInfo& j : jobs.jobs())
                if (j.state != QLatin1String("finished") && j.state != QLatin1String("failed")) return false;
            return true;
        };
        QTRY_VERIFY_WITH_TIMEOUT(ended(), 540000);
        for (const JobInfo& j : jobs.jobs())
            QVERIFY2(j.state == QLatin1String("finished"), qPrintable(j.title + ": " + j.message));

        for (int r = 0; r < rows; ++r) {
            QFile f(page.resultFile(r));
            QVERIFY2(f.open(QIODevice::ReadOnly), qPrintable(page.resultFile(r)));
            const QJsonObject result = QJsonDocument::fromJson(f.readAll()).object();
            const QString fp = QString::number(result["fp"].toDouble(), 'f', 3);
            QCOMPARE(table->item(r, 1)->text(), fp);
            QCOMPARE(table->horizontalHeaderItem(1)->text(), QStringLiteral("FP perplexity"));
            QVERIFY2(
                table->item(r, 2)->text().startsWith(
                    QString::number(result["quantized_mean"].toDouble(), 'f', 3) + QStringLiteral(" ± ")),
                qPrintable(table->item(r, 2)->text()));
            QVERIFY(table->item(r, state)->text().startsWith(QLatin1String("done")));
            if (!result["transform"].toString().isEmpty()) // the transform kept the model's function
                QCOMPARE(table->item(r, 3)->text(), fp);
        }
        // The rotation spreads the stream's outliers: kurtosis "51.36 → 6.53" (docs/quantization.md).
        const QStringList kurtosis = table->item(3, 5)->text().split(QStringLiteral(" → "));
        QCOMPARE(kurtosis.size(), 2);
        QVERIFY2(kurtosis[1].toDouble() < kurtosis[0].toDouble() / 3, qPrintable(table->item(3, 5)->text()));

        // The first row's per-layer sensitivity: the embeddings and head, then each of the 3 layers.
        auto* view = page.findChild<QChartView*>(QStringLiteral("quantizationSensitivity"));
        QVERIFY(view);
        QCOMPARE(view->chart()->series().size(), 1);
        auto* bars = qobject_cast<QBarSeries*>(view->chart()->series().first());
        QVERIFY(bars);
        QCOMPARE(bars->barSets().first()->count(), 4);

        // Reopened: the results are read again, nothing is queued.
        QuantizationPage again(&jobs);
        again.setModel(model);
        QCOMPARE(again.table()->item(2, 1)->text(), table->item(2, 1)->text());
        QVERIFY(again.table()->item(2, state)->text().startsWith(QLatin1String("done")));
    }

private:
    QTemporaryDir m_home;
    std::unique_ptr<JobManager> m_jobs;
};

QTEST_MAIN(TstQuantizationPage)
#include "tst_quantization_page.moc"
