// `outlierlens quantize`: simulated W8A8 (or any bit width) post-training quantization of a model
// folder, calibrated on a few batches and evaluated over several seeds; one row of the paper's tables.

#include "cli/progress_printer.h"
#include "cli/task_data_options.h"

#include "common/atomic_file.h"
#include "common/csv.h"
#include "common/error.h"
#include "quant/evaluation.h"
#include "train/run_folder.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

namespace outlierlens::cli {
namespace {

nlohmann::json toJson(const QuantExperiment& e, const QuantResult& r)
{
    nlohmann::json ranges = nlohmann::json::object();
    for (const auto& [name, range] : r.ranges)
        ranges[name] = {range.first, range.second};
    nlohmann::json sensitivity = nlohmann::json::array();
    for (const LayerSensitivity& s : r.sensitivity)
        sensitivity.push_back(
            {{"layer", s.layer < 0 ? nlohmann::json("embeddings+head") : nlohmann::json(s.layer + 1)},
             {"metric", s.metric},
             {"damage", s.damage}});
    return {{"model", e.modelDir},
            {"data", e.data},
            {"bits_w", e.quant.weightBits},
            {"bits_a", e.quant.activationBits},
            {"bits_kv", e.quant.kvBits > 0 ? e.quant.kvBits : e.quant.activationBits},
            {"weights", e.quant.quantizeWeights
                            ? (e.quant.perChannelWeights ? "symmetric per channel" : "symmetric per tensor")
                            : "float"},
            {"weight_range", e.quant.mseWeights ? "mse" : "minmax"},
            {"activations",
             e.quant.quantizeActivations
                 ? "asymmetric per " + toString(e.quant.activationGranularity) +
                       (e.quant.activationGranularity == ActivationGranularity::Token ? " (dynamic)" : "")
                 : std::string("float")},
            {"activation_granularity", toString(e.quant.activationGranularity)},
            {"activation_placement", toString(e.quant.placement)},
            {"keep_fp_tokens", e.quant.keepFpTokens},
            {"transform", r.transform},
            {"fp_after_transform",
             r.transform.empty() ? nlohmann::json() : nlohmann::json(r.transformedFloatMetric)},
            {"normed_input_max_before",
             r.transform.empty() ? nlohmann::json() : nlohmann::json(r.transformReport.normedMaxBefore)},
            {"max_inf_norm_after_transform",
             r.transform.empty() ? nlohmann::json() : nlohmann::json(r.transformedMaxInfNorm)},
            {"avg_kurtosis_after_transform",
             r.transform.empty() ? nlohmann::json() : nlohmann::json(r.transformedAvgKurtosis)},
            {"normed_input_max_after",
             r.transform.empty() ? nlohmann::json() : nlohmann::json(r.transformReport.normedMaxAfter)},
            {"estimator", toString(e.quant.estimator)},
            {"percentile", e.quant.percentile},
            {"calib_batches", e.calibBatches},
            {"batch_size", e.batchSize},
            {"seeds", e.seeds},
            {"metric", r.metricName},
            {"fp", r.floatMetric},
            {"quantized", r.quantMetrics},
            {"quantized_mean", r.quantMean},
            {"quantized_std", r.quantStd},
            {"outlier_tensor", r.trackedPoint},
            {"max_inf_norm", r.maxInfNorm},
            {"avg_kurtosis", r.avgKurtosis},
            {"max_inf_norm_per_layer", r.maxInfNormPerLayer},
            {"kurtosis_per_layer", r.kurtosisPerLayer},
            {"quantized_weights", r.quantizedWeights},
            {"activation_ranges_seed1", ranges},
            {"sensitivity", sensitivity},
            {"seconds", r.seconds}};
}

std::string toCsv(const QuantExperiment& e, const QuantResult& r)
{
    std::ostringstream out;
    out.precision(8);
    out << "# outlierlens quantize; layers 1-based\n"
        << "model,data,bits_w,bits_a,estimator,calib_batches,seeds,metric,fp,quantized_mean,quantized_std,"
           "max_inf_norm,"
           "avg_kurtosis,act_granularity,keep_fp_tokens,transform,fp_after_transform,placement\n"
        << csvField(e.modelDir) << ',' << csvField(e.data) << ',' << e.quant.weightBits << ','
        << e.quant.activationBits << ',' << toString(e.quant.estimator) << ',' << e.calibBatches << ','
        << e.seeds << ',' << r.metricName << ',' << r.floatMetric << ',' << r.quantMean << ',' << r.quantStd
        << ',' << r.maxInfNorm << ',' << r.avgKurtosis << ',' << toString(e.quant.activationGranularity)
        << ',' << e.quant.keepFpTokens << ',' << csvField(r.transform) << ',';
    if (!r.transform.empty()) out << r.transformedFloatMetric;
    out << ',' << toString(e.quant.placement) << '\n';
    if (!r.sensitivity.empty()) {
        out << "\nrank,layer,metric,damage\n";
        int rank = 1;
        for (const LayerSensitivity& s : r.sensitivity)
            out << rank++ << ','
                << (s.layer < 0 ? std::string("embeddings+head") : std::to_string(s.layer + 1)) << ','
                << s.metric << ',' << s.damage << '\n';
    }
    return out.str();
}

/// " smoothquant 0.5, per-token, keep-fp 1" for the summary line; empty for the paper's setup.
std::string variantText(const QuantOptions& q, const ModelTransform& transform)
{
    std::string text;
    if (transform.any()) text += " " + transform.describe();
    if (q.placement != ActivationPlacement::Paper) text += " " + toString(q.placement);
    if ((transform.any() || q.placement != ActivationPlacement::Paper) &&
        q.activationGranularity != ActivationGranularity::Tensor)
        text += ",";
    if (q.activationGranularity != ActivationGranularity::Tensor)
        text += " per-" + toString(q.activationGranularity);
    if (q.kvBits > 0 && q.kvBits != q.activationBits) text += " KV" + std::to_string(q.kvBits);
    if (q.keepFpTokens > 0)
        text += std::string(text.empty() ? " " : ", ") + "keep-fp " + std::to_string(q.keepFpTokens);
    return text;
}

/// parse(text), its Error reported as a usage error (exit code 2 and the usage hint).
template<class Parse>
auto usageChecked(Parse parse, const std::string& text)
{
    try {
        return parse(text);
    } catch (const Error& err) {
        throw UsageException{err.what()};
    }
}

} // namespace

int runQuantize(const QStringList& args)
{
    Command cmd(
        "quantize",
        "Simulate integer quantization of a BERT, ViT or decoder model folder (symmetric weights, asymmetric "
        "activations, round to nearest; placement in docs/quantization.md), calibrate the activation "
        "ranges on a few training batches, and report the floating-point and quantized task metric (mean "
        "and std over seeds that draw different calibration batches), max inf norm and average kurtosis. "
        "--sensitivity also quantizes one layer's activations at a time and ranks layers by the damage.");
    addTaskDataOptions(cmd, QStringLiteral("Calibration batches per seed"));
    cmd.parser().addOptions({
        {"bits-w", "Weight bits (default 8).", "n"},
        {"bits-a", "Activation bits (default 8).", "n"},
        {"bits-kv", "Bits of the attention's keys and values, the KV cache (default: --bits-a).", "n"},
        {"seeds", "Seeds, each drawing other calibration batches (default 3).", "n"},
        {"estimator", "Activation range: running_minmax (default, momentum 0.9), minmax, mse or percentile.",
         "name"},
        {"percentile", "Percentile for --estimator percentile (default 99.999).", "p"},
        {"weight-range", "Weight range: minmax (default) or mse.", "name"},
        {"per-channel", "Weights per output channel instead of per tensor."},
        {"act-granularity",
         "Activation scales: tensor (default: one calibrated range per site, the paper's), token (each "
         "token's own min-max range at run time) or channel (a calibrated range per hidden channel; "
         "attention scores and probabilities stay per tensor).",
         "name"},
        {"keep-fp",
         "Leave the first N token positions of every activation in floating point and out of the ranges "
         "(the sink token, as PrefixQuant does; default 0).",
         "n"},
        {"placement",
         "Which activations are quantized: paper (default: every site of the paper's code, residual sums "
         "and norms included) or linear-inputs (only what integer matmuls read: the linear layers' inputs "
         "and the keys and values, as SmoothQuant and QuaRot run LLMs).",
         "name"},
        {"smoothquant",
         "Before quantizing, migrate activation ranges into the weights as SmoothQuant does (per channel "
         "s = max|X|^ALPHA / max|W|^(1-ALPHA), folded into each pre-norm and the layers reading it; the "
         "floating-point model is unchanged, which the output shows). Pre-norm decoders and ViTs; ALPHA in "
         "[0, 1], 0.5 in the paper.",
         "alpha"},
        {"rotate",
         "Before quantizing (and after --smoothquant), rotate the residual stream as QuaRot does: 'hadamard' "
         "(a randomized Hadamard matrix for any hidden size, folded into the weights with the norms' scales; "
         "the FFN's down projection also reads its input through one). The floating-point model is "
         "unchanged. Pre-norm decoders except Gemma 2, pre-LN ViTs except CLIP's.",
         "kind"},
        {"weights-only", "Quantize weights only (activations stay in floating point)."},
        {"activations-only", "Quantize activations only (weights stay in floating point)."},
        {"sensitivity", "Also quantize each layer's activations alone and rank layers by the damage."},
        {"json-progress",
         "Report progress as JSON lines on stdout, as `outlierlens train` does ({\"type\": \"progress\", "
         "\"step\": .., \"total\": .., ...}: loading, the floating-point evaluation, the transform, each "
         "seed); the app's job list reads them. The messages stay on stderr."},
    });
    if (auto code = cmd.parse(args)) return *code;
    return cmd.guarded([&]() -> int {
        QuantExperiment e = readTaskDataOptions(cmd);
        e.quant.weightBits = cmd.intValue("bits-w", 8, 2, 16);
        e.quant.activationBits = cmd.intValue("bits-a", 8, 2, 16);
        e.quant.kvBits = cmd.intValue("bits-kv", 0, 2, 16);
        e.seeds = cmd.intValue("seeds", 3, 1, 1000);
        if (cmd.isSet("estimator"))
            e.quant.estimator = usageChecked(parseRangeEstimator, cmd.value("estimator"));
        if (cmd.isSet("act-granularity"))
            e.quant.activationGranularity =
                usageChecked(parseActivationGranularity, cmd.value("act-granularity"));
        e.quant.keepFpTokens = cmd.intValue("keep-fp", 0, 0, 1000000);
        if (cmd.isSet("rotate")) {
            if (cmd.value("rotate") != "hadamard")
                throw UsageException{"--rotate takes 'hadamard', found '" + cmd.value("rotate") + "'"};
            e.transform.rotate = true;
        }
        if (cmd.isSet("placement"))
            e.quant.placement = usageChecked(parseActivationPlacement, cmd.value("placement"));
        if (cmd.isSet("smoothquant")) {
            const double alpha = cmd.doubleValue("smoothquant", 0.5);
            if (!(alpha >= 0 && alpha <= 1)) throw UsageException{"--smoothquant takes an alpha in [0, 1]"};
            e.transform.smoothQuantAlpha = alpha;
        }
        if (e.quant.activationGranularity == ActivationGranularity::Channel &&
            e.quant.estimator != RangeEstimator::RunningMinMax &&
            e.quant.estimator != RangeEstimator::CurrentMinMax)
            throw UsageException{"--act-granularity channel takes --estimator minmax or running_minmax"};
        e.quant.percentile = cmd.doubleValue("percentile", 99.999);
        if (!(e.quant.percentile > 50 && e.quant.percentile <= 100))
            throw UsageException{"--percentile must be in (50, 100]"};
        const std::string weightRange = cmd.isSet("weight-range") ? cmd.value("weight-range") : "minmax";
        if (weightRange != "minmax" && weightRange != "mse")
            throw UsageException{"--weight-range must be minmax or mse, found '" + weightRange + "'"};
        e.quant.mseWeights = weightRange == "mse";
        e.quant.perChannelWeights = cmd.isSet("per-channel");
        if (cmd.isSet("weights-only") && cmd.isSet("activations-only"))
            throw UsageException{"--weights-only and --activations-only exclude each other"};
        e.quant.quantizeActivations = !cmd.isSet("weights-only");
        e.quant.quantizeWeights = !cmd.isSet("activations-only");
        e.sensitivity = cmd.isSet("sensitivity");

        if (cmd.isSet("out")) // before the experiment, not after it
            for (const char* ext : {".json", ".csv"})
                checkCanWrite(cmd.value("out") + ext);
        // Stages: loading, floating point, (the transform's calibration and FP again,) each seed; the
        // sensitivity's layers count as the last stage.
        const std::int64_t stages = 2 + (e.transform.any() ? 2 : 0) + e.seeds;
        std::int64_t stage = 0;
        ProgressPrinter printer("quantize", "stages", true);
        const bool jsonProgress = cmd.isSet("json-progress");
        const QuantResult r = runQuantExperiment(
            e,
            [&](const std::string& message) {
                std::fprintf(stderr, "outlierlens quantize: %s\n", message.c_str());
                if (jsonProgress) printer.update(std::min(stage++, stages - 1), stages);
            },
            &interruptFlag());
        if (jsonProgress) printer.update(stages, stages);
        const nlohmann::json j = toJson(e, r);
        if (cmd.isSet("out")) {
            const std::string prefix = cmd.value("out");
            writeTextFileAtomically(prefix + ".json", j.dump(2) + "\n");
            writeTextFileAtomically(prefix + ".csv", toCsv(e, r));
        }
        const char* unit = r.metricName == "accuracy" ? "%" : "";
        const double scale = r.metricName == "accuracy" ? 100.0 : 1.0;
        std::printf("%s: FP %s %.2f%s, W%dA%d%s %.2f +- %.2f%s (%d seeds); max inf norm %.2f, avg kurtosis "
                    "%.2f (%s)\n",
                    std::filesystem::path(e.modelDir).filename().c_str(), r.metricName.c_str(),
                    r.floatMetric * scale, unit, e.quant.weightBits, e.quant.activationBits,
                    variantText(e.quant, e.transform).c_str(), r.quantMean * scale, r.quantStd * scale, unit,
                    e.seeds, r.maxInfNorm, r.avgKurtosis, r.trackedPoint.c_str());
        if (!r.transform.empty())
            std::printf("  %s: FP %s %.4g after the transform (%.4g before); max inf norm %.2f -> %.2f, avg "
                        "kurtosis %.2f -> %.2f (%s); largest |x| entering the pre-norms' linear layers %.4g "
                        "-> %.4g\n",
                        r.transform.c_str(), r.metricName.c_str(), r.transformedFloatMetric * scale,
                        r.floatMetric * scale, r.maxInfNorm, r.transformedMaxInfNorm, r.avgKurtosis,
                        r.transformedAvgKurtosis, r.trackedPoint.c_str(), r.transformReport.normedMaxBefore,
                        r.transformReport.normedMaxAfter);
        for (std::size_t i = 0; i < r.sensitivity.size(); ++i) {
            const LayerSensitivity& s = r.sensitivity[i];
            std::printf("  sensitivity #%zu: %s: %s %.4g (damage %.4g)\n", i + 1,
                        s.layer < 0 ? "embeddings and head"
                                    : ("layer " + std::to_string(s.layer + 1)).c_str(),
                        r.metricName.c_str(), s.metric * scale, s.damage * scale);
        }
        std::printf("%s\n", j.dump().c_str());
        return Ok;
    });
}

} // namespace outlierlens::cli
