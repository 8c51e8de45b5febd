#pragma once
// runTraining() runs on the calling thread (the `outlierlens train` process's main thread). The
// stop flag may be set from a signal handler or another thread.

#include "tasks/config/train_config.h"
#include "train/distributed.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

namespace outlierlens {

enum class TrainOutcome {
    Finished, ///< all steps done; final/ holds the model
    Stopped,  ///< the stop flag was set; a checkpoint of the current step was written
    Diverged, ///< the loss became NaN or infinite; the last good checkpoint is kept
};

struct TrainResult
{
    TrainOutcome outcome = TrainOutcome::Finished;
    std::int64_t step = 0;      ///< steps completed
    std::string lastCheckpoint; ///< folder of the newest checkpoint (or final/)
    std::string message;        ///< one line for the user
};

/// Trains (or, with `resume`, continues from the newest checkpoint of config.output) and writes
/// the run folder of run_folder.h. Each event is also handed to `emit` as one JSON object per line
/// ({"type": "progress"|"eval"|"checkpoint"|"done", ...}): the progress protocol of DESIGN.md.
/// The same config, seed and thread count give the same losses whether or not the run was
/// interrupted and resumed. Throws Error for a bad config or data.
///
/// With `dist` of a group (worldSize > 1, config.worldSize the same) this process is one rank of a
/// distributed run (train/distributed.h): it joins the group, trains on its shard of every batch
/// with gradients averaged over the ranks, and the run gives the same losses and weights as one
/// process with the same batch_size (up to float rounding; dropout masks differ). Rank 0 alone writes
/// the run folder and calls `emit`; all ranks return the same outcome. A failure of the group throws
/// GroupError.
TrainResult runTraining(const TrainConfig& config, bool resume, const std::atomic<bool>& stop,
                        const std::function<void(const std::string& jsonLine)>& emit,
                        const DistributedSetup& dist = DistributedSetup());

} // namespace outlierlens
