// Reading tokenizer.model (protobuf) and LLaMA-style tokenizer.json into a SentencePieceTokenizer.

#include "text/sentencepiece_tokenizer.h"

#include "text/sentencepiece_model.h"

#include "common/error.h"
#include "common/input_file.h"
#include "common/json_util.h"
#include "text/truncation.h"
#include "text/utf8.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <functional>
#include <queue>

namespace outlierlens {
using namespace spm;
namespace {

namespace fs = std::filesystem;

// ---- protobuf wire format (just what ModelProto needs) ---------------------------------------------

class ProtoReader
{
public:
    ProtoReader(const std::string& file, const char* data, std::size_t size, std::size_t base = 0)
        : m_file(file)
        , m_p(reinterpret_cast<const unsigned char*>(data))
        , m_size(size)
        , m_base(base)
    {}

    bool atEnd() const { return m_pos >= m_size; }

    std::uint64_t varint()
    {
        std::uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (m_pos >= m_size) fail("truncated varint");
            const unsigned char b = m_p[m_pos++];
            v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
            if (b < 0x80) return v;
        }
        fail("varint longer than 10 bytes");
    }

    // Reads a tag: (field number, wire type).
    std::pair<std::uint32_t, int> tag()
    {
        const std::uint64_t t = varint();
        if ((t >> 3) == 0 || (t >> 3) > 0x1FFFFFFF) fail("invalid field number");
        return {static_cast<std::uint32_t>(t >> 3), static_cast<int>(t & 7)};
    }

    // A length-delimited field: its offset and size within this message.
    std::pair<std::size_t, std::size_t> bytes()
    {
        const std::uint64_t len = varint();
        if (len > m_size - m_pos) fail("length-delimited field runs past the end");
        const std::size_t at = m_pos;
        m_pos += static_cast<std::size_t>(len);
        return {at, static_cast<std::size_t>(len)};
    }

    std::string string()
    {
        const auto [at, len] = bytes();
        return std::string(reinterpret_cast<const char*>(m_p + at), len);
    }

    ProtoReader message()
    {
        const auto [at, len] = bytes();
        return ProtoReader(m_file, reinterpret_cast<const char*>(m_p + at), len, m_base + at);
    }

    float fixed32Float()
    {
        if (m_size - m_pos < 4) fail("truncated fixed32");
        std::uint32_t u = 0;
        for (int i = 0; i < 4; ++i)
            u |= static_cast<std::uint32_t>(m_p[m_pos + i]) << (8 * i);
        m_pos += 4;
        float f = 0;
        std::memcpy(&f, &u, 4);
        return f;
    }

    void skip(int wireType)
    {
        switch (wireType) {
        case 0:
            varint();
            break;
        case 1:
            if (m_size - m_pos < 8) fail("truncated fixed64");
            m_pos += 8;
            break;
        case 2:
            bytes();
            break;
        case 5:
            if (m_size - m_pos < 4) fail("truncated fixed32");
            m_pos += 4;
            break;
        default:
            fail("unsupported wire type " + std::to_string(wireType));
        }
    }

    void expect(int wireType, int expected, const char* field)
    {
        if (wireType != expected)
            fail(std::string("field '") + field + "' has wire type " + std::to_string(wireType) +
                 ", expected " + std::to_string(expected));
    }

    [[noreturn]] void fail(const std::string& what) const
    {
        throw Error(m_file + ": not a valid SentencePiece model (" + what + " at byte " +
                    std::to_string(m_base + m_pos) + ")");
    }

private:
    std::string m_file;
    const unsigned char* m_p;
    std::size_t m_size;
    std::size_t m_base;
    std::size_t m_pos = 0;
};

} // namespace

// ---- loading -------------------------------------------------------------------------------------

