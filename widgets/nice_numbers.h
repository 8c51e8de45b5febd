#pragma once
// Any thread: pure functions for axes and label strides.

namespace outlierlens {

/// The smallest step of 1, 2 or 5 times a power of ten that is >= `minimum` (> 0): 0.3 -> 0.5, 7 -> 10,
/// 1 -> 1. Tick intervals and every-n-th label strides use it. A minimum <= 0 or not finite gives 1.
double niceStep(double minimum);

} // namespace outlierlens
