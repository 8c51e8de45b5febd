#pragma once
// Called on the thread that runs the task.

#include <nlohmann/json_fwd.hpp>

namespace outlierlens {

class TrainingTask;

/// Per-layer max inf norm and kurtosis of the task's tracked tensors ({"max_inf_norm": {"ffn_out":
/// [per layer]}, "kurtosis": {...}}), and mean gate probability per layer and head ("gate", gated
/// models), on the task's fixed probe batch (DESIGN.md metrics; padding left out).
nlohmann::json probeMetrics(TrainingTask& task);

} // namespace outlierlens
