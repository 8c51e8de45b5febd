// `outlierlens tokenize`: the tokenizer's output as one JSON line, for debugging inputs.

#include "cli/command_line.h"

#include "analysis/stats_runner.h"
#include "text/decoder_tokenizer.h"
#include "text/mnli.h"
#include "text/wordpiece.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>

namespace outlierlens::cli {

int runTokenize(const QStringList& args)
{
    Command cmd(
        "tokenize",
        "Tokenize text like Hugging Face's tokenizers and print one JSON line: "
        "BertTokenizer (vocab.txt: input_ids, token_type_ids, tokens), GPT2Tokenizer "
        "(vocab.json + merges.txt), LlamaTokenizer (tokenizer.model) or a tokenizer.json "
        "pipeline as the tokenizers library runs it (LLaMA 3, Qwen 2/3, Gemma 2): input_ids, tokens.");
    cmd.parser().addOptions({
        {"model",
         "Model or tokenizer folder: vocab.txt (BERT), vocab.json + merges.txt (GPT-2, OPT), "
         "tokenizer.model (LLaMA 2) or tokenizer.json (LLaMA 3, Qwen, Gemma 2; also a folder with "
         "only tokenizer.json), with tokenizer_config.json if any.",
         "dir"},
        {"text", "Text; the first segment of a pair.", "text"},
        {"pair", "Second segment.", "text"},
        {"max-length", "Truncate to N tokens including the special tokens (longest_first).", "N"},
        {"no-special-tokens", "Do not add special tokens ([CLS]/[SEP]; the BOS of OPT and LLaMA)."},
        {"data", "Instead of --text: every pair of mnli:FILE[:N], one JSON line each.", "spec"},
    });
    if (auto code = cmd.parse(args)) return *code;
    return cmd.guarded([&]() -> int {
        const std::string modelDir = cmd.required("model");
        const int maxLength = cmd.intValue("max-length", 0, 1, 1 << 20);
        const bool special = !cmd.isSet("no-special-tokens");
        auto print = [](const Encoding& e, bool withTokenTypes) {
            nlohmann::json j;
            j["input_ids"] = e.inputIds;
            if (withTokenTypes) j["token_type_ids"] = e.tokenTypeIds;
            j["tokens"] = e.tokens;
            std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        };

        // The files decide: vocab.txt is WordPiece (BERT); otherwise a decoder's tokenizer files.
        std::function<Encoding(const std::string&, const std::optional<std::string>&)> encode;
        bool withTokenTypes = true;
        std::optional<BertTokenizer> bert;
        std::unique_ptr<DecoderTokenizer> decoder;
        std::error_code ec;
        const bool hasVocabTxt = std::filesystem::exists(std::filesystem::path(modelDir) / "vocab.txt", ec);
        if (!hasVocabTxt && !DecoderTokenizer::existsIn(modelDir))
            throw std::runtime_error(modelDir +
                                     ": no tokenizer files (vocab.txt for BERT; vocab.json + merges.txt, "
                                     "tokenizer.model or tokenizer.json for decoders)");
        if (!hasVocabTxt) {
            decoder = DecoderTokenizer::fromModelDir(modelDir);
            withTokenTypes = false;
            encode = [&](const std::string& a, const std::optional<std::string>& b) {
                return decoder->encode(a, b, maxLength, special);
            };
        } else {
            bert = BertTokenizer::fromModelDir(modelDir);
            encode = [&](const std::string& a, const std::optional<std::string>& b) {
                return bert->encode(a, b, maxLength, special);
            };
        }

        if (cmd.isSet("data")) {
            if (cmd.isSet("text")) throw UsageException{"give --text or --data, not both"};
            const DataSpec spec = DataSpec::parse(cmd.value("data"));
            if (spec.kind != DataSpec::Kind::Mnli) throw UsageException{"--data must be mnli:FILE[:N]"};
            for (const NliPair& p : readNliPairs(spec.path, spec.limit))
                print(encode(p.premise, p.hypothesis), withTokenTypes);
            return Ok;
        }
        // May be empty, as in Hugging Face: "" gives [CLS] [SEP].
        const std::string text = cmd.requiredText("text");
        const std::optional<std::string> pair = cmd.optionalText("pair");
        print(encode(text, pair), withTokenTypes);
        return Ok;
    });
}

} // namespace outlierlens::cli
