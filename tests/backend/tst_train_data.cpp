// Training data pipelines: packed masked-LM corpus and BERT masking, batch order, MNLI split, Fashion-MNIST
// IDX files (hand-made gzipped ones and, when installed, Debian's), image folders, augmentation and the
// canvas task. The synthetic no-op task: tst_synthetic_data.

#include "common/error.h"
#include "io/image.h"
#include "tasks/data/batch_indices.h"
#include "tasks/data/canvas_data.h"
#include "tasks/data/image_data.h"
#include "tasks/data/mlm_data.h"
#include "tasks/data/nli_data.h"
#include "text/mnli.h"
#include "text/wordpiece.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace outlierlens;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = std::string(OUTLIERLENS_TEST_DATA) + "/train/data/";
const std::string kTinyCorpus = kFixtures + "tiny_corpus.txt";
const std::string kTinyVocab = kFixtures + "tiny_vocab.txt";
const std::string kBertVocab = std::string(OUTLIERLENS_SOURCE_DIR) + "/sample_data/bert/vocab.txt";
const std::string kMnli = std::string(OUTLIERLENS_SOURCE_DIR) + "/sample_data/mnli/mnli_dev_matched.jsonl";
const std::string kImages = std::string(OUTLIERLENS_TEST_DATA) + "/images/";

at::Generator generator(std::uint64_t seed)
{
    return at::make_generator<at::CPUGeneratorImpl>(seed);
}

template<typename Fn>
QString errorOf(Fn fn)
{
    try {
        fn();
    } catch (const Error& e) {
        return QString::fromStdString(e.what());
    }
    return {};
}

