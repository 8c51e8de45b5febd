#pragma once
// Any thread. Unicode character classes and GPT-2's byte map, shared by the byte-level tokenizers
// (bpe_tokenizer.cpp, tokenizer_json*.cpp).

#include <array>

namespace outlierlens::textclass {

/// \p{L}: general category Lu, Ll, Lt, Lm or Lo.
bool isLetter(char32_t c);
/// \p{N}: general category Nd, Nl or No (Rust's char::is_numeric).
bool isNumber(char32_t c);
/// The White_Space property: \s of Python's `regex`, Rust's char::is_whitespace.
bool isWhiteSpace(char32_t c);
/// \w as Rust's regex reads it: letters, marks, numbers and connector punctuation.
bool isWordChar(char32_t c);

/// GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 to 256 + n.
std::array<char32_t, 256> bytesToUnicode();

} // namespace outlierlens::textclass
