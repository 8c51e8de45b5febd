#include "train/data/mlm_data.h"

#include "common/error.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

namespace outlierlens {
namespace {

constexpr std::int64_t kIgnoreIndex = -100;

// A run of whole lines of the file; lines are tokenized independently and the chunks concatenated
// in file order, so the result does not depend on the number of threads.
struct Chunk
{
    std::size_t begin = 0, end = 0; // byte range in the text
    std::int64_t firstLine = 1;     // 1-based line number of its first line
    std::vector<std::int64_t> ids;
    std::string error;
    bool done = false;
};

bool isBlank(const char* begin, const char* end)
{
    return std::all_of(begin, end,
                       [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; });
}

std::string readWholeFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open the text corpus (missing or unreadable)");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad()) throw Error(path + ": read error");
    return buffer.str();
}

std::vector<Chunk> splitIntoChunks(const std::string& text)
{
    constexpr std::size_t kChunkBytes = 256 * 1024;
    std::vector<Chunk> chunks;
    std::size_t pos = 0;
    std::int64_t line = 1;
    while (pos < text.size()) {
        Chunk c;
        c.begin = pos;
        c.firstLine = line;
        std::size_t end = std::min(text.size(), pos + kChunkBytes);
        if (end < text.size()) {
            const std::size_t nl = text.find('\n', end);
            end = nl == std::string::npos ? text.size() : nl + 1;
        }
        c.end = end;
        line += std::count(text.begin() + static_cast<std::ptrdiff_t>(pos),
                           text.begin() + static_cast<std::ptrdiff_t>(end), '\n');
        chunks.push_back(std::move(c));
        pos = end;
    }
    return chunks;
}

void tokenizeChunk(const std::string& text, const BertTokenizer& tokenizer, const std::string& path,
                   Chunk& chunk)
{
    std::int64_t line = chunk.firstLine;
    std::size_t pos = chunk.begin;
    std::string lineText;
    while (pos < chunk.end) {
        const std::size_t nl = text.find('\n', pos);
        const std::size_t end = (nl == std::string::npos || nl >= chunk.end) ? chunk.end : nl;
        if (!isBlank(text.data() + pos, text.data() + end)) {
            lineText.assign(text, pos, end - pos);
            try {
                for (const std::string& token : tokenizer.tokenize(lineText))
                    chunk.ids.push_back(tokenizer.tokenToId(token));
            } catch (const Error& e) {
                chunk.error = path + ":" + std::to_string(line) + ": " + e.what();
                return;
            }
        }
        pos = end + 1;
        ++line;
    }
}

} // namespace

PackedCorpus PackedCorpus::build(const std::string& textFile, const BertTokenizer& tokenizer, int seqLength,
                                 std::size_t maxSequences)
{
    if (seqLength < 3)
        throw Error(textFile + ": sequence length must be at least 3 ([CLS], one token, [SEP]), got " +
                    std::to_string(seqLength));
    const std::string text = readWholeFile(textFile);
    if (std::all_of(text.begin(), text.end(), [](char c) { return c == '\n' || isBlank(&c, &c + 1); }))
        throw Error(textFile + ": empty text corpus (no non-blank line)");

    const std::int64_t body = seqLength - 2;
    const std::int64_t wanted = maxSequences > 0 ? static_cast<std::int64_t>(maxSequences) * body : -1;

    std::vector<Chunk> chunks = splitIntoChunks(text);
    std::atomic<std::size_t> next{0};
    std::atomic<bool> enough{false};
    std::mutex mutex; // guards `done` flags and the prefix count below
    std::size_t prefixDone = 0;
    std::int64_t prefixTokens = 0;
    const auto worker = [&] {
        while (!enough.load()) {
            const std::size_t k = next.fetch_add(1);
            if (k >= chunks.size()) return;
            tokenizeChunk(text, tokenizer, textFile, chunks[k]);
            std::lock_guard<std::mutex> lock(mutex);
            chunks[k].done = true;
            // With maxSequences, stop once the finished chunks at the start of the file hold enough.
            while (prefixDone < chunks.size() && chunks[prefixDone].done &&
                   chunks[prefixDone].error.empty()) {
                prefixTokens += static_cast<std::int64_t>(chunks[prefixDone].ids.size());
                ++prefixDone;
            }
            if (wanted >= 0 && prefixTokens >= wanted) enough = true;
        }
    };
    const unsigned threads =
        chunks.size() < 2 ? 1u : std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t)
        pool.emplace_back(worker);
    worker();
    for (std::thread& t : pool)
        t.join();

    PackedCorpus corpus;
    corpus.m_file = textFile;
    corpus.m_seqLength = seqLength;
    // Concatenate in file order up to the first gap (chunks skipped after `enough`).
    std::vector<std::int64_t> stream;
    for (const Chunk& c : chunks) {
        if (!c.error.empty()) throw Error(c.error);
        if (!c.done) break;
        stream.insert(stream.end(), c.ids.begin(), c.ids.end());
        if (wanted >= 0 && static_cast<std::int64_t>(stream.size()) >= wanted) break;
    }
    corpus.m_tokenCount = static_cast<std::int64_t>(stream.size());

    std::int64_t n = corpus.m_tokenCount / body;
    if (maxSequences > 0) n = std::min<std::int64_t>(n, static_cast<std::int64_t>(maxSequences));
    if (n == 0)
        throw Error(textFile + ": the corpus has " + std::to_string(corpus.m_tokenCount) +
                    " tokens; one sequence of " + std::to_string(seqLength) + " needs " +
                    std::to_string(body) + " (plus [CLS] and [SEP])");

    corpus.m_sequences = torch::empty({n, seqLength}, torch::kInt64);
    auto* out = corpus.m_sequences.data_ptr<std::int64_t>();
    for (std::int64_t s = 0; s < n; ++s) {
        std::int64_t* row = out + s * seqLength;
        row[0] = tokenizer.clsId();
        std::memcpy(row + 1, stream.data() + s * body, static_cast<std::size_t>(body) * sizeof(std::int64_t));
        row[seqLength - 1] = tokenizer.sepId();
    }
    return corpus;
}

