#include "image_page.h"

#include "inspection_controller.h"
#include "view_builders.h"

namespace outlierlens {

ImagePage::ImagePage(InspectionController* controller, QWidget* parent)
    : ImageView(parent)
    , m_controller(controller)
{}

void ImagePage::refresh(const PageState& state)
{
    if (!state.hasHead() || state.snapshot->model.takesText()) return;
    ImageViewData data = buildImageView(*state.snapshot, state.layer, state.head);
    const StatisticsPtr stats = m_controller->statistics();
    if (stats && m_controller->statisticsDescribeModel(*stats)) addDatasetPatches(data, *stats, state.layer);
    setData(data);
}

} // namespace outlierlens
