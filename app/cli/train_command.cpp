// `outlierlens train`: one training run in this process, progress as JSON lines on stdout.

#include "cli/command_line.h"

#include "cli/train_launcher.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/json_util.h"
#include "common/text_format.h"
#include "model/variant_fields.h"
#include "paths.h"
#include "tasks/config/train_config.h"
#include "train/distributed.h"
#include "train/trainer.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <tuple>

namespace outlierlens::cli {
namespace {

std::string readText(const std::string& path)
{
    return readWholeFile(path, "the training config");
}

/// Fills paths the user may leave out with the sample data the app ships, and resolves the
/// presets' "sample_data/..." paths wherever the command runs from.
void applyDefaults(TrainConfig& c)
{
    if (c.task == TrainTask::MaskedLm && c.vocab.empty()) c.vocab = sampleDataFile("bert/vocab.txt");
    if (c.task == TrainTask::Nli && c.data.empty()) c.data = sampleDataFile("mnli/mnli_dev_matched.jsonl");
    if (c.task == TrainTask::Image && c.data.empty()) c.data = "fashion-mnist";
    if (c.task == TrainTask::CausalLm && c.tokenizer.empty() && c.init.empty())
        c.tokenizer = sampleDataFile("tokenizers/wiki-bpe-1k");
    for (std::string* path : {&c.corpus, &c.validCorpus, &c.data, &c.vocab, &c.tokenizer})
        if (path->rfind("sample_data/", 0) == 0 && !std::filesystem::exists(*path))
            *path = sampleDataFile(path->substr(std::string("sample_data/").size()));
}

/// The launcher's options when this command is to start several processes; nullopt for one.
std::optional<LaunchOptions> launchOptions(const Command& cmd)
{
    LaunchOptions o;
    o.nprocPerNode = cmd.intValue("nproc-per-node", 1, 1, 4096);
    o.nnodes = cmd.intValue("nnodes", 1, 1, 4096);
    o.nodeRank = cmd.intValue("node-rank", 0, 0, o.nnodes - 1);
    o.timeoutSeconds = cmd.doubleValue("dist-timeout", kDefaultDistTimeoutSeconds);
    if (!(o.timeoutSeconds > 0)) throw UsageException{"--dist-timeout: expected seconds > 0"};
    if (cmd.isSet("master")) {
        try {
            std::tie(o.masterHost, o.masterPort) = parseHostPort(cmd.value("master"), "--master");
        } catch (const Error& e) {
            throw UsageException{e.what()};
        }
    }
    if (o.nnodes > 1 && (o.masterHost.empty() || o.masterPort == 0))
        throw UsageException{
            "--nnodes " + std::to_string(o.nnodes) +
            ": give --master HOST:PORT, the address of machine 0 and a port every machine can reach"};
    if (o.nprocPerNode * o.nnodes == 1) {
        if (cmd.isSet("master") || cmd.isSet("node-rank"))
            throw UsageException{
                "--master and --node-rank are for several processes (--nproc-per-node, --nnodes)"};
        return std::nullopt;
    }
    return o;
}

void printPresets()
{
    for (const TrainPreset& p : trainPresets())
        std::printf("%-22s %s\n", p.name.c_str(), p.description.c_str());
}

} // namespace

int runTrain(const QStringList& args)
{
    Command cmd("train",
                "Train a BERT, a ViT or a causal decoder LLM (task clm: GPT-2, OPT or LLaMA shapes; vanilla, "
                "clipped softmax or gated attention) in this process. Progress "
                "is printed as one JSON object per line; the run folder gets run.json, status.json, "
                "metrics.jsonl, checkpoints/ and final/. SIGTERM or Ctrl-C saves a checkpoint and stops; "
                "--resume continues it.\n\n"
                "Several processes (like torchrun): --nproc-per-node N starts N worker processes of this "
                "command on this machine, which train one model together over PyTorch's c10d (Gloo): every "
                "step each process takes an equal share of the batch (batch_size stays the global batch, so "
                "it must be divisible by the number of processes), the gradients are averaged by bucketed "
                "all-reduce overlapping the backward pass, and rank 0 writes progress, metrics and "
                "checkpoints. Each process uses cores / N threads unless --threads says otherwise. For M "
                "machines run the same command on each with --nnodes M, --node-rank 0..M-1 and --master "
                "HOST:PORT of machine 0 (which hosts the rendezvous; GLOO_SOCKET_IFNAME picks the network "
                "interface). If a process dies or a machine does not arrive within --dist-timeout, the whole "
                "run ends with an error naming the rank; --resume (with the same flags) continues from the "
                "last checkpoint. docs/training.md explains more.");
    cmd.parser().addOptions({
        {"config", "Run configuration (JSON); every key can also be given as a flag, which wins.",
         "run.json"},
        {"from-preset", "Start from a named configuration (see --list-presets).", "name"},
        {"list-presets", "List the named configurations and exit."},
        {"print-config", "Print the resolved configuration and exit without training."},
        {"resume",
         "Continue the run in --output from its newest checkpoint (same losses as without the break)."},
        {"nproc-per-node", "Worker processes on this machine (default 1: train in this process).", "N"},
        {"nnodes", "Machines taking part (default 1); each runs this command with its --node-rank.", "M"},
        {"node-rank", "This machine's number, 0 to M-1 (default 0); machine 0 hosts the rendezvous.", "R"},
        {"master",
         "HOST:PORT where machine 0 hosts the rendezvous (required with --nnodes > 1; default: a free "
         "port on this machine).",
         "host:port"},
        {"dist-timeout",
         "Seconds to wait for all processes to arrive and for any one step's exchange before the run "
         "fails (default 300).",
         "seconds"},
        {"attention",
         "An et al.'s attention variant by name (task clm): " +
             QString::fromStdString(joinedText(namedVariants())) +
             "; sets softmax, bias or context_scale (the flags for those win).",
         "name"},
    });
    for (const TrainFieldInfo& f : trainFields()) {
        const QString name = QString::fromStdString(f.name);
        if (name == QLatin1String("config")) continue;
        QString dashed = name;
        dashed.replace(QLatin1Char('_'), QLatin1Char('-'));
        const QStringList names = dashed == name ? QStringList{name} : QStringList{dashed, name};
        cmd.parser().addOption(
            {names, QString::fromStdString(f.help + " (" + f.type + ", default " + f.defaultText + ")"),
             QString::fromStdString(f.type)});
    }
    if (auto code = cmd.parse(args)) return *code;
    if (cmd.isSet("list-presets")) {
        printPresets();
        return Ok;
    }
    return cmd.guarded([&]() -> int {
        TrainConfig config;
        const bool resume = cmd.isSet("resume");
        if (cmd.isSet("config")) {
            const std::string path = cmd.value("config");
            config = parseTrainConfig(readText(path), path);
        } else if (cmd.isSet("from-preset")) {
            config = presetConfig(cmd.value("from-preset"));
        } else if (resume && cmd.isSet("output")) {
            const std::string path = (std::filesystem::path(cmd.value("output")) / "run.json").string();
            if (!std::filesystem::exists(path))
                throw Error(cmd.value("output") + ": no run.json here, so no run to resume");
            config = parseTrainConfig(readText(path), path);
        } else if (cmd.isSet("task")) {
            config = TrainConfig(); // the defaults, then the flags below
        } else {
            throw UsageException{
                "give --config, --from-preset, --task (with flags for the rest), or --resume "
                "with --output"};
        }
        if (cmd.isSet("attention")) applyTrainFlag(config, "attention", cmd.value("attention"));
        for (const TrainFieldInfo& f : trainFields()) {
            const QString name = QString::fromStdString(f.name);
            if (name != QLatin1String("config") && cmd.isSet(name))
                applyTrainFlag(config, f.name, cmd.value(name));
        }
        applyDefaults(config);
        const std::optional<DistributedSetup> worker = distributedSetupFromEnvironment();
        if (worker)
            installWorkerInterruptHandlers();
        else
            finishBeforeRepeatedInterrupts();
        const std::optional<LaunchOptions> launch = launchOptions(cmd);
        const int worldSize = worker ? worker->worldSize : launch ? launch->nprocPerNode * launch->nnodes : 1;
        if (cmd.isSet("world-size") && config.worldSize != worldSize)
            throw UsageException{"--world-size is set by --nproc-per-node x --nnodes (" +
                                 std::to_string(worldSize) + " here)"};
        config.worldSize = worldSize; // a resumed run may continue with another number of processes
        validateTrainConfig(config);
        if (cmd.isSet("print-config")) {
            std::printf("%s", trainConfigToJson(config).c_str());
            return Ok;
        }
        if (launch && !worker) {
            LaunchOptions options = *launch;
            options.trainArguments = args;
            return launchTrainingGroup(options);
        }
        const auto emit = [](const std::string& line) {
            std::printf("%s\n", line.c_str());
            std::fflush(stdout);
            const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
            if (j.is_object() && j.value("type", "") == "notice")
                std::fprintf(stderr, "outlierlens train: %s\n", j.value("message", "").c_str());
        };
        TrainResult result;
        try {
            result = runTraining(config, resume, interruptFlag(), emit, worker.value_or(DistributedSetup()));
        } catch (const GroupError& e) {
            return cmd.fail(e.what(), kPeerFailureExitCode); // the launcher then looks for the rank to blame
        }
        if (worker && worker->rank != 0)
            return result.outcome == TrainOutcome::Stopped ? interruptedExitCode() : Ok;
        switch (result.outcome) {
        case TrainOutcome::Finished:
            std::fprintf(stderr, "outlierlens train: %s\n", result.message.c_str());
            return Ok;
        case TrainOutcome::Stopped:
            std::fprintf(stderr, "outlierlens train: %s (outlierlens train --resume --output %s)\n",
                         result.message.c_str(), config.output.c_str());
            return interruptedExitCode();
        case TrainOutcome::Diverged:
            return cmd.fail(result.message);
        }
        return Ok;
    });
}

} // namespace outlierlens::cli
