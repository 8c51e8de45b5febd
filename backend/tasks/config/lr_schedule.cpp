#include "tasks/config/lr_schedule.h"

#include "common/error.h"

#include <algorithm>
#include <cmath>

namespace outlierlens {
namespace {

constexpr double kPi = 3.14159265358979323846; // Python's math.pi

} // namespace

std::string toString(DecayKind kind)
{
    switch (kind) {
    case DecayKind::Linear:
        return "linear";
    case DecayKind::Cosine:
        return "cosine";
    case DecayKind::Constant:
        return "constant";
    }
    return "linear";
}

DecayKind parseDecayKind(const std::string& text)
{
    if (text == "linear") return DecayKind::Linear;
    if (text == "cosine") return DecayKind::Cosine;
    if (text == "constant") return DecayKind::Constant;
    throw Error("unknown learning-rate decay '" + text + "' (expected linear, cosine or constant)");
}

double learningRate(double peakLr, std::int64_t step, std::int64_t warmupSteps, std::int64_t totalSteps,
                    DecayKind kind)
{
    // The factor is computed in double in the same order as the Python lambdas, and multiplied by
    // the peak last as LambdaLR does, so the values agree to the last bit.
    double factor = 1.0;
    if (step < warmupSteps) {
        factor = double(step) / double(std::max<std::int64_t>(1, warmupSteps));
    } else if (kind == DecayKind::Linear) {
        factor = std::max(0.0, double(totalSteps - step) /
                                   double(std::max<std::int64_t>(1, totalSteps - warmupSteps)));
    } else if (kind == DecayKind::Cosine) {
        const double progress =
            double(step - warmupSteps) / double(std::max<std::int64_t>(1, totalSteps - warmupSteps));
        factor = std::max(0.0, 0.5 * (1.0 + std::cos(kPi * 0.5 * 2.0 * progress)));
    }
    return peakLr * factor;
}

} // namespace outlierlens
