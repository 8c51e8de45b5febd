#include "train/trainer.h"
#include "tasks/probe_metrics.h"

#include "analysis/metrics.h"
#include "common/error.h"
#include "common/json_util.h"
#include "io/safetensors.h"
#include "model/precision.h"
#include "model/runtime.h"
#include "tasks/config/lr_schedule.h"
#include "tasks/data/canvas_data.h"
#include "tasks/training_task.h"
#include "train/adamw.h"
#include "train/distributed.h"
#include "train/run_folder.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
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

/// A private temporary folder, removed at the end, for the files a task writes next to its run: ranks
/// other than 0 must not touch the run folder (which another machine may not even have).
class ScratchFolder
{
public:
    ScratchFolder(bool wanted, int rank)
    {
        if (!wanted) return;
        const std::string path = workerScratchFolder(rank, long(::getpid()));
        std::error_code failed;
        fs::remove_all(path, failed); // left by an earlier process with the same id
        if (!fs::create_directories(path, failed) || failed)
            throw Error(path + ": cannot create a scratch folder (" + failed.message() + ")");
        m_path = path;
    }
    ~ScratchFolder()
    {
        std::error_code ignored;
        if (!m_path.empty()) fs::remove_all(m_path, ignored);
    }
    ScratchFolder(const ScratchFolder&) = delete;
    ScratchFolder& operator=(const ScratchFolder&) = delete;
    const std::string& path() const { return m_path; }

private:
    std::string m_path;
};

/// Every rank must train the same model on the same data as rank 0: on several machines each one
/// reads its own command line and files. Throws Error naming the first field that differs (the run
/// folder and the thread count may differ from machine to machine).
void checkSameConfig(const TrainConfig& config, TrainingGroup& group)
{
    const nlohmann::json mine = nlohmann::json::parse(trainConfigToJson(config));
    const nlohmann::json leader = nlohmann::json::parse(group.broadcastText(trainConfigToJson(config)));
    for (auto it = mine.begin(); it != mine.end(); ++it) {
        if (it.key() == "output" || it.key() == "threads") continue;
        if (!leader.contains(it.key()) || leader[it.key()] != *it)
            throw Error("rank " + std::to_string(group.rank()) + ": " + it.key() + " is " + it->dump() +
                        " here but " + (leader.contains(it.key()) ? leader[it.key()].dump() : "absent") +
                        " on rank 0; every machine must run the same configuration");
    }
}

/// Rank 0 alone touches the run folder: it checks and locks it and writes run.json before the group
/// forms, so a refused folder ends the run before any other rank waits for it.
/// Every file or folder the config names must be there before the run folder is made: a missing corpus used
/// to leave run.json and a lock behind.
void checkInputsExist(const TrainConfig& config)
{
    const auto need = [](const std::string& path, const char* field) {
        std::error_code ec;
        if (!path.empty() && !fs::exists(path, ec))
            throw Error(std::string(field) + ": " + path + ": no such file or folder");
    };
    need(config.corpus, "corpus");
    need(config.validCorpus, "valid_corpus");
    need(config.vocab, "vocab");
    need(config.tokenizer, "tokenizer");
    need(config.init, "init");
    // Task image also takes the names of the built-in data sets.
    if (config.data != "fashion-mnist" && config.data != kCanvasData) need(config.data, "data");
}

std::unique_ptr<RunFolderLock> prepareRunFolder(const TrainConfig& config, bool resume, RunFolder& run,
                                                const std::function<void(const std::string&)>& emit)
{
    checkInputsExist(config);
    std::error_code ec;
    for (const char* modelFile : {"config.json", "model.safetensors", "pytorch_model.bin"})
        if (!resume && fs::exists(fs::path(config.output) / modelFile, ec))
            throw Error(
                config.output + ": holds a model (" + modelFile +
                "), not a run folder; choose another --output (training writes its model to <output>/final)");
    fs::create_directories(config.output);
    auto lock =
        std::make_unique<RunFolderLock>(config.output); // before anything in the folder is read or written
    const std::vector<std::string> existing = run.checkpoints();
    if (!resume && (fs::exists(run.path("final")) || !existing.empty()))
        throw Error(config.output +
                    ": already holds a run; use --resume to continue it or choose another --output");
    if (resume && existing.empty() && fs::exists(run.path("final")))
        throw Error(config.output + ": this run has finished (final/ exists); nothing to resume");
    if (!resume || !fs::exists(run.path("run.json"))) {
        writeTextFileAtomically(run.path("run.json"), trainConfigToJson(config));
    } else if (const std::optional<TrainConfig> recorded = run.readConfig();
               recorded && recorded->worldSize != config.worldSize) {
        // The same global batch is shared differently: the samples, and so the losses, stay the same.
        emit(nlohmann::json{{"type", "notice"},
                            {"message", "resuming with " + std::to_string(config.worldSize) +
                                            " processes; the run had " + std::to_string(recorded->worldSize)}}
                 .dump());
        TrainConfig updated = *recorded;
        updated.worldSize = config.worldSize;
        writeTextFileAtomically(run.path("run.json"), trainConfigToJson(updated));
    }
    return lock;
}

