#pragma once
// Any thread. Thin helpers over nlohmann::json that turn every type or range problem into an
// outlierlens::Error naming the file and the field.

#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace outlierlens::jsonutil {

/// JSON nested deeper than this is refused: real configs, tokenizers and headers nest a few levels,
/// and printing or walking a value nested 100,000 deep overflows the stack.
constexpr int kMaxDepth = 256;

/// Called with each key of the top-level object as it is parsed, duplicates included (the parsed
/// value keeps only the last of two equal keys).
using TopLevelKeyFn = std::function<void(const std::string& key)>;

/// Parses JSON text refusing nesting beyond kMaxDepth (Error "<what>: JSON nested deeper than 256
/// levels"), in time linear in the text (nlohmann's callback parser rescans an object's members at
/// the end of each nested object: quadratic in the entry count). Every JSON read from outside goes
/// through it. Syntax errors stay nlohmann::json::parse_error, so a caller can word them for its format.
nlohmann::json parseWithDepthLimit(std::string_view text, const std::string& what,
                                   const TopLevelKeyFn& onTopLevelKey = {});

/// Parses a whole JSON file. Errors name the file and the byte offset of a syntax error.
nlohmann::json parseFile(const std::string& path);
/// Parses JSON text; `what` names its origin in error messages.
nlohmann::json parseText(const std::string& text, const std::string& what);

/// Required (no default) or optional (default given) typed fields of an object. `where` is the
/// file or object name for messages such as "config.json: field 'hidden_size' must be an integer".
long long getInt(const nlohmann::json& obj, const std::string& key, const std::string& where,
                 std::optional<long long> fallback = std::nullopt);
/// getInt for a field held in an int (sizes, counts, token ids): a value outside the 32-bit range is
/// an Error, never cut to its low bits (hidden_size 2^32 + 256 must not read as 256).
int getInt32(const nlohmann::json& obj, const std::string& key, const std::string& where,
             std::optional<int> fallback = std::nullopt);
double getNumber(const nlohmann::json& obj, const std::string& key, const std::string& where,
                 std::optional<double> fallback = std::nullopt);
std::string getString(const nlohmann::json& obj, const std::string& key, const std::string& where,
                      std::optional<std::string> fallback = std::nullopt);
bool getBool(const nlohmann::json& obj, const std::string& key, const std::string& where,
             std::optional<bool> fallback = std::nullopt);

} // namespace outlierlens::jsonutil
