#include "analysis/bert_batch.h"

#include "common/error.h"

#include <torch/torch.h>

#include <algorithm>
#include <cctype>

namespace outlierlens {
namespace {

std::string lower(std::string s)
{
    for (char& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

} // namespace

PaddedBertBatch padBertBatch(const std::vector<const Encoding*>& rows, std::int64_t padId)
{
    if (rows.empty()) throw Error("a BERT batch needs at least one input");
    std::size_t longest = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
        if (!rows[r]) throw Error("BERT batch: input " + std::to_string(r) + " (0-based) is missing");
        if (rows[r]->tokenTypeIds.size() != rows[r]->inputIds.size())
            throw Error("BERT batch: input " + std::to_string(r) + " (0-based) has " +
                        std::to_string(rows[r]->inputIds.size()) + " token ids but " +
                        std::to_string(rows[r]->tokenTypeIds.size()) + " token types");
        longest = std::max(longest, rows[r]->inputIds.size());
    }
    const auto B = static_cast<std::int64_t>(rows.size());
    const auto T = static_cast<std::int64_t>(longest);
    PaddedBertBatch batch;
    batch.inputIds = torch::full({B, T}, padId, torch::kInt64);
    batch.tokenTypeIds = torch::zeros({B, T}, torch::kInt64);
    batch.attentionMask = torch::zeros({B, T}, torch::kInt64);
    auto* ids = batch.inputIds.data_ptr<std::int64_t>();
    auto* types = batch.tokenTypeIds.data_ptr<std::int64_t>();
    auto* mask = batch.attentionMask.data_ptr<std::int64_t>();
    for (std::int64_t r = 0; r < B; ++r) {
        const Encoding& e = *rows[static_cast<std::size_t>(r)];
        std::copy(e.inputIds.begin(), e.inputIds.end(), ids + r * T);
        std::copy(e.tokenTypeIds.begin(), e.tokenTypeIds.end(), types + r * T);
        std::fill_n(mask + r * T, e.inputIds.size(), std::int64_t(1));
    }
    return batch;
}

int goldLabelId(const std::vector<std::string>& id2label, const std::string& gold)
{
    if (gold.empty()) return -1;
    const std::string wanted = lower(gold);
    for (std::size_t i = 0; i < id2label.size(); ++i)
        if (lower(id2label[i]) == wanted) return static_cast<int>(i);
    return -1;
}

} // namespace outlierlens
