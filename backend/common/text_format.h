#pragma once
// Any thread: how numbers and shapes are written in messages, run.json and flags, and how numbers
// and switches are read back from flags (locale-independent).

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
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

/// The items joined by `separator`: joinedText({"a", "b"}, ", ") = "a, b".
std::string joinedText(const std::vector<std::string>& items, const std::string& separator = ", ");

/// A finite number written as C would ("-0.025", "3e-05", "+1"); nullopt for anything else, trailing
/// text, nan and inf included.
std::optional<double> numberFromText(std::string text);

/// true/1/yes/on or false/0/no/off; nullopt otherwise.
std::optional<bool> switchFromText(const std::string& text);

/// An integer of type T, also written as an integral number in scientific notation ("1e6");
/// nullopt when not integral or outside T's range.
template<class T>
std::optional<T> integerFromText(std::string text)
{
    if (!text.empty() && text[0] == '+') text.erase(0, 1);
    T v = 0;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    if (!text.empty() && r.ec == std::errc() && r.ptr == text.data() + text.size()) return v;
    if (r.ec == std::errc::result_out_of_range) return std::nullopt;
    const std::optional<double> d = numberFromText(text);
    if (!d || *d != std::floor(*d) || *d < double(std::numeric_limits<T>::min()) ||
        *d >= double(std::numeric_limits<T>::max()))
        return std::nullopt;
    return T(*d);
}

} // namespace outlierlens
