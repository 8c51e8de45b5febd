#pragma once
// Any thread: how numbers and shapes are written in messages, run.json and flags (locale-independent).

#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens {

/// The shortest decimal that reads back as the same double ("0.1", "3e-05", "1234"), whatever the
/// locale; "nan", "inf", "-inf" spelled out.
std::string numberText(double v);

/// "[2, 3, 768]": a tensor shape for messages.
std::string shapeText(const std::vector<std::int64_t>& dims);

} // namespace outlierlens
