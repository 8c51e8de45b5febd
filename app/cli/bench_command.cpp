// `outlierlens bench`: forward-pass timings with and without every capture point recorded.

#include "cli/command_line.h"

#include "analysis/recording_sink.h"
#include "common/error.h"
#include "model/bert_network.h"
#include "model/decoder_network.h"
#include "model/model_family.h"
#include "model/runtime.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <set>

#include <sys/resource.h>

namespace outlierlens::cli {
namespace {

struct Timing
{
    double median = 0, min = 0;
};

Timing summarize(std::vector<double> ms)
{
    std::sort(ms.begin(), ms.end());
    Timing t;
    t.min = ms.front();
    t.median = ms.size() % 2 ? ms[ms.size() / 2] : 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]);
    return t;
}

nlohmann::json toJson(const Timing& t)
{
    return {{"median", t.median}, {"min", t.min}};
}

/// Times `forward(sink)` without a sink and with a fresh RecordingSink of `names` (empty = every capture
/// point), interleaved run by run so drift hits both alike, after `warmup` untimed pairs. Returns false
/// if interrupted before the first timed pair; `capturedBytes` is what one captured pass recorded.
bool timeInterleaved(const std::function<void(ActivationSink*)>& forward, const std::set<std::string>& names,
                     int runs, int warmup, std::vector<double>& plain, std::vector<double>& captured,
                     double& capturedBytes)
{
    auto timeOne = [&](bool capture) {
        RecordingSink sink = names.empty() ? RecordingSink() : RecordingSink(names);
        const auto start = std::chrono::steady_clock::now();
        forward(capture ? &sink : nullptr);
        const auto end = std::chrono::steady_clock::now();
        if (capture) {
            capturedBytes = 0;
            for (const auto& [name, t] : sink.tensors())
                capturedBytes += double(t.numel()) * double(t.element_size());
        }
        return std::chrono::duration<double, std::milli>(end - start).count();
    };
    for (int i = 0; i < warmup; ++i) {
        timeOne(false);
        timeOne(true);
    }
    for (int i = 0; i < runs && !interruptFlag(); ++i) {
        plain.push_back(timeOne(false));
        captured.push_back(timeOne(true));
    }
    return !plain.empty();
}

double peakRssMb()
{
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return double(usage.ru_maxrss) / 1024.0; // kilobytes on Linux
}

/// Decoder timings: no capture vs every capture point of one layer; peak RSS against the weights.
int benchDecoder(Command& cmd, const std::string& modelDir, int seq, int batch, int runs, int warmup,
                 int threads, Precision precision)
{
    DecoderNetwork network = DecoderNetwork::load(modelDir);
    if (precision == Precision::Bf16) network.setComputeDtype(torch::kBFloat16);
    const DecoderConfig& c = network.config();
    if (c.maxPositions > 0 && seq > c.maxPositions)
        throw UsageException{"--seq " + std::to_string(seq) + " exceeds the model's " +
                             std::to_string(c.maxPositions) + " positions"};
    const int layer = cmd.intValue("capture-layer", c.numLayers / 2, 0, c.numLayers - 1);
    std::set<std::string> names;
    for (CapturePoint p : perLayerCapturePoints())
        names.insert(captureName(p, layer));
    torch::manual_seed(1);
    const torch::Tensor ids = torch::randint(0, c.vocabSize, {batch, seq}, torch::kLong);
    const double rssLoaded = peakRssMb();

    c10::InferenceMode guard;
    double capturedBytes = 0;
    std::vector<double> plain, captured;
    if (!timeInterleaved([&](ActivationSink* sink) { network.forward(ids, {}, sink, true); }, names, runs,
                         warmup, plain, captured, capturedBytes))
        return interruptedExitCode();
    const double weightsMb = double(network.parameterBytes()) / (1024.0 * 1024.0);
    const double peak = peakRssMb();
    const nlohmann::json out = {
        {"model", modelDir},
        {"architecture", toString(c.arch)},
        {"layers", c.numLayers},
        {"hidden", c.hiddenSize},
        {"seq", seq},
        {"batch", batch},
        {"threads", threads},
        {"blas_kernels", blasKernels()},
        {"precision", toString(precision)},
        {"runs", int(plain.size())},
        {"capture_layer", layer},
        {"no_capture_ms", toJson(summarize(plain))},
        {"capture_layer_ms", toJson(summarize(captured))},
        {"captured_mb", capturedBytes / 1e6},
        {"weights_mib", weightsMb},
        {"rss_after_load_mib", rssLoaded},
        {"peak_rss_mib", peak},
        {"peak_rss_over_weights", peak / weightsMb},
    };
    std::printf("%s\n", out.dump().c_str());
    return Ok;
}

} // namespace

