#pragma once
// Any thread. The CSV files the commands write (sweep summaries, quantization results).

#include <string>

namespace outlierlens {

/// One CSV field (RFC 4180): quoted, with quotes doubled, when it holds a comma, quote, line break or
/// edge space; as is otherwise. Every text field of our CSV files goes through it.
inline std::string csvField(const std::string& text)
{
    const bool quote = text.find_first_of(",\"\n\r") != std::string::npos ||
                       (!text.empty() && (text.front() == ' ' || text.back() == ' '));
    if (!quote) return text;
    std::string out = "\"";
    for (char c : text) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + '"';
}

} // namespace outlierlens
