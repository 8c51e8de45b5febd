#pragma once
// GUI thread.

#include "head_view.h"
#include "page.h"

namespace outlierlens {

/// The Head page: one attention head of the main model for the current input (the view itself).
class HeadPage : public HeadView, public Page
{
    Q_OBJECT
public:
    explicit HeadPage(QWidget* parent = nullptr);

    void refresh(const PageState& state) override;
    const Figure* figure() const override { return this; }
};

} // namespace outlierlens
