// The normalizers, pre-tokenizers and post-processors of a tokenizer.json, as Hugging Face's
// tokenizers (normalizers/, pre_tokenizers/, processors/, tokenizer/normalizer.rs) define them.

#include "text/tokenizer_json_parts.h"

#include "common/error.h"
#include "common/json_util.h"
#include "text/text_classes.h"
#include "text/utf8.h"

#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>

namespace outlierlens::tokjson {
namespace {

// GPT-2's pattern, which the ByteLevel pre-tokenizer splits with when use_regex is true.
const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

const nlohmann::json& member(const nlohmann::json& j, const char* key, const Where& where)
{
    const auto it = j.find(key);
    if (it == j.end()) throw Error(where.str() + ": required field '" + key + "' is missing");
    return *it;
}

const nlohmann::json& listMember(const nlohmann::json& j, const char* key, const Where& where)
{
    const nlohmann::json& list = member(j, key, where);
    if (!list.is_array()) throw Error(where.str() + ": field '" + key + "' must be a list");
    return list;
}

// Matches of a character class, one per character (tokenizers' Pattern for Fn(char) -> bool).
template<typename Pred>
std::vector<std::pair<std::size_t, std::size_t>> charMatches(const std::string& text, Pred pred)
{
    std::vector<std::pair<std::size_t, std::size_t>> out;
    std::u32string cp;
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t len = utf8::sequenceLength(static_cast<unsigned char>(text[i]));
        utf8::decode(std::string_view(text).substr(i, len), cp);
        if (cp.size() == 1 && pred(cp[0])) out.emplace_back(i, i + len);
        i += len;
    }
    return out;
}

// NormalizedString::split: the text cut at the matches, kept or merged as `behavior` says.
std::vector<std::pair<std::size_t, std::size_t>>
splitAt(const std::string& text, const std::vector<std::pair<std::size_t, std::size_t>>& matches,
        SplitBehavior behavior, bool invert)
{
    std::vector<std::pair<std::pair<std::size_t, std::size_t>, bool>> pieces;
    std::size_t prev = 0;
    for (const auto& [b, e] : matches) {
        if (prev != b) pieces.push_back({{prev, b}, false});
        pieces.push_back({{b, e}, true});
        prev = e;
    }
    if (prev != text.size() || pieces.empty()) pieces.push_back({{prev, text.size()}, false});
    if (invert) {
        for (auto& p : pieces)
            p.second = !p.second;
    }

    std::vector<std::pair<std::size_t, std::size_t>> out;
    bool previousMatch = false;
    switch (behavior) {
    case SplitBehavior::Removed:
        for (const auto& [range, isMatch] : pieces)
            if (!isMatch) out.push_back(range);
        break;
    case SplitBehavior::Isolated:
        for (const auto& p : pieces)
            out.push_back(p.first);
        break;
    case SplitBehavior::MergedWithPrevious:
        for (const auto& [range, isMatch] : pieces) {
            if (isMatch && !previousMatch && !out.empty())
                out.back().second = range.second;
            else
                out.push_back(range);
            previousMatch = isMatch;
        }
        break;
    case SplitBehavior::MergedWithNext:
        for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
            if (it->second && !previousMatch && !out.empty())
                out.back().first = it->first.first;
            else
                out.push_back(it->first);
            previousMatch = it->second;
        }
        std::reverse(out.begin(), out.end());
        break;
    case SplitBehavior::Contiguous:
        for (const auto& [range, isMatch] : pieces) {
            if (isMatch == previousMatch && !out.empty())
                out.back().second = range.second;
            else
                out.push_back(range);
            previousMatch = isMatch;
        }
        break;
    }
    out.erase(std::remove_if(out.begin(), out.end(), [](const auto& r) { return r.first == r.second; }),
              out.end());
    return out;
}

std::string unicodeNormalize(const std::string& text, int options)
{
    utf8proc_uint8_t* dst = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                            static_cast<utf8proc_ssize_t>(text.size()), &dst,
                                            static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE));
    if (n < 0)
        throw Error(std::string("tokenizer: Unicode normalization failed (") + utf8proc_errmsg(n) + ")");
    std::string out(reinterpret_cast<const char*>(dst), static_cast<std::size_t>(n));
    std::free(dst);
    return out;
}

