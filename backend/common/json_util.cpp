#include "common/json_util.h"

#include "common/error.h"
#include "common/input_file.h"

#include <nlohmann/json.hpp>

#include <climits>
#include <cmath>
#include <type_traits>

namespace outlierlens::jsonutil {
namespace {

// config.json is a few KB; the largest tokenizer.json files are tens of MB.
constexpr std::uint64_t kMaxJsonBytes = 256ull << 20;

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

namespace {

// nlohmann's DOM builder with a nesting limit and a look at the top-level keys.
class LimitedDomParser : public nlohmann::detail::json_sax_dom_parser<nlohmann::json>
{
public:
    using Base = nlohmann::detail::json_sax_dom_parser<nlohmann::json>;
    LimitedDomParser(nlohmann::json& result, const std::string& what, const TopLevelKeyFn& onTopLevelKey)
        : Base(result)
        , m_what(what)
        , m_onTopLevelKey(onTopLevelKey)
    {}

    bool start_object(std::size_t n)
    {
        enter();
        return Base::start_object(n);
    }
    bool end_object()
    {
        --m_depth;
        return Base::end_object();
    }
    bool start_array(std::size_t n)
    {
        enter();
        return Base::start_array(n);
    }
    bool end_array()
    {
        --m_depth;
        return Base::end_array();
    }
    bool key(std::string& k)
    {
        if (m_depth == 1 && m_onTopLevelKey) m_onTopLevelKey(k);
        return Base::key(k);
    }
    // A number too large for a double (1e999) reaches the SAX interface as out_of_range.406, which
    // callers would not expect from a parser: refuse it here, in words, like the depth limit.
    template<typename Exception>
    bool parse_error(std::size_t position, const std::string& token, const Exception& ex)
    {
        if constexpr (std::is_same_v<Exception, nlohmann::json::out_of_range>)
            throw Error(m_what + ": number " + token.substr(0, 40) + (token.size() > 40 ? "..." : "") +
                        " at byte " + std::to_string(position) + " is outside the range of a double");
        return Base::parse_error(position, token, ex);
    }

private:
    void enter()
    {
        if (++m_depth > kMaxDepth)
            throw Error(m_what + ": JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }

    const std::string& m_what;
    const TopLevelKeyFn& m_onTopLevelKey;
    int m_depth = 0;
};

} // namespace

nlohmann::json parseWithDepthLimit(std::string_view text, const std::string& what,
                                   const TopLevelKeyFn& onTopLevelKey)
{
    nlohmann::json result;
    LimitedDomParser parser(result, what, onTopLevelKey);
    nlohmann::json::sax_parse(text.begin(), text.end(), &parser);
    return result;
}

nlohmann::json parseFile(const std::string& path)
{
    return parseText(readWholeFile(path, "JSON file", kMaxJsonBytes), path);
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
    const auto tooLarge = [&] {
        return Error(where + ": field '" + key + "' is " + v->dump() + ", outside the 64-bit integer range");
    };
    if (v->is_number_unsigned()) {
        if (v->get<unsigned long long>() > static_cast<unsigned long long>(LLONG_MAX)) throw tooLarge();
        return v->get<long long>();
    }
    if (v->is_number_integer()) return v->get<long long>();
    if (v->is_number_float()) {
        const double d = v->get<double>();
        // 2^63 is the first double outside long long; casting it (or NaN) would be undefined.
        if (!(std::abs(d) < 9223372036854775808.0)) throw tooLarge();
        if (d == std::trunc(d)) return static_cast<long long>(d);
    }
    throw Error(where + ": field '" + key + "' must be an integer, found " + v->dump());
}

int getInt32(const nlohmann::json& obj, const std::string& key, const std::string& where,
             std::optional<int> fallback)
{
    const long long v =
        getInt(obj, key, where, fallback ? std::optional<long long>(*fallback) : std::nullopt);
    if (v < INT_MIN || v > INT_MAX)
        throw Error(where + ": field '" + key + "' is " + std::to_string(v) + ", outside the 32-bit range (" +
                    std::to_string(INT_MIN) + " to " + std::to_string(INT_MAX) + ")");
    return int(v);
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
