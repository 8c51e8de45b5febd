#include "text/decoder_tokenizer.h"

#include "common/error.h"
#include "text/bpe_tokenizer.h"
#include "text/sentencepiece_tokenizer.h"

#include <filesystem>

namespace outlierlens {
namespace {

namespace fs = std::filesystem;

bool fileExists(const fs::path& p)
{
    std::error_code ec;
    return fs::exists(p, ec);
}

} // namespace

std::unique_ptr<DecoderTokenizer> DecoderTokenizer::fromModelDir(const std::string& modelDir)
{
    const fs::path dir(modelDir);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw Error(modelDir + ": not a folder");
    // The files decide the kind: tokenizer.model is SentencePiece (LLaMA), vocab.json + merges.txt
    // (or OpenAI's encoder.json + vocab.bpe) byte-level BPE (GPT-2, OPT); hub folders often hold a
    // tokenizer.json as well, which the slow tokenizers ignore.
    if (fileExists(dir / "tokenizer.model")) return SentencePieceTokenizer::fromModelDir(modelDir);
    if (fileExists(dir / "vocab.json") || fileExists(dir / "encoder.json") ||
        fileExists(dir / "merges.txt") || fileExists(dir / "vocab.bpe"))
        return ByteLevelBpeTokenizer::fromModelDir(modelDir);
    // Only a tokenizer.json: read as LLaMA-style BPE (other pipelines are an error naming the file).
    if (fileExists(dir / "tokenizer.json")) return SentencePieceTokenizer::fromModelDir(modelDir);
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
