// Fuzz target: text through the three tokenizers (WordPiece of the bundled BERT vocabulary, GPT-2's
// byte-level BPE and LLaMA's SentencePiece from the test fixtures), as one text and, split at the first
// tab, as a sentence pair; with and without truncation. Invalid UTF-8 must be an Error, not a crash.

#include "fuzz_support.h"

#include "text/decoder_tokenizer.h"
#include "text/wordpiece.h"

#include <memory>
#include <optional>

namespace {

struct Tokenizers
{
    outlierlens::BertTokenizer wordpiece = outlierlens::BertTokenizer::fromVocabFile(
        std::string(OUTLIERLENS_FUZZ_SAMPLE_DATA) + "/bert/vocab.txt");
    std::unique_ptr<outlierlens::DecoderTokenizer> bpe =
        outlierlens::DecoderTokenizer::fromModelDir(fuzzsupport::fixture("decoders/tokenizers/gpt2"));
    std::unique_ptr<outlierlens::DecoderTokenizer> sentencepiece =
        outlierlens::DecoderTokenizer::fromModelDir(fuzzsupport::fixture("decoders/tokenizers/llama"));
};

// Every id an encoding holds must be one the tokenizer can name.
template<typename T>
void checkIds(const T& tokenizer, const outlierlens::Encoding& encoding)
{
    for (const std::int64_t id : encoding.inputIds)
        if (id < 0 || id >= tokenizer.vocabSize()) std::abort();
}

// Loaded once, before the first input: loading takes about a second under the sanitizers, which
// must not count against the first input's time limit.
const Tokenizers& tokenizers()
{
    static const Tokenizers t;
    return t;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***)
{
    (void)tokenizers();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace outlierlens;
    const Tokenizers& t = tokenizers();
    const std::string input(reinterpret_cast<const char*>(data), size);
    const std::size_t tab = input.find('\t');
    const std::string text = input.substr(0, tab);
    const std::optional<std::string> pair =
        tab == std::string::npos ? std::nullopt : std::optional<std::string>(input.substr(tab + 1));
    for (const int maxLength : {0, 9}) {
        fuzzsupport::refusedOnlyWithError(
            [&] { checkIds(t.wordpiece, t.wordpiece.encode(text, pair, maxLength)); });
        for (const DecoderTokenizer* decoder : {t.bpe.get(), t.sentencepiece.get()})
            fuzzsupport::refusedOnlyWithError([&] {
                const Encoding e = decoder->encode(text, pair, maxLength);
                checkIds(*decoder, e);
                for (const std::int64_t id : e.inputIds)
                    (void)decoder->displayToken(id);
            });
    }
    return 0;
}
