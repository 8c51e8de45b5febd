#pragma once
// Any thread. A PackedCorpus is immutable after build(): one const object may be shared by several
// threads. maskForMlm() mutates only the generator it is given (one generator per thread).
//
// Masked-LM pre-training data: a text file tokenized once and packed into fixed-length sequences,
// and BERT's 80/10/10 masking drawn from an explicit generator so that a resumed run masks exactly
// as the uninterrupted run would have.

#include "tasks/data/batch_indices.h"
#include "text/wordpiece.h"

#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens {

/// A text file tokenized once and packed into sequences of seqLength tokens: [CLS] + (seqLength - 2)
/// corpus tokens + [SEP], taken consecutively from the concatenated token stream (Hugging Face
/// run_mlm's group_texts, with the special tokens added per block); the remainder is dropped. Blank
/// lines separate documents, but packing runs across them as run_mlm does.
class PackedCorpus
{
public:
    /// Reads and tokenizes `textFile` (UTF-8, one paragraph per line; lines are tokenized in parallel
    /// on all cores). maxSequences > 0 keeps only the first maxSequences sequences (and stops
    /// tokenizing once they are full). Throws Error naming the file for a missing or empty file,
    /// invalid UTF-8 (with the 1-based line), seqLength < 3, or too few tokens for one sequence
    /// (saying how many it has and needs).
    static PackedCorpus build(const std::string& textFile, const BertTokenizer& tokenizer, int seqLength,
                              std::size_t maxSequences = 0);

    /// Number of packed sequences N.
    std::int64_t size() const { return m_sequences.size(0); }
    /// Tokens per sequence T, including [CLS] and [SEP].
    int seqLength() const { return m_seqLength; }
    /// Corpus tokens the file produced (before packing dropped the remainder or maxSequences cut it).
    std::int64_t tokenCount() const { return m_tokenCount; }
    /// The file the corpus was read from (for messages).
    const std::string& file() const { return m_file; }

    /// The sequences with these 0-based indices, in order: int64 [B, T] (B = indices.size()).
    /// Throws Error naming the file for an index outside [0, size()).
    torch::Tensor sequences(const std::vector<std::int64_t>& indices) const;

    /// Throws Error naming the file, its token count and the tokens needed if the corpus holds fewer
    /// than `count` sequences; `what` says what they are for ("one batch of 32").
    void requireSequences(std::int64_t count, const std::string& what) const;

private:
    PackedCorpus() = default;

    std::string m_file;
    int m_seqLength = 0;
    std::int64_t m_tokenCount = 0;
    torch::Tensor m_sequences; // int64 [N, T]
};

/// A masked-LM batch; all tensors int64 [B, T].
struct MlmBatch
{
    torch::Tensor inputIds;      ///< after masking
    torch::Tensor tokenTypeIds;  ///< all 0
    torch::Tensor attentionMask; ///< 1, and 0 where the input is [PAD]
    torch::Tensor labels;        ///< the original id at selected positions, -100 elsewhere
};

/// BERT's masking (Hugging Face DataCollatorForLanguageModeling) of ids int64 [B, T]: each position
/// whose token is not special ([PAD], [UNK], [CLS], [SEP], [MASK]) is selected independently with
/// probability p (a sequence may end up with none); a selected position becomes [MASK] with
/// probability 0.8, a uniformly random non-special vocabulary id with probability 0.1, and stays
/// unchanged otherwise. Every draw comes from `gen`. Throws Error if ids is not a 2-D int64 CPU
/// tensor with values in [0, vocabSize), or p is not in (0, 1].
MlmBatch maskForMlm(const torch::Tensor& ids, const BertTokenizer& tokenizer, double p, at::Generator& gen);

} // namespace outlierlens
