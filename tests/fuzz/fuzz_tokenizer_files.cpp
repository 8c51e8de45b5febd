// Fuzz target: the files a tokenizer is read from. The first byte chooses which file of a valid
// tokenizer folder (from the test fixtures) the rest of the input replaces; the folder is then loaded
// as the app loads it and a fixed text is encoded.

#include "fuzz_support.h"

#include "text/decoder_tokenizer.h"
#include "text/wordpiece.h"

#include <array>

namespace {

struct Case
{
    const char* fixtureDir; // under tests/fixtures
    const char* file;       // the file the input replaces
    bool wordpiece;
};

constexpr std::array<Case, 12> kCases{{
    {"text/cased_model", "vocab.txt", true},
    {"text/cased_model", "tokenizer_config.json", true},
    {"decoders/tokenizers/gpt2", "vocab.json", false},
    {"decoders/tokenizers/gpt2", "merges.txt", false},
    {"decoders/tokenizers/gpt2", "tokenizer_config.json", false},
    {"decoders/tokenizers/gpt2", "special_tokens_map.json", false},
    {"decoders/tokenizers/opt", "added_tokens.json", false},
    {"decoders/tokenizers/llama", "tokenizer.model", false},
    {"decoders/tokenizers/llama", "tokenizer_config.json", false},
    {"decoders/tokenizers/llama-tokenizer-json", "tokenizer.json", false},
    {"tokenizers/tiny", "tokenizer.json",
     false}, // the tokenizers library's pipeline (TokenizerJsonTokenizer)
    {"tokenizers/tiny", "tokenizer_config.json", false},
}};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace outlierlens;
    namespace fs = std::filesystem;
    if (size == 0) return 0;
    const Case& c = kCases[data[0] % kCases.size()];
    const fs::path dir = fuzzsupport::scratchDir() / "tokenizer";
    fs::remove_all(dir);
    fs::copy(fuzzsupport::fixture(c.fixtureDir), dir);
    fuzzsupport::writeFile(dir / c.file, data + 1, size - 1);

    const std::string text = "Hello, world! Caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac <s></s>[MASK] 12345";
    if (c.wordpiece) {
        fuzzsupport::refusedOnlyWithError([&] {
            const BertTokenizer tokenizer = BertTokenizer::fromModelDir(dir.string());
            for (const std::int64_t id : tokenizer.encode(text, std::string("a pair")).inputIds)
                (void)tokenizer.idToToken(id);
        });
    } else {
        fuzzsupport::refusedOnlyWithError([&] {
            const auto tokenizer = DecoderTokenizer::fromModelDir(dir.string());
            for (const std::int64_t id : tokenizer->encode(text, std::string("a pair")).inputIds) {
                (void)tokenizer->idToToken(id);
                (void)tokenizer->displayToken(id);
            }
        });
    }
    return 0;
}
