#pragma once
// Any thread: how numbers and shapes are written in messages, run.json and flags (locale-independent).

#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens {

/// The shortest decimal that reads back as the same double ("0.1", "3e-05", "2.5e+20"), whatever the
/// locale; whole numbers below 1e15 in full ("1000", "-3", "0"); "nan", "inf", "-inf" spelled out.
std::string numberText(double v);

/// Text from a file (a tensor or record name) for a one-line message: control bytes, bytes from 0x7f
/// and backslashes written as \xNN, cut after 100 characters ("...").
std::string printableText(const std::string& text);

/// "[2, 3, 768]": a tensor shape for messages.
std::string shapeText(const std::vector<std::int64_t>& dims);

} // namespace outlierlens
