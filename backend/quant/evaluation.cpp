#include "quant/evaluation.h"

#include "analysis/metrics.h"
#include "common/error.h"
#include "model/bert.h"
#include "model/decoder_config.h"
#include "model/model_family.h"
#include "tasks/probe_metrics.h"
#include "tasks/training_task.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace outlierlens {
namespace {

/// A training config that makes the task of `e.data` around the model folder (see QuantExperiment).
TrainConfig taskConfig(const QuantExperiment& e)
{
    TrainConfig t;
    t.init = e.modelDir;
    t.batchSize = e.batchSize;
    t.seqLength = e.seqLength;
    t.evalBatches = e.evalBatches > 0 ? e.evalBatches : 32;
    t.nliTrainPairs = e.nliTrainPairs;
    t.augment = false;
    t.dropout = 0;
    t.seed = 0; // the same held-out data for every seed; seeds only change the calibration batches
    const auto colon = e.data.find(':');
    const std::string kind = e.data.substr(0, colon),
                      rest = colon == std::string::npos ? "" : e.data.substr(colon + 1);
    if (kind == "mnli" && !rest.empty()) {
        t.task = TrainTask::Nli;
        t.data = rest;
    } else if (kind == "text" && !rest.empty()) {
        // Masked LM for BERT folders, causal LM (perplexity of next-token prediction) for decoders.
        t.task = isModelDirOf(e.modelDir, FamilyEngine::Decoder) ? TrainTask::CausalLm : TrainTask::MaskedLm;
        t.corpus = rest;
    } else if (kind == "backcopy" && !rest.empty()) {
        // Bigram-Backcopy decoders: sequences generated from FILE's character bigrams, as in training.
        t.task = TrainTask::CausalLm;
        t.clmData = ClmData::BigramBackcopy;
        t.corpus = rest;
    } else if (kind == "fashion-mnist" && rest.empty()) {
        t.task = TrainTask::Image;
        t.data = "fashion-mnist";
    } else if (kind == "images" && !rest.empty()) {
        t.task = TrainTask::Image;
        t.data = rest;
    } else if (kind == "synthetic" && rest.empty()) {
        t.task = TrainTask::Synthetic;
    } else {
        throw Error(
            "--data: expected mnli:FILE, text:FILE, backcopy:FILE, fashion-mnist, images:DIR or synthetic, "
            "found '" +
            e.data + "'");
    }
    return t;
}

/// The task of `config` around the model of `e`, in evaluation mode; refuses non-finite weights.
std::unique_ptr<TrainingTask> loadTask(const QuantExperiment& e, const TrainConfig& config,
                                       const std::function<void(const std::string&)>& progress)
{
    progress("loading " + e.modelDir + " and its data");
    std::unique_ptr<TrainingTask> task = makeTrainingTask(config);
    if (const std::string notice = nonFiniteWeightsNotice(task->module()); !notice.empty())
        throw Error(e.modelDir + ": " + notice);
    task->module().eval();
    return task;
}

void throwIfCancelled(const std::atomic<bool>* cancel)
{
    if (cancel && *cancel) throw Error("cancelled");
}

/// Floating-point copies of every parameter, to start each seed from the same model.
std::vector<std::pair<torch::Tensor, torch::Tensor>> snapshotParameters(torch::nn::Module& module)
{
    std::vector<std::pair<torch::Tensor, torch::Tensor>> out;
    for (const torch::Tensor& p : module.parameters(true))
        out.emplace_back(p, p.detach().clone());
    return out;
}

void restoreParameters(const std::vector<std::pair<torch::Tensor, torch::Tensor>>& saved)
{
    torch::NoGradGuard noGrad;
    for (const auto& [live, copy] : saved)
        live.detach().copy_(copy);
}

} // namespace

double sampleStd(const std::vector<double>& values)
{
    if (values.size() < 2) return 0;
    const double mean = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
    double sum = 0;
    for (double v : values)
        sum += (v - mean) * (v - mean);
    return std::sqrt(sum / double(values.size() - 1));
}

