#pragma once
// Any thread (pure functions; syntheticBatch() mutates only the generator it is given).
//
// The synthetic "no-op" task: the live teaching demo in which a small post-LN BERT-style encoder,
// trained on CPU for minutes, should need attention heads that do nothing at most tokens.
//
// Why this task (an earlier probe of this project, reported in docs/demo-models.md): a copy task whose query
// tokens are tokens of their own was solved in a few hundred steps without outliers. There a head can stay
// weak: the query token's own embedding can be learned small, so a small attention update wins after the
// LayerNorm, and at every other position the same small update (attention spread evenly) is drowned by
// the token's own embedding. Bondarenko et al. argue that outliers appear when a head must make a
// strong update at a few tokens and exactly none at all others, and parks its attention on frequent
// tokens without information ([SEP], ".", ","), whose values it can make small. This task is built so
// that the weak-head escape does not work and such parking places exist:
//
// - Most positions must stay what they are: every content token's label is the token itself (an
//   identity, the "no-op"). Anything a head writes there can only cost loss, and cross entropy keeps
//   rewarding a cleaner residual long after the task is solved, so the pressure to do nothing never stops.
// - A few positions need a strong update. An operator token backK at position t means: the token at
//   t + 1, an ordinary content token drawn like any other, must be predicted as the content token at
//   t - k. The overridden position carries a full-strength embedding of its own token, which the update
//   must beat, so the heads that copy must write large values; at every other position those same
//   values would destroy the identity, so the heads must switch off there.
// - Spreading attention evenly is not a harmless no-op either: each sequence draws its content tokens
//   from a small random topic (topicSize of the content vocabulary), so an average over the sequence
//   pushes towards the topic's other tokens, the nearest competitors of the right answer.
// - Every sequence has tokens that carry no information and are never scored: [CLS] at position 0,
//   [SEP] at the end and delimiters ("." "," ...) at random positions (delimiterRate), like [SEP], "."
//   and "," in BERT's pre-training data. Their representations are free (no loss), so they are where
//   a no-op head can park its attention and where outliers are expected to grow.
// - Random lengths (minLength < seqLength) add [PAD] positions with attention mask 0, as in real batches.
//
// Sequence layout (length L, 0-based positions): [CLS] at 0, [SEP] at L - 1, [PAD] after it up to
// seqLength; inner positions 1 .. L - 2 are a delimiter with probability delimiterRate, else a content
// token of the sequence's topic. Operators are then placed left to right: a content position t with
// content at t + 1 (<= L - 2) becomes backK with probability operatorRate, k drawn uniformly from the
// offsets in copyOffsets whose source t - k >= 1 holds a content token (not an operator, delimiter or
// [CLS]); t + 1 cannot be an operator itself. Labels: content and operator tokens -> their own id, the
// position after an operator -> the copied id, [CLS] [SEP] delimiters [PAD] -> -100.
//
// Measured once (2026-11-22, a PyTorch mirror of this generator with the default options, one seed):
// post-LN encoder of 4 layers, d 128, 4 heads, AdamW lr 1e-3 wd 0.01 (none on biases and LayerNorm),
// batch 64. Copy accuracy 0.41 / 0.96 / 0.98 at steps 1000 / 2000 / 2500, identity accuracy 1.00
// throughout. At step 2500 the FFN-output max inf norm of layers 1..4 was 12.3, 11.8, 10.3, 1.5 with
// Pearson kurtosis 36, 41, 35, 6, and content tokens put 12%, 75%, 88%, 80% of their attention on the
// [CLS]/[SEP]/delimiter tokens, which are 13% of the positions. The copy task of the notes reached
// 3.2..3.7, kurtosis ~2.9 and 34% on its start token after 3,600 steps.
//
// With sentencePairs, a second [SEP] at a position m drawn uniformly from the middle third of 1 .. L - 2
// splits the sequence into BERT's pair format [CLS] A [SEP] B [SEP] (token type 1 from m + 1 on); the
// middle [SEP] is a free token like the others, and a copy may reach across it.
//
// With successorLabels, a content token that is not a copy target is labelled with the content token after
// it in the vocabulary (the last with the first); operators and copy targets are labelled as above.
//
// Vocabulary (ids 0 .. vocabSize - 1): [PAD] [UNK] [CLS] [SEP] [MASK] (BERT's relative order; [UNK]
// and [MASK] never occur, they are there so the vocabulary works with BertTokenizer), the delimiters,
// one backK per copy offset, then content tokens "a" .. "z", "a1" .. "z1", "a2" ... (with wordTokens,
// short English words, then the words with a number, "cat1", ...).

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens {

struct SyntheticTaskOptions
{
    int vocabSize = 64;         ///< all ids: 5 specials + delimiters + operators + content (>= 2)
    int seqLength = 64;         ///< T, tokens incl. [CLS] and [SEP] (and padding)
    int minLength = 0;          ///< shortest sequence before padding; 0 = seqLength (no padding)
    int numDelimiters = 2;      ///< delimiter token types: ".", ",", ";", ":", "!", "?", ...
    double delimiterRate = 0.1; ///< probability that an inner position is a delimiter
    double operatorRate = 0.08; ///< probability that an eligible position becomes an operator
    std::vector<int> copyOffsets = {1, 3, 7}; ///< k of each operator backK, distinct, >= 1
    int topicSize = 8;                        ///< distinct content tokens a sequence draws from; 0 = all
    /// BERT's sentence-pair layout [CLS] A [SEP] B [SEP]: a second [SEP] splits the sequence at a random
    /// point in its middle third, token type 1 after it (MNLI's premise / hypothesis format).
    bool sentencePairs = false;
    /// Content tokens named by short English words ("cat", "door", ...) instead of "a" .. "z", "a1", ...
    bool wordTokens = false;
    /// A content token's label is the next content token (cyclically) instead of itself, and a copied
    /// position's the copied token itself: what a copying head writes (a token's identity) is then wrong
    /// at every other position, so attending to its own token is no longer a harmless way to do nothing,
    /// as in Bigram-Backcopy, where a copy predicts a token and every other position its successor.
    bool successorLabels = false;

    /// Throws Error naming the option if a value is out of range: a vocabulary too small for the special
    /// tokens, delimiters and operators plus max(2, topicSize) content tokens, seqLength outside
    /// [4, 8192], minLength outside {0} and [4, seqLength], no offset, a repeated offset, an offset < 1 or
    /// one that cannot fit the shortest sequence (k > shortest length - 4), rates outside [0, 1).
    void validate() const;
    /// Number of content token types: vocabSize - 5 - numDelimiters - copyOffsets.size().
    int numContent() const;
};

/// One batch of the synthetic task; all tensors [B, T] with T = seqLength.
struct SyntheticBatch
{
    torch::Tensor inputIds;        ///< int64
    torch::Tensor attentionMask;   ///< int64, 1 for [CLS] .. [SEP], 0 for [PAD]
    torch::Tensor tokenTypeIds;    ///< int64, 0; with sentencePairs 1 after the middle [SEP]
    torch::Tensor labels;          ///< int64, -100 where no loss ([CLS], [SEP], delimiters, [PAD])
    torch::Tensor attentionNeeded; ///< bool, true at positions whose label is copied (after an operator)
};

/// Where each group of tokens sits in the vocabulary (first id and count).
struct SyntheticVocabularyLayout
{
    std::int64_t padId = 0, unkId = 1, clsId = 2, sepId = 3, maskId = 4;
    std::int64_t firstDelimiter = 5, numDelimiters = 0;
    std::int64_t firstOperator = 0, numOperators = 0; ///< operator i copies from copyOffsets[i] back
    std::int64_t firstContent = 0, numContent = 0;
};

/// Draws batchSize independent sequences (the layout above); every random choice comes from `gen`,
/// and a call consumes the same amount of it whatever the draws, so a generator seeded from (seed,
/// step) reproduces the batch of that step. Throws Error for invalid options or batchSize < 1.
SyntheticBatch syntheticBatch(const SyntheticTaskOptions& options, int batchSize, at::Generator& gen);

/// Token strings of ids 0 .. vocabSize - 1 (one line each of the run's vocab.txt), e.g. "[PAD]", ".",
/// "back3", "a". Throws Error for invalid options.
std::vector<std::string> syntheticVocabulary(const SyntheticTaskOptions& options);

/// Generated example `seed` as text: the one sequence of syntheticBatch() from a CPU generator seeded
/// with `seed` (the app's "synthetic example N"), its tokens between [CLS] and the last [SEP] joined by
/// spaces; with sentencePairs the premise and the hypothesis separated by a tab instead of the middle
/// [SEP]. A line of a model folder's sample_inputs.txt: BertTokenizer on the task's vocabulary turns it
/// back into the same ids and token types. Throws Error for invalid options.
std::string syntheticExampleText(const SyntheticTaskOptions& options, std::uint64_t seed);

/// The id ranges of the vocabulary for these options. Throws Error for invalid options.
SyntheticVocabularyLayout syntheticVocabularyLayout(const SyntheticTaskOptions& options);

} // namespace outlierlens
