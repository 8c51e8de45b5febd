#include "analysis/figure_tensor.h"

namespace outlierlens {

CapturePoint figureTensor(InputKind kind, bool decoder)
{
    return kind == InputKind::Text && !decoder ? CapturePoint::FfnOut : CapturePoint::Out;
}

std::vector<CapturePoint> kurtosisTensors(InputKind kind, bool decoder)
{
    if (kind == InputKind::Text && !decoder) return {CapturePoint::FfnOut, CapturePoint::Out};
    return {CapturePoint::Out};
}

} // namespace outlierlens
