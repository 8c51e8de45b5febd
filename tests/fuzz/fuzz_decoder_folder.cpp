// Fuzz target: a decoder model folder as the app opens it (issue #41.7): config.json, the shard index and
// the tokenizer files beside a decoder's config, which the other targets read only one at a time. The first
// byte chooses which file of a valid folder (from the test fixtures) the rest of the input replaces; the
// other files are the fixture's. The folder is then loaded as `inspect` loads it: the network, strictly,
// and its tokenizer, which encodes a short text.

#include "fuzz_support.h"

#include "model/decoder_network.h"
#include "text/decoder_tokenizer.h"

#include <array>

namespace {

struct Case
{
    const char* modelDir;     // under tests/fixtures: config.json and the weights
    const char* tokenizerDir; // under tests/fixtures: tokenizer files put beside them ("" for none)
    const char* file;         // the file the input replaces
};

constexpr std::array<Case, 8> kCases{{
    {"decoders/gpt2-seed0/hf", "", "config.json"},
    {"decoders/opt-seed0/hf", "", "config.json"},
    {"decoders/opt-oft-gated-linear-seed0/hf", "", "config.json"},
    {"decoders/llama-seed0/hf_sharded", "decoders/tokenizers/llama", "config.json"},
    {"decoders/llama-seed0/hf_sharded", "decoders/tokenizers/llama", "model.safetensors.index.json"},
    {"decoders/llama-seed0/hf_sharded", "decoders/tokenizers/llama-tokenizer-json", "tokenizer.json"},
    {"decoders/llama-seed0/hf_sharded", "decoders/tokenizers/llama", "tokenizer.model"},
    {"decoders/gpt2-seed0/hf", "", "merges.txt"},
}};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace outlierlens;
    namespace fs = std::filesystem;
    if (size == 0) return 0;
    const std::size_t index = data[0] % kCases.size();
    const Case& c = kCases[index];
    // Each case's folder is copied once per process; every input then gets hard links to it (a symbolic
    // link to the fixtures would be refused: a shard must not resolve outside the model folder).
    const fs::path original = fuzzsupport::scratchDir() / ("case-" + std::to_string(index));
    if (!fs::exists(original)) {
        fs::create_directories(original);
        for (const char* source : {c.modelDir, c.tokenizerDir}) {
            if (*source == '\0') continue;
            for (const auto& entry : fs::directory_iterator(fuzzsupport::fixture(source)))
                if (entry.is_regular_file() && entry.path().filename() != "pytorch_model.bin")
                    fs::copy_file(
                        entry.path(), original / entry.path().filename(),
                        fs::copy_options::overwrite_existing); // a tokenizer file replaces the model's
        }
    }
    const fs::path dir = fuzzsupport::scratchDir() / "decoder";
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const auto& entry : fs::directory_iterator(original))
        if (entry.path().filename() != c.file)
            fs::create_hard_link(entry.path(), dir / entry.path().filename());
    fuzzsupport::writeFile(dir / c.file, data + 1, size - 1);

    fuzzsupport::refusedOnlyWithError([&] { (void)DecoderNetwork::load(dir.string()); });
    fuzzsupport::refusedOnlyWithError([&] {
        const auto tokenizer = DecoderTokenizer::fromModelDir(dir.string());
        for (const std::int64_t id :
             tokenizer->encode("Hello, world! Caf\xc3\xa9 12345", std::nullopt).inputIds) {
            (void)tokenizer->idToToken(id);
            (void)tokenizer->displayToken(id);
        }
    });
    return 0;
}
