#include "tasks/data/nli_data.h"

#include "analysis/bert_batch.h"
#include "common/error.h"
#include "text/mnli.h"

#include <algorithm>

namespace outlierlens {
namespace {

std::string joined(const std::vector<std::string>& names)
{
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i)
        out += (i ? ", " : "") + std::to_string(i) + " " + names[i];
    return out;
}

} // namespace

NliDataset NliDataset::build(const std::string& file, const BertTokenizer& tokenizer, int maxLength,
                             std::size_t trainPairs, const std::vector<std::string>& id2label)
{
    const std::vector<NliPair> pairs = readNliPairs(file);
    NliDataset data;
    data.m_file = file;
    data.m_padId = tokenizer.padId();
    data.m_labelNames = id2label.empty() ? nliLabelNames() : id2label;
    if (trainPairs == 0 || trainPairs >= pairs.size())
        throw Error(file + ": " + std::to_string(pairs.size()) + " pairs; the training split [0, " +
                    std::to_string(trainPairs) +
                    ") must hold at least one pair and leave at least one for evaluation");
    data.m_trainSize = static_cast<std::int64_t>(trainPairs);

    data.m_encodings.reserve(pairs.size());
    data.m_labels.reserve(pairs.size());
    for (std::size_t i = 0; i < pairs.size(); ++i) {
        const NliPair& pair = pairs[i];
        if (pair.label.empty())
            throw Error(file + ": pair " + std::to_string(i) +
                        " (0-based) has no label; fine-tuning needs labelled pairs");
        const int label = goldLabelId(data.m_labelNames, pair.label);
        if (label < 0)
            throw Error(file + ": pair " + std::to_string(i) + " (0-based) has label '" + pair.label +
                        "', which is not in id2label (" + joined(data.m_labelNames) + ")");
        Encoding e;
        try {
            e = tokenizer.encode(pair.premise, pair.hypothesis, maxLength);
        } catch (const Error& err) {
            throw Error(file + ": pair " + std::to_string(i) + " (0-based): " + err.what());
        }
        // Batches read ids and token types only: the rest (the token strings are most of it) is not kept.
        data.m_encodings.push_back(Encoding{std::move(e.inputIds), std::move(e.tokenTypeIds), {}, {}});
        data.m_labels.push_back(label);
    }
    return data;
}

std::int64_t NliDataset::label(std::int64_t i) const
{
    if (i < 0 || i >= static_cast<std::int64_t>(m_labels.size()))
        throw Error(m_file + ": pair index " + std::to_string(i) + " out of range [0, " +
                    std::to_string(m_labels.size()) + ")");
    return m_labels[static_cast<std::size_t>(i)];
}

NliDataset::Batch NliDataset::trainBatch(const std::vector<std::int64_t>& indices) const
{
    for (const std::int64_t i : indices) {
        if (i < 0 || i >= m_trainSize)
            throw Error(m_file + ": training pair index " + std::to_string(i) + " out of range [0, " +
                        std::to_string(m_trainSize) + ")");
    }
    return gather(indices);
}

NliDataset::Batch NliDataset::evalBatch(std::int64_t start, int size) const
{
    if (start < 0 || start >= evalSize() || size < 1)
        throw Error(m_file + ": held-out batch of " + std::to_string(size) + " from " +
                    std::to_string(start) + " is outside [0, " + std::to_string(evalSize()) + ")");
    const std::int64_t count = std::min<std::int64_t>(size, evalSize() - start);
    std::vector<std::int64_t> indices;
    for (std::int64_t k = 0; k < count; ++k)
        indices.push_back(m_trainSize + start + k);
    return gather(indices);
}

NliDataset::Batch NliDataset::gather(const std::vector<std::int64_t>& pairIndices) const
{
    std::vector<const Encoding*> rows;
    Batch batch;
    batch.labels = torch::empty({static_cast<std::int64_t>(pairIndices.size())}, torch::kInt64);
    auto* labels = batch.labels.data_ptr<std::int64_t>();
    for (const std::int64_t i : pairIndices) {
        rows.push_back(&m_encodings[static_cast<std::size_t>(i)]);
        *labels++ = m_labels[static_cast<std::size_t>(i)];
    }
    PaddedBertBatch input = padBertBatch(rows, m_padId);
    batch.inputIds = std::move(input.inputIds);
    batch.tokenTypeIds = std::move(input.tokenTypeIds);
    batch.attentionMask = std::move(input.attentionMask);
    return batch;
}

} // namespace outlierlens
