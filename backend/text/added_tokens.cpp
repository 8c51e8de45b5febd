#include "text/added_tokens.h"

#include "common/error.h"
#include "common/json_util.h"
#include "text/utf8.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

namespace outlierlens {
namespace {

namespace fs = std::filesystem;

// A special token value: a string or a serialized AddedToken {"content": ..., "lstrip": ...}.
// `wrapped`: a string becomes an AddedToken without stripping (what the tokenizer classes' __init__
// does with bos/eos/unk/pad); otherwise a string stays a plain string.
std::optional<AddedTokenSpec> tokenValue(const nlohmann::json& v, const std::string& where, bool wrapped)
{
    if (v.is_null()) return std::nullopt;
    AddedTokenSpec t;
    if (v.is_string()) {
        t.content = v.get<std::string>();
        t.plainString = !wrapped;
    } else if (v.is_object()) {
        t.content = jsonutil::getString(v, "content", where);
        t.lstrip = jsonutil::getBool(v, "lstrip", where, false);
        t.rstrip = jsonutil::getBool(v, "rstrip", where, false);
    } else {
        throw Error(where + ": expected a string or an object with 'content', found " + v.dump());
    }
    if (t.content.empty()) throw Error(where + ": a special token must not be empty");
    if (utf8::firstInvalidByte(t.content) != std::string::npos)
        throw Error(where + ": special token is not valid UTF-8");
    return t;
}

std::vector<AddedTokenSpec> tokenList(const nlohmann::json& v, const std::string& where)
{
    std::vector<AddedTokenSpec> out;
    if (v.is_null()) return out;
    if (!v.is_array()) throw Error(where + ": expected a list of tokens, found " + v.dump());
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (auto t = tokenValue(v[i], where + "[" + std::to_string(i) + "]", false)) out.push_back(*t);
    }
    return out;
}

nlohmann::json readObject(const fs::path& path)
{
    const nlohmann::json j = jsonutil::parseFile(path.string());
    if (!j.is_object()) throw Error(path.string() + ": expected a JSON object");
    return j;
}

std::optional<bool> optionalBool(const nlohmann::json& obj, const char* key, const std::string& where)
{
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return std::nullopt;
    if (!it->is_boolean())
        throw Error(where + ": field '" + key + "' must be true or false, found " + it->dump());
    return it->get<bool>();
}

const char* const kTokenKeys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                  "pad_token", "cls_token", "mask_token"};

} // namespace

