#pragma once
// GUI thread. Training runs and statistics runs are separate `outlierlens` processes (DESIGN.md),
// started detached so that they survive closing the window; the registry of jobs is kept in
// QSettings, so a reopened app shows runs still going and finished ones. Progress comes from the
// files the processes write, read on a worker thread with the backend's readers of those formats:
// the run folder (train/run_folder.h: status.json, metrics.jsonl, lock) and the JSON progress lines
// both commands print into their logs (train/job_progress.h).

#include "view_data.h"

#include <QDateTime>
#include <QFutureWatcher>
#include <QHash>
#include <QJsonObject>
#include <QObject>
#include <QStringList>
#include <QTimer>

namespace outlierlens {

struct JobInfo
{
    QString id;
    QString kind; ///< "train", "stats", "figures", "quantize" or "intervene"
    QString title;
    QStringList arguments; ///< of `outlierlens`, e.g. {"train", "--config", ...}
    QString folder;        ///< train: the run folder; stats: the folder of the output file
    QString output;        ///< stats: the output file; train: <run>/final
    QString logFile;
    qint64 pid = 0;
    QDateTime started;
    QString state = QStringLiteral("queued"); ///< queued, running, finished, stopped, diverged, failed
    qint64 step = 0, total = 0;
    QString message;
    double secondsLeft =
        -1; ///< running jobs: the program's own estimate (training) or from its rate; -1 unknown
};

class JobManager : public QObject
{
    Q_OBJECT
public:
    /// `program` is the outlierlens executable (this one, normally); `jobsDir` holds logs and
    /// generated configs.
    JobManager(QString program, QString jobsDir, QObject* parent = nullptr);
    ~JobManager() override;

    QList<JobInfo> jobs() const { return m_jobs; }
    const JobInfo* job(const QString& id) const;

    /// Queues `outlierlens train` with a run configuration (JSON text, written into the jobs
    /// folder). Jobs run one at a time, in order: two busy processes on two cores slow each other
    /// down many times over. With `processes` > 1 the job is one `train --nproc-per-node` launcher whose
    /// workers share each batch (the run JSON's world_size must say the same).
    QString queueTraining(const QString& title, const QString& runJson, const QString& runFolder,
                          int processes = 1);
    /// Queues `outlierlens stats` with the given arguments (without "stats") writing `output`.
    QString queueStatistics(const QString& title, const QStringList& arguments, const QString& output);
    /// Queues `outlierlens figures` with the given arguments (without "figures" and --out) into
    /// `folder`; it has finished when <folder>/index.html exists (the command writes it last).
    QString queueFigures(const QString& title, const QStringList& arguments, const QString& folder);
    /// Queues `outlierlens quantize` with the given arguments (without "quantize" and --out), writing
    /// PREFIX.json and PREFIX.csv; it has finished when PREFIX.json exists.
    QString queueQuantize(const QString& title, const QStringList& arguments, const QString& prefix);
    /// The same for `outlierlens intervene` (PREFIX.json).
    QString queueIntervene(const QString& title, const QStringList& arguments, const QString& prefix);
    /// The folder of the jobs' logs and generated files.
    QString jobsDir() const { return m_jobsDir; }
    /// SIGTERM: a training run saves a checkpoint and stops; a statistics run stops without output.
    void cancel(const QString& id);
    /// Queues `outlierlens train --resume` for a stopped or interrupted run. Returns why not ("" when
    /// queued): a trainer already writing the run folder (its lock, whoever started it) is never
    /// joined by a second one.
    QString resume(const QString& id);
    /// Forgets a job that is not running (its files stay).
    void remove(const QString& id);

    /// The training curves of a run, as last read (empty if none).
    TrainingCurveData curves(const QString& id) const { return m_curves.value(id); }

    /// Reads every job's files now (on a worker thread); jobsChanged follows.
    void refresh();

Q_SIGNALS:
    void jobsChanged();
    void curvesChanged(const QString& id);
    void jobFinished(const QString& id);

private:
    struct Poll
    {
        QList<JobInfo> before; ///< the jobs as the poll found them: updates apply only if unchanged since
        QList<JobInfo> jobs;
        QHash<QString, TrainingCurveData> curves;
    };
    static Poll poll(QList<JobInfo> jobs);
    void pollDone();
    void startNext();
    void save() const;
    void load();
    QString newId() const;
    /// A job of a command with JSON progress lines that is done when `output` exists (stats, figures).
    QString queueCommand(const QString& kind, const QString& title, const QStringList& arguments,
                         const QString& folder, const QString& output);

    QString m_program;
    QString m_jobsDir;
    QList<JobInfo> m_jobs;
    QHash<QString, TrainingCurveData> m_curves;
    QTimer m_timer;
    QFutureWatcher<Poll> m_watcher;
};

/// A command job's result file (`quantize` or `intervene`'s PREFIX.json) as JSON; empty when it is
/// missing or unreadable.
QJsonObject readJobResult(const QString& path);
/// A task metric as the job pages show it: accuracy in percent with 2 decimals, anything else with 3.
QString metricText(double value, const QString& metric);

/// Parses a run's metrics.jsonl (progress and evaluation lines) into curves.
TrainingCurveData readTrainingCurves(const QString& runFolder);

} // namespace outlierlens
