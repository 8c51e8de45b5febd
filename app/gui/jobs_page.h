#pragma once
// GUI thread.

#include "page.h"

#include <QWidget>

class QComboBox;
class QDoubleSpinBox;
class QLineEdit;
class QSpinBox;
class QTableWidget;
class QPushButton;
class QLabel;

namespace outlierlens {

class JobManager;
class TrainingCharts;
class Figure;

/// Training runs and statistics runs as background jobs: a form to start one, the queue with
/// progress, live charts of the selected run (loss, evaluation metric, max inf norm and kurtosis
/// per layer), cancel, resume, and opening a finished model or statistics file in the views.
class JobsPage : public QWidget, public Page
{
    Q_OBJECT
public:
    JobsPage(JobManager* jobs, QWidget* parent = nullptr);
    const Figure* figure() const override;
    /// Queues a statistics run over `data` (mnli:FILE[:N], images:DIR[:N] or text:FILE[:N]) for `model`,
    /// counting outliers by `rule` (View > Outlier rule), which the file then records.
    void queueStatistics(const QString& model, const QString& data, const OutlierCriterion& rule);
    QPushButton* startButton() const { return m_start; }
    QPushButton* resumeButton() const { return m_resume; }
    QTableWidget* table() const { return m_table; }
    /// The checkpoint Open result opens for a stopped or failed run: the one status.json names as the last
    /// written, else the newest complete step-* folder; "" when there is none.
    static QString latestCheckpoint(const QString& runFolder);
    /// "40 s", "12 min", "2 h 5 min": a time estimate as the job list shows it.
    static QString durationText(double seconds);
    /// Selects a job's row (a new job is selected, so its progress and curves show at once).
    void selectJob(const QString& id);

Q_SIGNALS:
    void openModel(const QString& dir);
    void openStatistics(const QString& path);
    void failed(const QString& message);

private:
    void startTraining();
    void refreshTable();
    void selectionChanged();
    QString selectedId() const;

    JobManager* m_jobs;
    QComboBox* m_task = nullptr;
    QComboBox* m_size = nullptr;
    QComboBox* m_variant = nullptr;
    QDoubleSpinBox* m_alpha = nullptr;
    QDoubleSpinBox* m_piInit = nullptr;
    QSpinBox* m_steps = nullptr;
    QSpinBox* m_processes = nullptr; ///< --nproc-per-node: worker processes sharing each batch
    QComboBox* m_precision = nullptr;
    QLineEdit* m_name = nullptr;
    QPushButton* m_start = nullptr;
    QTableWidget* m_table = nullptr;
    QPushButton* m_cancel = nullptr;
    QPushButton* m_resume = nullptr;
    QPushButton* m_open = nullptr;
    QPushButton* m_remove = nullptr;
    QLabel* m_detail = nullptr;
    TrainingCharts* m_charts = nullptr;
};

} // namespace outlierlens
