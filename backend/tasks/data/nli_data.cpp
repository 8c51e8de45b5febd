#include "tasks/data/nli_data.h"

#include "common/error.h"
#include "text/mnli.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace outlierlens {
namespace {

std::string lower(std::string s)
{
    for (char& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

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

    std::vector<std::string> lowered;
    for (const std::string& name : data.m_labelNames)
        lowered.push_back(lower(name));
    data.m_inputIds.reserve(pairs.size());
    data.m_tokenTypeIds.reserve(pairs.size());
    data.m_labels.reserve(pairs.size());
    for (std::size_t i = 0; i < pairs.size(); ++i) {
        const NliPair& pair = pairs[i];
        if (pair.label.empty())
            throw Error(file + ": pair " + std::to_string(i) +
                        " (0-based) has no label; fine-tuning needs labelled pairs");
        const auto it = std::find(lowered.begin(), lowered.end(), lower(pair.label));
        if (it == lowered.end())
            throw Error(file + ": pair " + std::to_string(i) + " (0-based) has label '" + pair.label +
                        "', which is not in id2label (" + joined(data.m_labelNames) + ")");
        Encoding e;
        try {
            e = tokenizer.encode(pair.premise, pair.hypothesis, maxLength);
        } catch (const Error& err) {
            throw Error(file + ": pair " + std::to_string(i) + " (0-based): " + err.what());
        }
        data.m_inputIds.push_back(std::move(e.inputIds));
        data.m_tokenTypeIds.push_back(std::move(e.tokenTypeIds));
        data.m_labels.push_back(it - lowered.begin());
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
    const auto b = static_cast<std::int64_t>(pairIndices.size());
    std::size_t longest = 0;
    for (const std::int64_t i : pairIndices)
        longest = std::max(longest, m_inputIds[static_cast<std::size_t>(i)].size());
    const auto l = static_cast<std::int64_t>(longest);
    Batch batch;
    batch.inputIds = torch::full({b, l}, m_padId, torch::kInt64);
    batch.tokenTypeIds = torch::zeros({b, l}, torch::kInt64);
    batch.attentionMask = torch::zeros({b, l}, torch::kInt64);
    batch.labels = torch::empty({b}, torch::kInt64);
    auto* ids = batch.inputIds.data_ptr<std::int64_t>();
    auto* types = batch.tokenTypeIds.data_ptr<std::int64_t>();
    auto* mask = batch.attentionMask.data_ptr<std::int64_t>();
    auto* labels = batch.labels.data_ptr<std::int64_t>();
    for (std::int64_t r = 0; r < b; ++r) {
        const auto i = static_cast<std::size_t>(pairIndices[static_cast<std::size_t>(r)]);
        const std::vector<std::int64_t>& src = m_inputIds[i];
        std::memcpy(ids + r * l, src.data(), src.size() * sizeof(std::int64_t));
        std::memcpy(types + r * l, m_tokenTypeIds[i].data(), src.size() * sizeof(std::int64_t));
        std::fill(mask + r * l, mask + r * l + static_cast<std::int64_t>(src.size()), 1);
        labels[r] = m_labels[i];
    }
    return batch;
}

} // namespace outlierlens
