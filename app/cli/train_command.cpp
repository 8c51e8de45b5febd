// `outlierlens train`: one training run in this process, progress as JSON lines on stdout.

#include "cli/command_line.h"

#include "common/error.h"
#include "common/input_file.h"
#include "common/json_util.h"
#include "common/text_format.h"
#include "model/variant_fields.h"
#include "paths.h"
#include "tasks/config/train_config.h"
#include "train/trainer.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>

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
                "--resume continues it.");
    cmd.parser().addOptions({
        {"config", "Run configuration (JSON); every key can also be given as a flag, which wins.",
         "run.json"},
        {"from-preset", "Start from a named configuration (see --list-presets).", "name"},
        {"list-presets", "List the named configurations and exit."},
        {"print-config", "Print the resolved configuration and exit without training."},
        {"resume",
         "Continue the run in --output from its newest checkpoint (same losses as without the break)."},
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
        validateTrainConfig(config);
        if (cmd.isSet("print-config")) {
            std::printf("%s", trainConfigToJson(config).c_str());
            return Ok;
        }
        const TrainResult result = runTraining(config, resume, interruptFlag(), [](const std::string& line) {
            std::printf("%s\n", line.c_str());
            std::fflush(stdout);
            const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
            if (j.is_object() && j.value("type", "") == "notice")
                std::fprintf(stderr, "outlierlens train: %s\n", j.value("message", "").c_str());
        });
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
