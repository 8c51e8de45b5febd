#pragma once
// GUI thread. Owns one InspectionController for the model being taught.

#include "model_catalog.h"
#include "page.h"

#include <QWidget>

#include <memory>

class QComboBox;

namespace outlierlens {

class InspectionController;
class TeachingView;
class Figure;

/// The annotated attention block (Figures 4 and 5) with live numbers for a chosen token, layer and
/// head; switching between the vanilla, clipped and gated demo models shows the mechanism change.
class TeachingPage : public QWidget, public Page
{
    Q_OBJECT
public:
    explicit TeachingPage(QWidget* parent = nullptr);
    ~TeachingPage() override;

    void setCandidates(const QString& demoKind, const QString& currentModel);
    /// Offers the model and the demo trio of its kind; no input yet.
    void setModel(const ModelInfo& model) override
    {
        setInput({});
        setCandidates(ModelCatalog::demoKindOf(model.dir), model.dir);
    }
    void setInput(const InputRequest& input) override;
    void setOutlierRule(const OutlierCriterion& rule) override;
    /// The input the page shows (or will run when shown).
    const InputRequest& input() const { return m_input; }
    void setSelection(int layer, int head) override;
    const Figure* figure() const override;
    TeachingView* view() const { return m_view; }

Q_SIGNALS:
    void failed(const QString& message);

protected:
    void showEvent(QShowEvent* event) override;

private:
    void modelChosen();
    void rebuild();

    QComboBox* m_model = nullptr;
    QComboBox* m_token = nullptr;
    TeachingView* m_view = nullptr;
    std::unique_ptr<InspectionController> m_controller;
    SnapshotPtr m_snapshot;
    InputRequest m_input;
    OutlierCriterion m_outlierRule;
    bool m_inputPending = false;
    int m_layer = 0, m_head = 0;
};

} // namespace outlierlens
