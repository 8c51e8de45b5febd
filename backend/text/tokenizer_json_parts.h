#pragma once
// Internal to the tokenizer.json reader (tokenizer_json*.cpp). Any thread: every part is immutable
// after loading.
//
// The stages of a Hugging Face `tokenizers` pipeline as plain data, each parsed from its JSON object
// and run on UTF-8 strings. Offsets are not tracked: the app needs ids and token strings only.

#include "text/unicode_regex.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace outlierlens::tokjson {

/// "<file>: <json path>", the prefix of every message about one component.
struct Where
{
    std::string file;
    std::string path;
    std::string str() const { return file + ": " + path; }
    Where at(const std::string& key) const { return {file, path + "." + key}; }
    Where at(const std::string& key, std::size_t index) const
    {
        return {file, path + "." + key + "[" + std::to_string(index) + "]"};
    }
};

/// The component's "type" field. Throws Error if it is missing or not a string.
std::string componentType(const nlohmann::json& j, const Where& where);
/// Error "<where>: type '<type>' is not supported (this reader knows <known>)".
[[noreturn]] void unsupportedType(const Where& where, const std::string& type, const std::string& known);

/// A "pattern" of Split and Replace: {"String": s} (literal) or {"Regex": r}.
struct Pattern
{
    std::string literal;
    std::shared_ptr<const UnicodeRegex> regex; ///< set for {"Regex": ...}

    static Pattern parse(const nlohmann::json& j, const Where& where);
    /// Non-overlapping matches of valid UTF-8 `text`, left to right, as [begin, end) byte offsets.
    std::vector<std::pair<std::size_t, std::size_t>> find(const std::string& text) const;
};

struct Normalizer
{
    enum class Kind { Nfc, Nfd, Nfkc, Nfkd, Lowercase, Replace, Prepend, Strip };
    Kind kind = Kind::Nfc;
    Pattern pattern;                  ///< Replace
    std::string content;              ///< Replace: the replacement; Prepend: the prefix
    bool left = false, right = false; ///< Strip
};

/// A normalizer object (null: none; Sequence: flattened) as the steps to run in order.
std::vector<Normalizer> parseNormalizer(const nlohmann::json& j, const Where& where);
/// Runs the steps on valid UTF-8 text.
std::string normalize(const std::vector<Normalizer>& steps, std::string text);

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct PreTokenizer
{
    enum class Kind { Split, ByteLevel, Metaspace, Digits, WhitespaceSplit };
    Kind kind = Kind::Split;
    Pattern pattern; ///< Split; ByteLevel with use_regex: GPT-2's pattern
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false;
    bool addPrefixSpace = false;                                           ///< ByteLevel
    bool useRegex = true;                                                  ///< ByteLevel
    std::string replacement;                                               ///< Metaspace (one character)
    enum class Prepend { Always, First, Never } prepend = Prepend::Always; ///< Metaspace
    bool split = true;                                                     ///< Metaspace
    bool individualDigits = false;                                         ///< Digits
};

/// A piece of text on its way through the pre-tokenizers; `atStart`: it begins at the first
/// character of the input (Metaspace's prepend_scheme "first" looks at that).
struct PreToken
{
    std::string text;
    bool atStart = false;
};

/// A pre_tokenizer object (null: none; Sequence: flattened) as the steps to run in order.
std::vector<PreTokenizer> parsePreTokenizer(const nlohmann::json& j, const Where& where);
/// Runs the steps on one normalized piece; empty pieces are dropped. `byteSymbols`: GPT-2's byte
/// map as UTF-8 strings (ByteLevel).
std::vector<PreToken> preTokenize(const std::vector<PreTokenizer>& steps, PreToken input,
                                  const std::array<std::string, 256>& byteSymbols);

/// A tokenizer.json as read for the readers: the JSON of the pipeline, with model.vocab (an object)
/// and model.merges (a list) taken out while parsing (null in `json`): as DOM nodes, Gemma 2's 256k
/// entries and 580k merges cost over a second to build and free.
struct TokenizerJsonFile
{
    struct MergeRef
    {
        std::uint32_t offset, leftSize, rightSize; // in mergeText
    };

    std::string path;
    nlohmann::json json;
    bool vocabTaken = false, mergesTaken = false;
    std::vector<std::pair<std::string, std::int64_t>> vocab; ///< (token, id) in file order
    std::string mergeText;                                   ///< left and right of every merge
    std::vector<MergeRef> merges;

    /// Parses `path`. Throws Error naming the file: malformed JSON (with the byte offset), nesting
    /// deeper than jsonutil::kMaxDepth, a vocabulary id that is not an integer in [0, 5e7], a merge
    /// that is neither "a b" nor ["a", "b"].
    static TokenizerJsonFile read(const std::string& path);
    /// Merge i as (left, right).
    std::pair<std::string_view, std::string_view> merge(std::size_t i) const;
    void addMerge(std::string_view left, std::string_view right);
    /// Puts model.vocab and model.merges back into `json`, for a reader that wants the whole JSON.
    void restore();
};

/// (left id, right id) -> (rank, merged id), open addressing: hundreds of thousands of merges load
/// in a few milliseconds, where a node-based map allocates once per merge.
class MergeTable
{
public:
    struct Merge
    {
        std::int32_t rank = -1;
        std::int32_t merged = -1;
    };
    void reserve(std::size_t n);
    /// Sets the merge of (a, b); a pair set twice keeps the last value.
    void set(std::int32_t a, std::int32_t b, Merge m);
    /// nullptr if (a, b) does not merge.
    const Merge* find(std::int32_t a, std::int32_t b) const;

private:
    struct Slot
    {
        std::uint64_t key = kEmpty;
        Merge merge;
    };
    static constexpr std::uint64_t kEmpty = ~std::uint64_t(0);
    std::size_t slotOf(std::uint64_t key) const;
    std::vector<Slot> m_slots;
    std::size_t m_used = 0;
};

