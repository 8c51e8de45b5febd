#include "job_manager.h"

#include "tasks/config/train_config.h"
#include "train/job_progress.h"
#include "train/run_folder.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSettings>
#include <QtConcurrent>

#include <cmath>
#include <csignal>
#include <optional>
#include <sys/types.h>

namespace outlierlens {
namespace {

QJsonObject toJson(const JobInfo& j)
{
    return {{"id", j.id},
            {"kind", j.kind},
            {"title", j.title},
            {"arguments", QJsonArray::fromStringList(j.arguments)},
            {"folder", j.folder},
            {"output", j.output},
            {"log", j.logFile},
            {"pid", j.pid},
            {"started", j.started.toString(Qt::ISODate)},
            {"state", j.state},
            {"step", j.step},
            {"total", j.total},
            {"message", j.message}};
}

JobInfo fromJson(const QJsonObject& o)
{
    JobInfo j;
    j.id = o["id"].toString();
    j.kind = o["kind"].toString();
    j.title = o["title"].toString();
    for (const auto& a : o["arguments"].toArray())
        j.arguments << a.toString();
    j.folder = o["folder"].toString();
    j.output = o["output"].toString();
    j.logFile = o["log"].toString();
    j.pid = o["pid"].toInteger();
    j.started = QDateTime::fromString(o["started"].toString(), Qt::ISODate);
    j.state = o["state"].toString();
    j.step = o["step"].toInteger();
    j.total = o["total"].toInteger();
    j.message = o["message"].toString();
    return j;
}

/// True if `pid` is a live outlierlens process (not a reused pid of something else).
bool processAlive(qint64 pid)
{
    if (pid <= 0 || ::kill(pid_t(pid), 0) != 0) return false;
    QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(pid));
    if (!cmdline.open(QIODevice::ReadOnly)) return true;
    return cmdline.readAll().contains("outlierlens");
}

/// The last non-empty line of a job's log (its result or its error), for the job's message.
QString lastLine(const QString& path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) return {};
    const qint64 size = file.size();
    file.seek(std::max<qint64>(0, size - 8192));
    const QList<QByteArray> lines = file.readAll().split('\n');
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        // Progress bars redraw with carriage returns: take the last segment.
        const QString line = QString::fromUtf8(it->split('\r').last()).trimmed();
        if (!line.isEmpty()) return line;
    }
    return {};
}

/// The job's own estimate of the seconds it has left, from the last progress line of its log; -1 if none.
double secondsLeft(const QString& logFile)
{
    const std::optional<JobProgress> progress = lastProgressIn(logFile.toStdString());
    return progress && std::isfinite(progress->eta) ? progress->eta : -1;
}

/// A training job's state from its run folder: running while a trainer holds the folder's lock
/// (whoever started it; or while the process the app started is still starting up), else what
/// status.json says.
void updateTraining(JobInfo& j)
{
    const RunFolder run(j.folder.toStdString());
    const qint64 owner = runFolderOwner(run.dir());
    if (owner > 0) j.pid = owner;
    const bool alive = owner > 0 || (j.state == QLatin1String("running") && processAlive(j.pid));
    if (!alive && j.state != QLatin1String("running")) return; // stopped, failed, finished: as recorded
    if (const std::optional<RunStatus> s = run.readStatus()) {
        j.step = s->step;
        j.total = s->total;
        const QString state = QString::fromStdString(s->state);
        j.message = QString::fromStdString(s->message);
        if (alive)
            j.state = QStringLiteral("running"); // status.json may still hold the last run's end
        else if (state == QLatin1String("running") || state == QLatin1String("starting"))
            j.state = QStringLiteral("stopped");
        else
            j.state = state;
        if (alive) j.message.clear();
        // The trainer's progress lines (stdout, in the job's log) carry its own estimate.
        j.secondsLeft = -1;
        if (alive) j.secondsLeft = secondsLeft(j.logFile);
        if (!alive && j.state == QLatin1String("stopped") && j.message.isEmpty())
            j.message = QStringLiteral(
                "the process ended without finishing (killed?); resume continues from the last checkpoint");
    } else if (!alive) {
        j.state = QStringLiteral("failed");
        j.message = lastLine(j.logFile + QStringLiteral(".err"));
    } else {
        j.state = QStringLiteral("running");
    }
}

