#include "variant_comparison.h"

#include "analysis/statistics_file.h"
#include "job_manager.h"
#include "layer_series_chart.h"
#include "model/model_family.h"

#include <QDialogButtonBox>
#include <QFileInfo>
#include <QLabel>
#include <QVBoxLayout>
#include <QtConcurrent>

#include <algorithm>
#include <limits>

namespace outlierlens {

QVector<VariantRun> finishedDecoderRuns(const QList<JobInfo>& jobs)
{
    QVector<VariantRun> runs;
    for (const JobInfo& j : jobs)
        if (j.kind == QLatin1String("train") && j.state == QLatin1String("finished") &&
            isModelDirOf(j.output.toStdString(), FamilyEngine::Decoder))
            runs << VariantRun{j.title, j.output, j.folder + QStringLiteral("/systematic-stats.h5")};
    return runs;
}

LayerSeriesData buildVariantComparison(const QVector<QPair<QString, StatisticsFile>>& runs)
{
    LayerSeriesData d;
    d.title = QStringLiteral("Layer outputs h by attention variant: largest and median |h| per layer");
    d.axisTitle = QStringLiteral("|h|");
    int layers = 0;
    for (const auto& run : runs)
        layers = std::max(layers, run.second.numLayers);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (const auto& [name, stats] : runs) {
        if (!stats.systematic) continue;
        QVector<double> top(layers, nan), median(layers, nan);
        for (const SystematicLayerData& l : stats.systematic->layers) {
            if (l.layer >= layers) continue;
            top[l.layer] = l.out.meanTop[0];
            median[l.layer] = l.out.meanMedian;
        }
        d.names << name + QStringLiteral(": top 1") << name + QStringLiteral(": median");
        d.series << top << median;
    }
    return d;
}

VariantComparisonDialog::VariantComparisonDialog(JobManager* jobs, QString data, QWidget* parent)
    : QDialog(parent)
    , m_jobs(jobs)
    , m_data(std::move(data))
{
    setWindowTitle(tr("Attention variants: outliers per layer (An et al., Figs 10/11)"));
    m_chart = new LayerSeriesChart;
    m_status = new QLabel;
    m_status->setWordWrap(true);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(m_chart, 1);
    layout->addWidget(m_status);
    layout->addWidget(buttons);
    resize(900, 600);
    m_watcher = new QFutureWatcher<std::shared_ptr<Scan>>(this);
    connect(m_watcher, &QFutureWatcherBase::finished, this, [this] {
        showScan(*m_watcher->result());
        if (m_reloadAgain) {
            m_reloadAgain = false;
            reload();
        }
    });
    connect(m_jobs, &JobManager::jobFinished, this, &VariantComparisonDialog::reload);
    m_status->setText(tr("Reading the runs' statistics…"));
    reload();
}

QString VariantComparisonDialog::status() const
{
    return m_status->text();
}

/// What a reload found on disk (read on a pool thread): the runs, and the statistics files that exist.
struct VariantComparisonDialog::Scan
{
    QVector<VariantRun> runs;
    QVector<QPair<QString, StatisticsFile>> shown;
    QStringList missing;    ///< statistics paths not written yet
    QStringList unreadable; ///< "run (why)"
};

bool VariantComparisonDialog::busy() const
{
    return m_watcher->isRunning();
}

void VariantComparisonDialog::reload()
{
    if (m_watcher->isRunning()) {
        m_reloadAgain = true;
        return;
    }
    m_watcher->setFuture(QtConcurrent::run([jobs = m_jobs->jobs()] {
        auto scan = std::make_shared<Scan>();
        scan->runs = finishedDecoderRuns(jobs);
        for (const VariantRun& run : scan->runs) {
            if (!QFileInfo::exists(run.stats)) {
                scan->missing << run.stats;
                continue;
            }
            try {
                scan->shown.append({run.name, readStatisticsFile(run.stats.toStdString())});
            } catch (const std::exception& e) {
                scan->unreadable << QStringLiteral("%1 (%2)").arg(run.name, QString::fromUtf8(e.what()));
            }
        }
        return scan;
    }));
}

void VariantComparisonDialog::showScan(const Scan& scan)
{
    QStringList waiting, failed = scan.unreadable;
    const QList<JobInfo> jobs = m_jobs->jobs();
    for (const VariantRun& run : scan.runs) {
        if (!scan.missing.contains(run.stats)) continue;
        const bool pending = std::any_of(jobs.begin(), jobs.end(), [&](const JobInfo& j) {
            return j.kind == QLatin1String("stats") && j.output == run.stats &&
                   (j.state == QLatin1String("queued") || j.state == QLatin1String("running"));
        });
        const auto failedJob = std::find_if(jobs.rbegin(), jobs.rend(), [&](const JobInfo& j) {
            return j.kind == QLatin1String("stats") && j.output == run.stats &&
                   j.state == QLatin1String("failed");
        });
        if (!pending && m_queued.contains(run.stats) && failedJob != jobs.rend()) {
            failed << QStringLiteral("%1 (statistics failed: %2)").arg(run.name, failedJob->message);
            continue;
        }
        if (!pending && !m_queued.contains(run.stats)) {
            m_jobs->queueStatistics(tr("statistics of %1 for the variant comparison").arg(run.name),
                                    {QStringLiteral("--model"), run.model, QStringLiteral("--data"), m_data},
                                    run.stats);
            m_queued << run.stats;
        }
        waiting << run.name;
    }
    m_chart->setData(buildVariantComparison(scan.shown));
    QStringList lines;
    if (scan.runs.isEmpty())
        lines << tr("No finished decoder training run yet: train the decoder task with several attention "
                    "variants (Attention: softmax, fixed-bias, …), then compare them here.");
    if (!waiting.isEmpty())
        lines << tr("Waiting for the statistics of %1 (queued on the Jobs page over %2).")
                     .arg(waiting.join(QStringLiteral(", ")), m_data);
    if (!failed.isEmpty()) lines << tr("Could not read: %1.").arg(failed.join(QStringLiteral("; ")));
    if (!scan.shown.isEmpty())
        lines << tr("Means over the text chunks of each run's statistics file (<run>/systematic-stats.h5); "
                    "the largest |h| of a layer is An et al.'s top-1 massive activation.");
    m_status->setText(lines.join(QLatin1Char('\n')));
}

} // namespace outlierlens
