// `outlierlens intervene`: set chosen activations of one layer to 0, to their data-set mean or to a value,
// and measure what the model loses on its task (Sun et al. 2024, "Massive Activations"; issue #43).

#include "cli/progress_printer.h"
#include "cli/task_data_options.h"

#include "common/atomic_file.h"
#include "common/error.h"
#include "quant/evaluation.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

namespace outlierlens::cli {
namespace {

/// "3,17,42" -> {3, 17, 42}; each a non-negative integer.
std::vector<std::int64_t> parseList(const std::string& text, const std::string& option)
{
    std::vector<std::int64_t> values;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = text.find(',', start);
        const std::string part =
            text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        try {
            std::size_t used = 0;
            const long long v = std::stoll(part, &used);
            if (used != part.size() || v < 0) throw std::invalid_argument(part);
            values.push_back(v);
        } catch (const std::exception&) {
            throw UsageException{"--" + option + ": '" + part +
                                 "' is not a non-negative integer (a list is 3,17,42)"};
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return values;
}

} // namespace

int runIntervene(const QStringList& args)
{
    Command cmd("intervene",
                "Set chosen activations of one layer (a tensor, hidden dimensions, token positions) to 0, to "
                "their mean over calibration batches, or to a value, in every evaluation batch, and report "
                "the task metric with and without it (Sun et al. 2024: zeroing a model's massive "
                "activations destroys it, their mean keeps it). Data as for `quantize`.");
    addTaskDataOptions(cmd, QStringLiteral("Calibration batches the mean (--set mean) is taken over"));
    cmd.parser().addOptions({
        {"layer", "Layer, 1-based.", "n"},
        {"tensor",
         "out (the block output, default), ffn_out, attn_out, attn_probs (the attention after the "
         "softmax: --keys are removed from it), or attn_context (the heads' outputs: those of --heads are "
         "set to 0 at --tokens, a head ablated; in a gated model, its gate shut), or attn_gate (gated "
         "attention: the gates of --heads set to --set at --tokens; --set 1 forces them open).",
         "name"},
        {"keys", "attn_probs: key positions, 0-based, that the chosen queries no longer attend to (e.g. 0).",
         "list"},
        {"heads", "attn_probs, attn_context, attn_gate: heads, 1-based, comma-separated (default: all).",
         "list"},
        {"no-renormalize",
         "attn_probs: leave the rest of each row as it is (default: rescale it to its former sum, as if the "
         "keys were masked)."},
        {"dims", "Hidden dimensions, 0-based, comma-separated (default: all).", "list"},
        {"tokens",
         "Token positions, 0-based, comma-separated (default: all), e.g. 0 for the first token; with "
         "attn_probs, the queries.",
         "list"},
        {"set", "zero (default), mean (over --calib-batches batches of the calibration data) or a number.",
         "value"},
        {"json-progress",
         "Report progress as JSON lines on stdout, as `outlierlens train` does (loading, the evaluation "
         "as it is, the means, the evaluation with the intervention); the app's job list reads them. The "
         "messages stay on stderr."},
    });
    if (auto code = cmd.parse(args)) return *code;
    return cmd.guarded([&]() -> int {
        const QuantExperiment e = readTaskDataOptions(cmd);
        Intervention i;
        if (!cmd.isSet("layer")) throw UsageException{"--layer is required (1-based)"};
        i.layer = cmd.intValue("layer", 1, 1, 100000) - 1;
        i.tensor = cmd.isSet("tensor") ? cmd.value("tensor") : "out";
        if (i.tensor != "out" && i.tensor != "ffn_out" && i.tensor != "attn_out" &&
            i.tensor != "attn_probs" && i.tensor != "attn_context" && i.tensor != "attn_gate")
            throw UsageException{"--tensor must be out, ffn_out, attn_out, attn_probs, attn_context or "
                                 "attn_gate, found '" +
                                 i.tensor + "'"};
        const bool attention = i.tensor == "attn_probs", heads = i.tensor == "attn_context",
                   gate = i.tensor == "attn_gate";
        if (attention != cmd.isSet("keys"))
            throw UsageException{attention ? "--tensor attn_probs needs --keys"
                                           : "--keys goes with --tensor attn_probs"};
        if (!attention && !heads && !gate && cmd.isSet("heads"))
            throw UsageException{"--heads goes with --tensor attn_probs, attn_context or attn_gate"};
        if (gate && (cmd.isSet("dims") || (cmd.isSet("set") && cmd.value("set") == "mean")))
            throw UsageException{"--tensor attn_gate sets whole heads' gates to zero or a number (--set 1: "
                                 "forced open); --dims and --set mean do not apply"};
        if (!attention && cmd.isSet("no-renormalize"))
            throw UsageException{"--no-renormalize goes with --tensor attn_probs"};
        if ((attention || heads) && (cmd.isSet("dims") || cmd.isSet("set")))
            throw UsageException{"--tensor " + i.tensor +
                                 (attention ? " removes --keys" : " sets whole heads to 0") +
                                 "; --dims and --set do not apply"};
        if (cmd.isSet("heads"))
            for (std::int64_t h : parseList(cmd.value("heads"), "heads")) {
                if (h < 1) throw UsageException{"--heads are 1-based"};
                i.heads.push_back(h - 1);
            }
        if (attention) {
            i.keys = parseList(cmd.value("keys"), "keys");
            i.renormalize = !cmd.isSet("no-renormalize");
        }
        if (cmd.isSet("dims")) i.dims = parseList(cmd.value("dims"), "dims");
        if (cmd.isSet("tokens")) i.tokens = parseList(cmd.value("tokens"), "tokens");
        const std::string set = cmd.isSet("set") ? cmd.value("set") : "zero";
        if (set == "zero") {
            i.value = Intervention::Value::Zero;
        } else if (set == "mean") {
            i.value = Intervention::Value::Mean;
        } else {
            try {
                std::size_t used = 0;
                i.constant = std::stod(set, &used);
                if (used != set.size() || !std::isfinite(i.constant)) throw std::invalid_argument(set);
            } catch (const std::exception&) {
                throw UsageException{"--set must be zero, mean or a finite number, found '" + set + "'"};
            }
            i.value = Intervention::Value::Constant;
        }
        if (cmd.isSet("out")) checkCanWrite(cmd.value("out") + ".json");
        // Stages: loading, the evaluation as it is, (the means,) the evaluation with the intervention.
        const std::int64_t stages = i.value == Intervention::Value::Mean ? 4 : 3;
        std::int64_t stage = 0;
        ProgressPrinter printer("intervene", "stages", true);
        const bool jsonProgress = cmd.isSet("json-progress");
        const InterventionResult r = runInterventionExperiment(
            e, i,
            [&](const std::string& m) {
                std::fprintf(stderr, "outlierlens intervene: %s\n", m.c_str());
                if (jsonProgress) printer.update(std::min(stage++, stages - 1), stages);
            },
            &interruptFlag());
        if (jsonProgress) printer.update(stages, stages);
        const nlohmann::json j = {
            {"model", e.modelDir},    {"data", e.data},      {"intervention", r.description},
            {"layer", i.layer + 1},   {"tensor", i.tensor},  {"dims", i.dims},
            {"tokens", i.tokens},     {"set", set},          {"means", r.means},
            {"metric", r.metricName}, {"fp", r.floatMetric}, {"intervened", r.intervenedMetric},
            {"keys", i.keys},         {"heads", i.heads},    {"renormalize", i.renormalize},
            {"seconds", r.seconds}};
        if (cmd.isSet("out")) writeTextFileAtomically(cmd.value("out") + ".json", j.dump(2) + "\n");
        const double scale = r.metricName == "accuracy" ? 100.0 : 1.0;
        const char* unit = r.metricName == "accuracy" ? "%" : "";
        std::printf("%s: %s: %s %.4g%s as it is, %.4g%s with the intervention\n",
                    std::filesystem::path(e.modelDir).filename().c_str(), r.description.c_str(),
                    r.metricName.c_str(), r.floatMetric * scale, unit, r.intervenedMetric * scale, unit);
        std::printf("%s\n", j.dump().c_str());
        return Ok;
    });
}

} // namespace outlierlens::cli
