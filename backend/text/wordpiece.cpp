#include "text/wordpiece.h"

#include "common/error.h"
#include "common/input_file.h"
#include "common/json_util.h"
#include "text/truncation.h"
#include "text/utf8.h"

#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace outlierlens {
namespace {

// ---- UTF-8 ----------------------------------------------------------------------------------------

std::size_t decodeUtf8(const std::string& s, std::u32string& out)
{
    return utf8::decode(s, out);
}

std::string encodeUtf8(const char32_t* begin, const char32_t* end)
{
    return utf8::encode(begin, end);
}

std::string encodeUtf8(const std::u32string& s)
{
    return utf8::encode(s);
}

std::u32string decodeValidUtf8(const std::string& s)
{
    std::u32string out;
    decodeUtf8(s, out); // our own output or utf8proc's: always valid
    return out;
}

// ---- Unicode classes as Hugging Face's BasicTokenizer defines them --------------------------------

utf8proc_category_t category(char32_t c)
{
    return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

// _is_control: Cc or Cf, except \t \n \r (which are whitespace).
bool isControl(char32_t c)
{
    if (c == '\t' || c == '\n' || c == '\r') return false;
    if (c < 0x80) return c < 0x20 || c == 0x7F;
    const auto cat = category(c);
    return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF;
}

// _is_whitespace (space, \t, \n, \r, Zs) plus what Python's str.split() also splits on after
// cleaning: U+2028 and U+2029 (every other Python whitespace character is Cc and already removed).
bool isWhitespace(char32_t c)
{
    if (c < 0x80) return c == ' ' || c == '\t' || c == '\n' || c == '\r';
    return c == 0x2028 || c == 0x2029 || category(c) == UTF8PROC_CATEGORY_ZS;
}

// _is_punctuation: all non-alphanumeric printable ASCII, and Unicode categories P*.
bool isPunctuation(char32_t c)
{
    if (c < 0x80)
        return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
    const auto cat = category(c);
    return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

// _is_chinese_char: the CJK Unified Ideographs blocks (not kana, hangul or CJK punctuation).
bool isChineseChar(char32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) ||
           (c >= 0x2B820 && c <= 0x2CEAF) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

std::string normalize(const std::string& s, int options)
{
    utf8proc_uint8_t* dst = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                     static_cast<utf8proc_ssize_t>(s.size()), &dst, static_cast<utf8proc_option_t>(options));
    if (n < 0) throw Error(std::string("tokenizer: Unicode normalization failed: ") + utf8proc_errmsg(n));
    std::string out(reinterpret_cast<const char*>(dst), static_cast<std::size_t>(n));
    std::free(dst);
    return out;
}

std::string nfc(const std::string& s)
{
    return normalize(s, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
}

std::string nfd(const std::string& s)
{
    return normalize(s, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
}

bool isAscii(const std::u32string& s)
{
    return std::all_of(s.begin(), s.end(), [](char32_t c) { return c < 0x80; });
}

std::size_t countCodePoints(const std::string& s)
{
    return static_cast<std::size_t>(std::count_if(
        s.begin(), s.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; }));
}

} // namespace

// ---- loading -------------------------------------------------------------------------------------

BertTokenizer BertTokenizer::fromVocabFile(const std::string& vocabPath, bool lowerCase)
{
    BertTokenizerOptions options;
    options.lowerCase = lowerCase;
    return fromVocabFile(vocabPath, options);
}

BertTokenizer BertTokenizer::fromVocabFile(const std::string& vocabPath, const BertTokenizerOptions& options)
{
    const std::string data = readWholeFile(vocabPath, "vocabulary file");
    if (data.empty()) throw Error(vocabPath + ": empty vocabulary file, expected one token per line");

    BertTokenizer tok;
    tok.m_options = options;
    // Lines end at \n, \r\n or \r, as Python's readlines() in text mode splits them; a final line
    // break does not start another token.
    std::size_t pos = 0;
    std::u32string scratch;
    while (pos < data.size()) {
        std::size_t end = data.find_first_of("\r\n", pos);
        std::size_t next = end;
        if (end == std::string::npos) {
            end = next = data.size();
        } else {
            next = end + 1;
            if (data[end] == '\r' && next < data.size() && data[next] == '\n') ++next;
        }
        std::string token = data.substr(pos, end - pos);
        const std::size_t bad = decodeUtf8(token, scratch);
        if (bad != std::string::npos)
            throw Error(vocabPath + ":" + std::to_string(tok.m_idToToken.size() + 1) +
                        ": invalid UTF-8 at byte " + std::to_string(bad) + " of the line");
        const auto id = static_cast<std::int64_t>(tok.m_idToToken.size());
        tok.m_maxTokenChars = std::max(tok.m_maxTokenChars, scratch.size());
        tok.m_tokenToId[token] = id; // a repeated token keeps its last line, as in Hugging Face
        tok.m_idToToken.push_back(std::move(token));
        pos = next;
    }

    const auto special = [&](const std::string& name, const std::string& token) {
        if (token.empty()) throw Error(vocabPath + ": the " + name + " token must not be empty");
        const auto it = tok.m_tokenToId.find(token);
        if (it == tok.m_tokenToId.end())
            throw Error(vocabPath + ": vocabulary has no " + name + " token '" + token + "'");
        tok.m_specialTokens.push_back(token);
        tok.m_specialTokens32.push_back(decodeValidUtf8(token));
        return it->second;
    };
    tok.m_unkId = special("unknown", options.unkToken);
    tok.m_sepId = special("separator", options.sepToken);
    tok.m_padId = special("padding", options.padToken);
    tok.m_clsId = special("classifier", options.clsToken);
    tok.m_maskId = special("mask", options.maskToken);
    return tok;
}

BertTokenizer BertTokenizer::fromModelDir(const std::string& modelDir)
{
    const std::filesystem::path dir(modelDir);
    BertTokenizerOptions options;
    const std::filesystem::path configPath = dir / "tokenizer_config.json";
    std::error_code ec;
    if (std::filesystem::exists(configPath, ec)) {
        const std::string where = configPath.string();
        const nlohmann::json config = jsonutil::parseFile(where);
        if (!config.is_object()) throw Error(where + ": expected a JSON object");
        options.lowerCase = jsonutil::getBool(config, "do_lower_case", where, true);
        options.tokenizeChineseChars = jsonutil::getBool(config, "tokenize_chinese_chars", where, true);
        const auto strip = config.find("strip_accents");
        if (strip != config.end() && !strip->is_null())
            options.stripAccents = jsonutil::getBool(config, "strip_accents", where);
        // A special token is a string or a serialized AddedToken {"content": ..., ...}.
        const auto readSpecial = [&](const std::string& key, std::string& target) {
            const auto it = config.find(key);
            if (it == config.end() || it->is_null()) return;
            if (it->is_string())
                target = it->get<std::string>();
            else if (it->is_object())
                target = jsonutil::getString(*it, "content", where + ": " + key);
            else
                throw Error(where + ": field '" + key + "' must be a string, found " + it->dump());
        };
        readSpecial("unk_token", options.unkToken);
        readSpecial("sep_token", options.sepToken);
        readSpecial("pad_token", options.padToken);
        readSpecial("cls_token", options.clsToken);
        readSpecial("mask_token", options.maskToken);
    }
    return fromVocabFile((dir / "vocab.txt").string(), options);
}

// ---- tokenization --------------------------------------------------------------------------------

bool BertTokenizer::isSpecialToken(const std::string& token) const
{
    return std::find(m_specialTokens.begin(), m_specialTokens.end(), token) != m_specialTokens.end();
}

void BertTokenizer::splitText(const std::string& text, std::vector<std::string>& basicTokens,
                              std::vector<bool>& isRawSpecial) const
{
    std::u32string chars;
    const std::size_t bad = decodeUtf8(text, chars);
    if (bad != std::string::npos)
        throw Error("tokenizer: input text is not valid UTF-8 (byte " + std::to_string(bad) + ")");

    // PreTrainedTokenizer.tokenize: special token strings in the raw text are cut out first (leftmost,
    // longest), everything between them goes through the BasicTokenizer.
    std::size_t chunkStart = 0, i = 0;
    const auto flushChunk = [&](std::size_t end) {
        if (end > chunkStart) {
            const std::size_t before = basicTokens.size();
            basicTokenizeChunk(chars.substr(chunkStart, end - chunkStart), basicTokens);
            isRawSpecial.resize(isRawSpecial.size() + (basicTokens.size() - before), false);
        }
    };
    while (i < chars.size()) {
        std::size_t best = 0, bestLen = 0;
        for (std::size_t s = 0; s < m_specialTokens32.size(); ++s) {
            const std::u32string& sp = m_specialTokens32[s];
            if (sp.size() > bestLen && sp[0] == chars[i] && chars.compare(i, sp.size(), sp) == 0)
                best = s, bestLen = sp.size();
        }
        if (bestLen == 0) {
            ++i;
            continue;
        }
        flushChunk(i);
        basicTokens.push_back(m_specialTokens[best]);
        isRawSpecial.push_back(true);
        i += bestLen;
        chunkStart = i;
    }
    flushChunk(chars.size());
}

void BertTokenizer::basicTokenizeChunk(const std::u32string& chunk, std::vector<std::string>& out) const
{
    std::u32string word;
    const auto feed = [&](char32_t c) {
        // _clean_text: drop NUL, U+FFFD and controls; whitespace separates words.
        if (c == 0 || c == 0xFFFD || isControl(c)) return;
        if (isWhitespace(c)) {
            finishWord(word, out);
        } else if (m_options.tokenizeChineseChars && isChineseChar(c)) {
            // _tokenize_chinese_chars: every CJK ideograph is a word of its own.
            finishWord(word, out);
            word.push_back(c);
            finishWord(word, out);
        } else {
            word.push_back(c);
        }
    };
    for (const char32_t c : chunk) {
        if (!m_options.lowerCase) {
            feed(c);
        } else if (c < 0x80) {
            feed(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
        } else if (c == 0x130) {
            // Python's str.lower() (full mapping): 'İ' -> 'i' + COMBINING DOT ABOVE. Transformers
            // v4.31 lower-cases one character at a time (a regex over the text outside special
            // tokens), so the context-dependent final sigma never applies: 'Σ' always becomes 'σ'.
            feed('i');
            feed(0x307);
        } else {
            feed(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
        }
    }
    finishWord(word, out);
}

void BertTokenizer::finishWord(std::u32string& word, std::vector<std::string>& out) const
{
    if (word.empty()) return;
    if (isAscii(word)) {
        emitBasicToken(word, out);
    } else {
        // The BasicTokenizer NFC-normalizes the cleaned text; spaces never compose, so per word is the same.
        emitBasicToken(decodeValidUtf8(nfc(encodeUtf8(word))), out);
    }
    word.clear();
}

void BertTokenizer::emitBasicToken(const std::u32string& token, std::vector<std::string>& out) const
{
    // A whole word equal to a special token (e.g. after cleaning removed a control character
    // inside it) is never_split: no lower-casing, accent stripping or punctuation split.
    std::string utf8 = encodeUtf8(token);
    if (isSpecialToken(utf8)) {
        out.push_back(std::move(utf8));
        return;
    }
    std::u32string stripped;
    const std::u32string* chars = &token;
    if (stripsAccents() && !isAscii(token)) {
        // _run_strip_accents: NFD, then drop nonspacing marks (Mn).
        const std::u32string decomposed = decodeValidUtf8(nfd(utf8));
        stripped.reserve(decomposed.size());
        for (const char32_t c : decomposed) {
            if (category(c) != UTF8PROC_CATEGORY_MN) stripped.push_back(c);
        }
        chars = &stripped;
        utf8 = encodeUtf8(stripped);
        if (isSpecialToken(utf8)) {
            out.push_back(std::move(utf8));
            return;
        }
    }
    // _run_split_on_punc: every punctuation character is a token of its own.
    const char32_t* begin = chars->data();
    const char32_t* const end = begin + chars->size();
    for (const char32_t* c = begin; c != end; ++c) {
        if (!isPunctuation(*c)) continue;
        if (c > begin) out.push_back(encodeUtf8(begin, c));
        out.push_back(encodeUtf8(c, c + 1));
        begin = c + 1;
    }
    if (begin != end) out.push_back(encodeUtf8(begin, end));
}

void BertTokenizer::wordpiece(const std::string& word, std::vector<std::string>& out) const
{
    // Fast path: most words are in the vocabulary whole (the first step of the greedy search).
    if (m_tokenToId.count(word) != 0 && countCodePoints(word) <= maxInputCharsPerWord) {
        out.push_back(word);
        return;
    }
    // Byte offset of each code point boundary.
    std::vector<std::size_t> offsets;
    offsets.reserve(word.size() + 1);
    for (std::size_t b = 0; b < word.size(); ++b) {
        if ((static_cast<unsigned char>(word[b]) & 0xC0) != 0x80) offsets.push_back(b);
    }
    offsets.push_back(word.size());
    const std::size_t n = offsets.size() - 1;
    if (n > maxInputCharsPerWord) {
        out.push_back(m_options.unkToken);
        return;
    }
    const std::size_t firstOut = out.size();
    std::string key;
    key.reserve(word.size() + 2);
    std::size_t start = 0;
    while (start < n) {
        // Greedy longest match first. No vocabulary entry is longer than m_maxTokenChars code
        // points (including "##"), so longer candidates are skipped without a lookup.
        const std::size_t limit =
            start == 0 ? m_maxTokenChars : (m_maxTokenChars > 2 ? m_maxTokenChars - 2 : 0);
        std::size_t end = std::min(n, start + limit);
        bool found = false;
        for (; end > start; --end) {
            key.clear();
            if (start > 0) key += "##";
            key.append(word, offsets[start], offsets[end] - offsets[start]);
            if (m_tokenToId.count(key) != 0) {
                found = true;
                break;
            }
        }
        if (!found) {
            out.resize(firstOut);
            out.push_back(m_options.unkToken);
            return;
        }
        out.push_back(key);
        start = end;
    }
}

std::vector<std::string> BertTokenizer::basicTokenize(const std::string& text) const
{
    std::vector<std::string> tokens;
    std::vector<bool> isRawSpecial;
    splitText(text, tokens, isRawSpecial);
    return tokens;
}

std::vector<std::string> BertTokenizer::tokenize(const std::string& text) const
{
    std::vector<std::string> basic;
    std::vector<bool> isRawSpecial;
    splitText(text, basic, isRawSpecial);
    std::vector<std::string> out;
    out.reserve(basic.size() + basic.size() / 4);
    for (std::size_t i = 0; i < basic.size(); ++i) {
        // Special tokens cut from the raw text are final; any other word, including a special
        // token string the BasicTokenizer kept whole, goes through WordPiece (as in BertTokenizer._tokenize).
        if (isRawSpecial[i])
            out.push_back(std::move(basic[i]));
        else
            wordpiece(basic[i], out);
    }
    return out;
}

std::vector<std::int64_t> BertTokenizer::toIds(const std::string& text) const
{
    const std::vector<std::string> tokens = tokenize(text);
    std::vector<std::int64_t> ids;
    ids.reserve(tokens.size());
    for (const std::string& t : tokens)
        ids.push_back(tokenToId(t));
    return ids;
}

Encoding BertTokenizer::encode(const std::string& text, const std::optional<std::string>& pair, int maxLength,
                               bool addSpecialTokens) const
{
    std::vector<std::int64_t> first = toIds(text);
    std::vector<std::int64_t> second;
    if (pair) second = toIds(*pair);
    const std::size_t numSpecial = addSpecialTokens ? (pair ? 3 : 2) : 0;
    truncateLongestFirst(first, pair ? &second : nullptr, numSpecial, maxLength);

    Encoding enc;
    const std::size_t length = first.size() + second.size() + numSpecial;
    enc.inputIds.reserve(length);
    enc.tokenTypeIds.reserve(length);
    if (addSpecialTokens) enc.inputIds.push_back(m_clsId);
    enc.inputIds.insert(enc.inputIds.end(), first.begin(), first.end());
    if (addSpecialTokens) enc.inputIds.push_back(m_sepId);
    const std::size_t firstSegment = enc.inputIds.size();
    if (pair) {
        enc.inputIds.insert(enc.inputIds.end(), second.begin(), second.end());
        if (addSpecialTokens) enc.inputIds.push_back(m_sepId);
    }
    // Without special tokens Hugging Face gives every position token type 0, pair or not.
    enc.tokenTypeIds.assign(enc.inputIds.size(), 0);
    if (addSpecialTokens)
        std::fill(enc.tokenTypeIds.begin() + static_cast<std::ptrdiff_t>(firstSegment),
                  enc.tokenTypeIds.end(), 1);
    enc.attentionMask.assign(enc.inputIds.size(), 1);
    enc.tokens.reserve(enc.inputIds.size());
    for (const std::int64_t id : enc.inputIds)
        enc.tokens.push_back(idToToken(id));
    return enc;
}

std::int64_t BertTokenizer::tokenToId(const std::string& token) const
{
    const auto it = m_tokenToId.find(token);
    return it == m_tokenToId.end() ? m_unkId : it->second;
}

const std::string& BertTokenizer::idToToken(std::int64_t id) const
{
    if (id < 0 || id >= vocabSize())
        throw Error("tokenizer: token id " + std::to_string(id) + " is out of range [0, " +
                    std::to_string(vocabSize()) + ")");
    return m_idToToken[static_cast<std::size_t>(id)];
}

std::string truncationNotice(std::int64_t fullTokens, std::int64_t keptTokens, bool pair)
{
    if (fullTokens <= keptTokens) return {};
    return "the input has " + std::to_string(fullTokens) + " tokens; " +
           (pair ? "it was cut to " + std::to_string(keptTokens) +
                       " by removing tokens from the end of the longer sentence (the model's limit)"
                 : "only the first " + std::to_string(keptTokens) + " are used (the model's limit)");
}

} // namespace outlierlens