bool isPythonSpace(char32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

SpecialTokenFiles SpecialTokenFiles::read(const fs::path& dir, const std::optional<std::string>& bos,
                                          const std::optional<std::string>& eos,
                                          const std::optional<std::string>& unk,
                                          const std::optional<std::string>& pad)
{
    SpecialTokenFiles f;
    std::optional<AddedTokenSpec>* slots[] = {&f.bos, &f.eos, &f.unk, &f.sep, &f.pad, &f.cls, &f.mask};
    const auto defaultToken = [](const std::optional<std::string>& s) -> std::optional<AddedTokenSpec> {
        if (!s) return std::nullopt;
        AddedTokenSpec t;
        t.content = *s;
        return t;
    };
    f.bos = defaultToken(bos);
    f.eos = defaultToken(eos);
    f.unk = defaultToken(unk);
    f.pad = defaultToken(pad);

    std::error_code ec;
    const fs::path configPath = dir / "tokenizer_config.json";
    if (fs::exists(configPath, ec)) {
        const std::string where = configPath.string();
        const nlohmann::json config = readObject(configPath);
        f.addBosToken = optionalBool(config, "add_bos_token", where);
        f.addEosToken = optionalBool(config, "add_eos_token", where);
        f.addPrefixSpace = optionalBool(config, "add_prefix_space", where);
        f.legacy = optionalBool(config, "legacy", where);
        for (std::size_t k = 0; k < std::size(kTokenKeys); ++k) {
            const auto it = config.find(kTokenKeys[k]);
            // bos/eos/unk/pad strings are wrapped as AddedTokens by GPT2Tokenizer/LlamaTokenizer.__init__.
            if (it != config.end())
                *slots[k] = tokenValue(*it, where + ": " + kTokenKeys[k], k != 3 && k < 5);
        }
        if (const auto it = config.find("additional_special_tokens"); it != config.end())
            f.additional = tokenList(*it, where + ": additional_special_tokens");
    }

    // special_tokens_map.json overrides tokenizer_config.json (from_pretrained sets its values as
    // attributes after __init__, so a string here stays a plain string).
    const fs::path mapPath = dir / "special_tokens_map.json";
    if (fs::exists(mapPath, ec)) {
        const std::string where = mapPath.string();
        const nlohmann::json map = readObject(mapPath);
        for (std::size_t k = 0; k < std::size(kTokenKeys); ++k) {
            const auto it = map.find(kTokenKeys[k]);
            if (it != map.end()) *slots[k] = tokenValue(*it, where + ": " + kTokenKeys[k], false);
        }
        if (const auto it = map.find("additional_special_tokens"); it != map.end())
            f.additional = tokenList(*it, where + ": additional_special_tokens");
    }

    const fs::path addedPath = dir / "added_tokens.json";
    if (fs::exists(addedPath, ec)) {
        const std::string where = addedPath.string();
        const nlohmann::json added = readObject(addedPath);
        for (auto it = added.begin(); it != added.end(); ++it) {
            if (!it.value().is_number_integer() || it.value().get<long long>() < 0)
                throw Error(where + ": the id of '" + it.key() + "' must be a non-negative integer, found " +
                            it.value().dump());
            if (it.key().empty() || utf8::firstInvalidByte(it.key()) != std::string::npos)
                throw Error(where + ": added tokens must be non-empty UTF-8 strings");
            f.addedTokens.emplace_back(it.key(), it.value().get<std::int64_t>());
        }
        std::stable_sort(f.addedTokens.begin(), f.addedTokens.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    }
    return f;
}

std::vector<AddedTokenSpec> SpecialTokenFiles::specialTokens() const
{
    std::vector<AddedTokenSpec> all;
    for (const auto* t : {&bos, &eos, &unk, &sep, &pad, &cls, &mask}) {
        if (*t) all.push_back(**t);
    }
    all.insert(all.end(), additional.begin(), additional.end());
    // tokenize() looks the flags up in {str(t): t for AddedTokens}: the last AddedToken of a content
    // wins, and a content that only appears as plain strings is stripped on both sides.
    std::vector<AddedTokenSpec> out;
    for (const AddedTokenSpec& t : all) {
        auto it = std::find_if(out.begin(), out.end(), [&](const auto& o) { return o.content == t.content; });
        if (it == out.end())
            out.push_back(t);
        else if (!t.plainString)
            *it = t;
    }
    return out;
}

AddedTokenSplitter::AddedTokenSplitter(std::vector<AddedTokenSpec> tokens)
    : m_tokens(std::move(tokens))
{
    // Longest first, so that the first match at a position is the longest one.
    std::stable_sort(m_tokens.begin(), m_tokens.end(),
                     [](const auto& a, const auto& b) { return a.content.size() > b.content.size(); });
}

namespace {

// Byte length of the leading (trailing) Python whitespace of a valid UTF-8 string.
std::size_t leadingSpace(const std::string& s)
{
    std::size_t i = 0;
    std::u32string cp;
    while (i < s.size()) {
        const std::size_t len = utf8::sequenceLength(static_cast<unsigned char>(s[i]));
        utf8::decode(s.substr(i, len), cp);
        if (cp.size() != 1 || !isPythonSpace(cp[0])) break;
        i += len;
    }
    return i;
}

std::size_t trailingSpace(const std::string& s)
{
    std::u32string cps;
    utf8::decode(s, cps);
    std::size_t bytes = 0;
    std::string tmp;
    for (auto it = cps.rbegin(); it != cps.rend() && isPythonSpace(*it); ++it) {
        tmp.clear();
        utf8::append(tmp, *it);
        bytes += tmp.size();
    }
    return bytes;
}

} // namespace

std::vector<AddedTokenSplitter::Piece> AddedTokenSplitter::split(const std::string& text) const
{
    std::vector<Piece> pieces;
    std::vector<const AddedTokenSpec*> specs; // per piece: its token, or null
    std::size_t chunkStart = 0, i = 0;
    // Valid UTF-8 needles never match inside a character, so byte matching is character matching.
    while (i < text.size() && !m_tokens.empty()) {
        const AddedTokenSpec* match = nullptr;
        for (const AddedTokenSpec& t : m_tokens) {
            if (text.compare(i, t.content.size(), t.content) == 0) {
                match = &t;
                break;
            }
        }
        if (!match) {
            ++i;
            continue;
        }
        if (i > chunkStart) {
            pieces.push_back({text.substr(chunkStart, i - chunkStart), false});
            specs.push_back(nullptr);
        }
        pieces.push_back({match->content, true});
        specs.push_back(match);
        i += match->content.size();
        chunkStart = i;
    }
    if (chunkStart < text.size()) {
        pieces.push_back({text.substr(chunkStart), false});
        specs.push_back(nullptr);
    }

    for (std::size_t k = 0; k < pieces.size(); ++k) {
        if (!specs[k]) continue;
        const AddedTokenSpec& t = *specs[k];
        const bool stripRight = t.plainString || t.rstrip;
        const bool stripLeft = t.plainString || t.lstrip;
        if (stripRight && k + 1 < pieces.size() && !specs[k + 1]) {
            std::string& right = pieces[k + 1].text;
            right.erase(0, leadingSpace(right));
        }
        if (stripLeft && k > 0 && !specs[k - 1]) {
            std::string& left = pieces[k - 1].text;
            left.resize(left.size() - trailingSpace(left));
        }
    }
    pieces.erase(std::remove_if(pieces.begin(), pieces.end(), [](const Piece& p) { return p.text.empty(); }),
                 pieces.end());
    return pieces;
}

} // namespace outlierlens
