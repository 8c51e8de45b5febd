// The models of a tokenizer.json, as Hugging Face's tokenizers runs them. BPE (models/bpe/model.rs,
// word.rs): characters to ids (byte fallback, unk), then merges by rank, lowest first, leftmost
// first among equal ranks. Unigram (models/unigram/model.rs, encode_optimized and tokenize): the
// best-scoring segmentation, unknown characters fused, then byte fallback.

#include "text/tokenizer_json_parts.h"

#include "common/error.h"
#include "common/json_util.h"
#include "text/utf8.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

namespace outlierlens::tokjson {
namespace {

std::uint64_t pairKey(std::int32_t a, std::int32_t b)
{
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

// Ids are dense tables in the tokenizer: a vocabulary file is untrusted input.
constexpr long long kMaxTokenId = 50'000'000;

std::string optionalString(const nlohmann::json& j, const char* key, const Where& where)
{
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return {};
    if (!it->is_string()) throw Error(where.str() + ": field '" + key + "' must be a string or null");
    return it->get<std::string>();
}

} // namespace

void MergeTable::reserve(std::size_t n)
{
    std::size_t capacity = 16;
    while (capacity < 2 * n)
        capacity *= 2;
    m_slots.assign(capacity, Slot());
    m_used = 0;
}

std::size_t MergeTable::slotOf(std::uint64_t key) const
{
    // A 64-bit mix (splitmix64's finalizer), then linear probing.
    std::uint64_t h = key;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    const std::size_t mask = m_slots.size() - 1;
    std::size_t i = static_cast<std::size_t>(h) & mask;
    while (m_slots[i].key != kEmpty && m_slots[i].key != key)
        i = (i + 1) & mask;
    return i;
}

void MergeTable::set(std::int32_t a, std::int32_t b, Merge m)
{
    if (2 * (m_used + 1) > m_slots.size()) {
        std::vector<Slot> old = std::move(m_slots);
        reserve(std::max<std::size_t>(m_used + 1, old.size()));
        for (const Slot& s : old)
            if (s.key != kEmpty) {
                m_slots[slotOf(s.key)] = s;
                ++m_used;
            }
    }
    Slot& slot = m_slots[slotOf(pairKey(a, b))];
    if (slot.key == kEmpty) ++m_used;
    slot.key = pairKey(a, b);
    slot.merge = m;
}

const MergeTable::Merge* MergeTable::find(std::int32_t a, std::int32_t b) const
{
    if (m_slots.empty()) return nullptr;
    const Slot& slot = m_slots[slotOf(pairKey(a, b))];
    return slot.key == kEmpty ? nullptr : &slot.merge;
}

std::int32_t BpeModel::idOf(std::string_view token) const
{
    const auto it = m_vocab.find(token);
    return it == m_vocab.end() ? -1 : it->second;
}

BpeModel BpeModel::parse(const nlohmann::json& model, TokenizerJsonFile& file, const Where& where)
{
    BpeModel m;
    const std::string w = where.str();
    if (const auto it = model.find("dropout"); it != model.end() && !it->is_null()) {
        if (!it->is_number() || it->get<double>() != 0.0)
            throw Error(w + ": dropout " + it->dump() + " is not supported (it makes tokenization random)");
    }
    m.m_byteFallback = jsonutil::getBool(model, "byte_fallback", w, false);
    m.m_fuseUnk = jsonutil::getBool(model, "fuse_unk", w, false);
    m.m_ignoreMerges = jsonutil::getBool(model, "ignore_merges", w, false);
    m.m_prefix = optionalString(model, "continuing_subword_prefix", where);
    m.m_suffix = optionalString(model, "end_of_word_suffix", where);

    if (!file.vocabTaken) throw Error(w + ": field 'vocab' must be an object mapping tokens to ids");
    long long maxId = -1;
    for (const auto& [token, id] : file.vocab) {
        if (token.empty() || utf8::firstInvalidByte(token) != std::string::npos)
            throw Error(w + ".vocab: tokens must be non-empty UTF-8 strings");
        maxId = std::max<long long>(maxId, id);
    }
    // The strings first, then the index of views into them (m_tokens is not resized after this).
    m.m_tokens.assign(static_cast<std::size_t>(maxId + 1), std::string());
    for (auto& [token, id] : file.vocab) {
        std::string& slot = m.m_tokens[static_cast<std::size_t>(id)];
        if (!slot.empty())
            throw Error(w + ".vocab: '" + token + "' and '" + slot + "' have the same id " +
                        std::to_string(id));
        slot = std::move(token);
    }
    file.vocab.clear();
    file.vocabTaken = false;
    m.m_vocab.reserve(m.m_tokens.size());
    for (std::size_t id = 0; id < m.m_tokens.size(); ++id)
        if (!m.m_tokens[id].empty()) m.m_vocab.emplace(m.m_tokens[id], static_cast<std::int32_t>(id));

    const std::string unk = optionalString(model, "unk_token", where);
    if (!unk.empty()) {
        m.m_unkId = m.idOf(unk);
        if (m.m_unkId < 0) throw Error(w + ": unk_token '" + unk + "' is not in the vocabulary");
    }
    static const char* const hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b)
        m.m_byteIds[b] = m.idOf(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");

    if (!file.mergesTaken) throw Error(w + ": field 'merges' must be a list");
    m.m_merges.reserve(file.merges.size());
    std::string merged;
    for (std::size_t r = 0; r < file.merges.size(); ++r) {
        const auto [left, right] = file.merge(r);
        const auto here = [&] { return w + ".merges[" + std::to_string(r) + "]"; };
        const std::int32_t a = m.idOf(left), b = m.idOf(right);
        if (a < 0 || b < 0)
            throw Error(here() + ": '" + std::string(a < 0 ? left : right) + "' is not in the vocabulary");
        merged.assign(left);
        if (!m.m_prefix.empty() && right.substr(0, m.m_prefix.size()) == m.m_prefix)
            merged.append(right.substr(m.m_prefix.size()));
        else
            merged.append(right);
        const std::int32_t id = m.idOf(merged);
        if (id < 0) throw Error(here() + ": the merged token '" + merged + "' is not in the vocabulary");
        // A pair listed twice keeps its last rank, as the tokenizers' map does.
        m.m_merges.set(a, b, {static_cast<std::int32_t>(r), id});
    }
    return m;
}

void BpeModel::tokenize(const std::string& word, std::vector<std::int32_t>& out) const
{
    if (word.empty()) return;
    if (m_ignoreMerges) {
        if (const std::int32_t id = idOf(word); id >= 0) {
            out.push_back(id);
            return;
        }
    }

    // Characters to symbols (merge_word).
    std::vector<std::int32_t> symbols;
    symbols.reserve(word.size());
    std::int32_t pendingUnk = -1; // fuse_unk: one unk for a run of unknown characters
    std::string piece;
    for (std::size_t i = 0; i < word.size();) {
        const std::size_t len = utf8::sequenceLength(static_cast<unsigned char>(word[i]));
        const bool first = i == 0, last = i + len >= word.size();
        piece.clear();
        if (!first) piece += m_prefix;
        piece.append(word, i, len);
        if (last) piece += m_suffix;
        i += len;
        if (const std::int32_t id = idOf(piece); id >= 0) {
            if (pendingUnk >= 0) symbols.push_back(pendingUnk);
            pendingUnk = -1;
            symbols.push_back(id);
            continue;
        }
        if (m_byteFallback) {
            bool all = true;
            for (const char c : piece)
                all = all && m_byteIds[static_cast<unsigned char>(c)] >= 0;
            if (all) {
                // tokenizers adds the byte tokens without flushing a pending unk first.
                for (const char c : piece)
                    symbols.push_back(m_byteIds[static_cast<unsigned char>(c)]);
                continue;
            }
        }
        if (m_unkId >= 0) {
            if (pendingUnk >= 0 && !m_fuseUnk) symbols.push_back(pendingUnk);
            pendingUnk = m_unkId;
        }
        // Without an unk token the character is dropped, as tokenizers does.
    }
    if (pendingUnk >= 0) symbols.push_back(pendingUnk);

    // Word::merge_all: a heap of (rank, position), stale entries skipped.
    const std::size_t n = symbols.size();
    std::vector<int> prev(n), next(n);
    std::vector<bool> alive(n, true);
    for (std::size_t k = 0; k < n; ++k) {
        prev[k] = static_cast<int>(k) - 1;
        next[k] = k + 1 < n ? static_cast<int>(k + 1) : -1;
    }
    struct Entry
    {
        std::int32_t rank;
        int pos;
        std::int32_t merged;
        bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
    const auto push = [&](int pos) {
        if (pos < 0 || next[pos] < 0) return;
        if (const MergeTable::Merge* m = m_merges.find(symbols[pos], symbols[next[pos]]))
            queue.push({m->rank, pos, m->merged});
    };
    for (std::size_t k = 0; k + 1 < n; ++k)
        push(static_cast<int>(k));
    while (!queue.empty()) {
        const Entry top = queue.top();
        queue.pop();
        if (!alive[top.pos] || next[top.pos] < 0) continue;
        const int right = next[top.pos];
        const MergeTable::Merge* m = m_merges.find(symbols[top.pos], symbols[right]);
        if (!m || m->merged != top.merged) continue; // stale
        symbols[top.pos] = top.merged;
        alive[right] = false;
        next[top.pos] = next[right];
        if (next[right] >= 0) prev[next[right]] = top.pos;
        push(prev[top.pos]);
        push(top.pos);
    }
    for (std::size_t k = 0; k < n; ++k)
        if (alive[k]) out.push_back(symbols[k]);
}

// ---- Unigram ------------------------------------------------------------------------------------

namespace {

// tokenizers' K_UNK_PENALTY: <unk> scores this much below the lowest piece.
constexpr double kUnkPenalty = 10.0;

} // namespace

std::int32_t UnigramModel::idOf(std::string_view token) const
{
    const auto it = m_vocab.find(token);
    return it == m_vocab.end() ? -1 : it->second;
}

std::unique_ptr<UnigramModel> UnigramModel::parse(const nlohmann::json& model, const TokenizerJsonFile& file,
                                                  const Where& where)
{
    std::unique_ptr<UnigramModel> m(new UnigramModel());
    const std::string w = where.str();
    const auto vocabIt = model.find("vocab");
    if (file.vocabTaken || vocabIt == model.end() || !vocabIt->is_array())
        throw Error(w + ": field 'vocab' must be a list of [piece, score]");
    const nlohmann::json& vocab = *vocabIt;
    if (vocab.size() > static_cast<std::size_t>(kMaxTokenId))
        throw Error(w + ".vocab: more than " + std::to_string(kMaxTokenId) + " pieces");
    m->m_tokens.reserve(vocab.size());
    m->m_scores.reserve(vocab.size());
    double minScore = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < vocab.size(); ++i) {
        const nlohmann::json& entry = vocab[i];
        if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number())
            throw Error(w + ".vocab[" + std::to_string(i) + "]: expected [piece, score], found " +
                        entry.dump().substr(0, 80));
        std::string piece = entry[0].get<std::string>();
        if (utf8::firstInvalidByte(piece) != std::string::npos)
            throw Error(w + ".vocab[" + std::to_string(i) + "]: the piece is not valid UTF-8");
        const double score = entry[1].get<double>();
        if (!std::isfinite(score))
            throw Error(w + ".vocab[" + std::to_string(i) + "]: the score must be a finite number");
        minScore = std::min(minScore, score);
        m->m_tokens.push_back(std::move(piece));
        m->m_scores.push_back(score);
    }