int runBench(const QStringList& args)
{
    Command cmd("bench", "Time forward passes with and without capture; prints one JSON line (milliseconds "
                         "per forward). BERT: every capture point. Decoders (--model only): every capture "
                         "point of one layer, and peak RSS against the weights' size.");
    cmd.parser().addOptions({
        {"model", "Model folder to time.", "dir"},
        {"config",
         "Instead of --model: a randomly initialised model of this size (bert-base, bert-large, "
         "bert-6l, bert-small, bert-mini, bert-tiny).",
         "name"},
        {"seq", "Sequence length (default 128; decoders 256).", "T"},
        {"batch", "Batch size (default 1).", "B"},
        {"runs", "Timed runs of each kind (default 20).", "N"},
        {"warmup", "Untimed runs first (default 3).", "N"},
        {"threads", "LibTorch threads (default: all cores).", "N"},
        {"capture-layer", "Decoders: the layer whose capture points are recorded (default: the middle one).",
         "N"},
    });
    cmd.addPrecisionOption("fp32 (default) or bf16: BERT under bf16 autocast, decoders computing in bf16.");
    if (auto code = cmd.parse(args)) return *code;
    return cmd.guarded([&]() -> int {
        const int threads = configureTorchThreads(cmd.intValue("threads", 0, 1, 1024));
        const int seq = cmd.intValue("seq", 128, 2, 1 << 16);
        const int batch = cmd.intValue("batch", 1, 1, 4096);
        const int runs = cmd.intValue("runs", 20, 1, 100000);
        const int warmup = cmd.intValue("warmup", 3, 0, 1000);
        if (cmd.isSet("model") == cmd.isSet("config"))
            throw UsageException{"give exactly one of --model and --config"};
        const Precision precision = cmd.precision();
        if (cmd.isSet("model") && isModelDirOf(cmd.value("model"), FamilyEngine::Decoder))
            return benchDecoder(cmd, cmd.value("model"), cmd.isSet("seq") ? seq : 256, batch, runs, warmup,
                                threads, precision);
        if (cmd.isSet("capture-layer")) throw UsageException{"--capture-layer is for decoder models"};

        BertNetwork network =
            cmd.isSet("model")
                ? BertNetwork::load(cmd.value("model"))
                : BertNetwork::create(BertConfig::preset(cmd.value("config")), BertHead::Encoder, 0);
        if (seq > network.config().maxPositions)
            throw UsageException{"--seq " + std::to_string(seq) + " exceeds the model's " +
                                 std::to_string(network.config().maxPositions) + " positions"};

        torch::manual_seed(1);
        const torch::Tensor ids = torch::randint(999, network.config().vocabSize, {batch, seq}, torch::kLong);
        const torch::Tensor types = torch::zeros({batch, seq}, torch::kLong);
        const torch::Tensor mask = torch::ones({batch, seq}, torch::kLong);

        c10::InferenceMode guard;
        const AutocastScope autocast(precision);
        double capturedBytes = 0;
        std::vector<double> plain, captured;
        if (!timeInterleaved([&](ActivationSink* sink) { network.forward(ids, types, mask, sink); }, {}, runs,
                             warmup, plain, captured, capturedBytes))
            return interruptedExitCode();

        std::int64_t parameters = 0;
        for (const auto& p : network.module().parameters())
            parameters += p.numel();
        const nlohmann::json out = {
            {"model", cmd.isSet("model") ? cmd.value("model") : "random " + cmd.value("config")},
            {"parameters", parameters},
            {"layers", network.config().numLayers},
            {"hidden", network.config().hiddenSize},
            {"seq", seq},
            {"batch", batch},
            {"threads", threads},
            {"blas_kernels", blasKernels()},
            {"precision", toString(precision)},
            {"runs", int(plain.size())},
            {"no_capture_ms", toJson(summarize(plain))},
            {"capture_all_ms", toJson(summarize(captured))},
            {"captured_mb", capturedBytes / 1e6},
        };
        std::printf("%s\n", out.dump().c_str());
        return Ok;
    });
}

} // namespace outlierlens::cli