std::string lowercase(const std::string& text)
{
    std::u32string cps;
    utf8::decode(text, cps);
    std::string out;
    out.reserve(text.size());
    for (const char32_t c : cps) {
        if (c == 0x130) { // Rust's to_lowercase: the one full mapping that is not one character
            out += "i\xCC\x87";
            continue;
        }
        utf8::append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
    return out;
}

std::string strip(const std::string& text, bool left, bool right)
{
    std::u32string cps;
    utf8::decode(text, cps);
    std::size_t b = 0, e = cps.size();
    while (left && b < e && textclass::isWhiteSpace(cps[b]))
        ++b;
    while (right && e > b && textclass::isWhiteSpace(cps[e - 1]))
        --e;
    return utf8::encode(cps.data() + b, cps.data() + e);
}

} // namespace

std::string componentType(const nlohmann::json& j, const Where& where)
{
    if (!j.is_object()) throw Error(where.str() + ": expected an object with a 'type', found " + j.dump());
    const auto it = j.find("type");
    if (it == j.end() || !it->is_string()) throw Error(where.str() + ": field 'type' is missing");
    return it->get<std::string>();
}

void unsupportedType(const Where& where, const std::string& type, const std::string& known)
{
    throw Error(where.str() + ": type '" + type + "' is not supported (this reader knows " + known + ")");
}

// ---- patterns ------------------------------------------------------------------------------------

Pattern Pattern::parse(const nlohmann::json& j, const Where& where)
{
    Pattern p;
    if (j.is_object() && j.size() == 1 && j.contains("String") && j.at("String").is_string()) {
        p.literal = j.at("String").get<std::string>();
        return p;
    }
    if (j.is_object() && j.size() == 1 && j.contains("Regex") && j.at("Regex").is_string()) {
        p.regex = std::make_shared<UnicodeRegex>(j.at("Regex").get<std::string>(), where.str());
        return p;
    }
    throw Error(where.str() + ": expected {\"String\": ...} or {\"Regex\": ...}, found " + j.dump());
}

std::vector<std::pair<std::size_t, std::size_t>> Pattern::find(const std::string& text) const
{
    if (regex) return regex->findAll(text);
    std::vector<std::pair<std::size_t, std::size_t>> out;
    if (literal.empty()) return out;
    for (std::size_t at = text.find(literal); at != std::string::npos;
         at = text.find(literal, at + literal.size()))
        out.emplace_back(at, at + literal.size());
    return out;
}

// ---- normalizers ---------------------------------------------------------------------------------

std::vector<Normalizer> parseNormalizer(const nlohmann::json& j, const Where& where)
{
    std::vector<Normalizer> steps;
    if (j.is_null()) return steps;
    const std::string type = componentType(j, where);
    Normalizer n;
    if (type == "Sequence") {
        const nlohmann::json& list = listMember(j, "normalizers", where);
        for (std::size_t i = 0; i < list.size(); ++i) {
            auto inner = parseNormalizer(list[i], where.at("normalizers", i));
            steps.insert(steps.end(), inner.begin(), inner.end());
        }
        return steps;
    } else if (type == "NFC") {
        n.kind = Normalizer::Kind::Nfc;
    } else if (type == "NFD") {
        n.kind = Normalizer::Kind::Nfd;
    } else if (type == "NFKC") {
        n.kind = Normalizer::Kind::Nfkc;
    } else if (type == "NFKD") {
        n.kind = Normalizer::Kind::Nfkd;
    } else if (type == "Lowercase") {
        n.kind = Normalizer::Kind::Lowercase;
    } else if (type == "Replace") {
        n.kind = Normalizer::Kind::Replace;
        n.pattern = Pattern::parse(member(j, "pattern", where), where.at("pattern"));
        n.content = jsonutil::getString(j, "content", where.str());
    } else if (type == "Prepend") {
        n.kind = Normalizer::Kind::Prepend;
        n.content = jsonutil::getString(j, "prepend", where.str());
    } else if (type == "Strip") {
        n.kind = Normalizer::Kind::Strip;
        n.left = jsonutil::getBool(j, "strip_left", where.str(), true);
        n.right = jsonutil::getBool(j, "strip_right", where.str(), true);
    } else {
        unsupportedType(where, type, "NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Strip and Sequence");
    }
    if (utf8::firstInvalidByte(n.content) != std::string::npos)
        throw Error(where.str() + ": the text is not valid UTF-8");
    steps.push_back(std::move(n));
    return steps;
}

