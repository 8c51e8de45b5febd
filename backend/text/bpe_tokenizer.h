#pragma once
// Any thread. A ByteLevelBpeTokenizer is immutable after construction: one const object may be
// shared by several threads.
//
// Byte-level BPE exactly as Hugging Face's slow GPT2Tokenizer (transformers v4.31), for GPT-2 and
// OPT: special/added tokens are cut out first, the rest is split by GPT-2's regex, each UTF-8 byte
// becomes a printable symbol (bytes_to_unicode) and merges are applied by rank.

#include "text/added_tokens.h"
#include "text/decoder_tokenizer.h"

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace outlierlens {

class ByteLevelBpeTokenizer final : public DecoderTokenizer
{
public:
    /// Reads vocab.json + merges.txt (or OpenAI's encoder.json + vocab.bpe) and, if present,
    /// tokenizer_config.json (add_bos_token, add_prefix_space, special tokens),
    /// special_tokens_map.json and added_tokens.json. Throws Error naming the file that is missing
    /// or does not parse. The words are split by GPT-2's pattern: DecoderTokenizer::fromModelDir
    /// sends folders whose tokenizer.json has another pre-tokenizer (Qwen2) to TokenizerJsonTokenizer.
    static std::unique_ptr<ByteLevelBpeTokenizer> fromModelDir(const std::string& modelDir);

    Encoding encode(const std::string& text, const std::optional<std::string>& pair = std::nullopt,
                    int maxLength = 0, bool addSpecialTokens = true) const override;
    std::string idToToken(std::int64_t id) const override;
    std::string displayToken(std::int64_t id) const override;
    /// One more than the largest id of the vocabulary and the added tokens.
    std::int64_t vocabSize() const override { return static_cast<std::int64_t>(m_idToToken.size()); }
    std::int64_t bosId() const override { return m_bosId; }
    std::int64_t eosId() const override { return m_eosId; }
    std::int64_t padId() const override { return m_padId; }
    std::string kind() const override { return "byte-level BPE"; }

    /// PreTrainedTokenizer.tokenize: token strings ("Ġworld"), no BOS. Throws Error for invalid UTF-8.
    std::vector<std::string> tokenize(const std::string& text) const;
    /// GPT-2's regex split of UTF-8 text (no special-token handling), for diagnostics.
    static std::vector<std::string> preTokenize(const std::string& text);
    /// The id of a token string; unknown strings give the unk token's id (-1 if there is none).
    std::int64_t tokenToId(const std::string& token) const;
    bool addsBosToken() const { return m_addBos; }

private:
    ByteLevelBpeTokenizer() = default;

    void loadVocab(const std::string& path);
    void loadMerges(const std::string& path);
    std::int32_t internSymbol(const std::string& s);
    // BPE of one pre-token; appends token strings.
    void bpe(const std::string& preToken, std::vector<std::string>& out) const;
    std::vector<std::int64_t> toIds(const std::string& text) const;

    std::unordered_map<std::string, std::int64_t> m_tokenToId; // vocab.json and added tokens
    std::vector<std::string> m_idToToken;                      // "" where no token has the id
    std::vector<bool> m_hasId;
    // Symbols (byte symbols and merge results) are interned; a merge maps a pair of symbol ids to
    // (rank, merged symbol id).
    std::unordered_map<std::string, std::int32_t> m_symbolIds;
    std::vector<std::string> m_symbols;
    std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>> m_merges;
    std::array<std::int32_t, 256> m_byteSymbol{}; // byte -> symbol id
    std::unordered_map<char32_t, unsigned char> m_unicodeToByte;

    AddedTokenSplitter m_splitter;
    bool m_addBos = false;
    bool m_addPrefixSpace = false;
    std::string m_unkToken;
    std::int64_t m_bosId = -1, m_eosId = -1, m_padId = -1, m_unkId = -1;
};

} // namespace outlierlens
