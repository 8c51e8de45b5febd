#pragma once
// Any thread. A BigramBackcopy is immutable after build(): one const object may be shared by threads.
//
// The Bigram-Backcopy task of Guo et al. 2024 ("Active-dormant attention heads"): character sequences
// drawn from a bigram chain estimated from a text; after one of the most frequent characters (the
// triggers) the next character is not drawn but copies the character before the trigger. Attention is
// needed only right after a trigger; everywhere else the best a head can do is nothing, which small
// causal transformers learn by parking their attention on the first token (BOS) and growing a huge
// activation there: the mechanism of Bondarenko et al. 2023 in minutes of training
// (../docs/demo-models.md).

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens {

class DecoderTokenizer;

class BigramBackcopy
{
public:
    /// Estimates the chain from `textFile` (UTF-8; the counts run over bytes inside each line): the
    /// `alphabet` most frequent printable ASCII characters (ties by code) are the states, the
    /// `triggers` most frequent of them the triggers; bigram counts between alphabet characters
    /// inside a line, plus 1e-3 each, give the transition rows, and the character counts the first
    /// character's distribution. Sequences have `length` tokens: the tokenizer's BOS, then
    /// length - 1 characters, each of which must be exactly one token of `tokenizer` (a byte-level
    /// tokenizer without merges, such as sample_data/tokenizers/bytes). Throws Error naming the file
    /// or the tokenizer for: length < 4, alphabet < triggers + 1 or > 95, triggers < 1, a text with fewer
    /// than `alphabet` distinct characters, a tokenizer without BOS or one that splits or merges
    /// characters.
    static BigramBackcopy build(const std::string& textFile, const DecoderTokenizer& tokenizer, int length,
                                int alphabet = 63, int triggers = 3);

    /// `count` sequences, int64 [count, length] token ids, a pure function of (seed, index): sequence
    /// i of call (seed, index) is the same on every machine and run (exact resume, fixed held-out
    /// sets). Position 0 is BOS; position t >= 3 after a trigger copies position t - 2.
    torch::Tensor sample(std::uint64_t seed, std::int64_t index, int count) const;

    /// The characters of a row of sample() (BOS left out): the text that the tokenizer turns back
    /// into the same ids.
    std::string text(const torch::Tensor& row) const;

    int length() const { return m_length; }
    /// The alphabet's characters, most frequent first; the first triggers() are the triggers.
    const std::string& alphabet() const { return m_chars; }
    int triggers() const { return m_triggers; }
    /// Token ids of the triggers.
    std::vector<std::int64_t> triggerIds() const;
    const std::string& file() const { return m_file; }

private:
    BigramBackcopy() = default;
    /// Draws a state from row `from` (m_chars.size() = the first-character row).
    int draw(int from, double u) const;

    std::string m_file;
    int m_length = 0;
    int m_triggers = 0;
    std::string m_chars;             // alphabet, most frequent first
    std::vector<std::int64_t> m_ids; // token id of each alphabet character
    std::int64_t m_bos = -1;
    std::vector<std::vector<double>> m_cumulative; // [alphabet + 1][alphabet]: row alphabet = first char
};

} // namespace outlierlens
