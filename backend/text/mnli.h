#pragma once
// Any thread (plain functions, no shared state).

#include <cstddef>
#include <string>
#include <vector>

namespace outlierlens {

/// One MNLI example. label is "entailment", "neutral", "contradiction" or "" when the file has none.
struct NliPair
{
    std::string premise, hypothesis, label;
};

/// Reads MNLI sentence pairs in file order, from either format (chosen by content: the first
/// non-space byte '{' means JSONL):
/// - GLUE TSV: a header row naming the columns, which must include sentence1 and sentence2 and
///   may include gold_label; tab-separated, no quoting; rows whose gold_label is "-" are skipped.
/// - Plain pairs (a model folder's sample_inputs.txt): no header, every line "premise<TAB>hypothesis",
///   recognised by a first line of exactly two fields that are not the header's names.
/// - JSONL: one object per line with string fields "premise", "hypothesis" and optional "label"
///   (a string, or the integer ids of Hugging Face datasets: 0 entailment, 1 neutral,
///   2 contradiction, -1 unlabelled); blank lines are skipped.
/// limit is the number of pairs to return, 0 = all. Throws Error naming the file and the 1-based
/// line for a missing column, malformed JSON, invalid UTF-8 or an empty file.
std::vector<NliPair> readNliPairs(const std::string& path, std::size_t limit = 0);

/// Label names in the order of Hugging Face's MNLI label ids (0 entailment, 1 neutral, 2 contradiction).
const std::vector<std::string>& nliLabelNames();

} // namespace outlierlens