std::string normalize(const std::vector<Normalizer>& steps, std::string text)
{
    for (const Normalizer& n : steps) {
        switch (n.kind) {
        case Normalizer::Kind::Nfc:
            text = unicodeNormalize(text, UTF8PROC_COMPOSE);
            break;
        case Normalizer::Kind::Nfd:
            text = unicodeNormalize(text, UTF8PROC_DECOMPOSE);
            break;
        case Normalizer::Kind::Nfkc:
            text = unicodeNormalize(text, UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
            break;
        case Normalizer::Kind::Nfkd:
            text = unicodeNormalize(text, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
            break;
        case Normalizer::Kind::Lowercase:
            text = lowercase(text);
            break;
        case Normalizer::Kind::Replace: {
            std::string out;
            std::size_t prev = 0;
            for (const auto& [b, e] : n.pattern.find(text)) {
                out.append(text, prev, b - prev);
                out += n.content;
                prev = e;
            }
            out.append(text, prev, std::string::npos);
            text = std::move(out);
            break;
        }
        case Normalizer::Kind::Prepend:
            if (!text.empty()) text = n.content + text;
            break;
        case Normalizer::Kind::Strip:
            text = strip(text, n.left, n.right);
            break;
        }
    }
    return text;
}

// ---- pre-tokenizers ------------------------------------------------------------------------------

std::vector<PreTokenizer> parsePreTokenizer(const nlohmann::json& j, const Where& where)
{
    std::vector<PreTokenizer> steps;
    if (j.is_null()) return steps;
    const std::string type = componentType(j, where);
    PreTokenizer p;
    const std::string w = where.str();
    if (type == "Sequence") {
        const nlohmann::json& list = listMember(j, "pretokenizers", where);
        for (std::size_t i = 0; i < list.size(); ++i) {
            auto inner = parsePreTokenizer(list[i], where.at("pretokenizers", i));
            steps.insert(steps.end(), inner.begin(), inner.end());
        }
        return steps;
    } else if (type == "Split") {
        p.kind = PreTokenizer::Kind::Split;
        p.pattern = Pattern::parse(member(j, "pattern", where), where.at("pattern"));
        p.invert = jsonutil::getBool(j, "invert", w, false);
        const std::string behavior = jsonutil::getString(j, "behavior", w);
        const std::pair<const char*, SplitBehavior> behaviors[] = {
            {"Removed", SplitBehavior::Removed},
            {"Isolated", SplitBehavior::Isolated},
            {"MergedWithPrevious", SplitBehavior::MergedWithPrevious},
            {"MergedWithNext", SplitBehavior::MergedWithNext},
            {"Contiguous", SplitBehavior::Contiguous}};
        const auto it = std::find_if(std::begin(behaviors), std::end(behaviors),
                                     [&](const auto& b) { return behavior == b.first; });
        if (it == std::end(behaviors)) throw Error(w + ": unknown split behavior '" + behavior + "'");
        p.behavior = it->second;
    } else if (type == "ByteLevel") {
        p.kind = PreTokenizer::Kind::ByteLevel;
        p.addPrefixSpace = jsonutil::getBool(j, "add_prefix_space", w, true);
        p.useRegex = jsonutil::getBool(j, "use_regex", w, true);
        if (p.useRegex) p.pattern.regex = std::make_shared<UnicodeRegex>(kGpt2Pattern, w);
    } else if (type == "Metaspace") {
        p.kind = PreTokenizer::Kind::Metaspace;
        p.replacement = jsonutil::getString(j, "replacement", w, "\xE2\x96\x81");
        std::u32string cp;
        if (utf8::decode(p.replacement, cp) != std::string::npos || cp.size() != 1)
            throw Error(w + ": 'replacement' must be one character");
        p.split = jsonutil::getBool(j, "split", w, true);
        // Files before tokenizers 0.19 say add_prefix_space instead of prepend_scheme.
        std::string scheme = jsonutil::getBool(j, "add_prefix_space", w, true) ? "always" : "never";
        scheme = jsonutil::getString(j, "prepend_scheme", w, scheme);
        if (scheme == "always")
            p.prepend = PreTokenizer::Prepend::Always;
        else if (scheme == "first")
            p.prepend = PreTokenizer::Prepend::First;
        else if (scheme == "never")
            p.prepend = PreTokenizer::Prepend::Never;
        else
            throw Error(w + ": unknown prepend_scheme '" + scheme + "'");
    } else if (type == "Digits") {
        p.kind = PreTokenizer::Kind::Digits;
        p.individualDigits = jsonutil::getBool(j, "individual_digits", w, false);
    } else if (type == "WhitespaceSplit") {
        p.kind = PreTokenizer::Kind::WhitespaceSplit;
    } else {
        unsupportedType(where, type, "Split, ByteLevel, Metaspace, Digits, WhitespaceSplit and Sequence");
    }
    steps.push_back(std::move(p));
    return steps;
}

std::vector<PreToken> preTokenize(const std::vector<PreTokenizer>& steps, PreToken input,
                                  const std::array<std::string, 256>& byteSymbols)
{
    std::vector<PreToken> pieces;
    if (input.text.empty()) return pieces;
    pieces.push_back(std::move(input));
    for (const PreTokenizer& p : steps) {
        std::vector<PreToken> next;
        for (PreToken& piece : pieces) {
            std::string& text = piece.text;
            std::vector<std::pair<std::size_t, std::size_t>> ranges;
            switch (p.kind) {
            case PreTokenizer::Kind::Split:
                ranges = splitAt(text, p.pattern.find(text), p.behavior, p.invert);
                break;
            case PreTokenizer::Kind::ByteLevel:
                if (p.addPrefixSpace && text[0] != ' ') text.insert(0, 1, ' ');
                if (p.useRegex)
                    ranges = splitAt(text, p.pattern.find(text), SplitBehavior::Isolated, false);
                else
                    ranges.emplace_back(0, text.size());
                break;
            case PreTokenizer::Kind::Metaspace: {
                std::string replaced;
                for (const char c : text) {
                    if (c == ' ')
                        replaced += p.replacement;
                    else
                        replaced.push_back(c);
                }
                text = std::move(replaced);
                const bool prepend = p.prepend == PreTokenizer::Prepend::Always ||
                                     (p.prepend == PreTokenizer::Prepend::First && piece.atStart);
                if (prepend && text.compare(0, p.replacement.size(), p.replacement) != 0)
                    text.insert(0, p.replacement);
                if (p.split) {
                    std::vector<std::pair<std::size_t, std::size_t>> matches;
                    for (std::size_t at = text.find(p.replacement); at != std::string::npos;
                         at = text.find(p.replacement, at + p.replacement.size()))
                        matches.emplace_back(at, at + p.replacement.size());
                    ranges = splitAt(text, matches, SplitBehavior::MergedWithNext, false);
                } else {
                    ranges.emplace_back(0, text.size());
                }
                break;
            }
            case PreTokenizer::Kind::Digits:
                ranges =
                    splitAt(text, charMatches(text, textclass::isNumber),
                            p.individualDigits ? SplitBehavior::Isolated : SplitBehavior::Contiguous, false);
                break;
            case PreTokenizer::Kind::WhitespaceSplit:
                // Rust's char::is_whitespace (Unicode White_Space), the whitespace removed.
                ranges =
                    splitAt(text, charMatches(text, textclass::isWhiteSpace), SplitBehavior::Removed, false);
                break;
            }
            for (const auto& [b, e] : ranges) {
                PreToken out{text.substr(b, e - b), piece.atStart && b == 0};
                if (p.kind == PreTokenizer::Kind::ByteLevel) {
                    std::string mapped;
                    for (const char c : out.text)
                        mapped += byteSymbols[static_cast<unsigned char>(c)];
                    out.text = std::move(mapped);
                }
                if (!out.text.empty()) next.push_back(std::move(out));
            }
        }
        pieces = std::move(next);
    }
    return pieces;
}

// ---- post-processors -----------------------------------------------------------------------------

namespace {

// RobertaProcessing / BertProcessing: "sep" and "cls" as [token, id].
TemplateItem specialPair(const nlohmann::json& j, const char* key, const Where& where)
{
    const nlohmann::json& v = member(j, key, where);
    if (!v.is_array() || v.size() != 2 || !v[0].is_string() || !v[1].is_number_integer() ||
        v[1].get<long long>() < 0)
        throw Error(where.str() + ": field '" + key + "' must be [token, id], found " + v.dump());
    TemplateItem t;
    t.tokens.push_back(v[0].get<std::string>());
    t.ids.push_back(v[1].get<std::int64_t>());
    return t;
}

TemplateItem sequenceItem(int which)
{
    TemplateItem t;
    t.sequence = which;
    return t;
}

std::vector<TemplateItem> parseTemplate(const nlohmann::json& j, const char* key,
                                        const nlohmann::json& specials, const Where& where)
{
    std::vector<TemplateItem> out;
    const nlohmann::json& list = listMember(j, key, where);
    for (std::size_t i = 0; i < list.size(); ++i) {
        const Where w = where.at(key, i);
        const nlohmann::json& item = list[i];
        if (item.is_object() && item.contains("Sequence")) {
            const std::string id = jsonutil::getString(item.at("Sequence"), "id", w.str());
            if (id != "A" && id != "B")
                throw Error(w.str() + ": sequence id must be 'A' or 'B', found '" + id + "'");
            out.push_back(sequenceItem(id == "A" ? 0 : 1));
        } else if (item.is_object() && item.contains("SpecialToken")) {
            const std::string id = jsonutil::getString(item.at("SpecialToken"), "id", w.str());
            const auto it = specials.is_object() ? specials.find(id) : specials.end();
            if (it == specials.end())
                throw Error(w.str() + ": special token '" + id + "' is not in special_tokens");
            const Where sw = where.at("special_tokens").at(id);
            TemplateItem t;
            const nlohmann::json& ids = listMember(*it, "ids", sw);
            const nlohmann::json& tokens = listMember(*it, "tokens", sw);
            if (ids.size() != tokens.size())
                throw Error(sw.str() + ": 'ids' and 'tokens' must have the same length");
            for (std::size_t k = 0; k < ids.size(); ++k) {
                if (!ids[k].is_number_integer() || ids[k].get<long long>() < 0 || !tokens[k].is_string())
                    throw Error(sw.str() + ": expected non-negative integer ids and string tokens");
                t.ids.push_back(ids[k].get<std::int64_t>());
                t.tokens.push_back(tokens[k].get<std::string>());
            }
            out.push_back(std::move(t));
        } else {
            throw Error(w.str() + ": expected {\"Sequence\": ...} or {\"SpecialToken\": ...}, found " +
                        item.dump());
        }
    }
    return out;
}

} // namespace

PostProcessor parsePostProcessor(const nlohmann::json& j, const Where& where)
{
    PostProcessor p;
    if (j.is_null()) return p;
    const std::string type = componentType(j, where);
    if (type == "Sequence") {
        const nlohmann::json& list = listMember(j, "processors", where);
        for (std::size_t i = 0; i < list.size(); ++i) {
            PostProcessor inner = parsePostProcessor(list[i], where.at("processors", i));
            if (!inner.addsTokens) continue;
            if (p.addsTokens)
                throw Error(where.at("processors", i).str() +
                            ": a second post-processor that adds tokens is not supported");
            p = std::move(inner);
        }
    } else if (type == "ByteLevel") {
        // Only adjusts offsets, which the app does not use.
    } else if (type == "TemplateProcessing") {
        const nlohmann::json specials = j.value("special_tokens", nlohmann::json::object());
        p.addsTokens = true;
        p.single = parseTemplate(j, "single", specials, where);
        p.pair = parseTemplate(j, "pair", specials, where);
    } else if (type == "RobertaProcessing" || type == "BertProcessing") {
        const TemplateItem cls = specialPair(j, "cls", where), sep = specialPair(j, "sep", where);
        p.addsTokens = true;
        p.single = {cls, sequenceItem(0), sep};
        p.pair = {cls, sequenceItem(0), sep};
        if (type == "RobertaProcessing") p.pair.push_back(sep);
        p.pair.insert(p.pair.end(), {sequenceItem(1), sep});
    } else {
        unsupportedType(where, type,
                        "ByteLevel, TemplateProcessing, RobertaProcessing, BertProcessing and Sequence");
    }
    return p;
}

} // namespace outlierlens::tokjson