torch::Tensor PackedCorpus::sequences(const std::vector<std::int64_t>& indices) const
{
    const std::int64_t n = size();
    torch::Tensor out = torch::empty({static_cast<std::int64_t>(indices.size()), m_seqLength}, torch::kInt64);
    const auto* src = m_sequences.data_ptr<std::int64_t>();
    auto* dst = out.data_ptr<std::int64_t>();
    for (std::size_t b = 0; b < indices.size(); ++b) {
        const std::int64_t i = indices[b];
        if (i < 0 || i >= n)
            throw Error(m_file + ": sequence index " + std::to_string(i) + " out of range [0, " +
                        std::to_string(n) + ")");
        std::memcpy(dst + static_cast<std::int64_t>(b) * m_seqLength, src + i * m_seqLength,
                    static_cast<std::size_t>(m_seqLength) * sizeof(std::int64_t));
    }
    return out;
}

void PackedCorpus::requireSequences(std::int64_t count, const std::string& what) const
{
    if (size() >= count) return;
    const std::int64_t body = m_seqLength - 2;
    throw Error(m_file + ": the corpus has " + std::to_string(m_tokenCount) + " tokens (" +
                std::to_string(size()) + " sequences of " + std::to_string(m_seqLength) + "); " + what +
                " needs " + std::to_string(count) + " sequences, i.e. " + std::to_string(count * body) +
                " tokens");
}

MlmBatch maskForMlm(const torch::Tensor& ids, const BertTokenizer& tokenizer, double p, at::Generator& gen)
{
    if (!ids.defined() || ids.dim() != 2 || ids.scalar_type() != torch::kInt64 || !ids.device().is_cpu())
        throw Error("masked LM: expected input ids as a 2-D int64 CPU tensor [B, T], got " +
                    (ids.defined()
                         ? std::string(c10::toString(ids.scalar_type())) + " " + c10::str(ids.sizes())
                         : std::string("an undefined tensor")));
    if (!(p > 0.0 && p <= 1.0))
        throw Error("masked LM: mask probability must be in (0, 1], got " + std::to_string(p));
    const std::int64_t vocab = tokenizer.vocabSize();
    std::vector<std::int64_t> special{tokenizer.padId(), tokenizer.unkId(), tokenizer.clsId(),
                                      tokenizer.sepId(), tokenizer.maskId()};
    std::sort(special.begin(), special.end());
    special.erase(std::unique(special.begin(), special.end()), special.end());
    const std::int64_t ordinary = vocab - static_cast<std::int64_t>(special.size());
    if (ordinary < 1) throw Error("masked LM: the vocabulary has no token besides the special ones");

    const torch::Tensor input = ids.contiguous();
    const std::int64_t count = input.numel();
    if (count > 0) {
        const std::int64_t lo = input.min().item<std::int64_t>(), hi = input.max().item<std::int64_t>();
        if (lo < 0 || hi >= vocab)
            throw Error("masked LM: token id " + std::to_string(lo < 0 ? lo : hi) +
                        " outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }

    // Four draws per position, always all of them, so the stream of `gen` advances by a fixed amount.
    const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
    const torch::Tensor select = torch::rand(input.sizes(), gen, f64);
    const torch::Tensor replace = torch::rand(input.sizes(), gen, f64);
    const torch::Tensor randomize = torch::rand(input.sizes(), gen, f64);
    const torch::Tensor randomIds = torch::randint(ordinary, input.sizes(), gen, torch::kInt64);

    MlmBatch batch;
    batch.inputIds = input.clone();
    batch.labels = torch::full(input.sizes(), kIgnoreIndex, torch::kInt64);
    batch.tokenTypeIds = torch::zeros(input.sizes(), torch::kInt64);
    batch.attentionMask = input.ne(tokenizer.padId()).to(torch::kInt64);

    const auto* src = input.data_ptr<std::int64_t>();
    const auto* u = select.data_ptr<double>();
    const auto* r = replace.data_ptr<double>();
    const auto* q = randomize.data_ptr<double>();
    const auto* w = randomIds.data_ptr<std::int64_t>();
    auto* dst = batch.inputIds.data_ptr<std::int64_t>();
    auto* labels = batch.labels.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < count; ++i) {
        const std::int64_t id = src[i];
        if (std::binary_search(special.begin(), special.end(), id) || u[i] >= p) continue;
        labels[i] = id;
        if (r[i] < 0.8) {
            dst[i] = tokenizer.maskId();
        } else if (q[i] < 0.5) {
            // The w-th non-special id: skip over the special ids at or below it.
            std::int64_t v = w[i];
            for (const std::int64_t s : special)
                if (v >= s) ++v;
            dst[i] = v;
        }
    }
    return batch;
}

} // namespace outlierlens
