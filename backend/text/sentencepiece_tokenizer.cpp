#include "text/sentencepiece_tokenizer.h"

#include "text/sentencepiece_model.h"

#include "common/error.h"
#include "common/json_util.h"
#include "text/truncation.h"
#include "text/utf8.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <queue>
#include <sstream>

namespace outlierlens {
using namespace spm;
namespace {

std::string bytePiece(unsigned char b)
{
    static const char* const hex = "0123456789ABCDEF";
    return std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
}

bool startsWith(const std::string& s, const std::string& prefix)
{
    return s.compare(0, prefix.size(), prefix) == 0;
}

std::string replaceAll(const std::string& s, const std::string& from, const std::string& to)
{
    std::string out;
    std::size_t pos = 0;
    while (true) {
        const std::size_t at = s.find(from, pos);
        if (at == std::string::npos) break;
        out.append(s, pos, at - pos);
        out += to;
        pos = at + from.size();
    }
    out.append(s, pos, std::string::npos);
    return out;
}

} // namespace

// ---- sentencepiece -------------------------------------------------------------------------------

std::string SentencePieceTokenizer::normalize(const std::string& text) const
{
    // normalizer.cc with an empty character map: characters pass unchanged.
    const std::string space = m_escapeWhitespaces ? kSpaceSymbol : " ";
    std::size_t begin = 0;
    if (m_removeExtraWhitespaces) {
        while (begin < text.size() && text[begin] == ' ')
            ++begin;
    }
    if (begin == text.size()) return {};
    std::string out;
    out.reserve(text.size() * 2 + 3);
    if (!m_whitespaceAsSuffix && m_addDummyPrefix) out += space;
    bool prevSpace = m_removeExtraWhitespaces;
    for (std::size_t i = begin; i < text.size(); ++i) {
        const char c = text[i];
        if (c == ' ') {
            if (!prevSpace) out += space;
            prevSpace = m_removeExtraWhitespaces;
        } else {
            out.push_back(c);
            prevSpace = false;
        }
    }
    if (m_removeExtraWhitespaces) {
        while (out.size() >= space.size() && out.compare(out.size() - space.size(), space.size(), space) == 0)
            out.resize(out.size() - space.size());
    }
    if (m_whitespaceAsSuffix && m_addDummyPrefix) out += space;
    return out;
}

std::vector<std::string> SentencePieceTokenizer::encodePieces(const std::string& text) const
{
    const std::size_t bad = utf8::firstInvalidByte(text);
    if (bad != std::string::npos)
        throw Error("tokenizer: input text is not valid UTF-8 (byte " + std::to_string(bad) + ")");
    const std::string normalized = normalize(text);

    // bpe_model.cc Model::Encode: characters (user-defined symbols whole and frozen), then the
    // adjacent pair whose concatenation is the best-scored piece is merged first (leftmost on ties).
    struct Symbol
    {
        std::size_t begin = 0, size = 0;
        int prev = -1, next = -1;
        bool freeze = false;
    };
    std::vector<Symbol> symbols;
    for (std::size_t pos = 0; pos < normalized.size();) {
        Symbol s;
        s.begin = pos;
        for (const std::string& u : m_userDefined) {
            if (normalized.compare(pos, u.size(), u) == 0) {
                s.size = u.size();
                s.freeze = true;
                break;
            }
        }
        if (!s.freeze)
            s.size = std::min(normalized.size() - pos,
                              utf8::sequenceLength(static_cast<unsigned char>(normalized[pos])));
        s.prev = static_cast<int>(symbols.size()) - 1;
        pos += s.size;
        s.next = pos < normalized.size() ? static_cast<int>(symbols.size()) + 1 : -1;
        symbols.push_back(s);
    }

    struct Pair
    {
        int left, right;
        float score;
        std::size_t size;
    };
    const auto worse = [](const Pair& a, const Pair& b) {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    };
    std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> agenda(worse);
    // Unused pieces are merged through and split again afterwards (resegment).
    std::unordered_map<std::string, std::pair<std::string, std::string>> revMerge;
    const auto piece = [&](const Symbol& s) { return normalized.substr(s.begin, s.size); };
    const auto maybeAdd = [&](int left, int right) {
        if (left < 0 || right < 0 || symbols[left].freeze || symbols[right].freeze) return;
        const std::string merged =
            normalized.substr(symbols[left].begin, symbols[left].size + symbols[right].size);
        if (m_rankedMerges) {
            // tokenizer.json (the tokenizers crate's BPE): listed pairs only, lowest rank first.
            const auto r = m_mergeRanks.find(piece(symbols[left]) + '\0' + piece(symbols[right]));
            if (r != m_mergeRanks.end())
                agenda.push({left, right, -static_cast<float>(r->second), merged.size()});
            return;
        }
        const auto it = m_normalIds.find(merged);
        if (it == m_normalIds.end()) return;
        agenda.push({left, right, m_pieces[it->second].score, merged.size()});
        if (m_pieces[it->second].type == Unused)
            revMerge[merged] = {piece(symbols[left]), piece(symbols[right])};
    };
    for (std::size_t i = 1; i < symbols.size(); ++i)
        maybeAdd(static_cast<int>(i) - 1, static_cast<int>(i));
    while (!agenda.empty()) {
        const Pair top = agenda.top();
        agenda.pop();
        Symbol& l = symbols[top.left];
        Symbol& r = symbols[top.right];
        if (l.size == 0 || r.size == 0 || l.size + r.size != top.size) continue; // stale
        l.size += r.size;
        l.next = r.next;
        if (r.next >= 0) symbols[r.next].prev = top.left;
        r.size = 0;
        maybeAdd(l.prev, top.left);
        maybeAdd(top.left, l.next);
    }

    std::vector<std::string> out;
    std::function<void(const std::string&)> emit = [&](const std::string& w) {
        const std::int64_t id = pieceToId(w);
        if (m_pieces[static_cast<std::size_t>(id)].type == Unused) {
            const auto it = revMerge.find(w);
            if (it != revMerge.end()) {
                emit(it->second.first);
                emit(it->second.second);
                return;
            }
        }
        // sentencepiece_processor.cc: with byte_fallback an unknown piece becomes its UTF-8 bytes.
        if (id == m_unkPieceId && m_byteFallback) {
            for (const char b : w)
                out.push_back(bytePiece(static_cast<unsigned char>(b)));
            return;
        }
        out.push_back(w);
    };
    for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next)
        emit(piece(symbols[i]));
    return out;
}

