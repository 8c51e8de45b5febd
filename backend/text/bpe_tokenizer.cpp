#include "text/bpe_tokenizer.h"

#include "common/error.h"
#include "common/input_file.h"
#include "common/json_util.h"
#include "common/text_format.h"
#include "text/text_classes.h"
#include "text/truncation.h"
#include "text/utf8.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <limits>

namespace outlierlens {
namespace {

namespace fs = std::filesystem;

// Ids beyond this are rejected: a vocabulary file is untrusted input and the id table is dense.
constexpr std::int64_t kMaxTokenId = 50'000'000;

// ---- GPT-2's pre-tokenizer ------------------------------------------------------------------------
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ as the Python `regex`
// module runs it: alternatives in order at each position, \s = the White_Space property.

using textclass::isLetter;
using textclass::isNumber;
using textclass::isWhiteSpace;

bool isOther(char32_t c)
{
    return !isWhiteSpace(c) && !isLetter(c) && !isNumber(c);
}

// Length of the match at position i (> 0 whenever i < s.size()).
std::size_t matchAt(const std::u32string& s, std::size_t i)
{
    const std::size_t n = s.size();
    if (s[i] == '\'' && i + 1 < n) {
        const char32_t a = s[i + 1];
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if (i + 2 < n) {
            const char32_t b = s[i + 2];
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
        }
    }
    const std::size_t j = s[i] == ' ' ? i + 1 : i;
    for (bool (*cls)(char32_t) : {isLetter, isNumber, isOther}) {
        if (j < n && cls(s[j])) {
            std::size_t k = j + 1;
            while (k < n && cls(s[k]))
                ++k;
            return k - i;
        }
    }
    // s[i] is white space here: every other character matched one of the classes above.
    std::size_t k = i + 1;
    while (k < n && isWhiteSpace(s[k]))
        ++k;
    // \s+(?!\S) backs off one character before a non-space; a single space falls through to \s+.
    if (k < n && k - i >= 2) return k - i - 1;
    return k - i;
}

std::vector<std::string> splitPreTokens(const std::u32string& s)
{
    std::vector<std::string> out;
    std::size_t i = 0;
    while (i < s.size()) {
        const std::size_t len = matchAt(s, i);
        out.push_back(utf8::encode(s.data() + i, s.data() + i + len));
        i += len;
    }
    return out;
}

std::uint64_t pairKey(std::int32_t a, std::int32_t b)
{
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

std::string invalidUtf8Message(std::size_t bad)
{
    return "tokenizer: input text is not valid UTF-8 (byte " + std::to_string(bad) + ")";
}

} // namespace

// ---- loading -------------------------------------------------------------------------------------

std::unique_ptr<ByteLevelBpeTokenizer> ByteLevelBpeTokenizer::fromModelDir(const std::string& modelDir)
{
    const fs::path dir(modelDir);
    std::error_code ec;
    fs::path vocabPath = dir / "vocab.json", mergesPath = dir / "merges.txt";
    if (!fs::exists(vocabPath, ec) && fs::exists(dir / "encoder.json", ec)) {
        vocabPath = dir / "encoder.json";
        mergesPath = dir / "vocab.bpe";
    }
    if (!fs::exists(vocabPath, ec))
        throw Error(vocabPath.string() +
                    ": missing (a byte-level BPE tokenizer needs vocab.json and merges.txt)");
    if (!fs::exists(mergesPath, ec))
        throw Error(mergesPath.string() + ": missing (a byte-level BPE tokenizer needs " +
                    vocabPath.filename().string() + " and " + mergesPath.filename().string() + ")");

    std::unique_ptr<ByteLevelBpeTokenizer> tok(new ByteLevelBpeTokenizer());
    const auto byteMap = textclass::bytesToUnicode();
    for (int b = 0; b < 256; ++b) {
        std::string s;
        utf8::append(s, byteMap[b]);
        tok->m_byteSymbol[b] = tok->internSymbol(s);
        tok->m_unicodeToByte[byteMap[b]] = static_cast<unsigned char>(b);
    }
    tok->loadVocab(vocabPath.string());
    tok->loadMerges(mergesPath.string());

    // GPT2Tokenizer's defaults: "<|endoftext|>" for bos, eos and unk; no pad.
    const std::string eot = "<|endoftext|>";
    const SpecialTokenFiles files = SpecialTokenFiles::read(dir, eot, eot, eot, std::nullopt);
    tok->m_addBos = files.addBosToken.value_or(false);
    tok->m_addPrefixSpace = files.addPrefixSpace.value_or(false);
    if (files.unk) tok->m_unkToken = files.unk->content;

    // from_pretrained: added_tokens.json first (consecutive ids after the vocabulary), then the
    // special tokens that the vocabulary lacks (sanitize_special_tokens), never the unk token.
    std::int64_t nextId = static_cast<std::int64_t>(tok->m_tokenToId.size());
    const auto addToken = [&](const std::string& content) {
        if (tok->m_tokenToId.count(content) != 0 || content == tok->m_unkToken) return;
        if (nextId < static_cast<std::int64_t>(tok->m_hasId.size()) && tok->m_hasId[nextId])
            throw Error(vocabPath.string() + ": ids are not consecutive; cannot add the token '" + content +
                        "'");
        if (nextId >= static_cast<std::int64_t>(tok->m_idToToken.size())) {
            tok->m_idToToken.resize(nextId + 1);
            tok->m_hasId.resize(nextId + 1, false);
        }
        tok->m_tokenToId[content] = nextId;
        tok->m_idToToken[nextId] = content;
        tok->m_hasId[nextId] = true;
        ++nextId;
    };
    const std::vector<AddedTokenSpec> specials = files.specialTokens();
    std::vector<AddedTokenSpec> noSplit = specials;
    for (const auto& [content, id] : files.addedTokens) {
        if (id != nextId && tok->m_tokenToId.count(content) == 0)
            throw Error((dir / "added_tokens.json").string() + ": token '" + content + "' has id " +
                        std::to_string(id) + ", expected " + std::to_string(nextId) +
                        " (added tokens follow the vocabulary)");
        addToken(content);
        const bool special =
            std::any_of(specials.begin(), specials.end(),
                        [&, &text = content](const AddedTokenSpec& s) { return s.content == text; });
        if (!special) {
            AddedTokenSpec t;
            t.content = content;
            t.plainString = true; // not in all_special_tokens_extended: stripped on both sides
            noSplit.push_back(t);
        }
    }
    for (const AddedTokenSpec& t : specials)
        addToken(t.content);
    tok->m_splitter = AddedTokenSplitter(std::move(noSplit));

    const auto idOf = [&](const std::optional<AddedTokenSpec>& t) -> std::int64_t {
        if (!t) return -1;
        const auto it = tok->m_tokenToId.find(t->content);
        return it == tok->m_tokenToId.end() ? -1 : it->second;
    };
    tok->m_bosId = idOf(files.bos);
    tok->m_eosId = idOf(files.eos);
    tok->m_padId = idOf(files.pad);
    tok->m_unkId = idOf(files.unk);
    if (tok->m_addBos && tok->m_bosId < 0)
        throw Error((dir / "tokenizer_config.json").string() +
                    ": add_bos_token is true but there is no bos_token");
    return tok;
}

std::int32_t ByteLevelBpeTokenizer::internSymbol(const std::string& s)
{
    const auto [it, inserted] = m_symbolIds.emplace(s, static_cast<std::int32_t>(m_symbols.size()));
    if (inserted) m_symbols.push_back(s);
    return it->second;
}

void ByteLevelBpeTokenizer::loadVocab(const std::string& path)
{
    constexpr std::uint64_t kMaxVocabularyBytes = std::uint64_t(64) << 20; // real vocab.json: a few MB
    const std::string text = readWholeFile(path, "vocabulary file", kMaxVocabularyBytes);
    nlohmann::json vocab; // not ordered_json: its inserts are linear, quadratic for 50k tokens
    try {
        vocab = jsonutil::parseWithDepthLimit(text, path);
    } catch (const nlohmann::json::parse_error& e) {
        throw Error(path + ": not valid JSON at byte " + std::to_string(e.byte) +
                    " (expected an object mapping tokens to ids)");
    }
    if (!vocab.is_object() || vocab.empty())
        throw Error(path + ": expected a non-empty JSON object mapping tokens to ids");
    std::int64_t maxId = -1;
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
        if (!it.value().is_number_integer() || it.value().get<long long>() < 0 ||
            it.value().get<long long>() > kMaxTokenId)
            throw Error(path + ": the id of token '" + it.key() + "' must be an integer in [0, " +
                        std::to_string(kMaxTokenId) + "], found " + it.value().dump());
        maxId = std::max<std::int64_t>(maxId, it.value().get<std::int64_t>());
    }
    m_idToToken.assign(static_cast<std::size_t>(maxId + 1), std::string());
    m_hasId.assign(static_cast<std::size_t>(maxId + 1), false);
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
        const auto id = it.value().get<std::int64_t>();
        // Two tokens with one id cannot both be decoded (a vocab.json of all zeros tokenized to [0, 0]).
        if (m_hasId[static_cast<std::size_t>(id)])
            throw Error(path + ": tokens '" + printableText(m_idToToken[static_cast<std::size_t>(id)]) +
                        "' and '" + printableText(it.key()) + "' have the same id " + std::to_string(id));
        m_tokenToId[it.key()] = id;
        m_idToToken[static_cast<std::size_t>(id)] = it.key();
        m_hasId[static_cast<std::size_t>(id)] = true;
    }
}

