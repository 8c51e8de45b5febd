#include "inspection_controller.h"

#include "analysis/statistics_file.h"
#include "common/async_signals.h"

#include <QMetaObject>

namespace outlierlens {

InspectionController::InspectionController(QObject* parent)
    : QObject(parent)
{
    qRegisterMetaType<outlierlens::ModelInfo>();
    qRegisterMetaType<outlierlens::SnapshotPtr>();
    qRegisterMetaType<outlierlens::StatisticsPtr>();
    m_thread.setObjectName(QStringLiteral("inspection"));
    m_worker = new InspectionWorker;
    m_worker->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);

    connect(m_worker, &InspectionWorker::modelLoaded, this, [this](quint64 g, const ModelInfo& info) {
        if (!wanted(Kind::Model, g)) return;
        m_model = info;
        m_snapshot.reset();
        // Statistics belong to one checkpoint: another model's file is not shown for this one.
        const auto known = m_statisticsByCheckpoint.find(info.sha256);
        const bool keep = m_statistics && statisticsDescribeModel(*m_statistics);
        if (!keep) {
            m_statistics = known != m_statisticsByCheckpoint.end() ? known->second.first : nullptr;
            m_statisticsPath = known != m_statisticsByCheckpoint.end() ? known->second.second : QString();
        }
        Q_EMIT modelLoaded(info);
        if (!keep) Q_EMIT statisticsChanged();
    });
    connect(m_worker, &InspectionWorker::inspected, this, [this](quint64 g, const SnapshotPtr& s) {
        if (!wanted(Kind::Inspect, g) || s->model.dir != m_model.dir) return;
        m_snapshot = s;
        if (s->intervention.isEmpty()) m_baseline = s;
        Q_EMIT snapshotReady(s);
    });
    connect(m_worker, &InspectionWorker::predictionsReady, this,
            [this](quint64 g, int first, const QVector<int>& labels) {
                if (wanted(Kind::Predict, g)) Q_EMIT predictionsReady(first, labels);
            });
    connect(m_worker, &InspectionWorker::progress, this, [this](quint64 g, qint64 done, qint64 total) {
        if (wanted(Kind::Predict, g)) Q_EMIT progress(done, total);
    });
    connect(m_worker, &InspectionWorker::statisticsLoaded, this,
            [this](quint64 g, const StatisticsPtr& stats, const QString& path) {
                if (!wanted(Kind::Statistics, g)) return;
                m_statistics = stats;
                m_statisticsPath = path;
                const auto sha = stats->provenance.find("checkpoint_sha256");
                if (sha != stats->provenance.end() && !sha->second.empty())
                    m_statisticsByCheckpoint[QString::fromStdString(sha->second)] = {stats, path};
                Q_EMIT statisticsReady(stats, path);
            });
    connect(m_worker, &InspectionWorker::failed, this, [this](quint64 g, const QString& message) {
        for (const auto& [kind, generation] : m_wanted)
            if (generation == g) {
                if (kind == Kind::Model)
                    m_requestedDir = m_model.dir; // still the loaded one; asking again retries
                Q_EMIT failed(message);
                if (kind == Kind::Model) Q_EMIT modelLoadFailed();
                if (kind == Kind::Inspect) Q_EMIT inspectFailed();
                return;
            }
    });
    connect(m_worker, &InspectionWorker::requestFinished, this, &InspectionController::requestFinished);
    const AsyncSignalsBlocked blocked; // the worker computes: no signal handler may run on it (or its pool)
    m_thread.start();
}

InspectionController::~InspectionController()
{
    m_worker->cancelFlag() = true;
    m_thread.quit();
    m_thread.wait();
}

bool InspectionController::wanted(Kind kind, quint64 generation) const
{
    const auto it = m_wanted.find(kind);
    return it != m_wanted.end() && it->second == generation;
}

void InspectionController::submit(Kind kind, std::function<void(quint64)> request)
{
    // One request per kind on the worker; a newer one waits and replaces any older waiting one. A
    // request for the model (an input, predictions, statistics) also waits while a model load waits:
    // the worker runs requests in the order they are started, so started now it would run on the
    // model that is about to be replaced ("load a ViT model to run images" for an image sent right
    // after switching from a text model).
    if (m_inFlight.count(kind) || (kind != Kind::Model && m_pending.count(Kind::Model))) {
        m_pending[kind] = std::move(request);
        m_wanted[kind] = 0; // the running request's result is stale now
        return;
    }
    start(kind, std::move(request));
}

void InspectionController::start(Kind kind, std::function<void(quint64)> request)
{
    const quint64 generation = ++m_next;
    m_wanted[kind] = generation;
    m_inFlight[kind] = generation;
    if (!m_busy) Q_EMIT busyChanged(m_busy = true);
    QMetaObject::invokeMethod(
        m_worker, [request = std::move(request), generation] { request(generation); }, Qt::QueuedConnection);
}