std::int64_t SentencePieceTokenizer::pieceToId(const std::string& piece) const
{
    // model_interface.h PieceToId: reserved pieces first, then the others, else unk.
    if (const auto it = m_reservedIds.find(piece); it != m_reservedIds.end()) return it->second;
    if (const auto it = m_normalIds.find(piece); it != m_normalIds.end()) return it->second;
    return m_unkPieceId;
}

std::int64_t SentencePieceTokenizer::tokenToId(const std::string& token) const
{
    if (const auto it = m_addedIds.find(token); it != m_addedIds.end()) return it->second;
    return pieceToId(token);
}

// ---- LlamaTokenizer ------------------------------------------------------------------------------

std::vector<std::string> SentencePieceTokenizer::tokenizeChunk(const std::string& chunk) const
{
    // LlamaTokenizer._tokenize (v4.31). Without legacy, a chunk that does not start the text (it
    // follows a special token) loses the "▁" the dummy prefix put before its first piece, unless the
    // chunk itself starts with a space.
    std::string text = chunk;
    bool isFirst = false;
    if (!m_legacy) {
        isFirst = startsWith(text, kSpaceSymbol);
        if (isFirst) text.erase(0, kSpaceSymbol.size());
    }
    std::vector<std::string> pieces = encodePieces(text);
    if (!m_legacy && !isFirst && !startsWith(text, " ") && !pieces.empty() &&
        startsWith(pieces[0], kSpaceSymbol)) {
        if (pieces[0].size() > kSpaceSymbol.size())
            pieces[0].erase(0, kSpaceSymbol.size());
        else
            pieces.erase(pieces.begin());
    }
    return pieces;
}

