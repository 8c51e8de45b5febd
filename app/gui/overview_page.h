#pragma once
// GUI thread.

#include "overview_grid.h"
#include "page.h"

namespace outlierlens {

/// The Overview page: every head of the main model at a glance, the chosen one marked (the grid itself).
class OverviewPage : public OverviewGrid, public Page
{
    Q_OBJECT
public:
    explicit OverviewPage(QWidget* parent = nullptr);

    void refresh(const PageState& state) override;
    const Figure* figure() const override { return this; }
};

} // namespace outlierlens
