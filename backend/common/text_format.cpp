#include "common/text_format.h"

#include <charconv>
#include <cmath>
#include <locale>
#include <sstream>

namespace outlierlens {

std::string numberText(double v)
{
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    // Whole numbers in full ("1000", not the shorter "1e+03"), up to where doubles stop being exact.
    if (v == std::trunc(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
    std::string text;
    for (int precision = 1; precision <= 17; ++precision) {
        std::ostringstream out;
        out.imbue(std::locale::classic());
        out.precision(precision);
        out << v;
        text = out.str();
        double back = 0;
        const auto r = std::from_chars(text.data(), text.data() + text.size(), back);
        if (r.ec == std::errc() && back == v) break;
    }
    return text;
}

std::string printableText(const std::string& text)
{
    static const char* const hex = "0123456789abcdef";
    std::string out;
    for (const char c : text) {
        if (out.size() >= 100) {
            out += "...";
            break;
        }
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u >= 0x7f || c == '\\')
            out += std::string("\\x") + hex[u >> 4] + hex[u & 15];
        else
            out.push_back(c);
    }
    return out;
}

std::string shapeText(const std::vector<std::int64_t>& dims)
{
    std::string s = "[";
    for (std::size_t i = 0; i < dims.size(); ++i)
        s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
}

std::string joinedText(const std::vector<std::string>& items, const std::string& separator)
{
    std::string out;
    for (std::size_t i = 0; i < items.size(); ++i)
        out += (i ? separator : std::string()) + items[i];
    return out;
}

std::optional<double> numberFromText(std::string text)
{
    if (!text.empty() && text[0] == '+') text.erase(0, 1);
    double v = 0;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size() || !std::isfinite(v))
        return std::nullopt;
    return v;
}

std::optional<bool> switchFromText(const std::string& text)
{
    if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
    if (text == "false" || text == "0" || text == "no" || text == "off") return false;
    return std::nullopt;
}

} // namespace outlierlens
