#include "train/training_task.h"

namespace outlierlens {

std::unique_ptr<TrainingTask> makeBertTask(const TrainConfig& config);
std::unique_ptr<TrainingTask> makeImageTask(const TrainConfig& config);

std::unique_ptr<TrainingTask> makeTrainingTask(const TrainConfig& config)
{
    return config.task == TrainTask::Image ? makeImageTask(config) : makeBertTask(config);
}

} // namespace outlierlens
