#pragma once
// GUI thread.

#include "page.h"

#include <QWidget>

class QComboBox;
class QLabel;

namespace outlierlens {

class InspectionController;
class SystematicView;
class Figure;
class TransformBox;

/// An et al. 2025's systematic outliers (their Figures 1, 3-6 and Table 1) for the chosen layer of any
/// model (decoders, BERT, ViT): from the current input, or over a data set from the model's statistics
/// file.
class SystematicPage : public QWidget, public Page
{
    Q_OBJECT
public:
    explicit SystematicPage(InspectionController* controller, QWidget* parent = nullptr);

    bool showsModel(const ModelInfo& model) const override { return model.isOpen(); }
    void setModel(const ModelInfo& model) override;
    void refresh(const PageState& state) override;
    void showSource(bool statisticsFile) override;
    const Figure* figure() const override;
    SystematicView* view() const { return m_view; }
    /// "Current input", and the open model's statistics file when there is one (for tests).
    QComboBox* sourceBox() const { return m_source; }
    /// "Seen through" (for tests).
    TransformBox* transformBox() const { return m_transform; }
    QString note() const;

Q_SIGNALS:
    /// A channel (0-based) of the layer output h was clicked.
    void channelClicked(int channel);
    /// A key token (0-based) of the head-mean attention was clicked.
    void keyClicked(int key);
    /// A head (0-based) of the table was clicked.
    void headClicked(int head);
    /// The user asks for statistics of the current model over a data set (queued as a job).
    void statisticsRequested();

private:
    void rebuild();

    InspectionController* m_controller;
    QComboBox* m_source = nullptr;
    TransformBox* m_transform = nullptr;
    QLabel* m_note = nullptr;
    SystematicView* m_view = nullptr;
    SnapshotPtr m_snapshot;
    int m_layer = 0;
};

} // namespace outlierlens
