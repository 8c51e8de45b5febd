#pragma once
// Any thread: pure functions.

#include <cstdint>
#include <string>

namespace outlierlens {

/// What the learning rate does after the warm-up.
enum class DecayKind { Linear, Cosine, Constant };

/// "linear", "cosine", "constant".
std::string toString(DecayKind kind);
/// Parses the names of toString(); throws Error listing them otherwise.
DecayKind parseDecayKind(const std::string& text);

/// The learning rate of optimizer step `step` (0-based: the first update uses step 0) for a run of
/// `totalSteps` steps: a linear warm-up from 0 over `warmupSteps` (peakLr * step / warmupSteps, so
/// step 0 has lr 0 when warmupSteps > 0), then a linear decay to 0 at totalSteps, a half cosine
/// (peakLr * 0.5 * (1 + cos(pi * progress)), progress = (step - warmup) / (total - warmup)), or the
/// constant peakLr. Exactly Hugging Face transformers' get_linear_schedule_with_warmup,
/// get_cosine_schedule_with_warmup (num_cycles 0.5) and get_constant_schedule_with_warmup as a
/// LambdaLR stepped once per optimizer step, including their behaviour past totalSteps.
double learningRate(double peakLr, std::int64_t step, std::int64_t warmupSteps, std::int64_t totalSteps,
                    DecayKind kind);

} // namespace outlierlens
