#include "tasks/data/bigram_backcopy.h"

#include "common/error.h"
#include "tasks/data/text_lines.h"
#include "text/decoder_tokenizer.h"

#include <torch/torch.h>

#include <algorithm>
#include <numeric>
#include <random>

namespace outlierlens {

namespace {

bool printableAscii(unsigned char c)
{
    return c >= 0x20 && c < 0x7f;
}

/// A uniform double in [0, 1) from 53 bits of the engine: the same on every platform (the standard
/// distributions are not).
double uniform01(std::mt19937_64& engine)
{
    return double(engine() >> 11) * (1.0 / 9007199254740992.0);
}

} // namespace

BigramBackcopy BigramBackcopy::build(const std::string& textFile, const DecoderTokenizer& tokenizer,
                                     int length, int alphabet, int triggers)
{
    if (length < 4)
        throw Error(textFile + ": Bigram-Backcopy sequences need at least 4 tokens, got " +
                    std::to_string(length));
    if (triggers < 1) throw Error(textFile + ": Bigram-Backcopy needs at least one trigger character");
    if (alphabet < triggers + 1 || alphabet > 95)
        throw Error(textFile + ": the alphabet must hold between " + std::to_string(triggers + 1) +
                    " and 95 characters, got " + std::to_string(alphabet));
    const std::string text = readTextFile(textFile);

    std::vector<std::int64_t> counts(128, 0);
    for (const char ch : text)
        if (printableAscii(static_cast<unsigned char>(ch))) ++counts[static_cast<unsigned char>(ch)];
    std::vector<int> order(128);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return counts[a] > counts[b]; });
    const auto distinct = std::count_if(counts.begin(), counts.end(), [](std::int64_t n) { return n > 0; });
    if (distinct < alphabet)
        throw Error(textFile + ": " + std::to_string(distinct) +
                    " distinct printable ASCII characters, fewer than " + "the alphabet of " +
                    std::to_string(alphabet));

    BigramBackcopy out;
    out.m_file = textFile;
    out.m_length = length;
    out.m_triggers = triggers;
    std::vector<int> state(128, -1);
    for (int i = 0; i < alphabet; ++i) {
        out.m_chars.push_back(char(order[std::size_t(i)]));
        state[std::size_t(order[std::size_t(i)])] = i;
    }

    // Every character must be exactly one token, and BOS must exist: the sequences are token ids.
    out.m_bos = tokenizer.bosId();
    if (out.m_bos < 0)
        throw Error(tokenizer.kind() + " tokenizer: Bigram-Backcopy needs a BOS token for position 0");
    for (const char ch : out.m_chars) {
        const std::vector<std::int64_t> ids =
            tokenizer.encode(std::string(1, ch), std::nullopt, 0, false).inputIds;
        if (ids.size() != 1)
            throw Error(tokenizer.kind() + " tokenizer: the character '" + std::string(1, ch) + "' is " +
                        std::to_string(ids.size()) +
                        " tokens; Bigram-Backcopy needs one token per character " +
                        "(use a byte-level tokenizer without merges, e.g. sample_data/tokenizers/bytes)");
        out.m_ids.push_back(ids[0]);
    }
    {
        const std::string probe(out.m_chars.begin(), out.m_chars.begin() + std::min(alphabet, 16));
        const std::vector<std::int64_t> ids = tokenizer.encode(probe, std::nullopt, 0, false).inputIds;
        if (ids.size() != probe.size())
            throw Error(tokenizer.kind() + " tokenizer: '" + probe + "' is " + std::to_string(ids.size()) +
                        " tokens, not one per character; Bigram-Backcopy needs a tokenizer without merges "
                        "(e.g. sample_data/tokenizers/bytes)");
    }

    // Bigram counts inside lines; the first character of a sequence follows the character counts.
    const std::size_t a = std::size_t(alphabet);
    std::vector<std::vector<double>> rows(a + 1, std::vector<double>(a, 1e-3));
    int previous = -1;
    for (const char ch : text) {
        const unsigned char u = static_cast<unsigned char>(ch);
        const int s = u < 128 ? state[u] : -1;
        if (s >= 0) {
            rows[a][std::size_t(s)] += 1.0;
            if (previous >= 0) rows[std::size_t(previous)][std::size_t(s)] += 1.0;
        }
        previous = s; // a character outside the alphabet (or a line break) breaks the chain
    }
    for (auto& row : rows) {
        std::partial_sum(row.begin(), row.end(), row.begin());
        const double total = row.back();
        for (double& v : row)
            v /= total;
    }
    out.m_cumulative = std::move(rows);
    return out;
}

int BigramBackcopy::draw(int from, double u) const
{
    const std::vector<double>& row = m_cumulative[std::size_t(from)];
    const auto it = std::upper_bound(row.begin(), row.end(), u);
    return it == row.end() ? int(row.size()) - 1 : int(it - row.begin());
}

torch::Tensor BigramBackcopy::sample(std::uint64_t seed, std::int64_t index, int count) const
{
    torch::Tensor out = torch::empty({count, m_length}, torch::kLong);
    auto ids = out.accessor<std::int64_t, 2>();
    const int first = int(m_chars.size());
    std::vector<int> states(static_cast<std::size_t>(m_length));
    for (int i = 0; i < count; ++i) {
        // One engine per sequence, keyed by (seed, index, i): any batch can be rebuilt alone.
        std::seed_seq key{std::uint32_t(seed), std::uint32_t(seed >> 32), std::uint32_t(index),
                          std::uint32_t(std::uint64_t(index) >> 32), std::uint32_t(i)};
        std::mt19937_64 engine(key);
        ids[i][0] = m_bos;
        for (int t = 1; t < m_length; ++t) {
            const int prev = t >= 2 ? states[std::size_t(t - 1)] : first;
            const double u = uniform01(engine); // drawn at every position, so copies do not shift the stream
            const bool copy = t >= 3 && prev < m_triggers;
            states[std::size_t(t)] = copy ? states[std::size_t(t - 2)] : draw(prev, u);
            ids[i][t] = m_ids[std::size_t(states[std::size_t(t)])];
        }
    }
    return out;
}

std::string BigramBackcopy::text(const torch::Tensor& row) const
{
    const torch::Tensor r = row.to(torch::kLong).contiguous();
    const std::int64_t* p = r.data_ptr<std::int64_t>();
    std::string out;
    for (std::int64_t t = 0; t < r.numel(); ++t) {
        if (p[t] == m_bos && t == 0) continue;
        const auto it = std::find(m_ids.begin(), m_ids.end(), p[t]);
        if (it == m_ids.end())
            throw Error(m_file + ": token id " + std::to_string(p[t]) +
                        " is not a character of the alphabet");
        out.push_back(m_chars[std::size_t(it - m_ids.begin())]);
    }
    return out;
}

std::vector<std::int64_t> BigramBackcopy::triggerIds() const
{
    return {m_ids.begin(), m_ids.begin() + m_triggers};
}

} // namespace outlierlens
