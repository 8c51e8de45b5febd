#pragma once
// Runs on the calling thread (the quantize command); long, reports progress through a callback.

#include "quant/intervention.h"
#include "quant/quantizer.h"
#include "quant/transforms.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace outlierlens {

/// One `outlierlens quantize` experiment: a model folder, the data its metric is computed on, and how
/// to quantize it.
struct QuantExperiment
{
    std::string modelDir;
    /// "mnli:FILE" (a BertForSequenceClassification with the MNLI labels: pairs [0, nliTrainPairs)
    /// calibrate, the rest are evaluated), "text:FILE" (BertForMaskedLM, or a GPT-2 / OPT / LLaMA
    /// decoder: the last evalBatches x batch sequences are held out for perplexity, masked-LM or
    /// next-token, and the rest calibrate), "fashion-mnist" or "images:DIR" (ViT;
    /// training images calibrate, test / every tenth image evaluate), "synthetic" (the synthetic task's
    /// own generator, accuracy on masked positions), "backcopy:FILE" (a decoder trained with clm_data
    /// bigram-backcopy: the held-out sequences of FILE's chain that a run with seed 0 holds out; other
    /// generated sequences calibrate).
    std::string data;
    QuantOptions quant;
    /// Applied to the model after the floating-point measurements and before every quantized run; its
    /// scales come from the calibration batches of seed 0.
    ModelTransform transform;
    int calibBatches = 16;
    int seeds = 3;
    int batchSize = 32;
    int evalBatches = 0; ///< 0: the task's default (all held-out MNLI pairs; 32 batches otherwise)
    std::int64_t nliTrainPairs = 8000;
    int seqLength = 128; ///< tokens per sequence (mnli, text)
    bool sensitivity = false;
};

struct LayerSensitivity
{
    int layer = -1; ///< 0-based; -1 = embeddings and head
    double metric = 0;
    double damage = 0; ///< how much worse than floating point (accuracy points lost, or perplexity gained)
};

struct QuantResult
{
    std::string metricName; ///< "accuracy" or "perplexity"
    bool higherIsBetter = true;
    double floatMetric = 0;
    std::string transform; ///< ModelTransform::describe(); "" for none
    double transformedFloatMetric =
        0; ///< the floating-point metric after the transform (should equal floatMetric)
    TransformReport transformReport;
    /// maxInfNorm and avgKurtosis of the same tensor after the transform (a rotation spreads the stream's
    /// outliers; SmoothQuant leaves the stream as it was)
    double transformedMaxInfNorm = 0, transformedAvgKurtosis = 0;
    std::vector<double> quantMetrics; ///< one per seed
    double quantMean = 0, quantStd = 0;
    std::string
        trackedPoint; ///< the tensor behind the two numbers below: "ffn_out" (BERT) or "out" (ViT, decoders)
    std::vector<double> maxInfNormPerLayer, kurtosisPerLayer;
    double maxInfNorm = 0, avgKurtosis = 0;
    std::vector<std::string> quantizedWeights;
    std::map<std::string, std::pair<double, double>> ranges; ///< activation ranges of the first seed
    std::vector<LayerSensitivity> sensitivity;               ///< sorted, most damaged first
    double seconds = 0;
};

/// Builds the task for `experiment.data` from the model folder, measures the floating-point metric
/// and the outlier metrics, then for each seed quantizes a fresh copy of the model (weights, then
/// activations calibrated on `calibBatches` training batches drawn with that seed) and measures it
/// again. Throws Error for bad input; returns early with an Error("cancelled") when `cancel` is set.
QuantResult runQuantExperiment(const QuantExperiment& experiment,
                               const std::function<void(const std::string&)>& progress,
                               const std::atomic<bool>* cancel = nullptr);

/// One `outlierlens intervene` result: the task metric of the model as it is and with the intervention.
struct InterventionResult
{
    std::string metricName; ///< "accuracy" or "perplexity"
    bool higherIsBetter = true;
    double floatMetric = 0;
    double intervenedMetric = 0;
    std::vector<double> means; ///< Value::Mean: the collected means of the chosen dimensions
    std::string description;   ///< Intervention::describe()
    double seconds = 0;
};

/// Evaluates the model of `e` (its data, batch size, evaluation batches; quantization options unused) as
/// it is and with `intervention` applied to every evaluation batch; for Value::Mean, the means come first
/// from e.calibBatches calibration batches (seed 0). Throws Error for bad input (a layer the model does not
/// have, a dimension beyond the hidden size).
InterventionResult runInterventionExperiment(const QuantExperiment& e, const Intervention& intervention,
                                             const std::function<void(const std::string&)>& progress,
                                             const std::atomic<bool>* cancel = nullptr);

/// Sample standard deviation (n - 1); 0 for fewer than two values.
double sampleStd(const std::vector<double>& values);

} // namespace outlierlens