QuantResult runQuantExperiment(const QuantExperiment& e,
                               const std::function<void(const std::string&)>& progress,
                               const std::atomic<bool>* cancel)
{
    if (e.calibBatches < 1) throw Error("--calib-batches must be at least 1");
    if (e.seeds < 1) throw Error("--seeds must be at least 1");
    if (e.batchSize < 1) throw Error("--batch-size must be at least 1");
    if (e.quant.weightBits < 2 || e.quant.weightBits > 16 || e.quant.activationBits < 2 ||
        e.quant.activationBits > 16)
        throw Error("--bits-w and --bits-a must be between 2 and 16");
    const auto started = std::chrono::steady_clock::now();
    const auto checkCancel = [&] { throwIfCancelled(cancel); };
    const TrainConfig config = taskConfig(e);
    std::unique_ptr<TrainingTask> task = loadTask(e, config, progress);
    torch::nn::Module& module = task->module();
    auto* mlm = dynamic_cast<BertForMaskedLMImpl*>(&module);
    checkTransformApplies(module, e.transform); // a refusal before the floating-point evaluation

    QuantResult r;
    progress("floating point: evaluating");
    const auto [name, fp] = task->evaluate();
    r.metricName = name;
    r.higherIsBetter = name != "perplexity";
    r.floatMetric = fp;
    checkCancel();

    const bool decoder = config.task == TrainTask::CausalLm;
    r.trackedPoint = config.task == TrainTask::Image || decoder ? "out" : "ffn_out";
    // The tracked tensor's per-layer max inf norm and kurtosis on the probe batch; the largest and the mean.
    const auto outlierMetrics = [&](std::vector<double>& maxPerLayer, std::vector<double>& kurtosisPerLayer,
                                    double& maxInfNorm, double& avgKurtosis) {
        const nlohmann::json probe = probeMetrics(*task);
        maxPerLayer = probe["max_inf_norm"][r.trackedPoint].get<std::vector<double>>();
        kurtosisPerLayer = probe["kurtosis"][r.trackedPoint].get<std::vector<double>>();
        maxInfNorm = *std::max_element(maxPerLayer.begin(), maxPerLayer.end());
        avgKurtosis = std::accumulate(kurtosisPerLayer.begin(), kurtosisPerLayer.end(), 0.0) /
                      double(kurtosisPerLayer.size());
    };
    outlierMetrics(r.maxInfNormPerLayer, r.kurtosisPerLayer, r.maxInfNorm, r.avgKurtosis);

    if (e.transform.any()) {
        r.transform = e.transform.describe();
        progress(r.transform + ": calibrating");
        r.transformReport = applyTransform(module, e.transform, [&](ActivationSink& sink) {
            at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1000u);
            for (int b = 0; b < e.calibBatches; ++b) {
                checkCancel();
                task->calibrationForward(b, gen, sink);
            }
        });
        progress(r.transform + ": floating point after the transform");
        r.transformedFloatMetric = task->evaluate().second;
        std::vector<double> maxPerLayer, kurtosisPerLayer;
        outlierMetrics(maxPerLayer, kurtosisPerLayer, r.transformedMaxInfNorm, r.transformedAvgKurtosis);
        checkCancel();
    }
    const auto saved = snapshotParameters(module);

    // The MLM head stays in floating point, but its decoder is tied to the word embeddings, which are
    // quantized: it keeps a floating-point copy.
    if (mlm) mlm->decoderWeightOverride = mlm->bert->embeddings->wordEmbeddings->weight.detach().clone();
    // Causal LMs as the paper's OPT code runs them ("fp32_head"): the LM head (weights and logits) stays
    // in floating point, also when it is tied to the quantized token embeddings. An et al.'s context
    // scale is a gate and stays in floating point like the others.
    task->keepHeadInFloat();
    std::vector<std::string> keepFloat = {"cls.", ".alpha."};
    if (decoder) keepFloat.insert(keepFloat.end(), {"lm_head.", "context_scale."});

    // Calibrates a fresh copy of the model with the batches of `seed` and evaluates it.
    const auto quantizedMetric = [&](QuantOptions options, int seed, bool keepRanges) {
        if (decoder) options.quantizeLogits = false;
        restoreParameters(saved);
        std::vector<std::string> weights;
        if (options.quantizeWeights) weights = quantizeWeights(module, options, keepFloat);
        if (keepRanges) r.quantizedWeights = weights;
        QuantizationSink sink(options);
        sink.setCalibrating(true);
        at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1000u + std::uint64_t(seed));
        for (int b = 0; b < e.calibBatches; ++b) {
            checkCancel();
            task->calibrationForward(std::int64_t(seed) * e.calibBatches + b, gen, sink);
        }
        sink.setCalibrating(false);
        checkCancel();
        const double metric = task->evaluate(&sink).second;
        if (keepRanges) r.ranges = sink.ranges();
        return metric;
    };

    for (int s = 0; s < e.seeds; ++s) {
        progress("W" + std::to_string(e.quant.weightBits) + "A" + std::to_string(e.quant.activationBits) +
                 ": seed " + std::to_string(s + 1) + " of " + std::to_string(e.seeds));
        r.quantMetrics.push_back(quantizedMetric(e.quant, s, s == 0));
    }
    r.quantMean =
        std::accumulate(r.quantMetrics.begin(), r.quantMetrics.end(), 0.0) / double(r.quantMetrics.size());
    r.quantStd = sampleStd(r.quantMetrics);

    if (e.sensitivity) {
        QuantOptions one = e.quant;
        one.quantizeWeights = false;
        one.quantizeActivations = true;
        const int layers = task->numLayers();
        for (int l = -1; l < layers; ++l) {
            progress("sensitivity: activations of " +
                     (l < 0 ? std::string("embeddings and head") : "layer " + std::to_string(l + 1)));
            one.onlyLayer = l;
            LayerSensitivity row;
            row.layer = l;
            row.metric = quantizedMetric(one, 0, false);
            row.damage = r.higherIsBetter ? r.floatMetric - row.metric : row.metric - r.floatMetric;
            r.sensitivity.push_back(row);
        }
        std::stable_sort(
            r.sensitivity.begin(), r.sensitivity.end(),
            [](const LayerSensitivity& a, const LayerSensitivity& b) { return a.damage > b.damage; });
    }
    restoreParameters(saved);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return r;
}

