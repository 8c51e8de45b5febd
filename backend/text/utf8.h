#pragma once
// Any thread. Strict UTF-8 decoding and encoding shared by the tokenizers.

#include <string>
#include <string_view>

namespace outlierlens::utf8 {

/// Decodes UTF-8 into code points. Strict: no overlong forms, surrogates or code points past
/// U+10FFFF (Python, whose tokenizers we reproduce, never sees invalid UTF-8, so there is nothing
/// to match and callers report it instead). Returns the 0-based byte offset of the first invalid
/// sequence, or std::string::npos if `s` is valid.
std::size_t decode(std::string_view s, std::u32string& out);
/// The byte offset of the first invalid sequence of `s`, or npos.
std::size_t firstInvalidByte(std::string_view s);

/// Appends the UTF-8 encoding of one code point.
void append(std::string& out, char32_t cp);
std::string encode(const char32_t* begin, const char32_t* end);
std::string encode(const std::u32string& s);

/// Bytes as a one-line label: valid UTF-8 is kept, \n \t \r become those escapes, other control
/// characters and bytes that are not valid UTF-8 (part of a character split between tokens) become
/// "<0xNN>".
std::string printable(const std::string& bytes);

/// Length in bytes of the UTF-8 sequence that starts with lead byte `b` (1 for a stray byte).
inline std::size_t sequenceLength(unsigned char b)
{
    if (b < 0x80) return 1;
    if ((b & 0xE0) == 0xC0) return 2;
    if ((b & 0xF0) == 0xE0) return 3;
    if ((b & 0xF8) == 0xF0) return 4;
    return 1;
}

} // namespace outlierlens::utf8
