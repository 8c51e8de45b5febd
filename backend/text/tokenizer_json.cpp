// Loading a tokenizer.json and running its pipeline (tokenizers' tokenizer/mod.rs and
// tokenizer/added_vocabulary.rs); the stages are in tokenizer_json_pipeline.cpp and
// tokenizer_json_bpe.cpp (the BPE and Unigram models).

#include "text/tokenizer_json.h"

#include "common/error.h"
#include "common/json_util.h"
#include "text/added_tokens.h"
#include "text/text_classes.h"
#include "text/tokenizer_json_parts.h"
#include "text/truncation.h"
#include "text/utf8.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <unordered_map>

namespace outlierlens {
namespace tokjson {

/// An entry of tokenizer.json's added_tokens.
struct AddedToken
{
    std::string content; ///< what is matched (normalized ones: the normalized content)
    std::int64_t id = -1;
    bool lstrip = false, rstrip = false, singleWord = false;
};

/// Leftmost-longest matching of added tokens, as the Aho-Corasick automaton of tokenizers does.
class AddedTokenMatcher
{
public:
    void add(AddedToken t)
    {
        if (!t.content.empty()) m_tokens.push_back(std::move(t));
    }
    void finish()
    {
        std::stable_sort(m_tokens.begin(), m_tokens.end(),
                         [](const auto& a, const auto& b) { return a.content.size() > b.content.size(); });
        for (std::size_t k = 0; k < m_tokens.size(); ++k)
            m_byFirstByte[static_cast<unsigned char>(m_tokens[k].content[0])].push_back(k);
    }
    bool empty() const { return m_tokens.empty(); }

