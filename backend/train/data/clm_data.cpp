#include "train/data/clm_data.h"

#include "common/error.h"
#include "text/decoder_tokenizer.h"

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

namespace outlierlens {
namespace {

// A run of whole lines; lines are encoded independently and the chunks concatenated in file order,
// so the stream does not depend on the number of threads.
struct Chunk
{
    std::size_t begin = 0, end = 0; // byte range in the text
    std::int64_t firstLine = 1;     // 1-based
    std::vector<std::int64_t> ids;
    std::string error;
    bool done = false;
};

bool isBlank(const char* begin, const char* end)
{
    return std::all_of(begin, end, [](char c) {
        return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' || c == '\n';
    });
}

std::string readWholeFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open the text file (missing or unreadable)");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad()) throw Error(path + ": read error");
    return buffer.str();
}

std::vector<Chunk> splitIntoChunks(const std::string& text)
{
    constexpr std::size_t kChunkBytes = 64 * 1024;
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
        line += std::count(text.begin() + std::ptrdiff_t(pos), text.begin() + std::ptrdiff_t(end), '\n');
        chunks.push_back(std::move(c));
        pos = end;
    }
    return chunks;
}

void encodeChunk(const std::string& text, const DecoderTokenizer& tokenizer, std::int64_t separator,
                 const std::string& path, Chunk& chunk)
{
    std::int64_t line = chunk.firstLine;
    std::size_t pos = chunk.begin;
    std::string lineText;
    while (pos < chunk.end) {
        const std::size_t nl = text.find('\n', pos);
        std::size_t end = (nl == std::string::npos || nl >= chunk.end) ? chunk.end : nl;
        if (!isBlank(text.data() + pos, text.data() + end)) {
            std::size_t stop = end;
            if (stop > pos && text[stop - 1] == '\r') --stop; // CRLF files
            lineText.assign(text, pos, stop - pos);
            try {
                const std::vector<std::int64_t> ids = tokenizer.encode(lineText).inputIds;
                chunk.ids.insert(chunk.ids.end(), ids.begin(), ids.end());
                if (separator >= 0) chunk.ids.push_back(separator);
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

TokenBlocks TokenBlocks::build(const std::string& textFile, const DecoderTokenizer& tokenizer,
                               int blockLength, std::size_t maxBlocks)
{
    if (blockLength < 2)
        throw Error(textFile + ": a block needs at least 2 tokens (one input, one next token), got " +
                    std::to_string(blockLength));
    const std::string text = readWholeFile(textFile);
    if (isBlank(text.data(), text.data() + text.size()))
        throw Error(textFile + ": empty text file (no non-blank line)");

    // Does the tokenizer mark where a text starts (BOS)? If not, lines are separated by its EOS.
    std::int64_t separator = -1;
    {
        const std::string probe = "a";
        if (tokenizer.encode(probe).inputIds.size() ==
            tokenizer.encode(probe, std::nullopt, 0, false).inputIds.size())
            separator = tokenizer.eosId();
    }

    const std::int64_t wanted = maxBlocks > 0 ? std::int64_t(maxBlocks) * blockLength : -1;
    std::vector<Chunk> chunks = splitIntoChunks(text);
    std::atomic<std::size_t> next{0};
    std::atomic<bool> enough{false};
    std::mutex mutex; // guards the `done` flags and the prefix count
    std::size_t prefixDone = 0;
    std::int64_t prefixTokens = 0;
    const auto worker = [&] {
        while (!enough.load()) {
            const std::size_t k = next.fetch_add(1);
            if (k >= chunks.size()) return;
            encodeChunk(text, tokenizer, separator, textFile, chunks[k]);
            std::lock_guard<std::mutex> lock(mutex);
            chunks[k].done = true;
            while (prefixDone < chunks.size() && chunks[prefixDone].done &&
                   chunks[prefixDone].error.empty()) {
                prefixTokens += std::int64_t(chunks[prefixDone].ids.size());
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

    TokenBlocks out;
    out.m_file = textFile;
    out.m_blockLength = blockLength;
    std::vector<std::int64_t> stream;
    for (const Chunk& c : chunks) {
        if (!c.error.empty()) throw Error(c.error);
        if (!c.done) break;
        stream.insert(stream.end(), c.ids.begin(), c.ids.end());
        if (wanted >= 0 && std::int64_t(stream.size()) >= wanted) break;
    }
    out.m_tokenCount = std::int64_t(stream.size());
    std::int64_t n = out.m_tokenCount / blockLength;
    if (maxBlocks > 0) n = std::min<std::int64_t>(n, std::int64_t(maxBlocks));
    if (n == 0)
        throw Error(textFile + ": the text has " + std::to_string(out.m_tokenCount) +
                    " tokens; one block needs " + std::to_string(blockLength) + " (seq_length)");
    out.m_blocks = torch::from_blob(stream.data(), {n, blockLength}, torch::kInt64).clone();
    return out;
}

torch::Tensor TokenBlocks::blocks(const std::vector<std::int64_t>& indices) const
{
    const std::int64_t n = size();
    torch::Tensor out = torch::empty({std::int64_t(indices.size()), m_blockLength}, torch::kInt64);
    const auto* src = m_blocks.data_ptr<std::int64_t>();
    auto* dst = out.data_ptr<std::int64_t>();
    for (std::size_t b = 0; b < indices.size(); ++b) {
        const std::int64_t i = indices[b];
        if (i < 0 || i >= n)
            throw Error(m_file + ": block index " + std::to_string(i) + " out of range [0, " +
                        std::to_string(n) + ")");
        std::memcpy(dst + std::int64_t(b) * m_blockLength, src + i * m_blockLength,
                    std::size_t(m_blockLength) * sizeof(std::int64_t));
    }
    return out;
}

torch::Tensor TokenBlocks::range(std::int64_t start, std::int64_t count) const
{
    std::vector<std::int64_t> indices;
    for (std::int64_t i = 0; i < count; ++i)
        indices.push_back(start + i);
    return blocks(indices);
}

torch::Tensor nextTokenCrossEntropy(const torch::Tensor& logits, const torch::Tensor& ids)
{
    using torch::indexing::None;
    using torch::indexing::Slice;
    const std::int64_t vocab = logits.size(-1);
    const torch::Tensor predicted = logits.index({Slice(), Slice(None, -1)}).reshape({-1, vocab});
    const torch::Tensor targets = ids.index({Slice(), Slice(1, None)}).reshape({-1});
    return torch::nn::functional::cross_entropy(predicted.to(torch::kFloat), targets);
}

} // namespace outlierlens
