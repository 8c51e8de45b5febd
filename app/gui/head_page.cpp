#include "head_page.h"

#include "view_builders.h"

namespace outlierlens {

HeadPage::HeadPage(QWidget* parent)
    : HeadView(parent)
{}

void HeadPage::refresh(const PageState& state)
{
    if (!state.hasHead()) return;
    setData(buildHeadView(*state.snapshot, state.layer, state.head));
    setHighlightedTokens(state.highlightTokens);
}

} // namespace outlierlens
