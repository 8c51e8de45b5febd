#pragma once
// Helpers shared by the task implementations (training thread only).

#include "tasks/config/train_config.h"
#include "tasks/data/synthetic_data.h"
#include "tasks/training_task.h"

#include <optional>

#include <torch/types.h>

#include <string>

namespace torch::nn {
class Module;
}

namespace outlierlens {

/// Loads <dir>/model.safetensors written by saveModel() into `module` strictly (resume).
void loadWeightsInto(torch::nn::Module& module, const std::string& dir);

/// Mean cross entropy over positions whose label is not -100. logits [N, C], labels [N].
torch::Tensor maskedCrossEntropy(const torch::Tensor& logits, const torch::Tensor& labels);

/// Rows [rank * B / count, (rank + 1) * B / count) of dimension 0 of a batch tensor of B rows
/// (a view; the whole tensor for a whole shard).
torch::Tensor shardRows(const torch::Tensor& batch, const BatchShard& shard);

/// Positions whose label is not -100.
std::int64_t scoredCount(const torch::Tensor& labels);

/// A shard's share of a batch's mean cross entropy: the cross entropy summed over the shard's
/// positions whose label is not -100, divided by `batchScored`, the scored positions of the whole
/// batch. logits [N, C], labels [N].
torch::Tensor crossEntropyShare(const torch::Tensor& logits, const torch::Tensor& labels,
                                std::int64_t batchScored);

/// A generator whose draws are the same in every evaluation of a run (evaluation batches,
/// masking of held-out text), independent of the training step.
at::Generator evaluationGenerator(const TrainConfig& config);

/// The synthetic task's options recorded in a model folder's config.json ("outlierlens_synthetic"),
/// or nullopt for models of other tasks.
std::optional<SyntheticTaskOptions> readSyntheticOptions(const std::string& modelDir);

/// Writes README.md (the model card) into a model folder.
void writeModelCard(const std::string& dir, const std::string& card);

} // namespace outlierlens
