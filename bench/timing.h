#pragma once
// Timing helpers of the stand-alone benchmark programs in bench/ (built by hand with g++, see each one).

#include <algorithm>
#include <chrono>
#include <vector>

namespace bench {

/// Seconds on the steady clock.
inline double seconds()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// The median of v (the upper one for an even count).
inline double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace bench
