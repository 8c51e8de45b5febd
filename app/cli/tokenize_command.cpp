// `outlierlens tokenize`: the tokenizer's output as one JSON line, for debugging inputs.

#include "cli/command_line.h"

#include "analysis/stats_runner.h"
#include "text/mnli.h"
#include "text/wordpiece.h"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace outlierlens::cli {

int runTokenize(const QStringList& args)
{
    Command cmd("tokenize", "Tokenize text like Hugging Face's BertTokenizer and print one JSON line with "
                            "input_ids, token_type_ids and tokens.");
    cmd.parser().addOptions({
        {"model", "Model folder with vocab.txt (and tokenizer_config.json if any).", "dir"},
        {"text", "Text; the first segment of a pair.", "text"},
        {"pair", "Second segment.", "text"},
        {"max-length", "Truncate to N tokens including [CLS]/[SEP] (longest_first).", "N"},
        {"no-special-tokens", "Do not add [CLS] and [SEP]."},
        {"data", "Instead of --text: every pair of mnli:FILE[:N], one JSON line each.", "spec"},
    });
    if (auto code = cmd.parse(args)) return *code;
    try {
        const std::string modelDir = cmd.required("model");
        const int maxLength = cmd.intValue("max-length", 0, 1, 1 << 20);
        const BertTokenizer tokenizer = BertTokenizer::fromModelDir(modelDir);
        const bool special = !cmd.isSet("no-special-tokens");
        auto print = [](const Encoding& e) {
            nlohmann::json j;
            j["input_ids"] = e.inputIds;
            j["token_type_ids"] = e.tokenTypeIds;
            j["tokens"] = e.tokens;
            std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        };
        if (cmd.isSet("data")) {
            if (cmd.isSet("text")) throw UsageException{"give --text or --data, not both"};
            const DataSpec spec = DataSpec::parse(cmd.value("data"));
            if (spec.kind != DataSpec::Kind::Mnli) throw UsageException{"--data must be mnli:FILE[:N]"};
            for (const NliPair& p : readNliPairs(spec.path, spec.limit))
                print(tokenizer.encode(p.premise, p.hypothesis, maxLength, special));
            return Ok;
        }
        const std::string text = cmd.required("text");
        const std::optional<std::string> pair =
            cmd.isSet("pair") ? std::optional<std::string>(cmd.value("pair")) : std::nullopt;
        print(tokenizer.encode(text, pair, maxLength, special));
        return Ok;
    } catch (const UsageException& e) {
        return cmd.fail(e.message, UsageError);
    } catch (const std::exception& e) {
        return cmd.fail(e.what());
    }
}

} // namespace outlierlens::cli
