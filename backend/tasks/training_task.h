#pragma once
// A task is created and used by the training thread only.

#include "model/capture.h"
#include "tasks/config/train_config.h"

#include <torch/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}
namespace at {
class Generator;
}

namespace outlierlens {

/// The rows of every training batch that one process of a distributed run trains on. Every process
/// draws the same global batch (batch_size rows, from the same generator) and process `rank` keeps
/// rows [rank * B / count, (rank + 1) * B / count): N processes train on exactly the samples one
/// process trains on. B must be divisible by count (validated by the trainer).
struct BatchShard
{
    int rank = 0;  ///< 0-based
    int count = 1; ///< processes sharing each batch; 1 = the whole batch
    bool whole() const { return count <= 1; }
};

/// What a training run trains: the model, its data, its loss and its held-out metric. The trainer
/// (trainer.h) owns the loop, the optimizer, checkpoints and metrics; tasks only know their data.
class TrainingTask
{
public:
    virtual ~TrainingTask() = default;

    virtual torch::nn::Module& module() = 0;
    /// The training loss of step `step` (0-based) on a batch drawn from `gen` (seeded by the
    /// trainer from the run seed and the step, so a resumed run draws the same batches). Runs in
    /// train mode with gradients. With a batch shard (setBatchShard()), the shard's share of the
    /// whole batch's mean loss: its summed loss divided by the whole batch's count of scored
    /// positions, so the shares of all ranks add up to the loss (and gradient) of the whole batch.
    virtual torch::Tensor trainLoss(std::int64_t step, at::Generator& gen) = 0;
    /// Distributed runs: trainLoss() trains on this shard of each batch from now on.
    void setBatchShard(const BatchShard& shard) { m_shard = shard; }
    /// The held-out metric on the configured number of evaluation batches, in eval mode:
    /// ("perplexity", x) for masked LM, ("accuracy", x) otherwise. A sink sees (and, when it simulates
    /// quantization, transforms) every forward pass.
    virtual std::pair<std::string, double> evaluate(ActivationSink* sink = nullptr) = 0;
    /// Runs training batch `index` (drawn with `gen`, without augmentation) forward in eval mode under
    /// InferenceMode into `sink`: calibration data for quantizers, never the held-out data.
    virtual void calibrationForward(std::int64_t index, at::Generator& gen, ActivationSink& sink) = 0;
    /// Runs the fixed probe batch (the same every time) into `sink` under InferenceMode and
    /// returns each sample's real length (tokens), for the per-layer outlier metrics.
    virtual std::vector<std::int64_t> probe(ActivationSink& sink) = 0;
    /// The [T, d] capture whose max inf norm and kurtosis the run tracks per layer: BERT's FFN
    /// outputs ("ffn_out") and block outputs ("out"); ViT's block outputs.
    virtual std::vector<CapturePoint> trackedPoints() const = 0;
    virtual int numLayers() const = 0;

    /// Writes a model folder the rest of the app loads (config.json with the variant block,
    /// model.safetensors, vocab.txt for BERT, a README.md model card).
    virtual void saveModel(const std::string& dir, const std::string& modelCard) const = 0;
    /// Loads the weights of a model folder written by saveModel() (resuming a run).
    virtual void loadWeights(const std::string& dir) = 0;
    /// One line describing model and data, for the model card and the log.
    virtual std::string describe() const = 0;
    /// Called before simulated quantization changes the weights in place: a task whose output head
    /// stays in floating point although its weight is tied to the (quantized) token embeddings keeps a
    /// floating-point copy of it from now on (causal LMs; BERT's MLM head does this through its own
    /// decoderWeightOverride). Default: nothing.
    virtual void keepHeadInFloat() {}

protected:
    BatchShard m_shard;
};

/// Builds the task of a validated config: loads and prepares its data (a corpus too small for one
/// batch, a missing file, ... are Errors naming the file) and a freshly initialised model (seeded).
/// With "init" the model comes from that folder instead: nli fine-tunes its encoder (and keeps its
/// classifier if it already has the three MNLI labels); mlm, synthetic, image and clm continue from it.
std::unique_ptr<TrainingTask> makeTrainingTask(const TrainConfig& config);

} // namespace outlierlens