void ByteLevelBpeTokenizer::loadMerges(const std::string& path)
{
    // Real merges files are under 2 MB (GPT-2's: 456 kB); a 200 MB one took 2.5 GB before failing.
    constexpr std::uint64_t kMaxMergesBytes = std::uint64_t(64) << 20;
    const std::string data = readWholeFile(path, "merges file", kMaxMergesBytes);
    // GPT2Tokenizer: read().split("\n")[1:-1] -- the first line (#version) and whatever follows the
    // last line break are skipped; each line is split on white space; rank = index in that list.
    std::vector<std::string> lines;
    std::size_t pos = 0;
    while (true) {
        const std::size_t end = data.find('\n', pos);
        if (end == std::string::npos) break; // the part after the last "\n" is dropped
        lines.push_back(data.substr(pos, end - pos));
        pos = end + 1;
    }
    std::u32string cps;
    for (std::size_t li = 1; li < lines.size(); ++li) {
        const std::string where = path + ":" + std::to_string(li + 1);
        const std::size_t bad = utf8::decode(lines[li], cps);
        if (bad != std::string::npos) throw Error(where + ": invalid UTF-8 at byte " + std::to_string(bad));
        std::vector<std::u32string> parts;
        std::u32string cur;
        for (const char32_t c : cps) {
            if (isPythonSpace(c)) {
                if (!cur.empty()) parts.push_back(std::move(cur));
                cur.clear();
            } else {
                cur.push_back(c);
            }
        }
        if (!cur.empty()) parts.push_back(std::move(cur));
        if (parts.empty()) continue; // an empty line takes a rank and matches nothing, as in HF
        if (parts.size() != 2)
            throw Error(where + ": expected two symbols separated by a space, found " +
                        std::to_string(parts.size()) + " in '" + lines[li] + "'");
        const std::string a = utf8::encode(parts[0]), b = utf8::encode(parts[1]);
        const std::int32_t ia = internSymbol(a), ib = internSymbol(b);
        const std::int32_t merged = internSymbol(a + b);
        const auto rank = static_cast<std::int32_t>(li - 1);
        m_merges[pairKey(ia, ib)] = {rank,
                                     merged}; // dict(zip(merges, ranks)): a repeated pair keeps its last rank
    }
}