#define VERIFY_ERROR(call, ...)                                                                              \
    do {                                                                                                     \
        const QString msg_ = errorOf([&] { call; });                                                         \
        QVERIFY2(!msg_.isEmpty(), "no error thrown by " #call);                                              \
        QVERIFY2(!msg_.contains('\n'), qPrintable(msg_));                                                    \
        for (const char* part_ : {__VA_ARGS__})                                                              \
            QVERIFY2(msg_.contains(QString::fromUtf8(part_)),                                                \
                     qPrintable(QStringLiteral("'%1' lacks '%2'").arg(msg_, QString::fromUtf8(part_))));     \
    } while (false)

std::vector<std::int64_t> row(const torch::Tensor& t, std::int64_t r)
{
    const torch::Tensor c = t[r].contiguous();
    return std::vector<std::int64_t>(c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel());
}

void writeBytes(const std::string& path, const std::string& bytes)
{
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// gzip (RFC 1952) with stored deflate blocks: written here without zlib, so the reader is checked
// against an independent writer.
std::uint32_t crc32(const std::string& data)
{
    std::uint32_t crc = 0xFFFFFFFFu;
    for (const char ch : data) {
        crc ^= static_cast<std::uint8_t>(ch);
        for (int k = 0; k < 8; ++k)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

void putLe(std::string& out, std::uint32_t v, int bytes)
{
    for (int i = 0; i < bytes; ++i)
        out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

std::string gzipStored(const std::string& raw)
{
    const unsigned char header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
    std::string out(reinterpret_cast<const char*>(header), 10);
    std::size_t pos = 0;
    do {
        const std::size_t n = std::min<std::size_t>(65535, raw.size() - pos);
        out.push_back(pos + n == raw.size() ? 1 : 0);
        putLe(out, static_cast<std::uint32_t>(n), 2);
        putLe(out, static_cast<std::uint32_t>(~n & 0xFFFF), 2);
        out.append(raw, pos, n);
        pos += n;
    } while (pos < raw.size());
    putLe(out, crc32(raw), 4);
    putLe(out, static_cast<std::uint32_t>(raw.size()), 4);
    return out;
}

void putBe(std::string& out, std::uint32_t v)
{
    for (int i = 3; i >= 0; --i)
        out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

std::string idxImages(std::uint32_t magic, std::uint32_t count, std::uint32_t rows, std::uint32_t cols,
                      const std::string& pixels)
{
    std::string out;
    putBe(out, magic);
    putBe(out, count);
    putBe(out, rows);
    putBe(out, cols);
    return out + pixels;
}

std::string idxLabels(std::uint32_t magic, const std::string& labels)
{
    std::string out;
    putBe(out, magic);
    putBe(out, static_cast<std::uint32_t>(labels.size()));
    return out + labels;
}

// n random 28 x 28 images with pixel values 1..255 and labels i % 10.
void makeImages(std::uint32_t n, std::uint32_t side, std::string& pixels, std::string& labels)
{
    std::mt19937 rng(1234);
    pixels.resize(std::size_t(n) * side * side);
    for (char& c : pixels)
        c = static_cast<char>(1 + rng() % 255);
    labels.resize(n);
    for (std::uint32_t i = 0; i < n; ++i)
        labels[i] = static_cast<char>(i % 10);
}

// Writes the train-* pair of a fake Fashion-MNIST into dir.
void writeFashion(const QString& dir, const std::string& images, const std::string& labels, bool gzip = true)
{
    const std::string base = dir.toStdString() + "/";
    writeBytes(base + "train-images-idx3-ubyte" + (gzip ? ".gz" : ""), gzip ? gzipStored(images) : images);
    writeBytes(base + "train-labels-idx1-ubyte" + (gzip ? ".gz" : ""), gzip ? gzipStored(labels) : labels);
}

// Reference tokenization of a text file: every non-blank line through the tokenizer, concatenated.
std::vector<std::int64_t> referenceStream(const std::string& path, const BertTokenizer& tokenizer)
{
    std::ifstream in(path);
    std::string line;
    std::vector<std::int64_t> ids;
    while (std::getline(in, line)) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        for (const std::string& token : tokenizer.tokenize(line))
            ids.push_back(tokenizer.tokenToId(token));
    }
    return ids;
}

} // namespace

class TstTrainData : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    // ----------------------------------------------------------------------------------------------
    // Packed masked-LM corpus

    void packing()
    {
        const BertTokenizer tok = BertTokenizer::fromVocabFile(kTinyVocab);
        // the cat sat on the mat . | the dog ran . | a cat run ##s .  = 16 tokens, blank line ignored
        const PackedCorpus corpus = PackedCorpus::build(kTinyCorpus, tok, 7);
        QCOMPARE(corpus.tokenCount(), std::int64_t(16));
        QCOMPARE(corpus.size(), std::int64_t(3)); // 3 x 5 tokens, the final "." dropped
        QCOMPARE(corpus.seqLength(), 7);
        const torch::Tensor all = corpus.sequences({0, 1, 2});
        QCOMPARE(all.scalar_type(), torch::kInt64);
        QCOMPARE(all.sizes().vec(), (std::vector<std::int64_t>{3, 7}));
        QCOMPARE(row(all, 0), (std::vector<std::int64_t>{2, 5, 6, 7, 8, 5, 3}));
        QCOMPARE(row(all, 1), (std::vector<std::int64_t>{2, 9, 10, 5, 11, 12, 3}));
        QCOMPARE(row(all, 2), (std::vector<std::int64_t>{2, 10, 13, 6, 14, 15, 3}));
        QCOMPARE(row(corpus.sequences({2, 0}), 0), row(all, 2));

        // Exactly one sequence when the body takes all 16 tokens; maxSequences cuts.
        QCOMPARE(PackedCorpus::build(kTinyCorpus, tok, 18).size(), std::int64_t(1));
        const PackedCorpus two = PackedCorpus::build(kTinyCorpus, tok, 4, 2);
        QCOMPARE(two.size(), std::int64_t(2));
        QCOMPARE(row(two.sequences({1}), 0), (std::vector<std::int64_t>{2, 7, 8, 3}));
    }

    void packingLargeFileMatchesLineByLine()
    {
        // More than one 256 KB chunk, so several threads tokenize; the result must not depend on that.
        const BertTokenizer tok = BertTokenizer::fromVocabFile(kBertVocab);
        QTemporaryDir dir;
        const std::string path = dir.filePath("big.txt").toStdString();
        {
            std::ofstream out(path);
            std::mt19937 rng(7);
            const char* words[] = {"anarchism", "political",    "philosophy", "the",         "of",    "state",
                                   "Zürich",    "unbelievable", "1848",       "(sometimes)", "naïve", "x"};
            for (int line = 0; line < 12000; ++line) {
                if (line % 50 == 49) {
                    out << "\n";
                    continue;
                }
                for (int w = 0; w < 8; ++w)
                    out << words[rng() % 12] << (w == 7 ? ".\n" : " ");
            }
        }
        QVERIFY(fs::file_size(path) > 600'000);
        const std::vector<std::int64_t> expected = referenceStream(path, tok);
        const PackedCorpus corpus = PackedCorpus::build(path, tok, 128);
        QCOMPARE(corpus.tokenCount(), static_cast<std::int64_t>(expected.size()));
        QCOMPARE(corpus.size(), static_cast<std::int64_t>(expected.size() / 126));
        for (const std::int64_t s : {std::int64_t(0), corpus.size() / 2, corpus.size() - 1}) {
            const std::vector<std::int64_t> r = row(corpus.sequences({s}), 0);
            QCOMPARE(r.front(), tok.clsId());
            QCOMPARE(r.back(), tok.sepId());
            QVERIFY(std::equal(r.begin() + 1, r.end() - 1, expected.begin() + s * 126));
        }
        // maxSequences gives a prefix of the full corpus.
        const PackedCorpus prefix = PackedCorpus::build(path, tok, 128, 10);
        QCOMPARE(prefix.size(), std::int64_t(10));
        std::vector<std::int64_t> idx(10);
        std::iota(idx.begin(), idx.end(), 0);
        QVERIFY(torch::equal(prefix.sequences(idx), corpus.sequences(idx)));
    }

    void corpusErrors()
    {
        const BertTokenizer tok = BertTokenizer::fromVocabFile(kTinyVocab);
        VERIFY_ERROR(PackedCorpus::build(kFixtures + "no_such.txt", tok, 8), "no_such.txt", "cannot open");
        VERIFY_ERROR(PackedCorpus::build(kFixtures + "blank_corpus.txt", tok, 8), "blank_corpus.txt",
                     "empty");
        VERIFY_ERROR(PackedCorpus::build(kTinyCorpus, tok, 19), "tiny_corpus.txt", "has 16 tokens",
                     "needs 17");
        VERIFY_ERROR(PackedCorpus::build(kTinyCorpus, tok, 2), "at least 3");
        QTemporaryDir dir;
        const std::string empty = dir.filePath("empty.txt").toStdString();
        writeBytes(empty, "");
        VERIFY_ERROR(PackedCorpus::build(empty, tok, 8), "empty.txt", "empty");
        const std::string badUtf8 = dir.filePath("bad.txt").toStdString();
        writeBytes(badUtf8, "the cat\nthe \xff dog\n");
        VERIFY_ERROR(PackedCorpus::build(badUtf8, tok, 4), "bad.txt:2:", "UTF-8");

        const PackedCorpus corpus = PackedCorpus::build(kTinyCorpus, tok, 7);
        VERIFY_ERROR(corpus.sequences({3}), "tiny_corpus.txt", "index 3", "[0, 3)");
        VERIFY_ERROR(corpus.sequences({-1}), "index -1");
        corpus.requireSequences(3, "one batch of 3");
        VERIFY_ERROR(corpus.requireSequences(4, "one batch of 4"), "tiny_corpus.txt", "has 16 tokens",
                     "one batch of 4", "20 tokens");
    }

    // ----------------------------------------------------------------------------------------------
    // BERT masking

    void maskingStatistics()
    {
        const BertTokenizer tok = BertTokenizer::fromVocabFile(kBertVocab);
        const std::int64_t b = 200, t = 128;
        std::mt19937 rng(3);
        torch::Tensor ids = torch::empty({b, t}, torch::kInt64);
        auto* p = ids.data_ptr<std::int64_t>();
        for (std::int64_t i = 0; i < b * t; ++i)
            p[i] = 1000 + std::int64_t(rng() % 29000);
        ids.select(1, 0).fill_(tok.clsId());
        ids.select(1, 5).fill_(tok.unkId());
        ids.select(1, 6).fill_(tok.maskId());
        ids.select(1, t - 7).fill_(tok.sepId());
        ids.slice(1, t - 6).fill_(tok.padId());
        const torch::Tensor special = ids.eq(tok.clsId()) | ids.eq(tok.sepId()) | ids.eq(tok.padId()) |
                                      ids.eq(tok.unkId()) | ids.eq(tok.maskId());
        const double candidates = double((~special).sum().item<std::int64_t>());
        QCOMPARE(candidates, double(b * (t - 10)));

        const double prob = 0.15;
        at::Generator gen = generator(42);
        const MlmBatch m = maskForMlm(ids, tok, prob, gen);
        QCOMPARE(m.inputIds.sizes(), ids.sizes());
        QVERIFY(torch::equal(m.tokenTypeIds, torch::zeros_like(ids)));
        QVERIFY(torch::equal(m.attentionMask, ids.ne(tok.padId()).to(torch::kInt64)));

        const torch::Tensor selected = m.labels.ne(-100);
        const double n = double(selected.sum().item<std::int64_t>());
        const double sd = std::sqrt(candidates * prob * (1 - prob));
        QVERIFY2(std::abs(n - candidates * prob) < 5 * sd,
                 qPrintable(QStringLiteral("selected %1 of %2").arg(n).arg(candidates)));
        QVERIFY(!(selected & special).any().item<bool>()); // specials never
        QVERIFY(
            torch::equal(m.labels.masked_select(selected), ids.masked_select(selected))); // labels = original
        QVERIFY(torch::equal(m.inputIds.masked_select(~selected), ids.masked_select(~selected)));

        const torch::Tensor masked = selected & m.inputIds.eq(tok.maskId());
        const torch::Tensor unchanged = selected & m.inputIds.eq(ids);
        const torch::Tensor random = selected & ~masked & ~unchanged;
        const auto share = [&](const torch::Tensor& x, double expected) {
            const double k = double(x.sum().item<std::int64_t>());
            const double s = std::sqrt(n * expected * (1 - expected));
            return std::abs(k - n * expected) < 5 * s;
        };
        QVERIFY(share(masked, 0.8));
        QVERIFY(share(random, 0.1));
        QVERIFY(share(unchanged, 0.1));
        const torch::Tensor randomIds = m.inputIds.masked_select(random);
        for (const std::int64_t s : {tok.clsId(), tok.sepId(), tok.padId(), tok.unkId(), tok.maskId()})
            QVERIFY(!randomIds.eq(s).any().item<bool>());
        QVERIFY(randomIds.min().item<std::int64_t>() >= 0);
        QVERIFY(randomIds.max().item<std::int64_t>() < tok.vocabSize());

        // Deterministic for a seed, different for another seed and for the next draw of the same generator.
        at::Generator same = generator(42);
        const MlmBatch again = maskForMlm(ids, tok, prob, same);
        QVERIFY(torch::equal(again.inputIds, m.inputIds));
        QVERIFY(torch::equal(again.labels, m.labels));
        at::Generator other = generator(43);
        QVERIFY(!torch::equal(maskForMlm(ids, tok, prob, other).labels, m.labels));
        QVERIFY(!torch::equal(maskForMlm(ids, tok, prob, same).labels, m.labels));
    }

    void maskingRandomIdsAreUniformOverOrdinaryTokens()
    {
        const BertTokenizer tok = BertTokenizer::fromVocabFile(kTinyVocab); // ids 0-4 special, 5-15 ordinary
        const torch::Tensor ids = torch::full({400, 50}, 5, torch::kInt64);
        at::Generator gen = generator(9);
        const MlmBatch m = maskForMlm(ids, tok, 1.0, gen);
        QVERIFY(m.labels.eq(5).all().item<bool>());
        const torch::Tensor random = m.inputIds.ne(5) & m.inputIds.ne(tok.maskId());
        const torch::Tensor values = m.inputIds.masked_select(random);
        std::map<std::int64_t, int> counts;
        for (std::int64_t i = 0; i < values.numel(); ++i)
            ++counts[values[i].item<std::int64_t>()];
        QCOMPARE(counts.size(), std::size_t(10)); // 6..15; a draw of 5 looks unchanged
        QCOMPARE(counts.begin()->first, std::int64_t(6));
        const double each = 20000 * 0.1 / 11;
        for (const auto& [id, count] : counts)
            QVERIFY2(std::abs(count - each) < 5 * std::sqrt(each), qPrintable(QString::number(id)));
    }

    void maskingErrors()
    {
        const BertTokenizer tok = BertTokenizer::fromVocabFile(kTinyVocab);
        at::Generator gen = generator(1);
        const torch::Tensor ok = torch::full({2, 3}, 5, torch::kInt64);
        VERIFY_ERROR(maskForMlm(ok, tok, 0.0, gen), "(0, 1]");
        VERIFY_ERROR(maskForMlm(ok, tok, 1.5, gen), "(0, 1]");
        VERIFY_ERROR(maskForMlm(torch::full({6}, 5, torch::kInt64), tok, 0.15, gen), "2-D int64");
        VERIFY_ERROR(maskForMlm(ok.to(torch::kInt32), tok, 0.15, gen), "2-D int64");
        VERIFY_ERROR(maskForMlm(torch::full({2, 3}, 16, torch::kInt64), tok, 0.15, gen), "token id 16",
                     "[0, 16)");
    }

    // ----------------------------------------------------------------------------------------------
    // Batch order

    void batchIndicesPerEpoch()
    {
        const std::int64_t n = 12;
        const int bs = 4;
        QCOMPARE(stepsPerEpoch(n, bs), std::int64_t(3));
        for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
            std::vector<std::int64_t> seen;
            for (std::int64_t s = epoch * 3; s < epoch * 3 + 3; ++s) {
                const auto idx = batchIndices(n, bs, s, 77);
                QCOMPARE(idx.size(), std::size_t(bs));
                seen.insert(seen.end(), idx.begin(), idx.end());
            }
            std::vector<std::int64_t> perm = epochPermutation(n, epoch, 77);
            QCOMPARE(seen, perm);
            std::sort(seen.begin(), seen.end());
            std::vector<std::int64_t> all(n);
            std::iota(all.begin(), all.end(), 0);
            QCOMPARE(seen, all); // a permutation: covers every example once
        }
        // Epochs are shuffled differently; the same step and seed give the same batch; another seed differs.
        QVERIFY(epochPermutation(1000, 0, 77) != epochPermutation(1000, 1, 77));
        QCOMPARE(batchIndices(1000, 32, 45, 5), batchIndices(1000, 32, 45, 5));
        QVERIFY(batchIndices(1000, 32, 45, 5) != batchIndices(1000, 32, 45, 6));
        QVERIFY(epochPermutation(1000, 0, 0) != epochPermutation(1000, 0, 1));

        // An incomplete last batch is dropped: 10 examples, batches of 3 -> 3 steps, 9 distinct, then
        // epoch 1.
        std::set<std::int64_t> distinct;
        for (std::int64_t s = 0; s < 3; ++s)
            for (const std::int64_t i : batchIndices(10, 3, s, 1))
                distinct.insert(i);
        QCOMPARE(distinct.size(), std::size_t(9));
        const auto e1 = epochPermutation(10, 1, 1);
        QCOMPARE(batchIndices(10, 3, 3, 1), std::vector<std::int64_t>(e1.begin(), e1.begin() + 3));
    }

    void batchIndicesErrors()
    {
        VERIFY_ERROR(batchIndices(3, 4, 0, 1), "3 examples", "batch of 4");
        VERIFY_ERROR(batchIndices(10, 0, 0, 1), "batch size");
        VERIFY_ERROR(batchIndices(10, 2, -1, 1), "step");
    }

    // ----------------------------------------------------------------------------------------------
    // MNLI fine-tuning data

    void nliSplitAndLabels()
    {
        const BertTokenizer tok = BertTokenizer::fromVocabFile(kBertVocab);
        QElapsedTimer timer;
        timer.start();
        const NliDataset data = NliDataset::build(kMnli, tok, 128, 9000, {});
        qInfo("MNLI: 9815 pairs tokenized in %lld ms", static_cast<long long>(timer.elapsed()));
        QCOMPARE(data.trainSize(), std::int64_t(9000));
        QCOMPARE(data.evalSize(), std::int64_t(815));
        QCOMPARE(data.labelNames(), nliLabelNames());
        const std::vector<NliPair> pairs = readNliPairs(kMnli);
        QCOMPARE(data.label(0), std::int64_t(1)); // neutral
        QCOMPARE(data.label(1), std::int64_t(2)); // contradiction
        QCOMPARE(data.label(2), std::int64_t(0)); // entailment

        const NliDataset::Batch b = data.trainBatch({2, 0, 3});
        QCOMPARE(b.labels.size(0), std::int64_t(3));
        QCOMPARE(row(b.labels.unsqueeze(0), 0), (std::vector<std::int64_t>{0, 1, 2}));
        std::int64_t longest = 0;
        for (const int i : {2, 0, 3})
            longest = std::max<std::int64_t>(
                longest, tok.encode(pairs[i].premise, pairs[i].hypothesis, 128).inputIds.size());
        QCOMPARE(b.inputIds.size(1), longest); // padded to the longest of the batch
        int r = 0;
        for (const int i : {2, 0, 3}) {
            const Encoding e = tok.encode(pairs[i].premise, pairs[i].hypothesis, 128);
            const auto len = static_cast<std::int64_t>(e.inputIds.size());
            std::vector<std::int64_t> ids = row(b.inputIds, r), types = row(b.tokenTypeIds, r),
                                      mask = row(b.attentionMask, r);
            QCOMPARE(std::vector<std::int64_t>(ids.begin(), ids.begin() + len), e.inputIds);
            QCOMPARE(std::vector<std::int64_t>(types.begin(), types.begin() + len), e.tokenTypeIds);
            QVERIFY(
                std::all_of(ids.begin() + len, ids.end(), [&](std::int64_t v) { return v == tok.padId(); }));
            QVERIFY(std::all_of(types.begin() + len, types.end(), [](std::int64_t v) { return v == 0; }));
            QCOMPARE(std::count(mask.begin(), mask.end(), 1), len);
            QVERIFY(std::all_of(mask.begin(), mask.begin() + len, [](std::int64_t v) { return v == 1; }));
            ++r;
        }

        // The held-out part starts at pair 9000; the last batch is short.
        const NliDataset::Batch first = data.evalBatch(0, 4);
        QCOMPARE(first.labels.size(0), std::int64_t(4));
        const Encoding e9000 = tok.encode(pairs[9000].premise, pairs[9000].hypothesis, 128);
        const std::vector<std::int64_t> firstIds = row(first.inputIds, 0);
        QCOMPARE(std::vector<std::int64_t>(firstIds.begin(),
                                           firstIds.begin() + std::int64_t(e9000.inputIds.size())),
                 e9000.inputIds);
        QCOMPARE(first.labels[0].item<std::int64_t>(), data.label(9000));
        QCOMPARE(data.evalBatch(813, 4).labels.size(0), std::int64_t(2));

        // Truncation to maxLength.
        const NliDataset shortData = NliDataset::build(kMnli, tok, 16, 100, {});
        QVERIFY(shortData.evalBatch(0, 64).inputIds.size(1) <= 16);

        // Label ids through id2label names (case-insensitive), e.g. roberta-large-mnli's order.
        const NliDataset reordered =
            NliDataset::build(kMnli, tok, 128, 9000, {"CONTRADICTION", "NEUTRAL", "ENTAILMENT"});
        QCOMPARE(reordered.label(0), std::int64_t(1));
        QCOMPARE(reordered.label(1), std::int64_t(0));
        QCOMPARE(reordered.label(2), std::int64_t(2));
    }

    void nliErrors()
    {
        const BertTokenizer tok = BertTokenizer::fromVocabFile(kBertVocab);
        VERIFY_ERROR(NliDataset::build(kMnli, tok, 128, 0, {}), "mnli_dev_matched.jsonl", "9815 pairs");
        VERIFY_ERROR(NliDataset::build(kMnli, tok, 128, 9815, {}), "mnli_dev_matched.jsonl", "9815 pairs");
        VERIFY_ERROR(NliDataset::build(kMnli, tok, 128, 100, {"yes", "no"}), "pair 0", "'neutral'",
                     "0 yes, 1 no");
        const std::string unlabelled =
            std::string(OUTLIERLENS_TEST_DATA) + "/text/mnli_test_matched_sample.tsv";
        VERIFY_ERROR(NliDataset::build(unlabelled, tok, 128, 1, {}), "mnli_test_matched_sample.tsv",
                     "no label");
        VERIFY_ERROR(NliDataset::build(kMnli + ".missing", tok, 128, 1, {}), "missing");
        const NliDataset data = NliDataset::build(kMnli, tok, 64, 9000, {});
        VERIFY_ERROR(data.trainBatch({9000}), "9000", "[0, 9000)");
        VERIFY_ERROR(data.evalBatch(815, 1), "[0, 815)");
        VERIFY_ERROR(data.evalBatch(0, 0), "batch of 0");
    }

    // ----------------------------------------------------------------------------------------------
    // Fashion-MNIST IDX files

    void idxHandMade_data()
    {
        QTest::addColumn<bool>("gzip");
        QTest::newRow("gzipped") << true;
        QTest::newRow("uncompressed") << false;
    }
    void idxHandMade()
    {
        QFETCH(bool, gzip);
        QTemporaryDir dir;
        std::string pixels, labels;
        makeImages(70000 / 700, 28, pixels, labels); // 100 images
        writeFashion(dir.path(), idxImages(0x803, 100, 28, 28, pixels), idxLabels(0x801, labels), gzip);
        const ImageDataset data = ImageDataset::fashionMnist(dir.path().toStdString(), true);
        QCOMPARE(data.size(), std::int64_t(100));
        QCOMPARE(data.numClasses(), 10);
        QCOMPARE(data.classNames().front(), std::string("T-shirt/top"));
        QCOMPARE(data.classNames().back(), std::string("Ankle boot"));
        QCOMPARE(data.imageSize(), 28);
        QCOMPARE(data.storedChannels(), 1);
        QCOMPARE(data.label(37), std::int64_t(7));

        const RgbImage image = data.image(3);
        QCOMPARE(image.width, 28);
        QCOMPARE(image.height, 28);
        for (int p = 0; p < 28 * 28; ++p)
            for (int c = 0; c < 3; ++c)
                QCOMPARE(image.pixels[std::size_t(p * 3 + c)],
                         static_cast<std::uint8_t>(pixels[3 * 784 + p]));

        at::Generator gen = generator(0);
        const auto [x, y] = data.batch({3, 37}, false, gen);
        QCOMPARE(x.sizes().vec(), (std::vector<std::int64_t>{2, 3, 28, 28}));
        QCOMPARE(x.scalar_type(), torch::kFloat32);
        QCOMPARE(row(y.unsqueeze(0), 0), (std::vector<std::int64_t>{3, 7}));
        for (int c = 0; c < 3; ++c)
            for (const int p : {0, 100, 783}) {
                const double v = static_cast<std::uint8_t>(pixels[3 * 784 + p]);
                QCOMPARE(x[0][c][p / 28][p % 28].item<float>(), static_cast<float>((v / 255.0 - 0.5) / 0.5));
            }
    }

    void idxErrors_data()
    {
        QTest::addColumn<QString>("images");
        QTest::addColumn<QString>("labels");
        QTest::addColumn<QStringList>("mustContain");
        std::string px, lb;
        makeImages(4, 28, px, lb);
        const auto s = [](const std::string& b) { return QString::fromLatin1(b.data(), int(b.size())); };
        const std::string good = idxImages(0x803, 4, 28, 28, px), goodLabels = idxLabels(0x801, lb);
        QTest::newRow("image magic") << s(idxImages(0x801, 4, 28, 28, px)) << s(goodLabels)
                                     << QStringList{"train-images-idx3-ubyte.gz", "0x00000803", "0x00000801"};
        QTest::newRow("label magic") << s(good) << s(idxLabels(0x803, lb))
                                     << QStringList{"train-labels-idx1-ubyte.gz",
                                                    "expected magic 0x00000801"};
        QTest::newRow("count mismatch") << s(good) << s(idxLabels(0x801, lb.substr(0, 3)))
                                        << QStringList{"train-labels-idx1-ubyte.gz", "3 labels", "4 images"};
        QTest::newRow("not square") << s(idxImages(0x803, 4, 28, 14, px.substr(0, 4 * 28 * 14)))
                                    << s(goodLabels)
                                    << QStringList{"train-images-idx3-ubyte.gz", "28 x 14", "square"};
        QTest::newRow("zero images") << s(idxImages(0x803, 0, 28, 28, "")) << s(idxLabels(0x801, ""))
                                     << QStringList{"train-images-idx3-ubyte.gz", "image count 0"};
        QTest::newRow("absurd size") << s(idxImages(0x803, 4, 70000, 70000, px)) << s(goodLabels)
                                     << QStringList{"train-images-idx3-ubyte.gz", "70000 x 70000"};
        QTest::newRow("truncated pixels")
            << s(idxImages(0x803, 4, 28, 28, px.substr(0, 3000))) << s(goodLabels)
            << QStringList{"train-images-idx3-ubyte.gz", "truncated", "3136 bytes"};
        QTest::newRow("trailing bytes") << s(good + "xyz") << s(goodLabels)
                                        << QStringList{"train-images-idx3-ubyte.gz", "unexpected bytes"};
        QTest::newRow("truncated header") << s(good.substr(0, 10)) << s(goodLabels)
                                          << QStringList{"train-images-idx3-ubyte.gz", "truncated"};
        std::string badLabel = lb;
        badLabel[2] = 10;
        QTest::newRow("label out of range")
            << s(good) << s(idxLabels(0x801, badLabel))
            << QStringList{"train-labels-idx1-ubyte.gz", "label 10", "image 2"};
    }
    void idxErrors()
    {
        QFETCH(QString, images);
        QFETCH(QString, labels);
        QFETCH(QStringList, mustContain);
        QTemporaryDir dir;
        const QByteArray i = images.toLatin1(), l = labels.toLatin1();
        writeFashion(dir.path(), std::string(i.constData(), std::size_t(i.size())),
                     std::string(l.constData(), std::size_t(l.size())));
        const QString msg = errorOf([&] { ImageDataset::fashionMnist(dir.path().toStdString(), true); });
        QVERIFY2(!msg.isEmpty(), "no error thrown");
        QVERIFY2(!msg.contains('\n'), qPrintable(msg));
        for (const QString& part : mustContain)
            QVERIFY2(msg.contains(part), qPrintable(QStringLiteral("'%1' lacks '%2'").arg(msg, part)));
    }

    void idxCorruptAndMissing()
    {
        QTemporaryDir dir;
        VERIFY_ERROR(ImageDataset::fashionMnist(dir.path().toStdString(), false), "t10k-images-idx3-ubyte.gz",
                     "no such file", "dataset-fashion-mnist");
        std::string px, lb;
        makeImages(4, 28, px, lb);
        std::string gz = gzipStored(idxImages(0x803, 4, 28, 28, px));
        gz[gz.size() - 6] ^= 0x55; // CRC mismatch
        writeBytes(dir.filePath("train-images-idx3-ubyte.gz").toStdString(), gz);
        writeBytes(dir.filePath("train-labels-idx1-ubyte.gz").toStdString(),
                   gzipStored(idxLabels(0x801, lb)));
        VERIFY_ERROR(ImageDataset::fashionMnist(dir.path().toStdString(), true), "train-images-idx3-ubyte.gz",
                     "corrupt gzip");
    }

    void fashionMnistDebian()
    {
        if (!fs::is_directory(kDebianFashionMnistDir))
            QSKIP("Debian's dataset-fashion-mnist is not installed (/usr/share/datasets/fashion-mnist)");
        QElapsedTimer timer;
        timer.start();
        const ImageDataset train = ImageDataset::fashionMnist(kDebianFashionMnistDir, true);
        const qint64 trainMs = timer.restart();
        const ImageDataset test = ImageDataset::fashionMnist(kDebianFashionMnistDir, false);
        qInfo("Fashion-MNIST: 60000 training images in %lld ms, 10000 test images in %lld ms",
              static_cast<long long>(trainMs), static_cast<long long>(timer.elapsed()));
        QCOMPARE(train.size(), std::int64_t(60000));
        QCOMPARE(test.size(), std::int64_t(10000));
        QCOMPARE(train.numClasses(), 10);
        QCOMPARE(train.imageSize(), 28);
        // Fashion-MNIST is balanced: 6000 / 1000 images per class.
        std::vector<int> counts(10);
        for (std::int64_t i = 0; i < train.size(); ++i)
            ++counts[std::size_t(train.label(i))];
        QVERIFY(std::all_of(counts.begin(), counts.end(), [](int c) { return c == 6000; }));
        // The first training image is an ankle boot (label 9); the first test image too.
        QCOMPARE(train.label(0), std::int64_t(9));
        QCOMPARE(test.label(0), std::int64_t(9));
    }

    // ----------------------------------------------------------------------------------------------
    // Image folders

    void imageFolder()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        fs::create_directories(root / "b_cat" / "nested");
        fs::create_directories(root / "a_dog");
        fs::create_directories(root / ".hidden");
        fs::copy_file(kImages + "small.png", root / "b_cat" / "x.png");
        fs::copy_file(kImages + "rgb.bmp", root / "b_cat" / "nested" / "y.BMP");
        fs::copy_file(kImages + "gray.jpg", root / "a_dog" / "z.jpg");
        fs::copy_file(kImages + "wide.png", root / "a_dog" / "a.png");
        fs::copy_file(kImages + "small.png", root / ".hidden" / "h.png");
        writeBytes((root / "a_dog" / "notes.txt").string(), "not an image");

        const ImageDataset data = ImageDataset::folder(root.string(), 16);
        QCOMPARE(data.classNames(), (std::vector<std::string>{"a_dog", "b_cat"}));
        QCOMPARE(data.size(), std::int64_t(4));
        QCOMPARE(data.imageSize(), 16);
        QCOMPARE(data.storedChannels(), 3);
        // Sorted by path within a class: a_dog/a.png, a_dog/z.jpg, b_cat/nested/y.BMP, b_cat/x.png.
        const std::vector<fs::path> order = {root / "a_dog" / "a.png", root / "a_dog" / "z.jpg",
                                             root / "b_cat" / "nested" / "y.BMP", root / "b_cat" / "x.png"};
        for (std::int64_t i = 0; i < 4; ++i) {
            QCOMPARE(data.label(i), std::int64_t(i < 2 ? 0 : 1));
            const RgbImage expected =
                resizeImage(decodeImageFile(order[std::size_t(i)].string()), 16, 16, Interpolation::Bilinear);
            QVERIFY2(data.image(i).pixels == expected.pixels,
                     qPrintable(QString::fromStdString(order[std::size_t(i)])));
        }
        at::Generator gen = generator(0);
        const auto [x, y] = data.batch({2}, false, gen);
        const RgbImage third = data.image(2);
        QCOMPARE(x[0][1][3][5].item<float>(),
                 static_cast<float>((third.pixels[(3 * 16 + 5) * 3 + 1] / 255.0 - 0.5) / 0.5));
    }

    void imageFolderErrors()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        VERIFY_ERROR(ImageDataset::folder((root / "missing").string(), 32), "missing", "no such folder");
        VERIFY_ERROR(ImageDataset::folder(root.string(), 32), "no class sub-folders");
        fs::create_directories(root / "cls");
        fs::create_directories(root / "empty");
        fs::copy_file(kImages + "small.png", root / "cls" / "ok.png");
        VERIFY_ERROR(ImageDataset::folder(root.string(), 32), "empty", "no image files");
        fs::remove(root / "empty");
        writeBytes((root / "cls" / "broken.png").string(), "definitely not a png");
        VERIFY_ERROR(ImageDataset::folder(root.string(), 32), "broken.png");
        fs::remove(root / "cls" / "broken.png");
        VERIFY_ERROR(ImageDataset::folder(root.string(), 0), "image size");
        const ImageDataset data = ImageDataset::folder(root.string(), 8);
        at::Generator gen = generator(0);
        VERIFY_ERROR(data.batch({1}, false, gen), "index 1", "[0, 1)");
        VERIFY_ERROR(data.image(-1), "index -1");
    }

    // ----------------------------------------------------------------------------------------------
    // Augmentation

    void augmentationShiftsAndFlipsOnly()
    {
        QTemporaryDir dir;
        std::string pixels, labels;
        makeImages(10, 28, pixels, labels);
        writeFashion(dir.path(), idxImages(0x803, 10, 28, 28, pixels), idxLabels(0x801, labels));
        const ImageDataset data = ImageDataset::fashionMnist(dir.path().toStdString(), true);
        QCOMPARE(data.augmentPadding(), 2);
        std::vector<std::int64_t> indices;
        for (int k = 0; k < 80; ++k)
            indices.push_back(k % 10);
        at::Generator gen = generator(5);
        const auto [x, y] = data.batch(indices, true, gen);
        at::Generator plainGen = generator(5);
        const auto plain = data.batch(indices, false, plainGen);
        QVERIFY(torch::equal(y, plain.second)); // labels kept

        const int pad = 2, s = 28;
        const auto values = [](const torch::Tensor& t) {
            const torch::Tensor c = t.contiguous();
            return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
        };
        int identity = 0, flipped = 0;
        std::set<std::pair<int, int>> shifts;
        std::vector<float> expected(s * s);
        for (std::size_t k = 0; k < indices.size(); ++k) {
            const torch::Tensor out = x[std::int64_t(k)];
            QVERIFY(torch::equal(out[0], out[1]) && torch::equal(out[0], out[2])); // gray in all channels
            const std::vector<float> got = values(out[0]);
            const std::vector<float> original = values(plain.first[std::int64_t(k)][0]);
            bool found = false;
            for (int dy = 0; dy <= 2 * pad && !found; ++dy)
                for (int dx = 0; dx <= 2 * pad && !found; ++dx)
                    for (const bool flip : {false, true}) {
                        // Black (0 -> -1 after normalisation) where the shifted window leaves the image.
                        std::fill(expected.begin(), expected.end(), -1.0f);
                        for (int yy = 0; yy < s; ++yy)
                            for (int xx = 0; xx < s; ++xx) {
                                const int sx = (flip ? s - 1 - xx : xx) + dx - pad, sy = yy + dy - pad;
                                if (sx >= 0 && sx < s && sy >= 0 && sy < s)
                                    expected[std::size_t(yy * s + xx)] = original[std::size_t(sy * s + sx)];
                            }
                        if (expected == got) {
                            found = true;
                            identity += dx == pad && dy == pad && !flip;
                            flipped += flip;
                            shifts.insert({dx, dy});
                            break;
                        }
                    }
            QVERIFY2(found, qPrintable(QStringLiteral("sample %1 is not a shift/flip of its image").arg(k)));
        }
        QVERIFY(identity < 10);
        QVERIFY(flipped > 20 && flipped < 60);
        QVERIFY(shifts.size() > 10);

        // Deterministic for a seed.
        at::Generator again = generator(5);
        QVERIFY(torch::equal(data.batch(indices, true, again).first, x));
        at::Generator other = generator(6);
        QVERIFY(!torch::equal(data.batch(indices, true, other).first, x));
    }

    // ----------------------------------------------------------------------------------------------
    // Canvas task (ViT)

    /// Each canvas holds its item once, unchanged, somewhere on black; patches are numbered row-major; a
    /// patch is an object patch exactly when its brightest pixel exceeds the threshold; masked patches show
    /// the checkerboard and nothing else changes; targets are the unmasked canvas' pixels; a seed repeats.
    void canvasBatches()
    {
        QTemporaryDir dir;
        std::string pixels, labels;
        makeImages(10, 28, pixels, labels);
        writeFashion(dir.path(), idxImages(0x803, 10, 28, 28, pixels), idxLabels(0x801, labels));
        const ImageDataset data = ImageDataset::fashionMnist(dir.path().toStdString(), true);
        CanvasOptions o; // 56 px, patch 7, mask rate 0.25
        std::vector<std::int64_t> indices;
        for (int k = 0; k < 40; ++k)
            indices.push_back(k % 10);
        at::Generator gen = generator(3);
        const CanvasBatch b = canvasBatch(data, indices, o, true, gen);
        QCOMPARE(b.pixels.sizes().vec(), (std::vector<std::int64_t>{40, 3, 56, 56}));
        QCOMPARE(b.targets.sizes().vec(), (std::vector<std::int64_t>{40, 64, 49}));
        const auto px = b.pixels.accessor<float, 4>();
        const auto tg = b.targets.accessor<float, 3>();
        const auto mk = b.masked.accessor<bool, 2>(), ob = b.object.accessor<bool, 2>(),
                   sc = b.scored.accessor<bool, 2>();
        std::set<std::pair<int, int>> offsets;
        std::int64_t maskedCount = 0;
        for (std::size_t k = 0; k < indices.size(); ++k) {
            const auto i = std::int64_t(k);
            QCOMPARE(b.labels[i].item<std::int64_t>(), data.label(indices[k]));
            // The unmasked canvas from the targets, pixel by pixel.
            std::vector<double> canvas(56 * 56);
            for (int n = 0; n < 64; ++n)
                for (int p = 0; p < 49; ++p)
                    canvas[std::size_t(((n / 8) * 7 + p / 7) * 56 + (n % 8) * 7 + p % 7)] = tg[i][n][p];
            // Where is the item? Its top-left corner is the only place where all 28 x 28 pixels match.
            int found = 0;
            for (int r = 0; r <= 28; ++r)
                for (int c = 0; c <= 28; ++c) {
                    bool match = true;
                    for (int y = 0; y < 28 && match; ++y)
                        for (int x = 0; x < 28 && match; ++x)
                            match = std::abs(canvas[std::size_t((r + y) * 56 + c + x)] -
                                             static_cast<std::uint8_t>(
                                                 pixels[std::size_t(indices[k] * 784 + y * 28 + x)]) /
                                                 255.0) < 1e-6;
                    if (!match) continue;
                    double outside = 0;
                    for (int y = 0; y < 56; ++y)
                        for (int x = 0; x < 56; ++x)
                            if (y < r || y >= r + 28 || x < c || x >= c + 28)
                                outside += canvas[std::size_t(y * 56 + x)];
                    if (outside == 0) ++found, offsets.insert({r, c});
                }
            QVERIFY2(found >= 1,
                     qPrintable(QStringLiteral("canvas %1 does not hold its item on black").arg(k)));
            for (int n = 0; n < 64; ++n) {
                double brightest = 0;
                for (int p = 0; p < 49; ++p)
                    brightest = std::max(brightest, double(tg[i][n][p]));
                const bool masked = mk[i][n];
                maskedCount += masked;
                QCOMPARE(ob[i][n], brightest > 0.05);
                QCOMPARE(sc[i][n], brightest > 0.05 || masked);
                for (int p = 0; p < 49; ++p) {
                    const int y = (n / 8) * 7 + p / 7, x = (n % 8) * 7 + p % 7;
                    const double shown =
                        masked ? double((p / 7 + p % 7) % 2) : canvas[std::size_t(y * 56 + x)];
                    for (int ch = 0; ch < 3; ++ch)
                        QCOMPARE(px[i][ch][y][x], float((shown - 0.5) / 0.5));
                }
            }
        }
        QVERIFY(offsets.size() > 20);                                        // the place is drawn per canvas
        QVERIFY(maskedCount > 40 * 64 / 8 && maskedCount < 40 * 64 * 3 / 8); // about a quarter

        at::Generator again = generator(3);
        QVERIFY(torch::equal(canvasBatch(data, indices, o, true, again).pixels, b.pixels));
        at::Generator plainGen = generator(3);
        const CanvasBatch plain = canvasBatch(data, indices, o, false, plainGen);
        QVERIFY(!plain.masked.any().item<bool>());
        // Unmasked, every pixel is the target's (nothing hidden).
        QVERIFY(torch::equal(
            plain.pixels.select(1, 0),
            ((plain.targets.view({40, 8, 8, 7, 7}).permute({0, 1, 3, 2, 4}).reshape({40, 56, 56})) - 0.5) /
                0.5));
        const RgbImage image = canvasImage(plain, 0);
        QCOMPARE(image.width, 56);
        const auto ptg = plain.targets.accessor<float, 3>();
        for (int y = 0; y < 56; ++y)
            for (int x = 0; x < 56; ++x)
                QCOMPARE(int(image.pixels[std::size_t((y * 56 + x) * 3)]),
                         int(std::lround(ptg[0][(y / 7) * 8 + x / 7][(y % 7) * 7 + x % 7] * 255)));

        CanvasOptions bad;
        bad.canvasSize = 50; // not a multiple of 7
        at::Generator g = generator(0);
        VERIFY_ERROR(canvasBatch(data, {0}, bad, true, g), "multiple of patch_size");
        bad.canvasSize = 21; // smaller than the item
        bad.patchSize = 7;
        VERIFY_ERROR(canvasBatch(data, {0}, bad, true, g), "do not fit");
        VERIFY_ERROR(canvasBatch(data, {10}, o, true, g), "outside 0..9");
    }
};

QTEST_APPLESS_MAIN(TstTrainData)
#include "tst_train_data.moc"
