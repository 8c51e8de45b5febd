#include "analysis/high_norm.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace outlierlens {

std::string highNormRuleText()
{
    return "norm > 3 \u00d7 the median patch norm of the image";
}

std::vector<double> tokenNorms(const float* x, std::int64_t T, std::int64_t d)
{
    std::vector<double> norms(std::size_t(std::max<std::int64_t>(T, 0)), 0.0);
    for (std::int64_t t = 0; t < T; ++t) {
        double sum = 0;
        for (std::int64_t j = 0; j < d; ++j) {
            const double v = x[t * d + j];
            sum += v * v;
        }
        norms[std::size_t(t)] = std::sqrt(sum);
    }
    return norms;
}

double highNormCutoff(const std::vector<double>& norms, std::int64_t firstPatch)
{
    if (firstPatch < 0 || firstPatch >= std::int64_t(norms.size()))
        return std::numeric_limits<double>::quiet_NaN();
    std::vector<double> patches(norms.begin() + firstPatch, norms.end());
    const auto middle = patches.begin() + std::ptrdiff_t((patches.size() - 1) / 2);
    std::nth_element(patches.begin(), middle, patches.end());
    return kHighNormFactor * *middle;
}

std::vector<bool> highNormTokens(const std::vector<double>& norms, std::int64_t firstPatch)
{
    const double cutoff = highNormCutoff(norms, firstPatch);
    std::vector<bool> high(norms.size(), false);
    for (std::size_t t = 0; t < norms.size(); ++t)
        high[t] = norms[t] > cutoff; // false for a NaN cutoff
    return high;
}

std::vector<double> normBinEdges()
{
    std::vector<double> edges;
    for (int i = 0; i <= kNormBins; ++i)
        edges.push_back(std::pow(10.0, kNormLowDecade + double(i) / kNormBinsPerDecade));
    return edges;
}

int normBin(double norm)
{
    if (!(norm > 0) || !std::isfinite(norm))
        return norm == std::numeric_limits<double>::infinity() ? kNormBins - 1 : 0;
    const double position = (std::log10(norm) - kNormLowDecade) * kNormBinsPerDecade;
    return int(std::clamp(std::floor(position), 0.0, double(kNormBins - 1)));
}

} // namespace outlierlens