void InspectionController::requestFinished(quint64 generation)
{
    for (auto it = m_inFlight.begin(); it != m_inFlight.end(); ++it) {
        if (it->second != generation) continue;
        m_inFlight.erase(it);
        break;
    }
    // Waiting requests whose kind is free, a waiting model load first (std::map orders Kind::Model
    // first): what waited for it is started after it, so the worker runs it on the new model.
    for (auto pending = m_pending.begin(); pending != m_pending.end();) {
        const Kind kind = pending->first;
        if (m_inFlight.count(kind) || (kind != Kind::Model && m_pending.count(Kind::Model))) {
            ++pending;
            continue;
        }
        auto request = std::move(pending->second);
        pending = m_pending.erase(pending);
        start(kind, std::move(request));
    }
    if (m_busy && m_inFlight.empty()) Q_EMIT busyChanged(m_busy = false);
}

void InspectionController::loadModel(const QString& dir)
{
    m_requestedDir = dir;
    m_worker->cancelFlag() = true; // stop a running prediction of the old model
    m_wanted[Kind::Predict] = 0;
    InspectionWorker* w = m_worker;
    submit(Kind::Model, [w, dir](quint64 g) { w->loadModel(g, dir); });
}

void InspectionController::inspectText(const QString& text, const QString& pair)
{
    InspectionWorker* w = m_worker;
    submit(Kind::Inspect, [w, text, pair](quint64 g) { w->inspectText(g, text, pair); });
}

void InspectionController::inspectImage(const QString& path, const QString& credit)
{
    InspectionWorker* w = m_worker;
    submit(Kind::Inspect, [w, path, credit](quint64 g) { w->inspectImage(g, path, credit); });
}

void InspectionController::inspectSyntheticExample(quint64 seed)
{
    InspectionWorker* w = m_worker;
    submit(Kind::Inspect, [w, seed](quint64 g) { w->inspectSyntheticExample(g, seed); });
}

void InspectionController::predictPairs(const QStringList& premises, const QStringList& hypotheses)
{
    m_worker->cancelFlag() = true; // the running one stops between batches...
    InspectionWorker* w = m_worker;
    submit(Kind::Predict, [w, premises, hypotheses](quint64 g) {
        w->cancelFlag() = false; // ...and this one starts with a clear flag, on the worker thread
        w->predictPairs(g, premises, hypotheses);
    });
}

void InspectionController::preferPairRow(int row)
{
    m_worker->priorityRow() = row;
}

void InspectionController::stopPredictions()
{
    m_worker->cancelFlag() = true;
}

void InspectionController::setFastMode(bool on)
{
    m_fastMode = on;
    // Queued on the worker's thread before any later request, so they all see it.
    InspectionWorker* w = m_worker;
    QMetaObject::invokeMethod(
        m_worker, [w, on] { w->setFastMode(on); }, Qt::QueuedConnection);
}

void InspectionController::setOutlierRule(const OutlierCriterion& rule)
{
    m_outlierRule = rule;
    InspectionWorker* w = m_worker;
    QMetaObject::invokeMethod(
        m_worker, [w, rule] { w->setOutlierRule(rule); }, Qt::QueuedConnection);
}

void InspectionController::setTransform(const ModelTransform& transform)
{
    if (transform == m_transform) return;
    m_transform = transform;
    InspectionWorker* w = m_worker;
    QMetaObject::invokeMethod(
        m_worker, [w, transform] { w->setTransform(transform); }, Qt::QueuedConnection);
    Q_EMIT transformChanged();
}

SnapshotPtr InspectionController::originalOf(const SnapshotPtr& snapshot) const
{
    if (!snapshot || snapshot->intervention.isEmpty() || !m_baseline) return nullptr;
    const InspectionSnapshot& b = *m_baseline;
    // The same run but for the intervention: input, model, transform, precision and outlier rule.
    const bool same = b.input == snapshot->input && b.model.dir == snapshot->model.dir &&
                      b.transform == snapshot->transform && b.precision == snapshot->precision &&
                      b.outlierRule.shortText() == snapshot->outlierRule.shortText();
    return same ? m_baseline : nullptr;
}

void InspectionController::setIntervention(const std::optional<Intervention>& intervention)
{
    m_intervention = intervention;
    InspectionWorker* w = m_worker;
    QMetaObject::invokeMethod(
        m_worker, [w, intervention] { w->setIntervention(intervention); }, Qt::QueuedConnection);
    Q_EMIT interventionChanged();
}

bool InspectionController::statisticsDescribeModel(const StatisticsFile& stats) const
{
    const auto sha = stats.provenance.find("checkpoint_sha256");
    return !m_model.sha256.isEmpty() && sha != stats.provenance.end() &&
           QString::fromStdString(sha->second) == m_model.sha256;
}

void InspectionController::loadStatistics(const QString& path)
{
    InspectionWorker* w = m_worker;
    submit(Kind::Statistics, [w, path](quint64 g) { w->loadStatistics(g, path); });
}

} // namespace outlierlens
