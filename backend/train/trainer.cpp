#include "train/trainer.h"
#include "tasks/probe_metrics.h"

#include "common/error.h"
#include "common/json_util.h"
#include "io/safetensors.h"
#include "model/precision.h"
#include "model/runtime.h"
#include "tasks/config/lr_schedule.h"
#include "tasks/training_task.h"
#include "train/adamw.h"
#include "train/run_folder.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <unistd.h>

namespace outlierlens {
namespace fs = std::filesystem;

namespace {

/// splitmix64: independent, reproducible seeds for (run seed, step) pairs.
std::uint64_t mixSeed(std::uint64_t seed, std::uint64_t step)
{
    std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + step + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

std::string modelCard(const TrainConfig& config, const TrainingTask& task, std::int64_t step,
                      const nlohmann::json& lastEval, double seconds)
{
    std::string card = "# " + task.describe() + "\n\n";
    card += "Trained by OutlierLens (`outlierlens train`) for " + std::to_string(step) + " of " +
            std::to_string(config.steps) + " steps";
    if (seconds > 0)
        card += " in " + std::to_string(int(seconds / 60)) + " min on " + std::to_string(coreCount()) +
                " CPU cores";
    card += ".\n"; // the attention variant, resolved (gamma from alpha), is in the title
    if (config.clipWarmupSteps > 0)
        card += "Clipped softmax faded in over the first " + std::to_string(config.clipWarmupSteps) +
                " steps (clip_warmup_steps).\n";
    card += "\n";
    if (!lastEval.is_null())
        card += "Last evaluation (step " + std::to_string(lastEval.value("step", std::int64_t(0))) +
                "):\n\n```json\n" + lastEval.dump(2) + "\n```\n\n";
    card +=
        "The full configuration is in the run folder's run.json; this folder loads in every OutlierLens view "
        "and command.\n";
    return card;
}

} // namespace

TrainResult runTraining(const TrainConfig& config, bool resume, const std::atomic<bool>& stop,
                        const std::function<void(const std::string&)>& emit)
{
    validateTrainConfig(config);
    RunFolder run(config.output);
    fs::create_directories(config.output);
    const RunFolderLock lock(config.output); // before anything in the folder is read or written
    const std::vector<std::string> existing = run.checkpoints();
    if (!resume && (fs::exists(run.path("final")) || !existing.empty()))
        throw Error(config.output +
                    ": already holds a run; use --resume to continue it or choose another --output");
    if (resume && existing.empty() && fs::exists(run.path("final")))
        throw Error(config.output + ": this run has finished (final/ exists); nothing to resume");
    if (!resume || !fs::exists(run.path("run.json")))
        writeTextFileAtomically(run.path("run.json"), trainConfigToJson(config));

    configureTorchThreads(config.threads);
    std::string precisionNotice;
    const Precision precision = effectivePrecision(config.precision, &precisionNotice);
    if (!precisionNotice.empty())
        emit(nlohmann::json{{"type", "notice"}, {"message", "--precision bf16: " + precisionNotice}}.dump());
    torch::manual_seed(config.seed);
    std::unique_ptr<TrainingTask> task = makeTrainingTask(config);
    AdamW optimizer(decayGroups(task->module(), config.weightDecay, config.layerNormDecay), config.beta1,
                    config.beta2, config.adamEps);

    RunStatus status;
    status.total = config.steps;
    status.pid = ::getpid();
    std::int64_t start = 0;
    if (resume && !existing.empty()) {
        const std::string checkpoint = existing.back();
        const nlohmann::json state = jsonutil::parseFile(checkpoint + "/trainer_state.json");
        start = jsonutil::getInt(state, "step", checkpoint + "/trainer_state.json");
        task->loadWeights(checkpoint);
        optimizer.loadState(readSafetensors(checkpoint + "/optimizer.safetensors"));
        run.truncateMetricsAfter(start);
        status.lastCheckpoint = fs::relative(checkpoint, config.output).string();
    } else if (resume) {
        run.truncateMetricsAfter(0); // killed before its first checkpoint: start over
    }

    TrainResult result;
    nlohmann::json lastEval;
    const auto began = std::chrono::steady_clock::now();
    auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    };

