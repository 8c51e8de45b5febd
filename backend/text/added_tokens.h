#pragma once
// Any thread. An AddedTokenSplitter is immutable after construction.
//
// What Hugging Face's slow tokenizers (transformers v4.31) do with special and added tokens before
// the model's own tokenization: read them from tokenizer_config.json, special_tokens_map.json and
// added_tokens.json (PreTrainedTokenizerBase.from_pretrained), and cut them out of the text
// (PreTrainedTokenizer.tokenize: a trie split, then whitespace stripping next to them).

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace outlierlens {

/// One special or added token as PreTrainedTokenizer.tokenize treats it.
struct AddedTokenSpec
{
    std::string content;
    bool lstrip = false; ///< AddedToken.lstrip: eats the whitespace on its left
    bool rstrip = false; ///< AddedToken.rstrip: eats the whitespace on its right
    /// A plain string rather than an AddedToken (a string in special_tokens_map.json, a token of
    /// added_tokens.json that is not special): v4.31 strips the whitespace on both sides.
    bool plainString = false;
};

/// The special-token settings of a tokenizer folder, merged as from_pretrained merges them.
struct SpecialTokenFiles
{
    /// The boolean settings of tokenizer_config.json that change tokenization (nullopt: absent or null).
    std::optional<bool> addBosToken, addEosToken, addPrefixSpace, legacy;
    std::optional<AddedTokenSpec> bos, eos, unk, sep, pad, cls, mask;
    std::vector<AddedTokenSpec> additional; ///< additional_special_tokens
    /// added_tokens.json: (token, id), sorted by id.
    std::vector<std::pair<std::string, std::int64_t>> addedTokens;

    /// Reads the three files of `dir` (each optional). `defaults` gives the tokenizer class's
    /// default bos/eos/unk/pad (nullopt = none), which __init__ wraps as AddedTokens like any
    /// string of tokenizer_config.json. Throws Error naming a file that does not parse.
    static SpecialTokenFiles read(const std::filesystem::path& dir, const std::optional<std::string>& bos,
                                  const std::optional<std::string>& eos,
                                  const std::optional<std::string>& unk,
                                  const std::optional<std::string>& pad);

    /// all_special_tokens_extended: bos, eos, unk, sep, pad, cls, mask, additional, first of each
    /// content kept.
    std::vector<AddedTokenSpec> specialTokens() const;
};

/// Cuts special/added tokens out of a text: leftmost, longest match first, as the trie of
/// PreTrainedTokenizer.tokenize does, then strips whitespace next to them as v4.31 does.
class AddedTokenSplitter
{
public:
    struct Piece
    {
        std::string text;
        bool isAddedToken = false;
    };

    AddedTokenSplitter() = default;
    explicit AddedTokenSplitter(std::vector<AddedTokenSpec> tokens);

    /// `text` must be valid UTF-8. Empty pieces (e.g. whitespace that was stripped) are left out.
    std::vector<Piece> split(const std::string& text) const;
    const std::vector<AddedTokenSpec>& tokens() const { return m_tokens; }

private:
    std::vector<AddedTokenSpec> m_tokens;
};

/// Python's str.isspace() for one code point (what str.strip() removes).
bool isPythonSpace(char32_t c);

} // namespace outlierlens