// ---- tokenization --------------------------------------------------------------------------------

std::vector<std::string> ByteLevelBpeTokenizer::preTokenize(const std::string& text)
{
    std::u32string chars;
    const std::size_t bad = utf8::decode(text, chars);
    if (bad != std::string::npos) throw Error(invalidUtf8Message(bad));
    return splitPreTokens(chars);
}

void ByteLevelBpeTokenizer::bpe(const std::string& preToken, std::vector<std::string>& out) const
{
    std::vector<std::int32_t> word;
    word.reserve(preToken.size());
    for (const char ch : preToken)
        word.push_back(m_byteSymbol[static_cast<unsigned char>(ch)]);
    std::vector<std::int32_t> next;
    next.reserve(word.size());
    while (word.size() > 1) {
        // GPT2Tokenizer.bpe: the lowest-ranked pair, then every occurrence of it left to right.
        std::int32_t bestRank = std::numeric_limits<std::int32_t>::max(), merged = -1;
        std::int32_t first = -1, second = -1;
        for (std::size_t i = 0; i + 1 < word.size(); ++i) {
            const auto it = m_merges.find(pairKey(word[i], word[i + 1]));
            if (it != m_merges.end() && it->second.first < bestRank) {
                bestRank = it->second.first;
                merged = it->second.second;
                first = word[i];
                second = word[i + 1];
            }
        }
        if (merged < 0) break;
        next.clear();
        for (std::size_t i = 0; i < word.size();) {
            if (word[i] == first && i + 1 < word.size() && word[i + 1] == second) {
                next.push_back(merged);
                i += 2;
            } else {
                next.push_back(word[i]);
                ++i;
            }
        }
        word.swap(next);
    }
    for (const std::int32_t s : word)
        out.push_back(m_symbols[static_cast<std::size_t>(s)]);
}

