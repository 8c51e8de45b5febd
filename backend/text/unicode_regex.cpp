#include "text/unicode_regex.h"

#include "common/error.h"
#include "text/utf8.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace outlierlens {

namespace {

// The White_Space property, which \s is in Oniguruma (the tokenizers library's engine) and Python's
// `regex`; PCRE2's \s with UCP also matches U+180E.
const char* const kWhiteSpaceItems =
    "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}";

// `pattern` with \s (and \S outside a character class) spelled as White_Space.
std::string withWhiteSpaceClass(const std::string& pattern)
{
    std::string out;
    bool inClass = false;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        const char c = pattern[i];
        if (c == '\\' && i + 1 < pattern.size()) {
            const char e = pattern[++i];
            if (e == 's')
                out += inClass ? std::string(kWhiteSpaceItems) : "[" + std::string(kWhiteSpaceItems) + "]";
            else if (e == 'S' && !inClass)
                out += "[^" + std::string(kWhiteSpaceItems) + "]";
            else
                out.append({c, e});
            continue;
        }
        out.push_back(c);
        if (!inClass && c == '[') {
            inClass = true;
            // "[^]...]" and "[]...]": a leading ']' is a literal.
            if (i + 1 < pattern.size() && pattern[i + 1] == '^') out.push_back(pattern[++i]);
            if (i + 1 < pattern.size() && pattern[i + 1] == ']') out.push_back(pattern[++i]);
        } else if (inClass && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
            const std::size_t end = pattern.find(":]", i + 2); // a POSIX class such as [:alpha:]
            if (end != std::string::npos) {
                out.append(pattern, i + 1, end + 2 - (i + 1));
                i = end + 1;
            }
        } else if (inClass && c == ']') {
            inClass = false;
        }
    }
    return out;
}

} // namespace

struct UnicodeRegex::Impl
{
    pcre2_code* code = nullptr;
    bool jit = false;
};

UnicodeRegex::UnicodeRegex(const std::string& pattern, const std::string& where)
    : m_impl(std::make_unique<Impl>())
    , m_where(where)
{
    int errorCode = 0;
    PCRE2_SIZE errorOffset = 0;
    const std::string compiled = withWhiteSpaceClass(pattern);
    m_impl->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                                 PCRE2_UTF | PCRE2_UCP, &errorCode, &errorOffset, nullptr);
    if (!m_impl->code) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(errorCode, message, sizeof message);
        throw Error(where + ": invalid regular expression '" + pattern + "' (" +
                    reinterpret_cast<const char*>(message) + " at offset " + std::to_string(errorOffset) +
                    ")");
    }
    // The JIT is several times faster; where it is unavailable the interpreter gives the same matches.
    m_impl->jit = pcre2_jit_compile(m_impl->code, PCRE2_JIT_COMPLETE) == 0;
}

UnicodeRegex::~UnicodeRegex()
{
    pcre2_code_free(m_impl->code);
}

std::vector<std::pair<std::size_t, std::size_t>> UnicodeRegex::findAll(const std::string& text) const
{
    std::vector<std::pair<std::size_t, std::size_t>> out;
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
        pcre2_match_data_create_from_pattern(m_impl->code, nullptr), &pcre2_match_data_free);
    if (!data) throw Error(m_where + ": out of memory for a regular expression match");
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    std::size_t at = 0;
    while (at <= text.size()) {
        // The text was checked as UTF-8 once, before the pipeline: no check per match.
        uint32_t options = PCRE2_NO_UTF_CHECK;
        int rc = pcre2_match(m_impl->code, subject, text.size(), at, options, data.get(), nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) // a long run for the JIT's small stack: the interpreter
            rc = pcre2_match(m_impl->code, subject, text.size(), at, options | PCRE2_NO_JIT, data.get(),
                             nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(rc, message, sizeof message);
            throw Error(m_where + ": the regular expression failed on the input (" +
                        reinterpret_cast<const char*>(message) + ")");
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.get());
        const std::size_t begin = ov[0], end = ov[1];
        if (end > begin) {
            out.emplace_back(begin, end);
            at = end;
        } else {
            // An empty match splits the text there (as Rust's find_iter reports it), except right
            // after a match.
            if (out.empty() || out.back().second != begin) out.emplace_back(begin, end);
            if (begin >= text.size()) break;
            at = begin + utf8::sequenceLength(static_cast<unsigned char>(text[begin]));
        }
    }
    return out;
}

} // namespace outlierlens
