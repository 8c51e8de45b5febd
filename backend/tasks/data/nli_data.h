#pragma once
// Any thread. An NliDataset is immutable after build(): one const object may be shared by several
// threads.

#include "tasks/data/batch_indices.h"
#include "text/wordpiece.h"

#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens {

/// MNLI pairs encoded for BertForSequenceClassification ([CLS] premise [SEP] hypothesis [SEP]) with a
/// fixed split: pairs [0, trainPairs) of the file for training, [trainPairs, N) held out (the MNLI-m
/// validation set is the only MNLI data on these machines). Labels are mapped through their names
/// (goldLabelId()): entailment 0, neutral 1, contradiction 2 unless id2label says otherwise.
class NliDataset
{
public:
    /// One padded batch: inputIds, tokenTypeIds, attentionMask int64 [B, L] with L the longest pair
    /// of the batch (padding: [PAD], token type 0, mask 0), labels int64 [B].
    struct Batch
    {
        torch::Tensor inputIds, tokenTypeIds, attentionMask, labels;
    };

    /// Reads `file` with readNliPairs() (GLUE TSV or JSONL) and tokenizes every pair once, truncated to
    /// maxLength tokens (Hugging Face longest_first; 0 = no truncation). id2label[i] is the name of class
    /// i, compared case-insensitively with the file's labels (goldLabelId()); empty = nliLabelNames(). Throws
    /// Error naming the file for an unlabelled pair or a label not in id2label (0-based pair index), a
    /// trainPairs of 0 or not below the number of pairs, and the errors of readNliPairs/encode.
    static NliDataset build(const std::string& file, const BertTokenizer& tokenizer, int maxLength,
                            std::size_t trainPairs, const std::vector<std::string>& id2label);

    /// Number of training pairs (= trainPairs) and of held-out pairs (N - trainPairs).
    std::int64_t trainSize() const { return m_trainSize; }
    std::int64_t evalSize() const { return static_cast<std::int64_t>(m_labels.size()) - m_trainSize; }
    /// Class names by label id (the id2label used).
    const std::vector<std::string>& labelNames() const { return m_labelNames; }
    /// Label id of pair i (0-based over the whole file: training pairs first).
    std::int64_t label(std::int64_t i) const;

    /// Training pairs with these 0-based indices in [0, trainSize()). Throws Error for an index out of range.
    Batch trainBatch(const std::vector<std::int64_t>& indices) const;
    /// Held-out pairs start .. start + size - 1 (0-based within the held-out part), fewer at the end:
    /// min(size, evalSize() - start) rows. Throws Error if start is not in [0, evalSize()) or size < 1.
    Batch evalBatch(std::int64_t start, int size) const;

private:
    NliDataset() = default;
    Batch gather(const std::vector<std::int64_t>& pairIndices) const;

    std::string m_file;
    std::int64_t m_padId = 0;
    std::int64_t m_trainSize = 0;
    std::vector<std::string> m_labelNames;
    std::vector<Encoding> m_encodings; ///< per pair: inputIds and tokenTypeIds only
    std::vector<std::int64_t> m_labels;
};

} // namespace outlierlens