/// runTraining() itself; `group` is set once this process has joined its training group.
TrainResult train(const TrainConfig& config, bool resume, const std::atomic<bool>& stop,
                  const std::function<void(const std::string&)>& emitLine, const DistributedSetup& dist,
                  std::unique_ptr<TrainingGroup>& group)
{
    validateTrainConfig(config);
    if (dist.worldSize != config.worldSize)
        throw Error("world_size: the run config says " + std::to_string(config.worldSize) +
                    " processes, but this process is one of " + std::to_string(dist.worldSize));
    const bool leader = dist.rank == 0;
    // Other ranks report nothing: rank 0 speaks for the group (the launcher relays its lines).
    const std::function<void(const std::string&)> emit = [&](const std::string& line) {
        if (leader) emitLine(line);
    };
    RunFolder run(config.output);
    std::unique_ptr<RunFolderLock> lock;
    if (leader) lock = prepareRunFolder(config, resume, run, emit);

    configureTorchThreads(config.threads > 0 ? config.threads
                                             : std::max(1, coreCount() / dist.localWorldSize));
    if (dist.worldSize > 1) {
        group = std::make_unique<TrainingGroup>(dist);
        checkSameConfig(config, *group);
    }
    // Ranks other than 0 never write into the run folder, not even the files a task creates.
    const ScratchFolder scratch(!leader, dist.rank);
    TrainConfig taskConfig = config;
    if (!leader) taskConfig.output = scratch.path();

    std::string precisionNotice;
    const Precision precision = effectivePrecision(config.precision, &precisionNotice);
    if (!precisionNotice.empty())
        emit(nlohmann::json{{"type", "notice"}, {"message", "--precision bf16: " + precisionNotice}}.dump());
    torch::manual_seed(config.seed);
    std::unique_ptr<TrainingTask> task = makeTrainingTask(taskConfig);
    task->setBatchShard({dist.rank, dist.worldSize});
    AdamW optimizer(decayGroups(task->module(), config.weightDecay, config.layerNormDecay), config.beta1,
                    config.beta2, config.adamEps);

    RunStatus status;
    status.total = config.steps;
    status.pid = ::getpid();
    std::int64_t start = 0;
    const std::vector<std::string> existing = leader ? run.checkpoints() : std::vector<std::string>();
    if (resume && !existing.empty()) {
        const std::string checkpoint = existing.back();
        const nlohmann::json state = jsonutil::parseFile(checkpoint + "/trainer_state.json");
        start = jsonutil::getInt(state, "step", checkpoint + "/trainer_state.json");
        task->loadWeights(checkpoint);
        optimizer.loadState(readSafetensors(checkpoint + "/optimizer.safetensors"));
        run.truncateMetricsAfter(start);
        status.lastCheckpoint = fs::relative(checkpoint, config.output).string();
    } else if (resume && leader) {
        // Killed before its first checkpoint: start over, dropping every line (its step-0 evaluation too,
        // which the new start writes again).
        run.truncateMetricsAfter(-1);
    }
    // A model to continue (--init, a checkpoint) with NaN or Inf weights is refused by name, as quantize
    // refuses it, instead of an evaluation of NaN and a 'diverged' at the first step.
    if (leader)
        if (const std::string notice = nonFiniteWeightsNotice(task->module()); !notice.empty())
            throw Error((config.init.empty() ? config.output : config.init) + ": " + notice);
    if (group) {
        // Rank 0's weights (fresh or resumed) and optimizer state become everyone's: the other ranks need
        // neither the run folder nor a shared file system.
        start = group->broadcast(start);
        group->broadcastModule(task->module());
        if (start > 0)
            optimizer.loadState(
                group->broadcastTensors(leader ? optimizer.state() : std::map<std::string, torch::Tensor>()));
        group->attachReducer(task->module());
    }

    TrainResult result;
    nlohmann::json lastEval;
    const auto began = std::chrono::steady_clock::now();
    auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    };

    // Only rank 0 writes checkpoints, metrics and status; every write is a temp file or folder + rename.
    auto checkpoint = [&](std::int64_t step) {
        if (!leader) return;
        const std::string dir = run.checkpointDir(step);
        const std::string temp = dir + ".tmp";
        fs::remove_all(temp);
        try {
            task->saveModel(temp, modelCard(config, *task, step, lastEval, 0));
            writeSafetensors(temp + "/optimizer.safetensors", optimizer.state());
            writeTextFileAtomically(temp + "/trainer_state.json",
                                    nlohmann::json{{"step", step},
                                                   {"seed", config.seed},
                                                   {"threads", config.threads},
                                                   {"world_size", config.worldSize}}
                                        .dump(2));
        } catch (...) {
            std::error_code ignored; // a full disk: no half-written checkpoint folder is left behind
            fs::remove_all(temp, ignored);
            throw;
        }
        fs::remove_all(dir);
        fs::rename(temp, dir);
        run.pruneCheckpoints(config.keepCheckpoints);
        status.lastCheckpoint = fs::relative(dir, config.output).string();
        emit(nlohmann::json{{"type", "checkpoint"}, {"step", step}, {"path", dir}}.dump());
    };
    auto evaluate = [&](std::int64_t step, double loss, double lr) {
        if (!leader) return; // the others wait for it in the next step's first collective
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

    auto writeStatus = [&] {
        if (leader) run.writeStatus(status);
    };
    status.state = "running";
    status.step = start;
    writeStatus();
    if (start == 0) evaluate(0, std::nan(""), 0.0);

    double windowLoss = 0;
    int windowSteps = 0;
    double lr = 0;
    std::int64_t step = start;
    for (; step < config.steps; ++step) {
        if (group) group->setStep(step);
        // All ranks stop at the same step, whichever of them was told to.
        if (group ? group->any(stop) : bool(stop)) {
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
        if (group) group->beginStep();
        torch::Tensor loss;
        {
            // Forward pass and loss under autocast; the backward pass follows the recorded dtypes.
            const AutocastScope autocast(precision);
            loss = task->trainLoss(step, gen);
        }
        // A rank's loss is its share of the batch's mean loss (TrainingTask::trainLoss): the shares add up.
        const double lossValue = group ? group->sum(loss.item<double>()) : loss.item<double>();
        if (!std::isfinite(lossValue)) {
            result.outcome = TrainOutcome::Diverged;
            result.message =
                "the loss became " + std::string(std::isnan(lossValue) ? "NaN" : "infinite") + " at step " +
                std::to_string(step + 1) + "; training stopped" +
                (status.lastCheckpoint.empty() ? " (no checkpoint was written yet)"
                                               : "; the last good checkpoint is " + status.lastCheckpoint);
            break;
        }
        if (group)
            group->backward(loss * double(group->worldSize())); // the reducer averages: undo the 1 / N
        else
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
            if (leader) run.appendMetrics(nlohmann::json{{"step", done}, {"loss", mean}, {"lr", lr}}.dump());
            emit(line.dump());
            windowLoss = 0;
            windowSteps = 0;
            status.step = done;
            writeStatus();
        }
        if (done % config.evalEvery == 0 || done == config.steps) evaluate(done, lossValue, lr);
        if (done % config.checkpointEvery == 0 && done != config.steps) checkpoint(done);
    }
    result.step = step;

    if (result.outcome == TrainOutcome::Finished && step == config.steps) {
        const std::string finalDir = run.path("final");
        if (leader) {
            const std::string temp = finalDir + ".tmp";
            fs::remove_all(temp);
            task->saveModel(temp, modelCard(config, *task, step, lastEval, elapsed()));
            fs::remove_all(finalDir);
            fs::rename(temp, finalDir);
        }
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
    writeStatus();
    const char* outcome = result.outcome == TrainOutcome::Finished  ? "finished"
                          : result.outcome == TrainOutcome::Stopped ? "stopped"
                                                                    : "diverged";
    emit(nlohmann::json{{"type", "done"}, {"outcome", outcome}, {"step", step}, {"message", result.message}}
             .dump());
    return result;
}

} // namespace

TrainResult runTraining(const TrainConfig& config, bool resume, const std::atomic<bool>& stop,
                        const std::function<void(const std::string&)>& emit, const DistributedSetup& dist)
{
    std::unique_ptr<TrainingGroup> group;
    try {
        return train(config, resume, stop, emit, dist, group);
    } catch (const GroupError&) {
        throw;
    } catch (const std::exception& e) {
        // This rank's own failure: leave a note so that ranks on other machines can name it.
        if (group) group->reportFailure(e.what());
        throw;
    }
}

} // namespace outlierlens
