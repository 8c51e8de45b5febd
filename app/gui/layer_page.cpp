#include "layer_page.h"

#include "view_builders.h"

namespace outlierlens {

LayerPage::LayerPage(QWidget* parent)
    : HeadGrid(parent)
{
    connect(this, &HeadGrid::headClicked, this, [this](int index) { Q_EMIT headActivated(m_layer, index); });
}

void LayerPage::refresh(const PageState& state)
{
    const SnapshotPtr& s = state.snapshot;
    if (!s || state.layer >= s->L()) {
        setHeads({}); // nothing of another model or input stays on screen
        return;
    }
    m_layer = state.layer;
    QVector<HeadViewData> heads;
    for (int h = 0; h < s->H(); ++h)
        heads << buildHeadView(*s, state.layer, h);
    setHeads(heads);
    setHighlightedTokens(state.highlightTokens);
}

} // namespace outlierlens
