#include "text/utf8.h"

namespace outlierlens::utf8 {

std::size_t decode(std::string_view s, std::u32string& out)
{
    out.clear();
    out.reserve(s.size());
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const std::size_t n = s.size();
    std::size_t i = 0;
    while (i < n) {
        const unsigned char b = p[i];
        if (b < 0x80) {
            out.push_back(b);
            ++i;
            continue;
        }
        std::size_t len = 0;
        char32_t cp = 0, min = 0;
        if ((b & 0xE0) == 0xC0) {
            len = 2, cp = b & 0x1F, min = 0x80;
        } else if ((b & 0xF0) == 0xE0) {
            len = 3, cp = b & 0x0F, min = 0x800;
        } else if ((b & 0xF8) == 0xF0) {
            len = 4, cp = b & 0x07, min = 0x10000;
        } else {
            return i;
        }
        if (i + len > n) return i;
        for (std::size_t k = 1; k < len; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        out.push_back(cp);
        i += len;
    }
    return std::string::npos;
}

std::size_t firstInvalidByte(std::string_view s)
{
    std::u32string scratch;
    return decode(s, scratch);
}

void append(std::string& out, char32_t cp)
{
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string encode(const char32_t* begin, const char32_t* end)
{
    std::string out;
    out.reserve(static_cast<std::size_t>(end - begin));
    for (const char32_t* c = begin; c != end; ++c)
        append(out, *c);
    return out;
}

std::string encode(const std::u32string& s)
{
    return encode(s.data(), s.data() + s.size());
}

std::string printable(const std::string& bytes)
{
    static const char* const hex = "0123456789ABCDEF";
    std::string out;
    std::u32string cp;
    std::size_t i = 0;
    while (i < bytes.size()) {
        const auto b = static_cast<unsigned char>(bytes[i]);
        const std::size_t len = sequenceLength(b);
        if (b < 0x80) {
            if (b == '\n') {
                out += "\\n";
            } else if (b == '\t') {
                out += "\\t";
            } else if (b == '\r') {
                out += "\\r";
            } else if (b < 0x20 || b == 0x7F) {
                out += std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
            } else {
                out.push_back(static_cast<char>(b));
            }
            ++i;
            continue;
        }
        if (len > 1 && i + len <= bytes.size() && decode(bytes.substr(i, len), cp) == std::string::npos) {
            out.append(bytes, i, len);
            i += len;
        } else {
            out += std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
            ++i;
        }
    }
    return out;
}

} // namespace outlierlens::utf8
