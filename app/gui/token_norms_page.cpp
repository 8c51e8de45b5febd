#include "token_norms_page.h"

#include "inspection_controller.h"
#include "view_builders.h"

namespace outlierlens {

TokenNormsPage::TokenNormsPage(InspectionController* controller, QWidget* parent)
    : TokenNormView(parent)
    , m_controller(controller)
{}

void TokenNormsPage::refresh(const PageState& state)
{
    if (!state.snapshot || !state.snapshot->model.takesImages() || state.layer >= state.snapshot->L()) return;
    TokenNormData data = buildTokenNorms(*state.snapshot, state.layer);
    const StatisticsPtr stats = m_controller->statistics();
    if (stats && m_controller->statisticsDescribeModel(*stats)) addDatasetNorms(data, *stats, state.layer);
    setData(data);
}

} // namespace outlierlens
