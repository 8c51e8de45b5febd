#include "tasks/training_task.h"

namespace outlierlens {

std::unique_ptr<TrainingTask> makeBertTask(const TrainConfig& config);
std::unique_ptr<TrainingTask> makeImageTask(const TrainConfig& config);
std::unique_ptr<TrainingTask> makeClmTask(const TrainConfig& config);

std::unique_ptr<TrainingTask> makeTrainingTask(const TrainConfig& config)
{
    switch (config.task) {
    case TrainTask::Image:
        return makeImageTask(config);
    case TrainTask::CausalLm:
        return makeClmTask(config);
    case TrainTask::MaskedLm:
    case TrainTask::Nli:
    case TrainTask::Synthetic:
        break;
    }
    return makeBertTask(config);
}

} // namespace outlierlens
