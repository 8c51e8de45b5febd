#pragma once
// Any thread. A compiled UnicodeRegex is immutable and may be used by several threads at once.
//
// A Unicode regular expression as Hugging Face's tokenizers runs the patterns of a tokenizer.json
// (Oniguruma there): PCRE2 in UTF mode with Unicode properties, so \p{L}, \p{N} and \s mean the
// Unicode classes. \s (and \S outside a character class) is rewritten as the White_Space property,
// as Oniguruma and Python's `regex` read it (PCRE2's own \s adds U+180E); U+FEFF is not in it.

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace outlierlens {

class UnicodeRegex
{
public:
    /// Compiles `pattern`. Throws Error "<where>: invalid regular expression ... at offset N".
    UnicodeRegex(const std::string& pattern, const std::string& where);
    ~UnicodeRegex();
    UnicodeRegex(const UnicodeRegex&) = delete;
    UnicodeRegex& operator=(const UnicodeRegex&) = delete;

    /// Every non-overlapping match in valid UTF-8 `text`, left to right, as 0-based [begin, end)
    /// byte offsets. Empty matches are reported too (they split a text); the search then moves on by
    /// one character. Throws Error if the engine gives up (match or depth limit).
    std::vector<std::pair<std::size_t, std::size_t>> findAll(const std::string& text) const;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
    std::string m_where;
};

} // namespace outlierlens
