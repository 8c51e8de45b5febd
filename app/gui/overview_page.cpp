#include "overview_page.h"

#include "view_builders.h"

namespace outlierlens {

OverviewPage::OverviewPage(QWidget* parent)
    : OverviewGrid(parent)
{}

void OverviewPage::refresh(const PageState& state)
{
    if (!state.hasHead()) return;
    setData(buildOverview(*state.snapshot));
    setCurrent(state.layer, state.head);
}

} // namespace outlierlens
