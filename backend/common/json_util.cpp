#include "common/json_util.h"

#include "common/error.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace outlierlens::jsonutil {
namespace {

const nlohmann::json* field(const nlohmann::json& obj, const std::string& key, const std::string& where,
                            bool required)
{
    if (!obj.is_object()) throw Error(where + ": expected a JSON object");
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
        if (required) throw Error(where + ": required field '" + key + "' is missing");
        return nullptr;
    }
    return &*it;
}

} // namespace

void checkDepth(int depth, const std::string& what)
{
    if (depth > kMaxDepth)
        throw Error(what + ": JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
}

nlohmann::json parseWithDepthLimit(std::string_view text, const std::string& what)
{
    return nlohmann::json::parse(text.begin(), text.end(),
                                 [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
                                     checkDepth(depth, what);
                                     return true;
                                 });
}

nlohmann::json parseFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open file");
    std::ostringstream text;
    text << in.rdbuf();
    return parseText(text.str(), path);
}

nlohmann::json parseText(const std::string& text, const std::string& what)
{
    try {
        return parseWithDepthLimit(text, what);
    } catch (const nlohmann::json::parse_error& e) {
        throw Error(what + ": malformed JSON at byte " + std::to_string(e.byte));
    }
}

long long getInt(const nlohmann::json& obj, const std::string& key, const std::string& where,
                 std::optional<long long> fallback)
{
    const nlohmann::json* v = field(obj, key, where, !fallback);
    if (!v) return *fallback;
    if (v->is_number_integer()) return v->get<long long>();
    if (v->is_number_float()) {
        const double d = v->get<double>();
        if (d == static_cast<double>(static_cast<long long>(d))) return static_cast<long long>(d);
    }
    throw Error(where + ": field '" + key + "' must be an integer, found " + v->dump());
}

double getNumber(const nlohmann::json& obj, const std::string& key, const std::string& where,
                 std::optional<double> fallback)
{
    const nlohmann::json* v = field(obj, key, where, !fallback);
    if (!v) return *fallback;
    if (!v->is_number()) throw Error(where + ": field '" + key + "' must be a number, found " + v->dump());
    return v->get<double>();
}

std::string getString(const nlohmann::json& obj, const std::string& key, const std::string& where,
                      std::optional<std::string> fallback)
{
    const nlohmann::json* v = field(obj, key, where, !fallback);
    if (!v) return *fallback;
    if (!v->is_string()) throw Error(where + ": field '" + key + "' must be a string, found " + v->dump());
    return v->get<std::string>();
}

bool getBool(const nlohmann::json& obj, const std::string& key, const std::string& where,
             std::optional<bool> fallback)
{
    const nlohmann::json* v = field(obj, key, where, !fallback);
    if (!v) return *fallback;
    if (!v->is_boolean())
        throw Error(where + ": field '" + key + "' must be true or false, found " + v->dump());
    return v->get<bool>();
}

} // namespace outlierlens::jsonutil
