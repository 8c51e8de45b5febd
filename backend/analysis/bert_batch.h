#pragma once
// Any thread: pure functions of their arguments. What turns tokenized sentence pairs into a BERT
// classifier's input, and MNLI gold labels into its class ids: one place for the inspection app, the
// statistics runner and NLI fine-tuning.

#include "text/wordpiece.h"

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens {

/// Input of BertNetwork::forward for B rows: int64 [B, T] each, T the longest row.
struct PaddedBertBatch
{
    torch::Tensor inputIds;      ///< row r's ids, then padId
    torch::Tensor tokenTypeIds;  ///< row r's token types, then 0
    torch::Tensor attentionMask; ///< 1 on row r's tokens, then 0
};

/// Pads encoded inputs (inputIds and tokenTypeIds of each; tokens and attentionMask are not read) on
/// the right to the longest. Row r of the batch is rows[r]. Throws Error for no rows, a null row, or a
/// row whose tokenTypeIds and inputIds differ in length.
PaddedBertBatch padBertBatch(const std::vector<const Encoding*>& rows, std::int64_t padId);

/// 0-based class id of gold label `gold` (e.g. "entailment") in a model's id2label, names compared
/// case-insensitively (checkpoints spell them "ENTAILMENT" or "entailment"); -1 when no class has
/// that name or `gold` is empty.
int goldLabelId(const std::vector<std::string>& id2label, const std::string& gold);

} // namespace outlierlens
