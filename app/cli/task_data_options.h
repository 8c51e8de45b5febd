#pragma once
// The options `quantize` and `intervene` share: the model folder, the task data its metric is computed on,
// and how calibration and evaluation batches are drawn (quant/evaluation.h, QuantExperiment).

#include "cli/command_line.h"
#include "quant/evaluation.h"

namespace outlierlens::cli {

/// Adds --model, --data, --calib-batches, --batch-size, --eval-batches, --seq-length, --nli-train-pairs,
/// --threads and --out; `calibration` says what the calibration batches are for in this command.
void addTaskDataOptions(Command& cmd, const QString& calibration);
/// Reads them into a QuantExperiment (quantization options left at their defaults) and sets the threads.
QuantExperiment readTaskDataOptions(const Command& cmd);

} // namespace outlierlens::cli
