#pragma once
// Any thread. A BertTokenizer is immutable after construction: one const object may be shared by
// several threads.
//
// WordPiece tokenization exactly as Hugging Face's slow BertTokenizer (transformers v4.31):
// PreTrainedTokenizer.tokenize (special tokens kept whole, per-character lower-casing),
// BasicTokenizer (cleaning, CJK spacing, NFC, accent stripping, punctuation split) and
// WordpieceTokenizer (greedy longest-match-first with "##" continuations).

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace outlierlens {

/// One encoded input: all four vectors have the same length T (tokens, 0-based positions).
struct Encoding
{
    std::vector<std::int64_t> inputIds;
    std::vector<std::int64_t> tokenTypeIds;  ///< 0 for the first segment, 1 for the pair segment
    std::vector<std::int64_t> attentionMask; ///< all 1 (no padding is added)
    std::vector<std::string> tokens;         ///< wordpiece strings, e.g. "[CLS]", "hello", "##ing"
};

/// "" when nothing was cut, else the sentence a user reads: "the input has 602 tokens; only the first
/// 512 are used (the model's limit)"; for sentence pairs, where the longer segment loses its end.
std::string truncationNotice(std::int64_t fullTokens, std::int64_t keptTokens, bool pair = false);

/// The settings of tokenizer_config.json that change tokenization (names as in Hugging Face).
struct BertTokenizerOptions
{
    bool lowerCase = true;            ///< do_lower_case
    std::optional<bool> stripAccents; ///< strip_accents; nullopt (null) = strip when lowerCase
    bool tokenizeChineseChars = true; ///< tokenize_chinese_chars
    std::string unkToken = "[UNK]";
    std::string sepToken = "[SEP]";
    std::string padToken = "[PAD]";
    std::string clsToken = "[CLS]";
    std::string maskToken = "[MASK]";
};

class BertTokenizer
{
public:
    /// Reads vocab.txt (one token per line, id = 0-based line number). Throws Error naming the file
    /// if it cannot be read, is empty or lacks one of the special tokens.
    static BertTokenizer fromVocabFile(const std::string& vocabPath, bool lowerCase = true);
    /// As above with every tokenization setting given explicitly.
    static BertTokenizer fromVocabFile(const std::string& vocabPath, const BertTokenizerOptions& options);
    /// Reads <modelDir>/vocab.txt and, if <modelDir>/tokenizer_config.json exists, do_lower_case
    /// (default true), strip_accents, tokenize_chinese_chars and the special token strings.
    static BertTokenizer fromModelDir(const std::string& modelDir);

    /// Splits UTF-8 text into wordpiece strings; no special tokens are added, but special token
    /// strings that appear literally in the text ("[MASK]", case-sensitive) stay single tokens.
    /// Throws Error if the text is not valid UTF-8.
    std::vector<std::string> tokenize(const std::string& text) const;
    /// The BasicTokenizer stage only (words and punctuation before WordPiece), for diagnostics.
    std::vector<std::string> basicTokenize(const std::string& text) const;

    /// [CLS] a [SEP] (b [SEP]); token_type_ids 0 for the first segment incl. its [CLS]/[SEP], 1 for
    /// b and its [SEP] (all 0 without special tokens). maxLength counts tokens incl. the special
    /// ones; 0 = no truncation, otherwise Hugging Face's "longest_first" truncation (tokens are
    /// removed from the end of the longer segment, the pair segment on ties). Throws Error if
    /// maxLength is negative or too small to hold the special tokens plus any text.
    Encoding encode(const std::string& text, const std::optional<std::string>& pair = std::nullopt,
                    int maxLength = 0, bool addSpecialTokens = true) const;

    /// Vocabulary id (0-based line of vocab.txt; the last line if a token repeats); unknown -> unkId().
    std::int64_t tokenToId(const std::string& token) const;
    /// The token on 0-based line `id` of vocab.txt. Throws Error if id is out of range.
    const std::string& idToToken(std::int64_t id) const;
    /// Number of lines of vocab.txt (= the rows of the model's word embedding).
    std::int64_t vocabSize() const { return static_cast<std::int64_t>(m_idToToken.size()); }

    std::int64_t clsId() const { return m_clsId; }
    std::int64_t sepId() const { return m_sepId; }
    std::int64_t padId() const { return m_padId; }
    std::int64_t maskId() const { return m_maskId; }
    std::int64_t unkId() const { return m_unkId; }
    bool lowerCase() const { return m_options.lowerCase; }
    const BertTokenizerOptions& options() const { return m_options; }

    /// Longest word WordPiece splits, in code points (Hugging Face's max_input_chars_per_word).
    static constexpr std::size_t maxInputCharsPerWord = 100;

private:
    BertTokenizer() = default;

    bool stripsAccents() const { return m_options.stripAccents.value_or(m_options.lowerCase); }
    // A piece of text between special tokens: appends its basic tokens (UTF-8) to `out`.
    void basicTokenizeChunk(const std::u32string& chunk, std::vector<std::string>& out) const;
    void finishWord(std::u32string& word, std::vector<std::string>& out) const;
    void emitBasicToken(const std::u32string& token, std::vector<std::string>& out) const;
    bool isSpecialToken(const std::string& token) const;
    void wordpiece(const std::string& word, std::vector<std::string>& out) const;
    // Runs the pipeline up to the basic tokens; special tokens found in the raw text are marked.
    void splitText(const std::string& text, std::vector<std::string>& basicTokens,
                   std::vector<bool>& isRawSpecial) const;
    std::vector<std::int64_t> toIds(const std::string& text) const;

    BertTokenizerOptions m_options;
    std::vector<std::string> m_specialTokens;
    std::vector<std::u32string> m_specialTokens32;
    std::unordered_map<std::string, std::int64_t> m_tokenToId;
    std::vector<std::string> m_idToToken;
    std::size_t m_maxTokenChars = 0; // longest vocabulary entry in code points (bounds the greedy search)
    std::int64_t m_clsId = 0, m_sepId = 0, m_padId = 0, m_maskId = 0, m_unkId = 0;
};

} // namespace outlierlens
