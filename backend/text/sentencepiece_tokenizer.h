#pragma once
// Any thread. A SentencePieceTokenizer is immutable after construction: one const object may be
// shared by several threads.
//
// SentencePiece BPE exactly as Hugging Face's slow LlamaTokenizer (transformers v4.31) runs it over
// sentencepiece: tokenizer.model (a protobuf ModelProto, parsed here) gives the pieces, their scores
// and types; the identity normalizer adds the dummy prefix "▁" and turns spaces into "▁"; pieces
// are merged by score; pieces outside the vocabulary become <0xNN> byte pieces (byte fallback).
// Special tokens inside the text are cut out first; legacy=false changes what follows them.

#include "text/added_tokens.h"
#include "text/decoder_tokenizer.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

namespace outlierlens {

class SentencePieceTokenizer final : public DecoderTokenizer
{
public:
    /// Reads <modelDir>/tokenizer.model and, if present, tokenizer_config.json (add_bos_token,
    /// add_eos_token, legacy, special tokens), special_tokens_map.json and added_tokens.json.
    /// Without tokenizer.model, a LLaMA-style tokenizer.json (BPE with "▁" prepended and spaces
    /// replaced, as transformers' LlamaConverter writes it) is read instead: merges by rank, then
    /// the slow tokenizer's handling of special tokens and legacy. Throws Error naming the file that
    /// is missing, does not parse or uses a feature we do not implement (unigram models, a
    /// precompiled normalization map, other tokenizer.json pipelines).
    static std::unique_ptr<SentencePieceTokenizer> fromModelDir(const std::string& modelDir);
    /// fromModelDir for a folder without tokenizer.model whose tokenizer.json (`json`, read from
    /// `path`) is LLaMA-style.
    static std::unique_ptr<SentencePieceTokenizer>
    fromTokenizerJson(const std::string& modelDir, const nlohmann::json& json, const std::string& path);
    /// True if a parsed tokenizer.json is the LLaMA-style pipeline that transformers' LlamaConverter
    /// writes (Prepend("▁") + Replace(" ", "▁"), or a Metaspace without split), which this class reads
    /// with the slow tokenizer's handling of special tokens and legacy.
    static bool isLlamaStyle(const nlohmann::json& json);

    Encoding encode(const std::string& text, const std::optional<std::string>& pair = std::nullopt,
                    int maxLength = 0, bool addSpecialTokens = true) const override;
    std::string idToToken(std::int64_t id) const override;
    std::string displayToken(std::int64_t id) const override;
    /// Pieces of tokenizer.model plus added tokens.
    std::int64_t vocabSize() const override;
    std::int64_t bosId() const override { return m_bosId; }
    std::int64_t eosId() const override { return m_eosId; }
    std::int64_t padId() const override { return m_padId; }
    std::string kind() const override { return "SentencePiece"; }

    /// PreTrainedTokenizer.tokenize as LlamaTokenizer overrides it: piece strings, no BOS.
    /// Throws Error for invalid UTF-8.
    std::vector<std::string> tokenize(const std::string& text) const;
    /// sentencepiece's encode(text, out_type=str): the pieces of the whole text, special-token
    /// strings included as ordinary text. Throws Error for invalid UTF-8.
    std::vector<std::string> encodePieces(const std::string& text) const;
    /// sp_model.piece_to_id, or an added token's id; unknown strings give the unk id.
    std::int64_t tokenToId(const std::string& token) const;
    bool legacy() const { return m_legacy; }

private:
    struct Piece
    {
        std::string text;
        float score = 0;
        int type = 1; // ModelProto.SentencePiece.Type: NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4, UNUSED
                      // 5, BYTE 6
    };

    SentencePieceTokenizer() = default;
    void parseModel(const std::string& path);
    // Returns tokenizer.json's added tokens (ids past the vocabulary become added tokens).
    std::vector<AddedTokenSpec> parseTokenizerJson(const nlohmann::json& j, const std::string& path);
    // tokenizer_config.json, special_tokens_map.json and added_tokens.json, after the pieces.
    void loadSpecialTokens(const std::filesystem::path& dir,
                           const std::vector<AddedTokenSpec>& jsonAddedTokens);
    std::string normalize(const std::string& text) const;
    std::vector<std::string> tokenizeChunk(const std::string& text) const;
    std::vector<std::int64_t> toIds(const std::string& text) const;
    std::int64_t pieceToId(const std::string& piece) const;

    std::vector<Piece> m_pieces;
    std::unordered_map<std::string, std::int32_t> m_normalIds;   // NORMAL, USER_DEFINED, UNUSED
    std::unordered_map<std::string, std::int32_t> m_reservedIds; // UNKNOWN, CONTROL, BYTE
    std::vector<std::string> m_userDefined;                      // longest first
    std::int32_t m_unkPieceId = -1;
    // tokenizer.json: merge rank by "left\0right"; when set, pairs merge by rank, not piece score.
    std::unordered_map<std::string, std::int32_t> m_mergeRanks;
    bool m_rankedMerges = false;
    bool m_byteFallback = false;
    bool m_addDummyPrefix = true;
    bool m_removeExtraWhitespaces = true;
    bool m_escapeWhitespaces = true;
    bool m_whitespaceAsSuffix = false;

    std::unordered_map<std::string, std::int64_t> m_addedIds; // added tokens beyond the pieces
    std::vector<std::string> m_addedTokens;                   // id - pieces
    AddedTokenSplitter m_splitter;
    bool m_legacy = true;
    bool m_addBos = true;
    bool m_addEos = false;
    std::int64_t m_bosId = -1, m_eosId = -1, m_padId = -1;
};

} // namespace outlierlens