void SentencePieceTokenizer::parseModel(const std::string& path)
{
    const std::string data = readWholeFile(path, "SentencePiece model");
    if (data.empty()) throw Error(path + ": empty file, expected a SentencePiece model");

    ProtoReader model(path, data.data(), data.size());
    int modelType = 1; // TrainerSpec.model_type defaults to UNIGRAM
    std::string normalizerName, charsMap;
    bool hasTrainerSpec = false;
    while (!model.atEnd()) {
        const auto [field, wire] = model.tag();
        if (field == 1) { // repeated SentencePiece pieces
            model.expect(wire, 2, "pieces");
            ProtoReader p = model.message();
            Piece piece;
            bool hasText = false;
            while (!p.atEnd()) {
                const auto [f, w] = p.tag();
                if (f == 1) {
                    p.expect(w, 2, "piece");
                    piece.text = p.string();
                    hasText = true;
                } else if (f == 2) {
                    p.expect(w, 5, "score");
                    piece.score = p.fixed32Float();
                } else if (f == 3) {
                    p.expect(w, 0, "type");
                    piece.type = static_cast<int>(p.varint());
                } else {
                    p.skip(w);
                }
            }
            const std::string where = path + ": piece " + std::to_string(m_pieces.size());
            if (!hasText || piece.text.empty()) throw Error(where + " is empty");
            if (piece.type < Normal || piece.type > Byte)
                throw Error(where + " has unknown type " + std::to_string(piece.type));
            if (utf8::firstInvalidByte(piece.text) != std::string::npos)
                throw Error(where + " is not valid UTF-8");
            m_pieces.push_back(std::move(piece));
        } else if (field == 2) { // TrainerSpec
            model.expect(wire, 2, "trainer_spec");
            hasTrainerSpec = true;
            ProtoReader t = model.message();
            while (!t.atEnd()) {
                const auto [f, w] = t.tag();
                if (f == 3) {
                    t.expect(w, 0, "model_type");
                    modelType = static_cast<int>(t.varint());
                } else if (f == 24) {
                    t.expect(w, 0, "treat_whitespace_as_suffix");
                    m_whitespaceAsSuffix = t.varint() != 0;
                } else if (f == 35) {
                    t.expect(w, 0, "byte_fallback");
                    m_byteFallback = t.varint() != 0;
                } else {
                    t.skip(w);
                }
            }
        } else if (field == 3) { // NormalizerSpec
            model.expect(wire, 2, "normalizer_spec");
            ProtoReader n = model.message();
            while (!n.atEnd()) {
                const auto [f, w] = n.tag();
                if (f == 1) {
                    n.expect(w, 2, "name");
                    normalizerName = n.string();
                } else if (f == 2) {
                    n.expect(w, 2, "precompiled_charsmap");
                    charsMap = n.string();
                } else if (f == 3) {
                    n.expect(w, 0, "add_dummy_prefix");
                    m_addDummyPrefix = n.varint() != 0;
                } else if (f == 4) {
                    n.expect(w, 0, "remove_extra_whitespaces");
                    m_removeExtraWhitespaces = n.varint() != 0;
                } else if (f == 5) {
                    n.expect(w, 0, "escape_whitespaces");
                    m_escapeWhitespaces = n.varint() != 0;
                } else {
                    n.skip(w);
                }
            }
        } else {
            model.skip(wire);
        }
    }

    if (m_pieces.empty()) throw Error(path + ": not a valid SentencePiece model (no pieces)");
    if (!hasTrainerSpec) throw Error(path + ": not a valid SentencePiece model (no trainer_spec)");
    if (modelType != 2)
        throw Error(path + ": SentencePiece model type " + std::to_string(modelType) +
                    " is not supported (only BPE, type 2, as LLaMA uses)");
    if (!charsMap.empty())
        throw Error(path + ": the normalization rule '" + normalizerName +
                    "' (a precompiled character map) is not supported; LLaMA models use 'identity'");

    for (std::size_t i = 0; i < m_pieces.size(); ++i) {
        const Piece& p = m_pieces[i];
        const auto id = static_cast<std::int32_t>(i);
        const bool normal = p.type == Normal || p.type == UserDefined || p.type == Unused;
        if (!(normal ? m_normalIds : m_reservedIds).emplace(p.text, id).second)
            throw Error(path + ": piece '" + p.text + "' is defined twice");
        if (p.type == UserDefined) m_userDefined.push_back(p.text);
        if (p.type == Unknown) {
            if (m_unkPieceId >= 0) throw Error(path + ": more than one unknown piece");
            m_unkPieceId = id;
        }
        if (p.type == Byte && !m_byteFallback)
            throw Error(path + ": byte piece '" + p.text + "' in a model without byte_fallback");
        if (p.type == Byte && (p.text.size() != 6 || p.text.compare(0, 3, "<0x") != 0 || p.text[5] != '>' ||
                               !std::isxdigit(static_cast<unsigned char>(p.text[3])) ||
                               !std::isxdigit(static_cast<unsigned char>(p.text[4]))))
            throw Error(path + ": byte piece '" + p.text + "' is not of the form <0xNN>");
    }
    if (m_unkPieceId < 0) throw Error(path + ": the model has no unknown piece");
    std::stable_sort(m_userDefined.begin(), m_userDefined.end(),
                     [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

bool SentencePieceTokenizer::isLlamaStyle(const nlohmann::json& j)
{
    if (!j.is_object()) return false;
    // Only a BPE model: a Unigram one with the same normalizer runs in the tokenizer.json pipeline.
    const nlohmann::json model = j.value("model", nlohmann::json());
    if (!model.is_object() || model.value("type", "BPE") != "BPE") return false;
    // The normalizer (or a Metaspace pre-tokenizer) must do what SentencePiece's identity
    // normalizer does with add_dummy_prefix and no whitespace folding.
    const auto isSpaceNormalizer = [](const nlohmann::json& n) {
        if (!n.is_object() || n.value("type", "") != "Sequence" || !n.contains("normalizers")) return false;
        const auto& ns = n.at("normalizers");
        return ns.is_array() && ns.size() == 2 && ns[0].is_object() && ns[1].is_object() &&
               ns[0].value("type", "") == "Prepend" && ns[0].value("prepend", "") == kSpaceSymbol &&
               ns[1].value("type", "") == "Replace" && ns[1].value("content", "") == kSpaceSymbol &&
               ns[1].contains("pattern") && ns[1].at("pattern").is_object() &&
               ns[1].at("pattern").value("String", "") == " ";
    };
    const auto isMetaspace = [](const nlohmann::json& p) {
        return p.is_object() && p.value("type", "") == "Metaspace" &&
               p.value("replacement", "") == kSpaceSymbol && !p.value("split", true) &&
               (p.value("prepend_scheme", "") == "first" || p.value("prepend_scheme", "") == "always" ||
                p.value("add_prefix_space", false));
    };
    const nlohmann::json normalizer = j.value("normalizer", nlohmann::json());
    const nlohmann::json preTokenizer = j.value("pre_tokenizer", nlohmann::json());
    return (isSpaceNormalizer(normalizer) && preTokenizer.is_null()) ||
           (normalizer.is_null() && isMetaspace(preTokenizer));
}

std::vector<AddedTokenSpec> SentencePieceTokenizer::parseTokenizerJson(const nlohmann::json& j,
                                                                       const std::string& path)
{
    if (!j.is_object() || !j.contains("model") || !j.at("model").is_object())
        throw Error(path + ": expected a tokenizers JSON object with a 'model'");
    const nlohmann::json& model = j.at("model");
    const std::string unsupported = path +
                                    ": only LLaMA-style tokenizer.json files (BPE, \"▁\" prepended, spaces "
                                    "replaced by \"▁\") are supported";
    if (jsonutil::getString(model, "type", path + ": model", "BPE") != "BPE")
        throw Error(unsupported + "; model type is '" + model.at("type").get<std::string>() + "'");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        if (model.contains(key) && !model.at(key).is_null())
            throw Error(unsupported + "; model." + key + " is set");
    }
    if (!isLlamaStyle(j))
        throw Error(unsupported + "; found normalizer " + j.value("normalizer", nlohmann::json()).dump() +
                    " and pre_tokenizer " + j.value("pre_tokenizer", nlohmann::json()).dump());
    m_addDummyPrefix = true;
    m_removeExtraWhitespaces = false;
    m_escapeWhitespaces = true;
    m_byteFallback = jsonutil::getBool(model, "byte_fallback", path + ": model", false);

    const auto vocabIt = model.find("vocab");
    if (vocabIt == model.end() || !vocabIt->is_object() || vocabIt->empty())
        throw Error(path + ": model.vocab must be a non-empty object mapping tokens to ids");
    const std::size_t n = vocabIt->size();
    std::vector<std::string> byId(n);
    std::vector<bool> seen(n, false);
    for (auto it = vocabIt->begin(); it != vocabIt->end(); ++it) {
        const auto& v = it.value();
        if (!v.is_number_integer() || v.get<long long>() < 0 ||
            v.get<long long>() >= static_cast<long long>(n) || seen[v.get<std::size_t>()])
            throw Error(path + ": model.vocab: the id of '" + it.key() + "' must be unique and in [0, " +
                        std::to_string(n) + "), found " + v.dump());
        seen[v.get<std::size_t>()] = true;
        byId[v.get<std::size_t>()] = it.key();
    }

    // Special added tokens inside the vocabulary are control pieces; the others follow it.
    std::vector<AddedTokenSpec> added;
    std::vector<bool> control(n, false);
    std::vector<std::pair<std::int64_t, std::string>> beyond;
    if (const auto at = j.find("added_tokens"); at != j.end() && !at->is_null()) {
        if (!at->is_array()) throw Error(path + ": added_tokens must be a list");
        for (const auto& t : *at) {
            const std::string where = path + ": added_tokens";
            AddedTokenSpec spec;
            spec.content = jsonutil::getString(t, "content", where);
            spec.lstrip = jsonutil::getBool(t, "lstrip", where, false);
            spec.rstrip = jsonutil::getBool(t, "rstrip", where, false);
            const long long id = jsonutil::getInt(t, "id", where);
            if (spec.content.empty() || utf8::firstInvalidByte(spec.content) != std::string::npos)
                throw Error(where + ": tokens must be non-empty UTF-8");
            if (id >= 0 && id < static_cast<long long>(n)) {
                if (byId[static_cast<std::size_t>(id)] != spec.content)
                    throw Error(where + ": '" + spec.content + "' has id " + std::to_string(id) +
                                ", which is '" + byId[static_cast<std::size_t>(id)] + "' in model.vocab");
                control[static_cast<std::size_t>(id)] = jsonutil::getBool(t, "special", where, false);
            } else {
                beyond.emplace_back(id, spec.content);
            }
            added.push_back(spec);
        }
    }
    std::sort(beyond.begin(), beyond.end());
    for (std::size_t k = 0; k < beyond.size(); ++k) {
        if (beyond[k].first != static_cast<std::int64_t>(n + k))
            throw Error(path + ": added token '" + beyond[k].second + "' has id " +
                        std::to_string(beyond[k].first) + ", expected " + std::to_string(n + k) +
                        " (added tokens follow the vocabulary)");
        m_addedIds[beyond[k].second] = beyond[k].first;
        m_addedTokens.push_back(beyond[k].second);
    }

    const std::string unk = jsonutil::getString(model, "unk_token", path + ": model", "");
    if (unk.empty() || vocabIt->find(unk) == vocabIt->end())
        throw Error(path + ": model.unk_token must name a token of model.vocab");
    for (std::size_t i = 0; i < n; ++i) {
        Piece p;
        p.text = byId[i];
        const bool isByte = m_byteFallback && p.text.size() == 6 && p.text.compare(0, 3, "<0x") == 0 &&
                            p.text[5] == '>' && std::isxdigit(static_cast<unsigned char>(p.text[3])) &&
                            std::isxdigit(static_cast<unsigned char>(p.text[4]));
        p.type = p.text == unk ? Unknown : control[i] ? Control : isByte ? Byte : Normal;
        const auto id = static_cast<std::int32_t>(i);
        (p.type == Normal ? m_normalIds : m_reservedIds).emplace(p.text, id);
        if (p.type == Unknown) m_unkPieceId = id;
        m_pieces.push_back(std::move(p));
    }

    const auto mergesIt = model.find("merges");
    if (mergesIt == model.end() || !mergesIt->is_array()) throw Error(path + ": model.merges must be a list");
    m_rankedMerges = true;
    for (std::size_t r = 0; r < mergesIt->size(); ++r) {
        const auto& m = (*mergesIt)[r];
        std::string left, right;
        if (m.is_string()) {
            const std::string s = m.get<std::string>();
            const std::size_t sp = s.find(' ');
            if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
                left.clear();
            else
                left = s.substr(0, sp), right = s.substr(sp + 1);
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            left = m[0].get<std::string>();
            right = m[1].get<std::string>();
        }
        const std::string where = path + ": model.merges[" + std::to_string(r) + "]";
        if (left.empty() || right.empty()) throw Error(where + ": expected two tokens, found " + m.dump());
        if (vocabIt->find(left) == vocabIt->end() || vocabIt->find(right) == vocabIt->end() ||
            vocabIt->find(left + right) == vocabIt->end())
            throw Error(where + ": '" + left + "', '" + right + "' or their merge is not in model.vocab");
        m_mergeRanks.emplace(left + '\0' + right,
                             static_cast<std::int32_t>(r)); // the first rank of a pair counts
    }
    return added;
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::fromModelDir(const std::string& modelDir)
{
    const fs::path dir(modelDir);
    std::error_code ec;
    if (!fs::exists(dir / "tokenizer.model", ec) && fs::exists(dir / "tokenizer.json", ec)) {
        const std::string path = (dir / "tokenizer.json").string();
        return fromTokenizerJson(modelDir, jsonutil::parseFile(path), path);
    }
    std::unique_ptr<SentencePieceTokenizer> tok(new SentencePieceTokenizer());
    tok->parseModel((dir / "tokenizer.model").string());
    tok->loadSpecialTokens(dir, {});
    return tok;
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::fromTokenizerJson(const std::string& modelDir,
                                                                                  const nlohmann::json& json,
                                                                                  const std::string& path)
{
    std::unique_ptr<SentencePieceTokenizer> tok(new SentencePieceTokenizer());
    const std::vector<AddedTokenSpec> jsonAddedTokens = tok->parseTokenizerJson(json, path);
    tok->loadSpecialTokens(fs::path(modelDir), jsonAddedTokens);
    return tok;
}

void SentencePieceTokenizer::loadSpecialTokens(const std::filesystem::path& dir,
                                               const std::vector<AddedTokenSpec>& jsonAddedTokens)
{
    // LlamaTokenizer's defaults: <unk>, <s>, </s>, no pad; add_bos_token true, add_eos_token false,
    // legacy true (the v4.31 default).
    const SpecialTokenFiles files = SpecialTokenFiles::read(dir, "<s>", "</s>", "<unk>", std::nullopt);
    m_addBos = files.addBosToken.value_or(true);
    m_addEos = files.addEosToken.value_or(false);
    m_legacy = files.legacy.value_or(true);

    const std::string unkToken = files.unk ? files.unk->content : std::string();
    const auto pieceCount = static_cast<std::int64_t>(m_pieces.size());
    const auto addToken = [&](const std::string& content) {
        // _add_tokens: only tokens that piece_to_id maps to unk, never the unk token itself.
        if (content == unkToken || tokenToId(content) != m_unkPieceId) return;
        m_addedIds[content] = pieceCount + static_cast<std::int64_t>(m_addedTokens.size());
        m_addedTokens.push_back(content);
    };
    const std::vector<AddedTokenSpec> specials = files.specialTokens();
    std::vector<AddedTokenSpec> noSplit = specials;
    for (const auto& [content, id] : files.addedTokens) {
        const std::int64_t expected = pieceCount + static_cast<std::int64_t>(m_addedTokens.size());
        if (id != expected)
            throw Error((dir / "added_tokens.json").string() + ": token '" + content + "' has id " +
                        std::to_string(id) + ", expected " + std::to_string(expected) +
                        " (added tokens follow the pieces of tokenizer.model)");
        addToken(content);
        if (std::none_of(specials.begin(), specials.end(),
                         [&, &text = content](const auto& s) { return s.content == text; })) {
            AddedTokenSpec t;
            t.content = content;
            t.plainString = true;
            noSplit.push_back(t);
        }
    }
    for (const AddedTokenSpec& t : specials)
        addToken(t.content);
    for (const AddedTokenSpec& t : jsonAddedTokens) {
        if (std::none_of(noSplit.begin(), noSplit.end(),
                         [&](const auto& s) { return s.content == t.content; }))
            noSplit.push_back(t);
    }
    m_splitter = AddedTokenSplitter(std::move(noSplit));

    const auto idOf = [&](const std::optional<AddedTokenSpec>& t) -> std::int64_t {
        return t ? tokenToId(t->content) : -1;
    };
    m_bosId = idOf(files.bos);
    m_eosId = idOf(files.eos);
    m_padId = idOf(files.pad);
    if (m_addBos && m_bosId < 0)
        throw Error((dir / "tokenizer_config.json").string() +
                    ": add_bos_token is true but there is no bos_token");
    if (m_addEos && m_eosId < 0)
        throw Error((dir / "tokenizer_config.json").string() +
                    ": add_eos_token is true but there is no eos_token");
}

} // namespace outlierlens
