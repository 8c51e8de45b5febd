#pragma once
// Any thread. A TokenBlocks is immutable after build(): one const object may be shared by several
// threads.
//
// Causal language-modelling data: a text file tokenized once with a decoder tokenizer, the token
// stream concatenated and cut into fixed-length blocks, as Hugging Face's run_clm.py (group_texts)
// and Qualcomm's outlier-free-transformers do. Inputs and labels are the same block: the model
// shifts them (position t predicts token t + 1).

#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens {

class DecoderTokenizer;

class TokenBlocks
{
public:
    /// Reads `textFile` (UTF-8, one paragraph per line; blank lines are skipped) and encodes every
    /// line as the tokenizer does by default (add_special_tokens: OPT's leading "</s>", LLaMA's "<s>").
    /// A tokenizer that adds nothing (GPT-2) gets its end-of-text token after each line instead, as
    /// GPT-2's own data preparation separates documents. The stream is cut into blocks of blockLength
    /// tokens; the remainder is dropped. maxBlocks > 0 keeps only the first maxBlocks blocks (and stops
    /// tokenizing once they are full). Lines are tokenized in parallel; the result does not depend on
    /// the number of threads. Throws Error naming the file for a missing or empty file, invalid UTF-8
    /// (with the 1-based line), blockLength < 2, or too few tokens for one block (saying how many it
    /// has and needs).
    static TokenBlocks build(const std::string& textFile, const DecoderTokenizer& tokenizer, int blockLength,
                             std::size_t maxBlocks = 0);

    /// Number of blocks N.
    std::int64_t size() const { return m_blocks.size(0); }
    /// Tokens per block T.
    int blockLength() const { return m_blockLength; }
    /// Tokens the file produced (before the remainder was dropped or maxBlocks cut it).
    std::int64_t tokenCount() const { return m_tokenCount; }
    const std::string& file() const { return m_file; }

    /// The blocks with these 0-based indices, in order: int64 [B, T]. Throws Error naming the file for
    /// an index outside [0, size()).
    torch::Tensor blocks(const std::vector<std::int64_t>& indices) const;
    /// Blocks [start, start + count): int64 [count, T].
    torch::Tensor range(std::int64_t start, std::int64_t count) const;

private:
    TokenBlocks() = default;

    std::string m_file;
    int m_blockLength = 0;
    std::int64_t m_tokenCount = 0;
    torch::Tensor m_blocks; // int64 [N, T]
};

/// Mean next-token cross entropy (natural log) of logits [B, T, V] for the ids [B, T] they were
/// computed from: position t is scored on token t + 1, so B * (T - 1) predictions. Float32 result.
torch::Tensor nextTokenCrossEntropy(const torch::Tensor& logits, const torch::Tensor& ids);

} // namespace outlierlens
