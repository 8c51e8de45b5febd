#pragma once
// Internal to the SentencePiece tokenizer (sentencepiece_tokenizer.cpp, sentencepiece_loading.cpp).

#include <string>

namespace outlierlens::spm {

/// U+2581 "▁": SentencePiece's visible space.
inline const std::string kSpaceSymbol = "\xE2\x96\x81";

/// ModelProto.SentencePiece.Type.
enum PieceType { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

} // namespace outlierlens::spm