std::vector<std::string> ByteLevelBpeTokenizer::tokenize(const std::string& text) const
{
    const std::size_t bad = utf8::firstInvalidByte(text);
    if (bad != std::string::npos) throw Error(invalidUtf8Message(bad));
    // prepare_for_tokenization: add_prefix_space puts one space before the whole text.
    const std::string input = m_addPrefixSpace ? " " + text : text;
    std::vector<std::string> tokens;
    std::u32string chars;
    for (const AddedTokenSplitter::Piece& piece : m_splitter.split(input)) {
        if (piece.isAddedToken) {
            tokens.push_back(piece.text);
            continue;
        }
        utf8::decode(piece.text, chars);
        for (const std::string& pre : splitPreTokens(chars))
            bpe(pre, tokens);
    }
    return tokens;
}

std::int64_t ByteLevelBpeTokenizer::tokenToId(const std::string& token) const
{
    const auto it = m_tokenToId.find(token);
    return it == m_tokenToId.end() ? m_unkId : it->second;
}

std::vector<std::int64_t> ByteLevelBpeTokenizer::toIds(const std::string& text) const
{
    std::vector<std::int64_t> ids;
    for (const std::string& t : tokenize(text)) {
        const std::int64_t id = tokenToId(t);
        if (id < 0)
            throw Error("tokenizer: token '" + t + "' is not in the vocabulary and there is no unk token");
        ids.push_back(id);
    }
    return ids;
}

Encoding ByteLevelBpeTokenizer::encode(const std::string& text, const std::optional<std::string>& pair,
                                       int maxLength, bool addSpecialTokens) const
{
    std::vector<std::int64_t> first = toIds(text);
    std::vector<std::int64_t> second;
    if (pair) second = toIds(*pair);
    // GPT2Tokenizer.build_inputs_with_special_tokens: [bos] A ([bos] B) when add_bos_token.
    const bool bos = addSpecialTokens && m_addBos;
    const std::size_t numSpecial = bos ? (pair ? 2 : 1) : 0;
    truncateLongestFirst(first, pair ? &second : nullptr, numSpecial, maxLength);

    Encoding enc;
    if (bos) enc.inputIds.push_back(m_bosId);
    enc.inputIds.insert(enc.inputIds.end(), first.begin(), first.end());
    if (pair) {
        if (bos) enc.inputIds.push_back(m_bosId);
        enc.inputIds.insert(enc.inputIds.end(), second.begin(), second.end());
    }
    enc.tokenTypeIds.assign(enc.inputIds.size(), 0);
    enc.attentionMask.assign(enc.inputIds.size(), 1);
    enc.tokens.reserve(enc.inputIds.size());
    for (const std::int64_t id : enc.inputIds)
        enc.tokens.push_back(idToToken(id));
    return enc;
}

std::string ByteLevelBpeTokenizer::idToToken(std::int64_t id) const
{
    if (id < 0 || id >= vocabSize() || !m_hasId[static_cast<std::size_t>(id)])
        throw Error("tokenizer: no token has id " + std::to_string(id) + " (vocabulary size " +
                    std::to_string(vocabSize()) + ")");
    return m_idToToken[static_cast<std::size_t>(id)];
}

std::string ByteLevelBpeTokenizer::displayToken(std::int64_t id) const
{
    const std::string token = idToToken(id);
    if (std::any_of(m_splitter.tokens().begin(), m_splitter.tokens().end(),
                    [&](const AddedTokenSpec& t) { return t.content == token; }))
        return token;
    // Symbols back to bytes (convert_tokens_to_string), then a printable label.
    std::u32string chars;
    utf8::decode(token, chars);
    std::string bytes;
    for (const char32_t c : chars) {
        const auto it = m_unicodeToByte.find(c);
        if (it != m_unicodeToByte.end())
            bytes.push_back(static_cast<char>(it->second));
        else
            utf8::append(bytes, c);
    }
    return utf8::printable(bytes);
}

} // namespace outlierlens