/// What the pipeline asks of a model (BPE or Unigram).
class Model
{
public:
    virtual ~Model() = default;
    /// Appends the ids of one pre-token. Throws Error where tokenizers fails (Unigram: an unknown
    /// character and no unk_id).
    virtual void tokenize(const std::string& word, std::vector<std::int32_t>& out) const = 0;
    /// The vocabulary by id.
    virtual const std::vector<std::string>& tokens() const = 0;
    /// Whether a token has id `id` (< tokens().size()).
    virtual bool hasToken(std::size_t id) const = 0;
    /// The id of a vocabulary token, or -1.
    virtual std::int32_t idOf(std::string_view token) const = 0;
    virtual bool byteFallback() const = 0;
    /// "BPE" or "Unigram".
    virtual const char* name() const = 0;
};

/// The BPE model of tokenizers (models/bpe): vocabulary, merges by rank, unk, byte fallback.
/// Move-only: the vocabulary index points into the token strings.
class BpeModel final : public Model
{
public:
    BpeModel() = default;
    BpeModel(BpeModel&&) = default;
    BpeModel& operator=(BpeModel&&) = default;
    BpeModel(const BpeModel&) = delete;
    BpeModel& operator=(const BpeModel&) = delete;

    /// Reads the options of `model` (file.json's "model") and takes file.vocab and file.merges.
    /// Throws Error naming `where` (e.g. "tokenizer.json: model.merges[12]") on anything malformed.
    static BpeModel parse(const nlohmann::json& model, TokenizerJsonFile& file, const Where& where);

    void tokenize(const std::string& word, std::vector<std::int32_t>& out) const override;
    /// model.vocab by id ("" where no token has the id).
    const std::vector<std::string>& tokens() const override { return m_tokens; }
    bool hasToken(std::size_t id) const override { return !m_tokens[id].empty(); }
    std::int32_t idOf(std::string_view token) const override;
    bool byteFallback() const override { return m_byteFallback; }
    const char* name() const override { return "BPE"; }

private:
    std::vector<std::string> m_tokens;
    std::unordered_map<std::string_view, std::int32_t> m_vocab; // views into m_tokens
    MergeTable m_merges;
    std::array<std::int32_t, 256> m_byteIds{}; // "<0xNN>" ids, -1 where absent
    std::int32_t m_unkId = -1;
    bool m_byteFallback = false;
    bool m_fuseUnk = false;
    bool m_ignoreMerges = false;
    std::string m_prefix, m_suffix; // continuing_subword_prefix, end_of_word_suffix
};

/// The Unigram model of tokenizers (models/unigram): model.vocab as [piece, score] pairs (the id is
/// the index), unk_id, byte_fallback. A pre-token is cut where the sum of the pieces' scores is
/// highest (Viterbi over the pieces that start at each character); a character with no
/// one-character piece may be <unk>, scored min(score) - 10; runs of <unk> become one, which is
/// then its own piece if the vocabulary has it, else its UTF-8 bytes as <0xNN> (byte_fallback, if
/// all of them are pieces), else <unk>.
class UnigramModel final : public Model
{
public:
    /// Reads `model` (file.json's "model"). Throws Error naming `where` on anything malformed.
    static std::unique_ptr<UnigramModel> parse(const nlohmann::json& model, const TokenizerJsonFile& file,
                                               const Where& where);

    void tokenize(const std::string& word, std::vector<std::int32_t>& out) const override;
    const std::vector<std::string>& tokens() const override { return m_tokens; }
    bool hasToken(std::size_t) const override { return true; }
    std::int32_t idOf(std::string_view token) const override;
    bool byteFallback() const override { return m_byteFallback; }
    const char* name() const override { return "Unigram"; }

private:
    UnigramModel() = default;

    std::vector<std::string> m_tokens;
    std::vector<double> m_scores;
    std::unordered_map<std::string_view, std::int32_t> m_vocab; // views into m_tokens; last id wins
    MergeTable m_trie;                         // (node, byte) -> child node in Merge::merged; root 0
    std::vector<std::int32_t> m_nodePiece;     // the piece id that ends at a node, -1 where none
    std::array<std::int32_t, 256> m_byteIds{}; // "<0xNN>" ids, -1 where absent
    std::int32_t m_unkId = -1;
    double m_unkScore = 0.0;
    bool m_byteFallback = false;
};

/// What a post-processor adds around the sequences: a template of special tokens and sequences.
struct TemplateItem
{
    int sequence = -1;               ///< 0 = A, 1 = B; -1 = special tokens
    std::vector<std::int64_t> ids;   ///< special tokens
    std::vector<std::string> tokens; ///< their strings
};

struct PostProcessor
{
    bool addsTokens = false; ///< false: A (then B), with or without add_special_tokens
    std::vector<TemplateItem> single, pair;
};

/// A post_processor object (null, ByteLevel, TemplateProcessing, RobertaProcessing,
/// BertProcessing, or a Sequence of them with at most one that adds tokens).
PostProcessor parsePostProcessor(const nlohmann::json& j, const Where& where);

} // namespace outlierlens::tokjson
