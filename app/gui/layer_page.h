#pragma once
// GUI thread.

#include "head_grid.h"
#include "page.h"

namespace outlierlens {

/// The Layer page: every head of the chosen layer for the current input, one row each (attention, V,
/// P.V and the gate), as the paper's Figures 10-13 and 16-17 show several heads at once. Clicking a
/// head opens it on the Head page.
class LayerPage : public HeadGrid, public Page
{
    Q_OBJECT
public:
    explicit LayerPage(QWidget* parent = nullptr);

    void refresh(const PageState& state) override;
    const Figure* figure() const override { return this; }

Q_SIGNALS:
    /// Head `head` (0-based) of `layer` was clicked.
    void headActivated(int layer, int head);

private:
    int m_layer = 0;
};

} // namespace outlierlens
