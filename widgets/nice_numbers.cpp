#include "nice_numbers.h"

#include <cmath>
#include <initializer_list>

namespace outlierlens {

double niceStep(double minimum)
{
    if (!(minimum > 0) || !std::isfinite(minimum)) return 1;
    const double power = std::pow(10.0, std::floor(std::log10(minimum)));
    for (double m : {1.0, 2.0, 5.0})
        if (m * power >= minimum) return m * power;
    return 10 * power;
}

} // namespace outlierlens
