#include "text/decoder_tokenizer.h"

#include "common/error.h"
#include "text/bpe_tokenizer.h"
#include "text/sentencepiece_tokenizer.h"
#include "text/tokenizer_json.h"
#include "text/tokenizer_json_parts.h"

#include <nlohmann/json.hpp>

#include <filesystem>

namespace outlierlens {
namespace {

namespace fs = std::filesystem;

bool fileExists(const fs::path& p)
{
    std::error_code ec;
    return fs::exists(p, ec);
}

// GPT-2's own tokenizer.json: no pre-tokenizer, or ByteLevel with its regex, which is what
// ByteLevelBpeTokenizer does with vocab.json + merges.txt.
bool isGpt2PreTokenizer(const nlohmann::json& json)
{
    if (!json.is_object()) return false;
    const nlohmann::json pre = json.value("pre_tokenizer", nlohmann::json());
    return pre.is_null() || (pre.is_object() && pre.value("type", std::string()) == "ByteLevel" &&
                             pre.value("use_regex", true));
}

} // namespace

std::unique_ptr<DecoderTokenizer> DecoderTokenizer::fromModelDir(const std::string& modelDir)
{
    const fs::path dir(modelDir);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw Error(modelDir + ": not a folder");
    // The files decide the kind: tokenizer.model is SentencePiece (LLaMA, read as the slow
    // LlamaTokenizer does). vocab.json + merges.txt (or OpenAI's encoder.json + vocab.bpe) are GPT-2's
    // byte-level BPE (GPT-2, OPT) unless a tokenizer.json beside them has another pre-tokenizer
    // (Qwen2 hub folders: its own Split regex): then the tokenizer.json pipeline is what the model
    // was trained with. A tokenizer.json alone is run as the tokenizers library runs it, except the
    // LLaMA-style one (as transformers' LlamaConverter writes it), which SentencePieceTokenizer reads
    // with the slow tokenizer's legacy handling.
    if (fileExists(dir / "tokenizer.model")) return SentencePieceTokenizer::fromModelDir(modelDir);
    const fs::path jsonPath = dir / "tokenizer.json";
    const bool hasJson = fileExists(jsonPath);
    const bool hasSlowBpe = fileExists(dir / "vocab.json") || fileExists(dir / "encoder.json") ||
                            fileExists(dir / "merges.txt") || fileExists(dir / "vocab.bpe");
    if (hasSlowBpe && !hasJson) return ByteLevelBpeTokenizer::fromModelDir(modelDir);
    if (hasJson) {
        tokjson::TokenizerJsonFile file = tokjson::TokenizerJsonFile::read(jsonPath.string());
        if (hasSlowBpe && isGpt2PreTokenizer(file.json)) return ByteLevelBpeTokenizer::fromModelDir(modelDir);
        if (!hasSlowBpe && SentencePieceTokenizer::isLlamaStyle(file.json)) {
            file.restore();
            return SentencePieceTokenizer::fromTokenizerJson(modelDir, file.json, jsonPath.string());
        }
        return TokenizerJsonTokenizer::fromFile(modelDir, file);
    }
    throw Error(modelDir +
                ": no decoder tokenizer files (expected tokenizer.model, vocab.json and merges.txt, "
                "or tokenizer.json)");
}

bool DecoderTokenizer::existsIn(const std::string& modelDir)
{
    const fs::path dir(modelDir);
    return fileExists(dir / "tokenizer.model") || fileExists(dir / "vocab.json") ||
           fileExists(dir / "encoder.json") || fileExists(dir / "tokenizer.json");
}

} // namespace outlierlens