    struct Piece
    {
        std::size_t begin, end;
        std::int64_t id; ///< -1: text between added tokens
    };
    /// The text as added tokens and the pieces between them (empty pieces left out).
    std::vector<Piece> split(const std::string& text) const;

private:
    std::vector<AddedToken> m_tokens; // longest first
    std::array<std::vector<std::size_t>, 256> m_byFirstByte;
};

std::vector<AddedTokenMatcher::Piece> AddedTokenMatcher::split(const std::string& text) const
{
    std::vector<Piece> out;
    std::size_t kept = 0; // end of the last added token kept
    std::size_t i = 0;
    std::u32string cp;
    const auto charBefore = [&](std::size_t at) -> char32_t {
        std::size_t b = at;
        while (b > 0 && (static_cast<unsigned char>(text[b - 1]) & 0xC0) == 0x80)
            --b;
        if (b == 0) return 0;
        --b;
        utf8::decode(std::string_view(text).substr(b, at - b), cp);
        return cp.size() == 1 ? cp[0] : 0;
    };
    const auto charAt = [&](std::size_t at) -> std::pair<char32_t, std::size_t> {
        const std::size_t len = utf8::sequenceLength(static_cast<unsigned char>(text[at]));
        utf8::decode(std::string_view(text).substr(at, len), cp);
        return {cp.size() == 1 ? cp[0] : 0, len};
    };
    while (i < text.size()) {
        const AddedToken* match = nullptr;
        for (const std::size_t k : m_byFirstByte[static_cast<unsigned char>(text[i])]) {
            if (text.compare(i, m_tokens[k].content.size(), m_tokens[k].content) == 0) {
                match = &m_tokens[k];
                break;
            }
        }
        if (!match) {
            ++i;
            continue;
        }
        std::size_t start = i, stop = i + match->content.size();
        i = stop;
        if (match->singleWord) {
            const bool wordBefore = start > 0 && textclass::isWordChar(charBefore(start));
            const bool wordAfter = stop < text.size() && textclass::isWordChar(charAt(stop).first);
            if (wordBefore || wordAfter) continue;
        }
        if (match->lstrip) {
            while (start > kept) {
                const char32_t c = charBefore(start);
                if (!textclass::isWhiteSpace(c)) break;
                std::string enc;
                utf8::append(enc, c);
                start -= enc.size();
            }
        }
        if (match->rstrip) {
            while (stop < text.size()) {
                const auto [c, len] = charAt(stop);
                if (!textclass::isWhiteSpace(c)) break;
                stop += len;
            }
            i = stop;
        }
        if (start > kept) out.push_back({kept, start, -1});
        out.push_back({start, stop, match->id});
        kept = stop;
    }
    if (kept < text.size()) out.push_back({kept, text.size(), -1});
    return out;
}

struct Pipeline
{
    std::string path;
    AddedTokenMatcher raw;        // added tokens with normalized = false
    AddedTokenMatcher normalized; // the others, matched in normalized text
    std::vector<Normalizer> normalizers;
    std::vector<PreTokenizer> preTokenizers;
    std::unique_ptr<Model> model; // BPE or Unigram
    PostProcessor post;
    std::unordered_map<std::string, std::int64_t> addedIds;
    std::array<std::string, 256> byteSymbols;
    std::unordered_map<char32_t, unsigned char> symbolBytes;
    bool byteLevel = false; // tokens are byte-level symbols (for display)
    std::string spaceSymbol = "\xE2\x96\x81";
};

namespace {

bool mentionsByteLevel(const nlohmann::json& j)
{
    if (j.is_object()) {
        if (j.value("type", std::string()) == "ByteLevel") return true;
        for (const auto& [key, value] : j.items())
            if (mentionsByteLevel(value)) return true;
    } else if (j.is_array()) {
        for (const auto& v : j)
            if (mentionsByteLevel(v)) return true;
    }
    return false;
}

} // namespace
} // namespace tokjson

using namespace tokjson;
namespace fs = std::filesystem;

TokenizerJsonTokenizer::TokenizerJsonTokenizer()
    : m_pipeline(std::make_unique<Pipeline>())
{}

TokenizerJsonTokenizer::~TokenizerJsonTokenizer() = default;

std::unique_ptr<TokenizerJsonTokenizer> TokenizerJsonTokenizer::fromModelDir(const std::string& modelDir)
{
    const std::string path = (fs::path(modelDir) / "tokenizer.json").string();
    std::error_code ec;
    if (!fs::exists(path, ec)) throw Error(path + ": missing");
    TokenizerJsonFile file = TokenizerJsonFile::read(path);
    return fromFile(modelDir, file);
}

std::unique_ptr<TokenizerJsonTokenizer> TokenizerJsonTokenizer::fromFile(const std::string& modelDir,
                                                                         TokenizerJsonFile& file)
{
    const nlohmann::json& j = file.json;
    const std::string& path = file.path;
    if (!j.is_object()) throw Error(path + ": expected a JSON object (a tokenizers pipeline)");
    std::unique_ptr<TokenizerJsonTokenizer> tok(new TokenizerJsonTokenizer());
    Pipeline& p = *tok->m_pipeline;
    p.path = path;
    const auto part = [&](const char* key) -> nlohmann::json {
        const auto it = j.find(key);
        return it == j.end() ? nlohmann::json() : *it;
    };

    const auto modelIt = j.find("model");
    if (modelIt == j.end() || !modelIt->is_object())
        throw Error(path + ": required field 'model' is missing or not an object");
    const Where modelWhere{path, "model"};
    const std::string modelType =
        modelIt->contains("type") ? componentType(*modelIt, modelWhere) : std::string("BPE");
    if (modelType == "BPE")
        p.model = std::make_unique<BpeModel>(BpeModel::parse(*modelIt, file, modelWhere));
    else if (modelType == "Unigram")
        p.model = UnigramModel::parse(*modelIt, file, modelWhere);
    else
        unsupportedType(modelWhere, modelType, "BPE and Unigram");
    p.normalizers = parseNormalizer(part("normalizer"), {path, "normalizer"});
    p.preTokenizers = parsePreTokenizer(part("pre_tokenizer"), {path, "pre_tokenizer"});
    p.post = parsePostProcessor(part("post_processor"), {path, "post_processor"});

    const auto byteMap = textclass::bytesToUnicode();
    for (int b = 0; b < 256; ++b) {
        utf8::append(p.byteSymbols[b], byteMap[b]);
        p.symbolBytes[byteMap[b]] = static_cast<unsigned char>(b);
    }
    const nlohmann::json decoder = part("decoder");
    p.byteLevel = decoder.is_null() ? mentionsByteLevel(part("pre_tokenizer")) : mentionsByteLevel(decoder);
    for (const PreTokenizer& pre : p.preTokenizers)
        if (pre.kind == PreTokenizer::Kind::Metaspace) p.spaceSymbol = pre.replacement;

    // The id table: the vocabulary, then the added tokens (which may repeat vocabulary entries).
    std::int64_t maxId = static_cast<std::int64_t>(p.model->tokens().size()) - 1;
    const nlohmann::json added = part("added_tokens");
    if (!added.is_null() && !added.is_array()) throw Error(path + ": added_tokens must be a list");
    std::vector<std::pair<std::int64_t, std::string>> addedList;
    for (std::size_t k = 0; added.is_array() && k < added.size(); ++k) {
        const std::string where = path + ": added_tokens[" + std::to_string(k) + "]";
        const nlohmann::json& t = added[k];
        AddedToken a;
        a.content = jsonutil::getString(t, "content", where);
        const long long id = jsonutil::getInt(t, "id", where);
        if (id < 0 || id > 50'000'000) throw Error(where + ": id " + std::to_string(id) + " is out of range");
        if (utf8::firstInvalidByte(a.content) != std::string::npos)
            throw Error(where + ": content is not valid UTF-8");
        a.id = id;
        a.lstrip = jsonutil::getBool(t, "lstrip", where, false);
        a.rstrip = jsonutil::getBool(t, "rstrip", where, false);
        a.singleWord = jsonutil::getBool(t, "single_word", where, false);
        const bool normalized = jsonutil::getBool(t, "normalized", where, false);
        maxId = std::max<std::int64_t>(maxId, id);
        addedList.emplace_back(id, a.content);
        p.addedIds[a.content] = id;
        if (normalized) {
            a.content = normalize(p.normalizers, a.content);
            p.normalized.add(std::move(a));
        } else {
            p.raw.add(std::move(a));
        }
    }
    p.raw.finish();
    p.normalized.finish();

    tok->m_idToToken = p.model->tokens();
    tok->m_idToToken.resize(static_cast<std::size_t>(maxId + 1));
    tok->m_hasId.assign(static_cast<std::size_t>(maxId + 1), false);
    for (std::size_t id = 0; id < p.model->tokens().size(); ++id)
        tok->m_hasId[id] = p.model->hasToken(id);
    for (const auto& [id, content] : addedList) {
        tok->m_idToToken[id] = content;
        tok->m_hasId[id] = true;
    }
    const auto checkIds = [&](const std::vector<TemplateItem>& items, const char* which) {
        for (const TemplateItem& item : items)
            for (const std::int64_t id : item.ids)
                if (id >= tok->vocabSize() || !tok->m_hasId[id])
                    throw Error(path + ": post_processor: the " + which + " template uses id " +
                                std::to_string(id) + ", which no token has");
    };
    checkIds(p.post.single, "single");
    checkIds(p.post.pair, "pair");

    // bos/eos/pad come from tokenizer_config.json (the tokenizer.json itself does not name them).
    const SpecialTokenFiles files =
        SpecialTokenFiles::read(fs::path(modelDir), std::nullopt, std::nullopt, std::nullopt, std::nullopt);
    const auto idOf = [&](const std::optional<AddedTokenSpec>& t) -> std::int64_t {
        return t ? tok->tokenToId(t->content) : -1;
    };
    tok->m_bosId = idOf(files.bos);
    tok->m_eosId = idOf(files.eos);
    tok->m_padId = idOf(files.pad);
    return tok;
}

std::string TokenizerJsonTokenizer::kind() const
{
    if (m_pipeline->byteLevel)
        return std::string("byte-level ") + m_pipeline->model->name() + " (tokenizer.json)";
    return std::string(m_pipeline->model->name()) + " (tokenizer.json)";
}

std::int64_t TokenizerJsonTokenizer::tokenToId(const std::string& token) const
{
    if (const auto it = m_pipeline->addedIds.find(token); it != m_pipeline->addedIds.end()) return it->second;
    return m_pipeline->model->idOf(token);
}

std::vector<std::int64_t> TokenizerJsonTokenizer::tokenizeToIds(const std::string& text) const
{
    const std::size_t bad = utf8::firstInvalidByte(text);
    if (bad != std::string::npos)
        throw Error("tokenizer: input text is not valid UTF-8 (byte " + std::to_string(bad) + ")");
    const Pipeline& p = *m_pipeline;
    std::vector<std::int64_t> ids;
    std::vector<std::int32_t> wordIds;
    const auto model = [&](const std::string& piece, bool atStart) {
        for (const PreToken& pre : preTokenize(p.preTokenizers, {piece, atStart}, p.byteSymbols)) {
            wordIds.clear();
            p.model->tokenize(pre.text, wordIds);
            ids.insert(ids.end(), wordIds.begin(), wordIds.end());
        }
    };
    // AddedVocabulary::extract_and_normalize: raw added tokens, normalize the rest, then the
    // normalized added tokens; each remaining piece goes through the pre-tokenizer and the model.
    for (const AddedTokenMatcher::Piece& piece : p.raw.split(text)) {
        if (piece.id >= 0) {
            ids.push_back(piece.id);
            continue;
        }
        const std::string normalized =
            normalize(p.normalizers, text.substr(piece.begin, piece.end - piece.begin));
        const bool atStart = piece.begin == 0;
        if (p.normalized.empty()) {
            model(normalized, atStart);
            continue;
        }
        for (const AddedTokenMatcher::Piece& inner : p.normalized.split(normalized)) {
            if (inner.id >= 0)
                ids.push_back(inner.id);
            else
                model(normalized.substr(inner.begin, inner.end - inner.begin), atStart && inner.begin == 0);
        }
    }
    return ids;
}

Encoding TokenizerJsonTokenizer::encode(const std::string& text, const std::optional<std::string>& pair,
                                        int maxLength, bool addSpecialTokens) const
{
    std::vector<std::int64_t> first = tokenizeToIds(text);
    std::vector<std::int64_t> second;
    if (pair) second = tokenizeToIds(*pair);
    const PostProcessor& post = m_pipeline->post;
    const bool withTemplate = addSpecialTokens && post.addsTokens;
    const std::vector<TemplateItem>& items = pair ? post.pair : post.single;
    std::size_t numSpecial = 0;
    if (withTemplate)
        for (const TemplateItem& item : items)
            numSpecial += item.ids.size();
    truncateLongestFirst(first, pair ? &second : nullptr, numSpecial, maxLength);

    Encoding enc;
    const auto appendIds = [&](const std::vector<std::int64_t>& ids) {
        for (const std::int64_t id : ids) {
            enc.inputIds.push_back(id);
            enc.tokens.push_back(idToToken(id));
        }
    };
    if (withTemplate) {
        for (const TemplateItem& item : items) {
            if (item.sequence == 0) {
                appendIds(first);
            } else if (item.sequence == 1) {
                if (pair) appendIds(second);
            } else {
                enc.inputIds.insert(enc.inputIds.end(), item.ids.begin(), item.ids.end());
                enc.tokens.insert(enc.tokens.end(), item.tokens.begin(), item.tokens.end());
            }
        }
    } else {
        appendIds(first);
        appendIds(second);
    }
    enc.tokenTypeIds.assign(enc.inputIds.size(), 0);
    enc.attentionMask.assign(enc.inputIds.size(), 1);
    return enc;
}

std::string TokenizerJsonTokenizer::idToToken(std::int64_t id) const
{
    if (id < 0 || id >= vocabSize() || !m_hasId[static_cast<std::size_t>(id)])
        throw Error("tokenizer: no token has id " + std::to_string(id) + " (vocabulary size " +
                    std::to_string(vocabSize()) + ")");
    return m_idToToken[static_cast<std::size_t>(id)];
}

std::string TokenizerJsonTokenizer::displayToken(std::int64_t id) const
{
    const std::string token = idToToken(id);
    const Pipeline& p = *m_pipeline;
    if (p.addedIds.count(token) != 0) return token;
    if (p.byteLevel) {
        std::u32string chars;
        utf8::decode(token, chars);
        std::string bytes;
        for (const char32_t c : chars) {
            const auto it = p.symbolBytes.find(c);
            if (it != p.symbolBytes.end())
                bytes.push_back(static_cast<char>(it->second));
            else
                utf8::append(bytes, c);
        }
        return utf8::printable(bytes);
    }
    if (p.model->byteFallback() && token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>' &&
        std::isxdigit(static_cast<unsigned char>(token[3])) &&
        std::isxdigit(static_cast<unsigned char>(token[4])))
        return utf8::printable(std::string(1, static_cast<char>(std::stoi(token.substr(3, 2), nullptr, 16))));
    std::string out;
    for (std::size_t at = 0; at < token.size();) {
        if (token.compare(at, p.spaceSymbol.size(), p.spaceSymbol) == 0) {
            out.push_back(' ');
            at += p.spaceSymbol.size();
        } else {
            out.push_back(token[at++]);
        }
    }
    return utf8::printable(out);
}

} // namespace outlierlens
