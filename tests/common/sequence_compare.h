#pragma once
// Test thread only: what the tokenizer tests compare sequences and errors with.

#include "common/error.h"

#include <QString>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens::test {

/// The message of the Error `fn` throws, or an empty string when it throws none.
template<typename Fn>
QString errorOf(Fn fn)
{
    try {
        fn();
    } catch (const Error& e) {
        return QString::fromStdString(e.what());
    }
    return {};
}

inline std::string show(const std::string& s)
{
    return "'" + s + "'";
}
inline std::string show(std::int64_t v)
{
    return std::to_string(v);
}

/// "" if equal, otherwise where the vectors first differ.
template<typename T>
std::string firstDifference(const std::vector<T>& got, const std::vector<T>& want)
{
    const std::size_t n = std::min(got.size(), want.size());
    for (std::size_t i = 0; i < n; ++i) {
        if (!(got[i] == want[i]))
            return "position " + std::to_string(i) + ": got " + show(got[i]) + ", expected " + show(want[i]);
    }
    if (got.size() != want.size())
        return "length " + std::to_string(got.size()) + ", expected " + std::to_string(want.size());
    return {};
}

} // namespace outlierlens::test
