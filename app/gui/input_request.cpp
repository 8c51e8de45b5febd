#include "input_request.h"

#include "inspection_controller.h"

namespace outlierlens {

void InputRequest::sendTo(InspectionController& controller) const
{
    switch (kind) {
    case Kind::Text:
        controller.inspectText(text, pair);
        break;
    case Kind::Image:
        controller.inspectImage(path, credit);
        break;
    case Kind::Synthetic:
        controller.inspectSyntheticExample(seed);
        break;
    case Kind::None:
        break;
    }
}

} // namespace outlierlens
