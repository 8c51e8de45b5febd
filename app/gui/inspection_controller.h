#pragma once
// GUI thread. Owns one InspectionWorker in its own QThread (ended by RAII: quit + wait) and keeps
// the GUI thread free of model and file work. Requests are coalesced: while the worker is busy only
// the newest request of each kind waits, and results of superseded requests are dropped (generation
// ids), so stepping quickly through inputs never queues stale work.

#include "inspection_snapshot.h"
#include "inspection_worker.h"

#include <QObject>
#include <QThread>

#include <functional>
#include <optional>

namespace outlierlens {

class InspectionController : public QObject
{
    Q_OBJECT
public:
    explicit InspectionController(QObject* parent = nullptr);
    ~InspectionController() override;

    void loadModel(const QString& dir);
    void inspectText(const QString& text, const QString& pair);
    void inspectImage(const QString& path, const QString& credit = {});
    void inspectSyntheticExample(quint64 seed);
    /// Predictions for a table of pairs; replaces (and cancels) any running prediction. progress()
    /// reports the pairs done.
    void predictPairs(const QStringList& premises, const QStringList& hypotheses);
    /// The running prediction continues at `row` (the first row the table shows) if not done yet.
    void preferPairRow(int row);
    /// Stops the running prediction after its current batch; rows not done stay empty.
    void stopPredictions();
    void loadStatistics(const QString& path);
    /// Fast mode (bf16) for the inspections asked for from now on; the caller reruns the input.
    void setFastMode(bool on);
    bool fastMode() const { return m_fastMode; }
    /// The outlier rule for the inspections asked for from now on; the caller reruns the input.
    void setOutlierRule(const OutlierCriterion& rule);
    const OutlierCriterion& outlierRule() const { return m_outlierRule; }
    /// The transform the inspections asked for from now on see the model through (none: as trained);
    /// emits transformChanged when it changes. The caller reruns the input.
    void setTransform(const ModelTransform& transform);
    const ModelTransform& transform() const { return m_transform; }
    /// The intervention the inspections asked for from now on apply (nullopt: none); emits
    /// interventionChanged. The caller reruns the input.
    void setIntervention(const std::optional<Intervention>& intervention);
    const std::optional<Intervention>& intervention() const { return m_intervention; }
    /// For a snapshot that ran with an intervention: the latest snapshot of the same model, input,
    /// transform, precision and outlier rule without one (what the pages draw it beside); null otherwise.
    SnapshotPtr originalOf(const SnapshotPtr& snapshot) const;

    /// The model loaded last (empty name before the first load succeeds).
    const ModelInfo& model() const { return m_model; }
    /// The folder of the latest loadModel() request, loaded or not yet: what the controller will hold.
    const QString& requestedModelDir() const { return m_requestedDir; }
    SnapshotPtr snapshot() const { return m_snapshot; }
    /// The statistics file shown for the current model: the last one opened for it (matched by
    /// checkpoint SHA-256), or one the user opened while this model was current. Null when none.
    StatisticsPtr statistics() const { return m_statistics; }
    QString statisticsPath() const { return m_statisticsPath; }
    /// Whether `stats` was computed on the current model's checkpoint.
    bool statisticsDescribeModel(const StatisticsFile& stats) const;
    bool busy() const { return m_busy; }
    /// A model load or an inspection is running or waiting (predictions for the pair table may still run).
    bool loadingOrInspecting() const
    {
        return m_inFlight.count(Kind::Model) || m_pending.count(Kind::Model) ||
               m_inFlight.count(Kind::Inspect) || m_pending.count(Kind::Inspect);
    }

Q_SIGNALS:
    void modelLoaded(const outlierlens::ModelInfo& info);
    void snapshotReady(const outlierlens::SnapshotPtr& snapshot);
    void predictionsReady(int firstRow, const QVector<int>& labels);
    /// A statistics file the user asked for was read (it becomes statistics()).
    void statisticsReady(const outlierlens::StatisticsPtr& statistics, const QString& path);
    /// statistics() changed because another model was loaded (null: none for this model).
    void statisticsChanged();
    void progress(qint64 done, qint64 total);
    /// A request failed; `message` names the file, tensor or input.
    void failed(const QString& message);
    /// A loadModel() failed (after failed()): model() is still the previous model.
    void modelLoadFailed();
    /// An inspection failed (after failed()): snapshot() is still the previous input's.
    void inspectFailed();
    void busyChanged(bool busy);
    /// setTransform() changed the transform.
    void transformChanged();
    /// setIntervention() changed the intervention.
    void interventionChanged();

private:
    enum class Kind { Model, Inspect, Predict, Statistics };
    /// Runs `request` on the worker now, or, while one of its kind runs (or, for any other kind, while
    /// a model load waits), keeps it as the pending request of that kind (replacing an older one).
    void submit(Kind kind, std::function<void(quint64)> request);
    void start(Kind kind, std::function<void(quint64)> request);
    void requestFinished(quint64 generation);
    bool wanted(Kind kind, quint64 generation) const;

    QThread m_thread;
    InspectionWorker* m_worker = nullptr; ///< lives in m_thread; deleted when the thread finishes
    quint64 m_next = 0;
    std::map<Kind, quint64> m_wanted;   ///< generation whose result is wanted, per kind
    std::map<Kind, quint64> m_inFlight; ///< generation running on the worker, per kind
    std::map<Kind, std::function<void(quint64)>> m_pending;
    bool m_busy = false;
    bool m_fastMode = false;
    OutlierCriterion m_outlierRule;
    ModelTransform m_transform;
    std::optional<Intervention> m_intervention;
    SnapshotPtr m_baseline;
    ModelInfo m_model;
    QString m_requestedDir;
    SnapshotPtr m_snapshot;
    StatisticsPtr m_statistics;
    QString m_statisticsPath;
    /// Statistics files opened in this session, by the checkpoint they were computed on.
    std::map<QString, std::pair<StatisticsPtr, QString>> m_statisticsByCheckpoint;
};

} // namespace outlierlens
