// `outlierlens bench`: forward-pass timings with and without every capture point recorded.

#include "cli/command_line.h"

#include "analysis/recording_sink.h"
#include "common/error.h"
#include "model/bert_network.h"
#include "model/runtime.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

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

} // namespace

int runBench(const QStringList& args)
{
    Command cmd("bench", "Time BERT forward passes with every capture point recorded and without capture; "
                         "prints one JSON line (milliseconds per forward).");
    cmd.parser().addOptions({
        {"model", "Model folder to time.", "dir"},
        {"config",
         "Instead of --model: a randomly initialised model of this size (bert-base, bert-large, "
         "bert-6l, bert-small, bert-mini, bert-tiny).",
         "name"},
        {"seq", "Sequence length (default 128).", "T"},
        {"batch", "Batch size (default 1).", "B"},
        {"runs", "Timed runs of each kind (default 20).", "N"},
        {"warmup", "Untimed runs first (default 3).", "N"},
        {"threads", "LibTorch threads (default: all cores).", "N"},
    });
    if (auto code = cmd.parse(args)) return *code;
    try {
        const int threads = configureTorchThreads(cmd.intValue("threads", 0, 1, 1024));
        const int seq = cmd.intValue("seq", 128, 2, 1 << 16);
        const int batch = cmd.intValue("batch", 1, 1, 4096);
        const int runs = cmd.intValue("runs", 20, 1, 100000);
        const int warmup = cmd.intValue("warmup", 3, 0, 1000);
        if (cmd.isSet("model") == cmd.isSet("config"))
            throw UsageException{"give exactly one of --model and --config"};

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
        auto timeOne = [&](bool capture) {
            RecordingSink sink;
            const auto start = std::chrono::steady_clock::now();
            network.forward(ids, types, mask, capture ? &sink : nullptr);
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
        std::vector<double> plain, captured;
        for (int i = 0; i < runs && !interruptFlag(); ++i) { // interleaved so drift hits both alike
            plain.push_back(timeOne(false));
            captured.push_back(timeOne(true));
        }
        if (plain.empty()) return Interrupted;

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
            {"runs", int(plain.size())},
            {"no_capture_ms", toJson(summarize(plain))},
            {"capture_all_ms", toJson(summarize(captured))},
            {"captured_mb", capturedBytes / 1e6},
        };
        std::printf("%s\n", out.dump().c_str());
        return Ok;
    } catch (const UsageException& e) {
        return cmd.fail(e.message, UsageError);
    } catch (const std::exception& e) {
        return cmd.fail(e.what());
    }
}

} // namespace outlierlens::cli
