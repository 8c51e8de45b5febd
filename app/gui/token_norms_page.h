#pragma once
// GUI thread.

#include "page.h"
#include "token_norm_view.h"

namespace outlierlens {

class InspectionController;

/// The Token norms page (models that take images): Darcet et al.'s view of the current image, i.e. the
/// norm of every token of the chosen layer's block output, the high-norm tokens, the class token's
/// attention in the last layer per head and, when the controller holds statistics of this model, the data
/// set's norm histogram.
class TokenNormsPage : public TokenNormView, public Page
{
    Q_OBJECT
public:
    explicit TokenNormsPage(InspectionController* controller, QWidget* parent = nullptr);

    bool showsModel(const ModelInfo& model) const override { return model.takesImages(); }
    void refresh(const PageState& state) override;
    const Figure* figure() const override { return this; }

private:
    InspectionController* m_controller;
};

} // namespace outlierlens
