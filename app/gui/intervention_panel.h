#pragma once
// GUI thread.

#include "inspection_snapshot.h"
#include "paper_tables.h"
#include "quant/intervention_spec.h"

#include <QFrame>
#include <QJsonObject>

#include <optional>

class QAction;
class QLabel;
class QMenu;
class QPushButton;
class QTableWidget;

namespace outlierlens {

class InspectionController;
class JobManager;

/// The intervention that is on (issue #43; docs/interventions.md, "In the app"), shown above the pages
/// while one is set: what it does, the current input's prediction before and after, the same model
/// measured over its data (an `outlierlens intervene` job), and, per layer, the intervened activations
/// beside the original ones (max |x|, kurtosis and outlier count of the tensor intervened on). The menus
/// the pages open on a right click come from here, so that every page offers the same choices.
class InterventionPanel : public QFrame
{
    Q_OBJECT
public:
    InterventionPanel(InspectionController* controller, JobManager* jobs, QWidget* parent = nullptr);

    /// Sets `intervention` on the open model: the input reruns with it at once (a mean, once the job has
    /// collected it over the model's data) and a job measures it over the model's data (its result is reused
    /// when the same intervention was measured before; no job while the model is seen through a transform,
    /// whose dimensions `intervene` does not have).
    void apply(const Intervention& intervention);
    /// No intervention: the input reruns as the model computes it.
    void clear();
    /// A model was opened: any intervention ends (it named another model's layers and dimensions).
    void setModel(const ModelInfo& model);
    /// A snapshot arrived: the comparison with the baseline is redrawn.
    void showSnapshot(const SnapshotPtr& snapshot);

    /// The right-click menu on hidden dimension `dimension` of `tensor` (attn_out, ffn_out, out) of
    /// `layer` in `snapshot`: zero it, set it to its data-set mean or to a value, at every token or at the
    /// tokens carrying its outliers. The caller owns the menu.
    QMenu* dimensionMenu(const InspectionSnapshot& snapshot, int layer, const QString& tensor, int dimension,
                         QWidget* parent);
    /// The right-click menu on key column `key` of head `head` in `layer` (the Head page's attention):
    /// remove the key from the head's (or every head's) attention, renormalised or not; ablate the head;
    /// set that token's block output to 0 or to its data-set mean; for a gated model, force the head's
    /// gates open or shut.
    QMenu* headMenu(const InspectionSnapshot& snapshot, int layer, int head, int key, QWidget* parent);

    /// For tests: the lines the panel shows, and the job result it read (empty before).
    QString text() const;
    const QJsonObject& result() const { return m_result; }
    QTableWidget* comparison() const { return m_table; }

Q_SIGNALS:
    /// A job was queued (its id) for the Jobs page.
    void jobQueued(const QString& id);

private:
    /// An action of `menu` that applies `intervention`; a mean's is disabled, with the reason, for a model
    /// without data to take it over.
    QAction* addIntervention(QMenu* menu, const QString& text, const Intervention& intervention);
    void jobFinished(const QString& id);
    void readResult();
    void redraw();
    /// The result file of `intervention` on the open model (in the jobs folder).
    QString resultPrefix(const Intervention& intervention) const;

    InspectionController* m_controller;
    JobManager* m_jobs;
    ModelInfo m_model;
    std::optional<QuantDataChoice> m_taskData;  ///< the model's own task data (quantDataFor), if any
    QString m_taskDataWhy;                      ///< why there is none
    std::optional<Intervention> m_intervention; ///< as asked for (a mean without its means until the job)
    QString m_jobId;
    QString m_prefix;
    QString m_jobError;
    QJsonObject m_result;
    SnapshotPtr m_snapshot;
    QLabel* m_title = nullptr;
    QLabel* m_input = nullptr;
    QLabel* m_data = nullptr;
    QTableWidget* m_table = nullptr;
};

/// The tensors an intervention can set per dimension (`intervene --tensor`): attn_out, ffn_out, out.
bool interventionTakesDimensions(const QString& tensor);

} // namespace outlierlens