    // unk_id: null or absent means none; tokenizers refuses one outside the vocabulary.
    if (const auto it = model.find("unk_id"); it != model.end() && !it->is_null()) {
        if (!it->is_number_integer() || it->get<long long>() < 0)
            throw Error(w + ": unk_id must be a non-negative integer or null, found " + it->dump());
        if (m->m_tokens.empty()) throw Error(w + ": the vocabulary is empty but unk_id needs a piece");
        if (it->get<long long>() >= static_cast<long long>(m->m_tokens.size()))
            throw Error(w + ": unk_id " + it->dump() + " is not in the vocabulary of " +
                        std::to_string(m->m_tokens.size()) + " pieces");
        m->m_unkId = it->get<std::int32_t>();
    }
    m->m_byteFallback = jsonutil::getBool(model, "byte_fallback", w, false);
    m->m_unkScore = minScore - kUnkPenalty;

    // The index (a piece listed twice is found as its last id, as tokenizers' map keeps it) and the
    // byte trie of the pieces (the empty piece is never matched).
    m->m_vocab.reserve(m->m_tokens.size());
    for (std::size_t id = 0; id < m->m_tokens.size(); ++id)
        m->m_vocab[m->m_tokens[id]] = static_cast<std::int32_t>(id);
    // The trie grows as it goes: pieces share prefixes, so far fewer edges than bytes.
    m->m_nodePiece.assign(1, -1);
    for (const auto& [piece, id] : m->m_vocab) {
        std::int32_t node = 0;
        for (const char c : piece) {
            const auto byte = static_cast<std::int32_t>(static_cast<unsigned char>(c));
            if (const MergeTable::Merge* edge = m->m_trie.find(node, byte)) {
                node = edge->merged;
                continue;
            }
            const auto child = static_cast<std::int32_t>(m->m_nodePiece.size());
            m->m_nodePiece.push_back(-1);
            m->m_trie.set(node, byte, {0, child});
            node = child;
        }
        if (node != 0) m->m_nodePiece[static_cast<std::size_t>(node)] = id;
    }
    static const char* const hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b)
        m->m_byteIds[b] = m->idOf(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
    return m;
}

void UnigramModel::tokenize(const std::string& word, std::vector<std::int32_t>& out) const
{
    if (word.empty()) return;
    const std::size_t n = word.size();

    // best[e]: the best path over word[0, e): its score, where its last piece starts, that piece.
    // A candidate replaces the one there only when strictly better, so among equal scores the
    // first found wins (earlier start, then shorter piece), as in tokenizers.
    struct Best
    {
        double score = 0.0;
        std::size_t start = std::string::npos;
        std::int32_t id = -1;
    };
    std::vector<Best> best(n + 1);
    for (std::size_t start = 0; start < n;) {
        const std::size_t charLen = utf8::sequenceLength(static_cast<unsigned char>(word[start]));
        const double here = best[start].score;
        bool hasSingle = false;
        std::int32_t node = 0;
        for (std::size_t k = start; k < n; ++k) {
            const MergeTable::Merge* edge =
                m_trie.find(node, static_cast<std::int32_t>(static_cast<unsigned char>(word[k])));
            if (!edge) break;
            node = edge->merged;
            const std::int32_t piece = m_nodePiece[static_cast<std::size_t>(node)];
            if (piece < 0) continue;
            const double candidate = m_scores[static_cast<std::size_t>(piece)] + here;
            Best& target = best[k + 1];
            if (target.start == std::string::npos || candidate > target.score)
                target = {candidate, start, piece};
            if (k + 1 - start == charLen) hasSingle = true;
        }
        if (!hasSingle) {
            Best& target = best[start + charLen];
            const double candidate = m_unkScore + here;
            if (target.start == std::string::npos || candidate > target.score) {
                if (m_unkId < 0)
                    throw Error("tokenizer: '" + utf8::printable(word.substr(start, charLen)) +
                                "' has no piece in the Unigram vocabulary and the model has no unk_id");
                target = {candidate, start, m_unkId};
            }
        }
        start += charLen;
    }

    // The path back from the end, then forward: a run of <unk> nodes is one string.
    std::vector<std::size_t> ends;
    for (std::size_t end = n; end > 0; end = best[end].start)
        ends.push_back(end);
    std::reverse(ends.begin(), ends.end());
    std::size_t unkBegin = std::string::npos; // start of the pending run of <unk>
    const auto flushUnk = [&](std::size_t end) {
        if (unkBegin == std::string::npos) return;
        const std::string_view text = std::string_view(word).substr(unkBegin, end - unkBegin);
        unkBegin = std::string::npos;
        if (const std::int32_t id = idOf(text); id >= 0) {
            out.push_back(id);
            return;
        }
        if (m_byteFallback) {
            bool all = true;
            for (const char c : text)
                all = all && m_byteIds[static_cast<unsigned char>(c)] >= 0;
            if (all) {
                for (const char c : text)
                    out.push_back(m_byteIds[static_cast<unsigned char>(c)]);
                return;
            }
        }
        out.push_back(m_unkId);
    };
    for (const std::size_t end : ends) {
        const Best& node = best[end];
        if (node.id == m_unkId) {
            if (unkBegin == std::string::npos) unkBegin = node.start;
            continue;
        }
        flushUnk(node.start);
        out.push_back(node.id);
    }
    flushUnk(n);
}

} // namespace outlierlens::tokjson
