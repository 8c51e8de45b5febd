#pragma once
// GUI thread.

#include "image_view.h"
#include "page.h"

namespace outlierlens {

class InspectionController;

/// The Image page (models that take images): the input image with its outlier patches, from the
/// current input or, when the controller holds statistics of this model, from the whole data set.
class ImagePage : public ImageView, public Page
{
    Q_OBJECT
public:
    explicit ImagePage(InspectionController* controller, QWidget* parent = nullptr);

    /// A text model does not invite an image drop: the tab is hidden.
    bool showsModel(const ModelInfo& model) const override { return !model.takesText(); }
    void refresh(const PageState& state) override;
    const Figure* figure() const override { return this; }

private:
    InspectionController* m_controller;
};

} // namespace outlierlens