/// A statistics or figures job's progress from its JSON progress lines (`--json-progress`, the same
/// protocol as training), its state from its process and output file.
void updateCommand(JobInfo& j, bool alive)
{
    const std::optional<JobProgress> progress = lastProgressIn(j.logFile.toStdString());
    if (progress) {
        j.step = progress->step;
        j.total = progress->total;
    }
    j.secondsLeft = alive && progress && std::isfinite(progress->eta) ? progress->eta : -1;
    if (alive) {
        j.state = QStringLiteral("running");
    } else if (QFileInfo::exists(j.output)) {
        j.state = QStringLiteral("finished");
        j.message = lastLine(j.logFile);
    } else {
        j.state = QStringLiteral("failed");
        j.message = lastLine(j.logFile + QStringLiteral(".err"));
    }
}

} // namespace

QJsonObject readJobResult(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

QString metricText(double value, const QString& metric)
{
    return metric == QLatin1String("accuracy") ? QString::number(100.0 * value, 'f', 2) + QLatin1Char('%')
                                               : QString::number(value, 'f', 3);
}

TrainingCurveData readTrainingCurves(const QString& runFolder)
{
    TrainingCurveData c;
    c.name = QFileInfo(runFolder).fileName();
    const auto toQt = [](const std::vector<double>& values) {
        return QVector<double>(values.begin(), values.end());
    };
    const auto perLayer = [&](const std::map<std::string, std::vector<double>>& tensors,
                              const std::string& name) {
        const auto it = tensors.find(name);
        return it == tensors.end() ? QVector<double>() : toQt(it->second);
    };
    const RunFolder run(runFolder.toStdString());
    // The run's figure tensor (BERT's FFN output, the block output of ViT and decoders); the block
    // output, which every task tracks, when run.json cannot be read.
    std::string tensor = pointName(CapturePoint::Out);
    try {
        if (const std::optional<TrainConfig> config = run.readConfig())
            tensor = pointName(figureTensorOf(config->task));
    } catch (const std::exception&) {
    }
    for (const MetricsLine& line : run.readMetrics()) {
        const double step = double(line.step);
        if (line.eval) {
            if (line.metricName.empty()) continue;
            c.evalName = QString::fromStdString(line.metricName);
            c.evalSteps << step;
            c.evalValue << line.metric;
            c.maxInfNorm << perLayer(line.maxInfNorm, tensor);
            c.kurtosis << perLayer(line.kurtosis, tensor);
            if (!line.firstTokenAttention.empty()) {
                QVector<double> largest; // per layer, its most sinking head
                for (const std::vector<double>& heads : line.firstTokenAttention)
                    largest << (heads.empty() ? std::nan("") : *std::max_element(heads.begin(), heads.end()));
                c.firstTokenAttention << largest;
            }
        } else {
            c.steps << step;
            c.loss << line.loss;
        }
    }
    return c;
}

JobManager::JobManager(QString program, QString jobsDir, QObject* parent)
    : QObject(parent)
    , m_program(std::move(program))
    , m_jobsDir(std::move(jobsDir))
{
    QDir().mkpath(m_jobsDir);
    load();
    connect(&m_watcher, &QFutureWatcher<Poll>::finished, this, &JobManager::pollDone);
    connect(&m_timer, &QTimer::timeout, this, &JobManager::refresh);
    m_timer.start(1000);
    refresh();
}

JobManager::~JobManager()
{
    m_timer.stop();
    m_watcher.waitForFinished(); // the poll reads files only; it ends quickly
    save();
}

const JobInfo* JobManager::job(const QString& id) const
{
    for (const JobInfo& j : m_jobs)
        if (j.id == id) return &j;
    return nullptr;
}

QString JobManager::newId() const
{
    return QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyyMMdd-HHmmss-zzz"));
}

QString JobManager::queueTraining(const QString& title, const QString& runJson, const QString& runFolder,
                                  int processes)
{
    JobInfo j;
    j.id = newId();
    j.kind = QStringLiteral("train");
    j.title = title;
    const QString config = m_jobsDir + QStringLiteral("/") + j.id + QStringLiteral(".json");
    QFile file(config);
    if (file.open(QIODevice::WriteOnly)) file.write(runJson.toUtf8());
    j.arguments = {QStringLiteral("train"), QStringLiteral("--config"), config, QStringLiteral("--output"),
                   runFolder};
    if (processes > 1) j.arguments << QStringLiteral("--nproc-per-node") << QString::number(processes);
    j.folder = runFolder;
    j.output = runFolder + QStringLiteral("/final");
    j.logFile = m_jobsDir + QStringLiteral("/") + j.id + QStringLiteral(".log");
    m_jobs << j;
    save();
    startNext();
    Q_EMIT jobsChanged();
    return j.id;
}

QString JobManager::queueStatistics(const QString& title, const QStringList& arguments, const QString& output)
{
    return queueCommand(QStringLiteral("stats"), title,
                        arguments + QStringList{QStringLiteral("--out"), output},
                        QFileInfo(output).absolutePath(), output);
}

QString JobManager::queueFigures(const QString& title, const QStringList& arguments, const QString& folder)
{
    return queueCommand(QStringLiteral("figures"), title,
                        arguments + QStringList{QStringLiteral("--out"), folder}, folder,
                        folder + QStringLiteral("/index.html"));
}

QString JobManager::queueQuantize(const QString& title, const QStringList& arguments, const QString& prefix)
{
    return queueCommand(QStringLiteral("quantize"), title,
                        arguments + QStringList{QStringLiteral("--out"), prefix},
                        QFileInfo(prefix).absolutePath(), prefix + QStringLiteral(".json"));
}

QString JobManager::queueIntervene(const QString& title, const QStringList& arguments, const QString& prefix)
{
    return queueCommand(QStringLiteral("intervene"), title,
                        arguments + QStringList{QStringLiteral("--out"), prefix},
                        QFileInfo(prefix).absolutePath(), prefix + QStringLiteral(".json"));
}

QString JobManager::queueCommand(const QString& kind, const QString& title, const QStringList& arguments,
                                 const QString& folder, const QString& output)
{
    JobInfo j;
    j.id = newId();
    j.kind = kind;
    j.title = title;
    // Progress as JSON lines on stdout (the log), read like a training run's.
    j.arguments = QStringList{kind, QStringLiteral("--json-progress")} + arguments;
    j.folder = folder;
    j.output = output;
    j.logFile = m_jobsDir + QStringLiteral("/") + j.id + QStringLiteral(".log");
    m_jobs << j;
    save();
    startNext();
    Q_EMIT jobsChanged();
    return j.id;
}

void JobManager::startNext()
{
    for (const JobInfo& j : m_jobs)
        if (j.state == QLatin1String("running")) return;
    for (JobInfo& j : m_jobs) {
        if (j.state != QLatin1String("queued")) continue;
        QProcess process;
        process.setProgram(m_program);
        process.setArguments(j.arguments);
        process.setStandardOutputFile(j.logFile, QIODevice::Append);
        process.setStandardErrorFile(j.logFile + QStringLiteral(".err"), QIODevice::Append);
        process.setStandardInputFile(QProcess::nullDevice());
        if (process.startDetached(&j.pid)) {
            j.state = QStringLiteral("running");
            j.started = QDateTime::currentDateTime();
        } else {
            j.state = QStringLiteral("failed");
            j.message = QStringLiteral("cannot start %1").arg(m_program);
        }
        save();
        return;
    }
}

void JobManager::cancel(const QString& id)
{
    for (JobInfo& j : m_jobs) {
        if (j.id != id) continue;
        if (j.state == QLatin1String("queued")) {
            j.state = QStringLiteral("stopped");
            j.message = QStringLiteral("cancelled before it started");
        } else if (processAlive(j.pid)) {
            ::kill(pid_t(j.pid), SIGTERM);
        }
    }
    save();
    Q_EMIT jobsChanged();
}

QString JobManager::resume(const QString& id)
{
    QString refusal;
    for (JobInfo& j : m_jobs) {
        if (j.id != id || j.kind != QLatin1String("train")) continue;
        if (const qint64 owner = runFolderOwner(j.folder.toStdString())) {
            // Someone is training in this folder already: show that run instead of starting another.
            j.state = QStringLiteral("running");
            j.pid = owner;
            j.message.clear();
            refusal = tr("%1 is being trained already (process %2): wait for it or cancel it.")
                          .arg(QFileInfo(j.folder).fileName())
                          .arg(owner);
        } else if (j.state == QLatin1String("stopped") || j.state == QLatin1String("failed")) {
            j.arguments = {QStringLiteral("train"), QStringLiteral("--resume"), QStringLiteral("--output"),
                           j.folder};
            // A group resumes as a group: as many processes as run.json records.
            std::optional<TrainConfig> recorded;
            try {
                recorded = RunFolder(j.folder.toStdString()).readConfig();
            } catch (const std::exception&) {
                // a malformed run.json: `train --resume` says so in the job's message
            }
            if (recorded && recorded->worldSize > 1)
                j.arguments << QStringLiteral("--nproc-per-node") << QString::number(recorded->worldSize);
            j.state = QStringLiteral("queued");
            j.message.clear();
        }
    }
    save();
    startNext();
    Q_EMIT jobsChanged();
    return refusal;
}

void JobManager::remove(const QString& id)
{
    m_jobs.erase(
        std::remove_if(m_jobs.begin(), m_jobs.end(),
                       [&](const JobInfo& j) { return j.id == id && j.state != QLatin1String("running"); }),
        m_jobs.end());
    m_curves.remove(id);
    save();
    Q_EMIT jobsChanged();
}

void JobManager::refresh()
{
    if (m_watcher.isRunning()) return;
    m_watcher.setFuture(QtConcurrent::run(&JobManager::poll, m_jobs));
}

JobManager::Poll JobManager::poll(QList<JobInfo> jobs)
{
    Poll result;
    result.before = jobs;
    for (JobInfo& j : jobs) {
        if (j.kind == QLatin1String("train")) {
            if (j.state != QLatin1String("queued") && j.state != QLatin1String("finished")) updateTraining(j);
        } else if (j.state == QLatin1String("running")) {
            updateCommand(j, processAlive(j.pid));
        }
        if (j.kind == QLatin1String("train") &&
            (j.state == QLatin1String("running") || !result.curves.contains(j.id)))
            result.curves.insert(j.id, readTrainingCurves(j.folder));
    }
    result.jobs = jobs;
    return result;
}

void JobManager::pollDone()
{
    const Poll result = m_watcher.result();
    bool changed = false;
    for (int i = 0; i < result.jobs.size(); ++i) {
        const JobInfo& before = result.before[i];
        const JobInfo& updated = result.jobs[i];
        for (JobInfo& j : m_jobs) {
            // A job started, resumed or cancelled while the poll ran keeps what the app did since.
            if (j.id != updated.id || j.state != before.state || j.pid != before.pid ||
                j.arguments != before.arguments)
                continue;
            const bool ended = before.state == QLatin1String("running") && updated.state != before.state;
            changed |= j.step != updated.step || j.state != updated.state || j.total != updated.total ||
                       j.pid != updated.pid || j.message != updated.message;
            j = updated;
            if (ended) Q_EMIT jobFinished(j.id);
        }
    }
    for (auto it = result.curves.begin(); it != result.curves.end(); ++it)
        if (m_curves.value(it.key()).steps.size() != it.value().steps.size() ||
            !m_curves.contains(it.key())) {
            m_curves.insert(it.key(), it.value());
            Q_EMIT curvesChanged(it.key());
        }
    if (changed) {
        save();
        startNext();
        Q_EMIT jobsChanged();
    }
}

void JobManager::save() const
{
    QJsonArray array;
    for (const JobInfo& j : m_jobs)
        array << toJson(j);
    QSettings().setValue(QStringLiteral("jobs/list"),
                         QString::fromUtf8(QJsonDocument(array).toJson(QJsonDocument::Compact)));
}

void JobManager::load()
{
    const QJsonArray array =
        QJsonDocument::fromJson(QSettings().value(QStringLiteral("jobs/list")).toString().toUtf8()).array();
    for (const auto& v : array)
        m_jobs << fromJson(v.toObject());
}

} // namespace outlierlens
