#pragma once
// Any thread. A TokenizerJsonTokenizer is immutable after construction: one const object may be
// shared by several threads.
//
// A Hugging Face tokenizer.json pipeline run as the `tokenizers` library runs it (LLaMA 3, Qwen 2/3,
// Gemma 2 and other fast tokenizers): added tokens cut out first (leftmost, longest), then per piece
// the normalizer (NFC/NFD/NFKC/NFKD, Lowercase, Replace, Prepend, Strip, Sequence), the
// pre-tokenizer (Split with the file's regex, ByteLevel, Metaspace, Digits, WhitespaceSplit,
// Sequence), the model (BPE: merges by rank, byte fallback, unk, ignore_merges; Unigram: the best
// segmentation by score, unk, byte fallback) and the post-processor (TemplateProcessing, ByteLevel,
// RobertaProcessing, BertProcessing, Sequence). A component it does not implement (WordPiece,
// Precompiled normalizers, ...) is an Error naming the file, the JSON path and the type, never an
// approximation.

#include "text/decoder_tokenizer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace outlierlens {

namespace tokjson {
struct Pipeline;
struct TokenizerJsonFile;
} // namespace tokjson

class TokenizerJsonTokenizer final : public DecoderTokenizer
{
public:
    /// Reads <modelDir>/tokenizer.json and, if present, tokenizer_config.json and
    /// special_tokens_map.json (bos_token, eos_token, pad_token: strings or AddedToken objects).
    /// Throws Error naming the file and the JSON path of what is missing, malformed or unsupported.
    static std::unique_ptr<TokenizerJsonTokenizer> fromModelDir(const std::string& modelDir);
    /// The same for a tokenizer.json already read (tokenizer_json_parts.h); takes its vocabulary and
    /// merges.
    static std::unique_ptr<TokenizerJsonTokenizer> fromFile(const std::string& modelDir,
                                                            tokjson::TokenizerJsonFile& file);
    ~TokenizerJsonTokenizer() override;

    /// Tokenizer.encode(text, pair, add_special_tokens) of `tokenizers`: the post-processor's special
    /// tokens only when `addSpecialTokens`. maxLength > 0 truncates longest-first (counting the
    /// special tokens). token_type_ids are all 0. Throws Error for invalid UTF-8.
    Encoding encode(const std::string& text, const std::optional<std::string>& pair = std::nullopt,
                    int maxLength = 0, bool addSpecialTokens = true) const override;
    std::string idToToken(std::int64_t id) const override;
    /// Byte-level tokens decoded to their bytes; "▁" as a space; "<0xNN>" as the byte.
    std::string displayToken(std::int64_t id) const override;
    /// One more than the largest id of the vocabulary and the added tokens.
    std::int64_t vocabSize() const override { return static_cast<std::int64_t>(m_idToToken.size()); }
    std::int64_t bosId() const override { return m_bosId; }
    std::int64_t eosId() const override { return m_eosId; }
    std::int64_t padId() const override { return m_padId; }
    /// "byte-level BPE (tokenizer.json)", "BPE (tokenizer.json)" or "Unigram (tokenizer.json)".
    std::string kind() const override;

    /// The ids of a text without special tokens of the post-processor (added tokens in the text
    /// still become their ids). Throws Error for invalid UTF-8.
    std::vector<std::int64_t> tokenizeToIds(const std::string& text) const;
    /// An added token's id or the vocabulary's; -1 if neither has `token`.
    std::int64_t tokenToId(const std::string& token) const;

private:
    TokenizerJsonTokenizer();

    std::unique_ptr<tokjson::Pipeline> m_pipeline;
    std::vector<std::string> m_idToToken; // "" where no token has the id
    std::vector<bool> m_hasId;
    std::int64_t m_bosId = -1, m_eosId = -1, m_padId = -1;
};

} // namespace outlierlens
