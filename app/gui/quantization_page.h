#pragma once
// GUI thread. The rows of `outlierlens quantize` for the current model (docs/quantization.md): each row is
// a job of the JobManager (a separate process, as training and statistics are), and its result file is
// read when the job ends; results of earlier sessions are shown again when the model is reopened.

#include "page.h"

#include <QHash>
#include <QJsonObject>
#include <QStringList>
#include <QVector>
#include <QWidget>

class QLabel;
class QPushButton;
class QTableWidget;
class QChartView;

namespace outlierlens {

class JobManager;

class QuantizationPage : public QWidget, public Page
{
    Q_OBJECT
public:
    /// One row: what it is called and the arguments it adds to quantize's.
    struct Row
    {
        QString name;
        QStringList arguments;
    };
    /// The rows every model gets: W8A8 per tensor (with the per-layer sensitivity), per token, after
    /// SmoothQuant 0.5, after the Hadamard rotation; W4A4 per token, rotated, with the first token in
    /// floating point. A model a transform does not apply to gets quantize's refusal in its row.
    static const QVector<Row>& rows();

    explicit QuantizationPage(JobManager* jobs, QWidget* parent = nullptr);

    void setModel(const ModelInfo& model) override;
    const Figure* figure() const override { return nullptr; }

    /// Appended to every row's quantize arguments (tests make the rows small: one seed, few batches).
    void setExtraArguments(const QStringList& arguments) { m_extraArguments = arguments; }
    /// Queues one job per row that has no result yet (the Compute button).
    void compute();
    QTableWidget* table() const { return m_table; }
    /// Row `row`'s result file, PREFIX.json (whether or not it exists yet).
    QString resultFile(int row) const;

private:
    void jobsChanged();
    void showRow(int row);
    void showSensitivity(const QJsonObject& result);

    JobManager* m_jobs;
    ModelInfo m_model;
    QString m_data; ///< quantize's --data and the arguments that go with it, for the caption
    QStringList m_dataArguments;
    QStringList m_extraArguments;
    QHash<int, QString> m_jobOfRow;
    QLabel* m_caption = nullptr;
    QPushButton* m_compute = nullptr;
    QTableWidget* m_table = nullptr;
    QChartView* m_sensitivity = nullptr;
};

} // namespace outlierlens
