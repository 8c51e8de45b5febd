#pragma once
// GUI thread. Owns one InspectionController (one worker thread) per compared model.

#include "model_catalog.h"
#include "page.h"

#include <QWidget>

#include <array>
#include <memory>

class QCheckBox;
class QComboBox;
class QStackedWidget;

namespace outlierlens {

class CompareView;
class TokenNormView;
class InspectionController;
class Figure;

/// Two or three models side by side on the same input, layer and head: by default the vanilla,
/// clipped-softmax and gated demo models of the current model's kind.
class ComparePage : public QWidget, public Page
{
    Q_OBJECT
public:
    explicit ComparePage(QWidget* parent = nullptr);
    ~ComparePage() override;

    /// Offers the demo trio of the given kind first; keeps the user's choice otherwise.
    void setCandidates(const QString& demoKind);
    /// Offers the demo trio of the model's kind (of its family for a model of one's own); no input yet.
    /// For an image model, also offers the token norms of each model (Darcet et al.).
    void setModel(const ModelInfo& model) override;
    /// Runs `input` on every chosen model (when the page is visible; otherwise on showing it).
    void setInput(const InputRequest& input) override;
    void setOutlierRule(const OutlierCriterion& rule) override;
    /// The input the page shows (or will run when shown).
    const InputRequest& input() const { return m_input; }
    void setSelection(int layer, int head) override;
    const Figure* figure() const override;

Q_SIGNALS:
    void failed(const QString& message);

protected:
    void showEvent(QShowEvent* event) override;

private:
    void modelChosen(int slot);
    void rebuild();

    std::array<QComboBox*, 3> m_pickers{};
    std::array<std::unique_ptr<InspectionController>, 3> m_controllers;
    std::array<SnapshotPtr, 3> m_snapshots;
    CompareView* m_view = nullptr;
    TokenNormView* m_norms = nullptr; ///< image models: Darcet et al.'s token norms of each model
    QCheckBox* m_normsCheck = nullptr;
    QStackedWidget* m_stack = nullptr;
    InputRequest m_input;
    OutlierCriterion m_outlierRule;
    bool m_inputPending = false;
    int m_layer = 0, m_head = 0;
};

} // namespace outlierlens
