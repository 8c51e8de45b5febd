#pragma once
// GUI thread.

#include "page.h"

#include <QWidget>

class QComboBox;
class QLabel;
class QPushButton;

namespace outlierlens {

class InspectionController;
class OutlierDashboard;
class Figure;
class TransformBox;
struct StatisticsFile;

/// The outlier dashboard with its controls: which tensor, and whether the counts come from the
/// current input or from a data-set statistics file.
class OutliersPage : public QWidget, public Page
{
    Q_OBJECT
public:
    OutliersPage(InspectionController* controller, QWidget* parent = nullptr);

    /// Rebuilds the dashboard for `layer` (0-based) from the current source.
    void refresh(const SnapshotPtr& snapshot, int layer);
    /// A model was opened: the tensor shown becomes defaultOutlierTensor(model).
    void setModel(const ModelInfo& model) override;
    void refresh(const PageState& state) override { refresh(state.snapshot, state.layer); }
    /// The tensor choice: a per-layer tensor's name (InspectionSnapshot::perLayerNames()) or `in`
    /// (resolveOutlierTensor).
    QString tensor() const;
    OutlierDashboard* dashboard() const { return m_dashboard; }
    void showSource(bool statisticsFile) override;
    const Figure* figure() const override;
    /// The source list ("Current input", and the statistics file of this model if any) and the note
    /// above the dashboard (for tests).
    QComboBox* sourceBox() const { return m_source; }
    /// "Seen through" (for tests).
    TransformBox* transformBox() const { return m_transform; }
    QString note() const;

Q_SIGNALS:
    /// A hidden dimension (0-based) was clicked in the dashboard.
    void dimensionClicked(int dimension);
    /// A context menu was asked for on dimension `dimension` of the tensor the dashboard shows (`tensor`
    /// of `layer`, 0-based).
    void dimensionMenuRequested(int layer, const QString& tensor, int dimension, const QPoint& globalPos);
    /// The user asks for statistics of the current model over a data set (queued as a job).
    void statisticsRequested();

private:
    InspectionController* m_controller;
    QComboBox* m_source = nullptr;
    QComboBox* m_tensor = nullptr;
    TransformBox* m_transform = nullptr;
    QLabel* m_note = nullptr;
    OutlierDashboard* m_dashboard = nullptr;
    SnapshotPtr m_snapshot;
    int m_layer = 0;
};

} // namespace outlierlens