std::vector<std::string> SentencePieceTokenizer::tokenize(const std::string& text) const
{
    const std::size_t bad = utf8::firstInvalidByte(text);
    if (bad != std::string::npos)
        throw Error("tokenizer: input text is not valid UTF-8 (byte " + std::to_string(bad) + ")");
    // LlamaTokenizer.tokenize: without legacy, "▁" in the text becomes a space and the text starts
    // with "▁" (so that the first chunk is known as the first).
    const std::string input = m_legacy ? text : kSpaceSymbol + replaceAll(text, kSpaceSymbol, " ");
    std::vector<std::string> tokens;
    for (const AddedTokenSplitter::Piece& piece : m_splitter.split(input)) {
        if (piece.isAddedToken) {
            tokens.push_back(piece.text);
        } else {
            for (std::string& p : tokenizeChunk(piece.text))
                tokens.push_back(std::move(p));
        }
    }
    return tokens;
}

std::vector<std::int64_t> SentencePieceTokenizer::toIds(const std::string& text) const
{
    std::vector<std::int64_t> ids;
    for (const std::string& t : tokenize(text))
        ids.push_back(tokenToId(t));
    return ids;
}

Encoding SentencePieceTokenizer::encode(const std::string& text, const std::optional<std::string>& pair,
                                        int maxLength, bool addSpecialTokens) const
{
    std::vector<std::int64_t> first = toIds(text);
    std::vector<std::int64_t> second;
    if (pair) second = toIds(*pair);
    // LlamaTokenizer.build_inputs_with_special_tokens: [bos] A [eos] ([bos] B [eos]).
    const bool bos = addSpecialTokens && m_addBos, eos = addSpecialTokens && m_addEos;
    const std::size_t perSegment = (bos ? 1 : 0) + (eos ? 1 : 0);
    truncateLongestFirst(first, pair ? &second : nullptr, perSegment * (pair ? 2 : 1), maxLength);

    Encoding enc;
    const auto segment = [&](const std::vector<std::int64_t>& ids) {
        if (bos) enc.inputIds.push_back(m_bosId);
        enc.inputIds.insert(enc.inputIds.end(), ids.begin(), ids.end());
        if (eos) enc.inputIds.push_back(m_eosId);
    };
    segment(first);
    if (pair) segment(second);
    enc.tokenTypeIds.assign(enc.inputIds.size(), 0);
    enc.attentionMask.assign(enc.inputIds.size(), 1);
    enc.tokens.reserve(enc.inputIds.size());
    for (const std::int64_t id : enc.inputIds)
        enc.tokens.push_back(idToToken(id));
    return enc;
}

std::int64_t SentencePieceTokenizer::vocabSize() const
{
    return static_cast<std::int64_t>(m_pieces.size() + m_addedTokens.size());
}

std::string SentencePieceTokenizer::idToToken(std::int64_t id) const
{
    if (id < 0 || id >= vocabSize())
        throw Error("tokenizer: token id " + std::to_string(id) + " is out of range [0, " +
                    std::to_string(vocabSize()) + ")");
    const auto n = static_cast<std::int64_t>(m_pieces.size());
    return id < n ? m_pieces[static_cast<std::size_t>(id)].text
                  : m_addedTokens[static_cast<std::size_t>(id - n)];
}

std::string SentencePieceTokenizer::displayToken(std::int64_t id) const
{
    const std::string token = idToToken(id);
    if (id >= static_cast<std::int64_t>(m_pieces.size())) return token;
    const Piece& p = m_pieces[static_cast<std::size_t>(id)];
    if (p.type == Control || p.type == Unknown) return token;
    if (p.type == Byte && token.size() == 6) {
        const auto b = static_cast<unsigned char>(std::stoi(token.substr(3, 2), nullptr, 16));
        return utf8::printable(std::string(1, static_cast<char>(b)));
    }
    return utf8::printable(replaceAll(token, kSpaceSymbol, " "));
}

} // namespace outlierlens