InterventionResult runInterventionExperiment(const QuantExperiment& e, const Intervention& intervention,
                                             const std::function<void(const std::string&)>& progress,
                                             const std::atomic<bool>* cancel)
{
    intervention.validate();
    if (e.calibBatches < 1) throw Error("--calib-batches must be at least 1");
    const auto started = std::chrono::steady_clock::now();
    const auto checkCancel = [&] { throwIfCancelled(cancel); };
    const TrainConfig config = taskConfig(e);
    std::unique_ptr<TrainingTask> task = loadTask(e, config, progress);
    if (intervention.layer >= task->numLayers())
        throw Error("intervention: layer " + std::to_string(intervention.layer + 1) + ", the model has " +
                    std::to_string(task->numLayers()));
    // Post-LN BERT blocks end in a LayerNorm, the registry's BERT engine.
    InterventionSink sink(
        intervention, interventionSite(intervention.tensor, isModelDirOf(e.modelDir, FamilyEngine::Bert)));

    InterventionResult r;
    r.description = intervention.describe();
    progress("as it is: evaluating");
    const auto [name, fp] = task->evaluate();
    r.metricName = name;
    r.higherIsBetter = name != "perplexity";
    r.floatMetric = fp;
    checkCancel();
    if (intervention.value == Intervention::Value::Mean) {
        progress("collecting the means over " + std::to_string(e.calibBatches) + " calibration batches");
        sink.setCollecting(true);
        at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1000u);
        for (int b = 0; b < e.calibBatches; ++b) {
            checkCancel();
            task->calibrationForward(b, gen, sink);
        }
        sink.setCollecting(false);
        const torch::Tensor means = sink.means();
        if (!means.defined()) throw Error("intervention: no calibration batch reached " + r.description);
        r.means = std::vector<double>(means.data_ptr<double>(), means.data_ptr<double>() + means.numel());
    }
    progress("with the intervention (" + r.description + "): evaluating");
    r.intervenedMetric = task->evaluate(&sink).second;
    if (sink.applied() == 0)
        throw Error("intervention: layer " + std::to_string(intervention.layer + 1) + " never produced its " +
                    intervention.tensor +
                    (intervention.tensor == "attn_gate" ? " (the model has no gates)" : std::string()));
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return r;
}

} // namespace outlierlens
