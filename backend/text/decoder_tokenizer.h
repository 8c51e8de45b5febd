#pragma once
// Any thread. A tokenizer is immutable after construction: one const object may be shared by
// several threads.
//
// The tokenizers of causal decoder LLMs: Hugging Face's slow tokenizers (transformers v4.31) for
// byte-level BPE (GPT2Tokenizer: GPT-2, and OPT with its "</s>" BOS) from vocab.json + merges.txt
// and SentencePiece (LlamaTokenizer, legacy behaviour by default) from tokenizer.model; the
// tokenizers library's pipeline for a tokenizer.json (LLaMA 3, Qwen 2/3, Gemma 2, ...).

#include "text/wordpiece.h" // Encoding

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace outlierlens {

class DecoderTokenizer
{
public:
    virtual ~DecoderTokenizer() = default;

    /// Reads the tokenizer files of a model folder (tokenizer_config.json, special_tokens_map.json and
    /// tokenizer.model, or vocab.json + merges.txt, or tokenizer.json: see fromModelDir in the .cpp for
    /// which wins when several are there). The folder need not hold a model. Throws Error naming the
    /// file that is missing, does not parse or uses a component that is not supported.
    static std::unique_ptr<DecoderTokenizer> fromModelDir(const std::string& modelDir);
    /// True if the folder holds files fromModelDir() can read.
    static bool existsIn(const std::string& modelDir);

    /// Encodes UTF-8 text as the Hugging Face tokenizer does with add_special_tokens =
    /// `addSpecialTokens` (OPT: leading "</s>"; LLaMA: leading "<s>"; GPT-2: nothing). Special-token
    /// strings inside the text become single tokens. `pair` is appended as HF does for pairs.
    /// maxLength > 0 truncates (counting special tokens). token_type_ids are all 0. Throws Error for
    /// invalid UTF-8.
    virtual Encoding encode(const std::string& text, const std::optional<std::string>& pair = std::nullopt,
                            int maxLength = 0, bool addSpecialTokens = true) const = 0;
    /// The token string of an id (as convert_ids_to_tokens gives it). Throws Error if out of range.
    virtual std::string idToToken(std::int64_t id) const = 0;
    /// Human-readable text of one token (bytes decoded, "Ġ"/"▁" as a space), for labels.
    virtual std::string displayToken(std::int64_t id) const = 0;
    virtual std::int64_t vocabSize() const = 0;
    /// -1 where the tokenizer has none.
    virtual std::int64_t bosId() const = 0;
    virtual std::int64_t eosId() const = 0;
    virtual std::int64_t padId() const = 0;
    /// "byte-level BPE", "SentencePiece" or "... (tokenizer.json)", for the UI.
    virtual std::string kind() const = 0;
};

} // namespace outlierlens
