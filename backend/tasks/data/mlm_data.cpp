#include "tasks/data/mlm_data.h"

#include "common/error.h"
#include "tasks/data/text_lines.h"

#include <algorithm>
#include <cstring>
#include <exception>

namespace outlierlens {
namespace {

constexpr std::int64_t kIgnoreIndex = -100;

} // namespace

PackedCorpus PackedCorpus::build(const std::string& textFile, const BertTokenizer& tokenizer, int seqLength,
                                 std::size_t maxSequences)
{
    if (seqLength < 3)
        throw Error(textFile + ": sequence length must be at least 3 ([CLS], one token, [SEP]), got " +
                    std::to_string(seqLength));
    const std::string text = readTextFile(textFile);
    const std::int64_t body = seqLength - 2;
    const std::int64_t wanted = maxSequences > 0 ? static_cast<std::int64_t>(maxSequences) * body : -1;
    std::vector<std::int64_t> stream = tokenizeLines(
        text, textFile,
        [&](const std::string& line, std::vector<std::int64_t>& ids) {
            for (const std::string& token : tokenizer.tokenize(line))
                ids.push_back(tokenizer.tokenToId(token));
        },
        wanted);

    PackedCorpus corpus;
    corpus.m_file = textFile;
    corpus.m_seqLength = seqLength;
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
    return gatherRows(m_sequences, indices, m_file, "sequence");
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
