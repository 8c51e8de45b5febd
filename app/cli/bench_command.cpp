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

/// The machine's matrix-product peak as LibTorch reaches it here: the best of 3 products of two n x n
/// matrices in `dtype` on the configured threads, in GFLOP/s (2 n^3 per product). Call it outside bf16
/// autocast, which would turn the float32 product into a bf16 one.
double measuredPeakGflops(torch::ScalarType dtype, int n = 2048)
{
    c10::InferenceMode guard;
    torch::manual_seed(0);
    const torch::Tensor a = torch::randn({n, n}).to(dtype), b = torch::randn({n, n}).to(dtype);
    torch::mm(a, b); // warm-up
    double best = 1e30;
    for (int i = 0; i < 3; ++i) {
        const auto start = std::chrono::steady_clock::now();
        torch::mm(a, b);
        best =
            std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return 2.0 * double(n) * n * n / best / 1e9;
}

/// The achieved rate of `gflop` per forward at `ms`, and its share of the measured peak of the dtype the
/// products ran in.
nlohmann::json rateJson(double gflop, double ms, Precision precision)
{
    const double fp32 = measuredPeakGflops(torch::kFloat);
    const double bf16 = measuredPeakGflops(torch::kBFloat16);
    const double achieved = gflop / (ms / 1000.0);
    const double peak = precision == Precision::Bf16 ? bf16 : fp32;
    return {{"gflop_per_forward", gflop},
            {"achieved_gflops", achieved},
            {"peak_gflops_fp32", fp32},
            {"peak_gflops_bf16", bf16},
            {"share_of_peak", achieved / peak}};
}

/// Matrix-product FLOPs of one BERT encoder forward (2 per multiply-add): per layer the Q, K, V and output
/// projections 4 * 2 T d^2, the scores and P.V 2 * 2 T^2 d, the FFN 2 * 2 T d d_ff; times layers and batch.
double bertGflop(const BertConfig& c, int batch, int seq)
{
    const double T = seq, d = c.hiddenSize, ff = c.intermediateSize;
    return double(batch) * c.numLayers * (8.0 * T * d * d + 4.0 * T * T * d + 4.0 * T * d * ff) / 1e9;
}

/// The same for a decoder, from its weights: 2 T per weight of every matrix of the layers (the
/// projections, whatever the family's layout), the scores and P.V 4 T^2 H d_head per layer, and the LM
/// head 2 T d V when logits are computed.
double decoderGflop(DecoderNetwork& network, int batch, int seq)
{
    const DecoderConfig& c = network.config();
    double matrixWeights = 0;
    for (const auto& p : network.module().named_parameters(true)) {
        const std::string& name = p.key();
        const bool table = name.find("embed") != std::string::npos || name.find("wte") != std::string::npos ||
                           name.find("wpe") != std::string::npos || name.find("lm_head") != std::string::npos;
        if (p.value().dim() == 2 && !table) matrixWeights += double(p.value().numel());
    }
    const double T = seq;
    return double(batch) *
           (2.0 * T * matrixWeights + 4.0 * T * T * c.numHeads * c.headDim() * c.numLayers +
            2.0 * T * c.hiddenSize * c.vocabSize) /
           1e9;
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
        {"rate", rateJson(decoderGflop(network, batch, seq), summarize(plain).median, precision)},
    };
    std::printf("%s\n", out.dump().c_str());
    return Ok;
}

} // namespace

int runBench(const QStringList& args)
{
    Command cmd("bench", "Time forward passes with and without capture; prints one JSON line (milliseconds "
                         "per forward). BERT: every capture point. Decoders (--model only): every capture "
                         "point of one layer, and peak RSS against the weights' size. \"rate\": the matrix-"
                         "product GFLOP of one forward, the rate the median forward without capture reached, "
                         "and its share of this machine's peak (float32 and bf16 2048 x 2048 products "
                         "timed after the forwards).");
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
        double capturedBytes = 0;
        std::vector<double> plain, captured;
        {
            const AutocastScope autocast(precision); // the forwards only: the peaks below run as they are
            if (!timeInterleaved([&](ActivationSink* sink) { network.forward(ids, types, mask, sink); }, {},
                                 runs, warmup, plain, captured, capturedBytes))
                return interruptedExitCode();
        }

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
            {"rate", rateJson(bertGflop(network.config(), batch, seq), summarize(plain).median, precision)},
        };
        std::printf("%s\n", out.dump().c_str());
        return Ok;
    });
}

} // namespace outlierlens::cli
