#include "tasks/data/synthetic_data.h"

#include "common/error.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <numeric>

namespace outlierlens {
namespace {

constexpr std::int64_t kIgnoreIndex = -100;
constexpr int kNumSpecial = 5;
constexpr int kMaxVocab = 1 << 20;
constexpr int kMaxSeqLength = 8192;

std::string optionError(const std::string& what)
{
    return "synthetic task: " + what;
}

std::string delimiterName(int i)
{
    static const char* const names[] = {".", ",", ";", ":", "!", "?", "-", "/"};
    return i < 8 ? names[i] : "[DELIM" + std::to_string(i) + "]";
}

std::string contentName(int i, bool words)
{
    if (!words) {
        const std::string letter(1, static_cast<char>('a' + i % 26));
        return i < 26 ? letter : letter + std::to_string(i / 26);
    }
    // Short, common, distinct English words (none is a delimiter, an operator or a special token).
    static const char* const names[] = {
        "cat",  "dog",   "sun",  "tree", "house", "road",  "book",  "door", "fish", "bird", "rain",
        "city", "river", "hand", "boat", "milk",  "bread", "stone", "wind", "fire", "snow", "ship",
        "king", "lamp",  "song", "wall", "field", "horse", "glass", "coat", "hill", "moon", "star",
        "car",  "shoe",  "box",  "bed",  "cup",   "key",   "map",   "pen",  "hat",  "egg",  "bell",
        "farm", "gold",  "lake", "leaf", "rock",  "sand",  "salt",  "sea",  "tea",  "town"};
    constexpr int n = static_cast<int>(sizeof(names) / sizeof(names[0]));
    return i < n ? std::string(names[i]) : std::string(names[i % n]) + std::to_string(i / n);
}

// floor(u * n) for u in [0, 1), clamped against rounding.
int pick(double u, int n)
{
    return std::min(n - 1, static_cast<int>(u * n));
}

} // namespace

int SyntheticTaskOptions::numContent() const
{
    return vocabSize - kNumSpecial - numDelimiters - static_cast<int>(copyOffsets.size());
}

void SyntheticTaskOptions::validate() const
{
    if (vocabSize < 1 || vocabSize > kMaxVocab)
        throw Error(optionError("vocabSize must be in [1, " + std::to_string(kMaxVocab) + "], got " +
                                std::to_string(vocabSize)));
    if (seqLength < 4 || seqLength > kMaxSeqLength)
        throw Error(optionError("seqLength must be in [4, " + std::to_string(kMaxSeqLength) + "], got " +
                                std::to_string(seqLength)));
    if (minLength != 0 && (minLength < 4 || minLength > seqLength))
        throw Error(optionError("minLength must be 0 (= seqLength) or in [4, seqLength = " +
                                std::to_string(seqLength) + "], got " + std::to_string(minLength)));
    if (numDelimiters < 1)
        throw Error(
            optionError("numDelimiters must be at least 1 (the no-op heads need a place to park), got " +
                        std::to_string(numDelimiters)));
    if (!(delimiterRate >= 0.0 && delimiterRate < 1.0))
        throw Error(optionError("delimiterRate must be in [0, 1), got " + std::to_string(delimiterRate)));
    if (!(operatorRate >= 0.0 && operatorRate < 1.0))
        throw Error(optionError("operatorRate must be in [0, 1), got " + std::to_string(operatorRate)));
    if (copyOffsets.empty()) throw Error(optionError("copyOffsets must name at least one offset"));
    const int shortest = minLength == 0 ? seqLength : minLength;
    for (std::size_t i = 0; i < copyOffsets.size(); ++i) {
        const int k = copyOffsets[i];
        if (k < 1 || k > shortest - 4)
            throw Error(optionError("copy offset " + std::to_string(k) + " must be in [1, " +
                                    std::to_string(shortest - 4) + "] (shortest sequence " +
                                    std::to_string(shortest) +
                                    " minus [CLS], [SEP], the operator and its target)"));
        if (std::find(copyOffsets.begin(), copyOffsets.begin() + static_cast<std::ptrdiff_t>(i), k) !=
            copyOffsets.begin() + static_cast<std::ptrdiff_t>(i))
            throw Error(optionError("copy offset " + std::to_string(k) + " is listed twice"));
    }
    if (topicSize < 0)
        throw Error(optionError("topicSize must be 0 (all) or positive, got " + std::to_string(topicSize)));
    const int needed = std::max(2, topicSize);
    if (numContent() < needed)
        throw Error(optionError(
            "vocabSize " + std::to_string(vocabSize) + " leaves " + std::to_string(numContent()) +
            " content tokens after " + std::to_string(kNumSpecial) + " special tokens, " +
            std::to_string(numDelimiters) + " delimiters and " + std::to_string(copyOffsets.size()) +
            " operators; at least " + std::to_string(needed) + " are needed"));
}

SyntheticVocabularyLayout syntheticVocabularyLayout(const SyntheticTaskOptions& options)
{
    options.validate();
    SyntheticVocabularyLayout layout;
    layout.firstDelimiter = kNumSpecial;
    layout.numDelimiters = options.numDelimiters;
    layout.firstOperator = layout.firstDelimiter + layout.numDelimiters;
    layout.numOperators = static_cast<std::int64_t>(options.copyOffsets.size());
    layout.firstContent = layout.firstOperator + layout.numOperators;
    layout.numContent = options.numContent();
    return layout;
}

std::vector<std::string> syntheticVocabulary(const SyntheticTaskOptions& options)
{
    const SyntheticVocabularyLayout layout = syntheticVocabularyLayout(options);
    std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (int i = 0; i < layout.numDelimiters; ++i)
        vocab.push_back(delimiterName(i));
    for (const int k : options.copyOffsets)
        vocab.push_back("back" + std::to_string(k)); // a plain word, so BertTokenizer keeps it whole
    for (int i = 0; i < layout.numContent; ++i)
        vocab.push_back(contentName(i, options.wordTokens));
    return vocab;
}

SyntheticBatch syntheticBatch(const SyntheticTaskOptions& options, int batchSize, at::Generator& gen)
{
    const SyntheticVocabularyLayout layout = syntheticVocabularyLayout(options);
    if (batchSize < 1)
        throw Error(optionError("batch size must be at least 1, got " + std::to_string(batchSize)));
    const int t = options.seqLength;
    const int minLength = options.minLength == 0 ? t : options.minLength;
    const int numContent = static_cast<int>(layout.numContent);
    const int topic = options.topicSize == 0 ? numContent : options.topicSize;
    const int numOffsets = static_cast<int>(options.copyOffsets.size());
    const std::int64_t b = batchSize;

    // All draws up front, a fixed number per call: lengths, topics, and four per position.
    const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
    const torch::Tensor lengthU = torch::rand({b}, gen, f64);
    const torch::Tensor topicU = torch::rand({b, numContent}, gen, f64);
    const torch::Tensor positionU = torch::rand({b, t, 4}, gen, f64);
    const torch::Tensor splitU = options.sentencePairs ? torch::rand({b}, gen, f64) : torch::Tensor();
    const auto* lu = lengthU.data_ptr<double>();
    const auto* tu = topicU.data_ptr<double>();
    const auto* pu = positionU.data_ptr<double>();

    SyntheticBatch batch;
    batch.inputIds = torch::full({b, t}, layout.padId, torch::kInt64);
    batch.attentionMask = torch::zeros({b, t}, torch::kInt64);
    batch.tokenTypeIds = torch::zeros({b, t}, torch::kInt64);
    batch.labels = torch::full({b, t}, kIgnoreIndex, torch::kInt64);
    batch.attentionNeeded = torch::zeros({b, t}, torch::kBool);
    auto* ids = batch.inputIds.data_ptr<std::int64_t>();
    auto* mask = batch.attentionMask.data_ptr<std::int64_t>();
    auto* types = batch.tokenTypeIds.data_ptr<std::int64_t>();
    auto* labels = batch.labels.data_ptr<std::int64_t>();
    auto* needed = batch.attentionNeeded.data_ptr<bool>();

    const auto isContent = [&](std::int64_t id) { return id >= layout.firstContent; };
    std::vector<int> perm(static_cast<std::size_t>(numContent));
    std::vector<int> validOffsets;
    std::vector<int> copiedFrom(static_cast<std::size_t>(t));
    for (std::int64_t s = 0; s < b; ++s) {
        std::int64_t* row = ids + s * t;
        std::int64_t* rowLabels = labels + s * t;
        bool* rowNeeded = needed + s * t;
        const double* u = pu + s * t * 4;
        const int length = minLength + pick(lu[s], t - minLength + 1);

        // The topic: the first `topic` entries of a partial Fisher-Yates shuffle of the content tokens.
        std::iota(perm.begin(), perm.end(), 0);
        for (int j = 0; j < topic; ++j)
            std::swap(perm[static_cast<std::size_t>(j)],
                      perm[static_cast<std::size_t>(j + pick(tu[s * numContent + j], numContent - j))]);

        row[0] = layout.clsId;
        row[length - 1] = layout.sepId;
        for (int i = 1; i < length - 1; ++i) {
            const double* ui = u + i * 4;
            row[i] = ui[0] < options.delimiterRate
                         ? layout.firstDelimiter + pick(ui[1], options.numDelimiters)
                         : layout.firstContent + perm[static_cast<std::size_t>(pick(ui[1], topic))];
        }
        std::fill(mask + s * t, mask + s * t + length, 1);
        if (options.sentencePairs) {
            // The middle [SEP]: uniform over the middle third of the inner positions 1 .. length - 2.
            const int inner = length - 2;
            const int first = 1 + inner / 3;
            const int last = std::max(first, inner - inner / 3);
            const int m = first + pick(splitU.data_ptr<double>()[s], last - first + 1);
            row[m] = layout.sepId;
            std::fill(types + s * t + m + 1, types + s * t + length, 1);
        }

        // Operators, left to right; a target position (after an operator) is never an operator itself.
        std::fill(copiedFrom.begin(), copiedFrom.end(), -1);
        for (int i = 2; i + 1 <= length - 2; ++i) {
            const double* ui = u + i * 4;
            if (!isContent(row[i]) || !isContent(row[i + 1]) || ui[2] >= options.operatorRate) continue;
            validOffsets.clear();
            for (int o = 0; o < numOffsets; ++o) {
                const int source = i - options.copyOffsets[static_cast<std::size_t>(o)];
                if (source >= 1 && isContent(row[source])) validOffsets.push_back(o);
            }
            if (validOffsets.empty()) continue;
            const int o =
                validOffsets[static_cast<std::size_t>(pick(ui[3], static_cast<int>(validOffsets.size())))];
            row[i] = layout.firstOperator + o;
            copiedFrom[static_cast<std::size_t>(i + 1)] =
                i - options.copyOffsets[static_cast<std::size_t>(o)];
            ++i; // the target cannot be an operator
        }

        // Labels: the copied token after an operator, the token itself for content and operators,
        // nothing for [CLS], [SEP], delimiters and padding.
        for (int i = 1; i < length - 1; ++i) {
            const int source = copiedFrom[static_cast<std::size_t>(i)];
            if (source >= 0) {
                rowLabels[i] = row[source];
                rowNeeded[i] = true;
            } else if (options.successorLabels && isContent(row[i])) {
                rowLabels[i] = layout.firstContent + (row[i] - layout.firstContent + 1) % layout.numContent;
            } else if (row[i] >= layout.firstOperator) {
                rowLabels[i] = row[i];
            }
        }
    }
    return batch;
}

std::string syntheticExampleText(const SyntheticTaskOptions& options, std::uint64_t seed)
{
    const std::vector<std::string> vocab = syntheticVocabulary(options);
    const SyntheticVocabularyLayout layout = syntheticVocabularyLayout(options);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const SyntheticBatch b = syntheticBatch(options, 1, gen);
    const std::int64_t length = b.attentionMask.sum().item<std::int64_t>();
    const auto* ids = b.inputIds.data_ptr<std::int64_t>();
    std::string text;
    for (std::int64_t i = 1; i + 1 < length; ++i) {
        if (ids[i] == layout.sepId) { // the middle [SEP] of a pair
            text += '\t';
            continue;
        }
        if (!text.empty() && text.back() != '\t') text += ' ';
        text += vocab[std::size_t(ids[i])];
    }
    return text;
}

} // namespace outlierlens
