#include "tasks/data/text_lines.h"

#include "common/error.h"
#include "common/input_file.h"

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

namespace outlierlens {
namespace {

// A run of whole lines of the text.
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
    return std::all_of(begin, end, [](char c) {
        return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' || c == '\n';
    });
}

std::vector<Chunk> splitIntoChunks(const std::string& text)
{
    constexpr std::size_t kChunkBytes = 128 * 1024;
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

void encodeChunk(const std::string& text, const LineEncoder& encodeLine, const std::string& path,
                 Chunk& chunk)
{
    std::int64_t line = chunk.firstLine;
    std::size_t pos = chunk.begin;
    std::string lineText;
    while (pos < chunk.end) {
        const std::size_t nl = text.find('\n', pos);
        const std::size_t end = (nl == std::string::npos || nl >= chunk.end) ? chunk.end : nl;
        if (!isBlank(text.data() + pos, text.data() + end)) {
            std::size_t stop = end;
            if (stop > pos && text[stop - 1] == '\r') --stop; // CRLF files
            lineText.assign(text, pos, stop - pos);
            try {
                encodeLine(lineText, chunk.ids);
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

std::string readTextFile(const std::string& path)
{
    return readWholeFile(path, "the text file");
}

std::vector<std::int64_t> tokenizeLines(const std::string& text, const std::string& path,
                                        const LineEncoder& encodeLine, std::int64_t wanted)
{
    if (isBlank(text.data(), text.data() + text.size()))
        throw Error(path + ": empty text file (no non-blank line)");
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
            encodeChunk(text, encodeLine, path, chunks[k]);
            std::lock_guard<std::mutex> lock(mutex);
            chunks[k].done = true;
            // With `wanted`, stop once the finished chunks at the start of the file hold enough.
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

    // Concatenate in file order up to the first gap (chunks skipped once there was enough).
    std::vector<std::int64_t> stream;
    for (const Chunk& c : chunks) {
        if (!c.error.empty()) throw Error(c.error);
        if (!c.done) break;
        stream.insert(stream.end(), c.ids.begin(), c.ids.end());
        if (wanted >= 0 && std::int64_t(stream.size()) >= wanted) break;
    }
    return stream;
}

torch::Tensor gatherRows(const torch::Tensor& rows, const std::vector<std::int64_t>& indices,
                         const std::string& file, const char* what)
{
    const std::int64_t n = rows.size(0), width = rows.size(1);
    torch::Tensor out = torch::empty({std::int64_t(indices.size()), width}, torch::kInt64);
    const auto* src = rows.data_ptr<std::int64_t>();
    auto* dst = out.data_ptr<std::int64_t>();
    for (std::size_t b = 0; b < indices.size(); ++b) {
        const std::int64_t i = indices[b];
        if (i < 0 || i >= n)
            throw Error(file + ": " + what + " index " + std::to_string(i) + " out of range [0, " +
                        std::to_string(n) + ")");
        std::memcpy(dst + std::int64_t(b) * width, src + i * width,
                    std::size_t(width) * sizeof(std::int64_t));
    }
    return out;
}

} // namespace outlierlens
