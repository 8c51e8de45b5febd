#pragma once
// GUI thread.

#include "view_data.h"

#include <QDialog>
#include <QFutureWatcher>
#include <QVector>

#include <memory>

class QLabel;

namespace outlierlens {

class JobManager;
class LayerSeriesChart;
struct JobInfo;
struct StatisticsFile;

/// One trained decoder in An et al.'s comparison (their Figs 10/11): a finished training run, and the
/// statistics over text its chart reads.
struct VariantRun
{
    QString name;  ///< the job's title
    QString model; ///< <run>/final
    QString stats; ///< <run>/systematic-stats.h5
};

/// The finished training runs of decoder models among `jobs`, oldest first (reads each run's config.json).
QVector<VariantRun> finishedDecoderRuns(const QList<JobInfo>& jobs);

/// Their Figs 10/11 as one chart: per layer (1-based), the largest |h| and the median |h| of each run's
/// layer outputs, means over the text chunks of its statistics file (one series each, named
/// "<run>: top 1" and "<run>: median").
LayerSeriesData buildVariantComparison(const QVector<QPair<QString, StatisticsFile>>& runs);

/// "Compare variants": the chart of every finished decoder run whose statistics exist, queueing
/// `outlierlens stats` over the sample text for those without; it redraws as those jobs finish.
class VariantComparisonDialog : public QDialog
{
    Q_OBJECT
public:
    VariantComparisonDialog(JobManager* jobs, QString data, QWidget* parent = nullptr);
    LayerSeriesChart* chart() const { return m_chart; }
    /// What the dialog says about runs still waiting for their statistics (for tests).
    QString status() const;

    /// Reads every run's statistics file again, off the GUI thread, and redraws; queues the missing
    /// ones (once each). A reload asked for while one runs follows it.
    void reload();
    /// A reload is reading files.
    bool busy() const;

private:
    struct Scan;
    void showScan(const Scan& scan);

    JobManager* m_jobs;
    QString m_data;
    QStringList m_queued; ///< stats outputs this dialog queued
    LayerSeriesChart* m_chart = nullptr;
    QLabel* m_status = nullptr;
    QFutureWatcher<std::shared_ptr<Scan>>* m_watcher = nullptr;
    bool m_reloadAgain = false;
};

} // namespace outlierlens