    auto checkpoint = [&](std::int64_t step) {
        const std::string dir = run.checkpointDir(step);
        const std::string temp = dir + ".tmp";
        fs::remove_all(temp);
        task->saveModel(temp, modelCard(config, *task, step, lastEval, 0));
        writeSafetensors(temp + "/optimizer.safetensors", optimizer.state());
        writeTextFileAtomically(
            temp + "/trainer_state.json",
            nlohmann::json{{"step", step}, {"seed", config.seed}, {"threads", config.threads}}.dump(2));
        fs::remove_all(dir);
        fs::rename(temp, dir);
        run.pruneCheckpoints(config.keepCheckpoints);
        status.lastCheckpoint = fs::relative(dir, config.output).string();
        emit(nlohmann::json{{"type", "checkpoint"}, {"step", step}, {"path", dir}}.dump());
    };
    auto evaluate = [&](std::int64_t step, double loss, double lr) {
        task->module().eval();
        const auto [metric, value] = task->evaluate();
        nlohmann::json line = probeMetrics(*task);
        line["type"] = "eval";
        line["step"] = step;
        line["loss"] = loss;
        line["lr"] = lr;
        line["eval"] = {{metric, value}};
        run.appendMetrics(line.dump());
        emit(line.dump());
        lastEval = line;
    };

    status.state = "running";
    status.step = start;
    run.writeStatus(status);
    if (start == 0) evaluate(0, std::nan(""), 0.0);

    double windowLoss = 0;
    int windowSteps = 0;
    double lr = 0;
    std::int64_t step = start;
    for (; step < config.steps; ++step) {
        if (stop) {
            checkpoint(step);
            result.outcome = TrainOutcome::Stopped;
            result.message =
                "stopped at step " + std::to_string(step) + ", checkpoint saved; resuming continues from it";
            break;
        }
        const std::uint64_t stepSeed = mixSeed(config.seed, std::uint64_t(step));
        torch::manual_seed(stepSeed); // dropout draws from the global generator
        at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(stepSeed ^ 0x5bd1e995ull);
        task->module().train();
        optimizer.zeroGrad();
        torch::Tensor loss;
        {
            // Forward pass and loss under autocast; the backward pass follows the recorded dtypes.
            const AutocastScope autocast(precision);
            loss = task->trainLoss(step, gen);
        }
        const double lossValue = loss.item<double>();
        if (!std::isfinite(lossValue)) {
            result.outcome = TrainOutcome::Diverged;
            result.message =
                "the loss became " + std::string(std::isnan(lossValue) ? "NaN" : "infinite") + " at step " +
                std::to_string(step + 1) + "; training stopped" +
                (status.lastCheckpoint.empty() ? " (no checkpoint was written yet)"
                                               : "; the last good checkpoint is " + status.lastCheckpoint);
            break;
        }
        loss.backward();
        if (config.gradClip > 0) clipGradNorm(task->module(), config.gradClip);
        lr = learningRate(config.lr, step, config.warmupSteps, config.steps, config.decay);
        optimizer.step(lr);
        windowLoss += lossValue;
        ++windowSteps;

        const std::int64_t done = step + 1;
        if (done % config.logEvery == 0 || done == config.steps) {
            const double mean = windowLoss / windowSteps;
            const double perStep = elapsed() / double(done - start);
            const nlohmann::json line = {
                {"type", "progress"},  {"step", done}, {"total", config.steps},
                {"loss", mean},        {"lr", lr},     {"eta", perStep * double(config.steps - done)},
                {"elapsed", elapsed()}};
            run.appendMetrics(nlohmann::json{{"step", done}, {"loss", mean}, {"lr", lr}}.dump());
            emit(line.dump());
            windowLoss = 0;
            windowSteps = 0;
            status.step = done;
            run.writeStatus(status);
        }
        if (done % config.evalEvery == 0 || done == config.steps) evaluate(done, lossValue, lr);
        if (done % config.checkpointEvery == 0 && done != config.steps) checkpoint(done);
    }
    result.step = step;

    if (result.outcome == TrainOutcome::Finished && step == config.steps) {
        const std::string finalDir = run.path("final");
        const std::string temp = finalDir + ".tmp";
        fs::remove_all(temp);
        task->saveModel(temp, modelCard(config, *task, step, lastEval, elapsed()));
        fs::remove_all(finalDir);
        fs::rename(temp, finalDir);
        result.lastCheckpoint = finalDir;
        result.message = "finished " + std::to_string(step) + " steps; model in " + finalDir;
        status.state = "finished";
        status.lastCheckpoint = "final";
    } else {
        result.lastCheckpoint =
            status.lastCheckpoint.empty() ? std::string() : run.path(status.lastCheckpoint);
        status.state = result.outcome == TrainOutcome::Diverged ? "diverged" : "stopped";
    }
    status.step = step;
    status.message = result.message;
    run.writeStatus(status);
    const char* outcome = result.outcome == TrainOutcome::Finished  ? "finished"
                          : result.outcome == TrainOutcome::Stopped ? "stopped"
                                                                    : "diverged";
    emit(nlohmann::json{{"type", "done"}, {"outcome", outcome}, {"step", step}, {"message", result.message}}
             .dump());
    return result;
}

} // namespace outlierlens
