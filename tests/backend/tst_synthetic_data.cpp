// The synthetic no-op task (tasks/data/synthetic_data.h): vocabulary, invariants of the generated
// sequences, the sentence-pair layout, the example texts of sample_inputs.txt, determinism and errors.

#include "../common/sequence_compare.h"

#include "common/error.h"
#include "tasks/data/synthetic_data.h"
#include "text/wordpiece.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <string>
#include <vector>

using namespace outlierlens;
using outlierlens::test::errorOf;

namespace {

at::Generator generator(std::uint64_t seed)
{
    return at::make_generator<at::CPUGeneratorImpl>(seed);
}

/// BertTokenizer on `vocab` (one token per line of a vocab.txt written to a temporary folder).
BertTokenizer tokenizerOf(const std::vector<std::string>& vocab)
{
    QTemporaryDir dir;
    const std::string path = dir.filePath("vocab.txt").toStdString();
    {
        std::ofstream out(path);
        for (const std::string& t : vocab)
            out << t << '\n';
    }
    return BertTokenizer::fromVocabFile(path);
}

std::vector<std::int64_t> row(const torch::Tensor& t, std::int64_t r)
{
    const torch::Tensor c = t[r].contiguous();
    return std::vector<std::int64_t>(c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel());
}

} // namespace

class TstSyntheticData : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void syntheticVocabularyNames()
    {
        const SyntheticTaskOptions o;
        const std::vector<std::string> vocab = syntheticVocabulary(o);
        QCOMPARE(vocab.size(), std::size_t(64));
        QCOMPARE(std::set<std::string>(vocab.begin(), vocab.end()).size(), vocab.size());
        QCOMPARE(std::vector<std::string>(vocab.begin(), vocab.begin() + 10),
                 (std::vector<std::string>{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "back1",
                                           "back3", "back7"}));
        QCOMPARE(vocab[10], std::string("a"));
        QCOMPARE(vocab[36], std::string("a1"));
        const SyntheticVocabularyLayout layout = syntheticVocabularyLayout(o);
        QCOMPARE(layout.firstContent, std::int64_t(10));
        QCOMPARE(layout.numContent, std::int64_t(54));

        // Works as a BERT vocab.txt.
        const BertTokenizer tok = tokenizerOf(vocab);
        QCOMPARE(tok.vocabSize(), std::int64_t(64));
        QCOMPARE(tok.clsId(), layout.clsId);
        QCOMPARE(tok.sepId(), layout.sepId);
        QCOMPARE(tok.padId(), layout.padId);
        QCOMPARE(tok.maskId(), layout.maskId);
        QCOMPARE(tok.unkId(), layout.unkId);
    }

    void syntheticInvariants_data()
    {
        QTest::addColumn<int>("minLength");
        QTest::addColumn<int>("topicSize");
        QTest::newRow("fixed length") << 0 << 8;
        QTest::newRow("padded") << 20 << 8;
        QTest::newRow("whole vocabulary") << 0 << 0;
    }
    void syntheticInvariants()
    {
        QFETCH(int, minLength);
        QFETCH(int, topicSize);
        SyntheticTaskOptions o;
        o.minLength = minLength;
        o.topicSize = topicSize;
        const SyntheticVocabularyLayout v = syntheticVocabularyLayout(o);
        at::Generator gen = generator(11);
        const int b = 512, t = o.seqLength;
        const SyntheticBatch batch = syntheticBatch(o, b, gen);
        for (const torch::Tensor& x : {batch.inputIds, batch.attentionMask, batch.tokenTypeIds, batch.labels})
            QCOMPARE(x.sizes().vec(), (std::vector<std::int64_t>{b, t}));
        QCOMPARE(batch.attentionNeeded.scalar_type(), torch::kBool);
        QVERIFY(batch.tokenTypeIds.eq(0).all().item<bool>());

        const auto isDelimiter = [&](std::int64_t id) {
            return id >= v.firstDelimiter && id < v.firstOperator;
        };
        const auto isOperator = [&](std::int64_t id) { return id >= v.firstOperator && id < v.firstContent; };
        const auto isContent = [&](std::int64_t id) { return id >= v.firstContent && id < 64; };
        std::int64_t inner = 0, delimiters = 0, operators = 0, lengthSum = 0;
        std::set<int> lengths;
        for (int s = 0; s < b; ++s) {
            const auto ids = row(batch.inputIds, s), labels = row(batch.labels, s),
                       mask = row(batch.attentionMask, s);
            const torch::Tensor needed = batch.attentionNeeded[s];
            const int length = int(std::count(mask.begin(), mask.end(), 1));
            lengths.insert(length);
            lengthSum += length;
            QVERIFY(length >= (minLength ? minLength : t) && length <= t);
            QVERIFY(std::all_of(mask.begin(), mask.begin() + length, [](std::int64_t m) { return m == 1; }));
            QCOMPARE(ids[0], v.clsId);
            QCOMPARE(ids[std::size_t(length - 1)], v.sepId);
            std::set<std::int64_t> content;
            for (int i = 0; i < t; ++i) {
                const std::int64_t id = ids[std::size_t(i)], label = labels[std::size_t(i)];
                const bool target = needed[i].item<bool>();
                if (i == 0 || i >= length - 1) {
                    QCOMPARE(label, std::int64_t(-100));
                    QVERIFY(!target);
                    if (i >= length) QCOMPARE(id, v.padId);
                    continue;
                }
                ++inner;
                QVERIFY(isDelimiter(id) || isOperator(id) || isContent(id));
                if (isDelimiter(id)) {
                    ++delimiters;
                    QCOMPARE(label, std::int64_t(-100));
                    QVERIFY(!target);
                } else if (isOperator(id)) {
                    ++operators;
                    QCOMPARE(label, id);
                    QVERIFY(!target);
                    // The next position copies the content token k back from the operator.
                    const int k = o.copyOffsets[std::size_t(id - v.firstOperator)];
                    QVERIFY(i + 1 < length - 1);
                    QVERIFY(needed[i + 1].item<bool>());
                    QVERIFY(isContent(ids[std::size_t(i + 1)]));
                    QVERIFY(i - k >= 1 && isContent(ids[std::size_t(i - k)]));
                    QCOMPARE(labels[std::size_t(i + 1)], ids[std::size_t(i - k)]);
                } else {
                    content.insert(id);
                    if (target)
                        QVERIFY(isOperator(ids[std::size_t(i - 1)]));
                    else
                        QCOMPARE(label, id); // the no-op: a token stays itself
                }
            }
            QVERIFY(int(content.size()) <= (topicSize ? topicSize : 54));
        }
        if (minLength) QVERIFY(lengths.size() > 20);
        // Rates: delimiters ~10% of inner positions; operators ~8% of the eligible ones (a bit fewer
        // overall).
        const double delimiterShare = double(delimiters) / double(inner);
        const double sd = std::sqrt(0.1 * 0.9 / double(inner));
        QVERIFY2(std::abs(delimiterShare - 0.1) < 5 * sd, qPrintable(QString::number(delimiterShare)));
        const double perSequence = double(operators) / b;
        QVERIFY2(perSequence > 0.03 * double(lengthSum) / b && perSequence < 0.08 * double(lengthSum) / b,
                 qPrintable(QString::number(perSequence)));
        QCOMPARE(batch.attentionNeeded.sum().item<std::int64_t>(), operators);
        // Every offset is used.
        for (std::int64_t op = v.firstOperator; op < v.firstContent; ++op)
            QVERIFY(batch.inputIds.eq(op).any().item<bool>());
    }

    void syntheticDeterminism()
    {
        const SyntheticTaskOptions o;
        at::Generator a = generator(3), b = generator(3), c = generator(4);
        const SyntheticBatch x = syntheticBatch(o, 16, a);
        const SyntheticBatch y = syntheticBatch(o, 16, b);
        QVERIFY(torch::equal(x.inputIds, y.inputIds) && torch::equal(x.labels, y.labels));
        QVERIFY(!torch::equal(x.inputIds, syntheticBatch(o, 16, c).inputIds));
        QVERIFY(!torch::equal(x.inputIds, syntheticBatch(o, 16, a).inputIds)); // the generator advanced
    }

    void syntheticOptionErrors_data()
    {
        QTest::addColumn<QString>("field");
        QTest::addColumn<int>("value");
        QTest::addColumn<QString>("mustContain");
        QTest::newRow("vocab too small") << "vocabSize" << 16 << "content tokens";
        QTest::newRow("seq too short") << "seqLength" << 3 << "seqLength";
        QTest::newRow("offset too long") << "seqLength" << 10 << "copy offset 7";
        QTest::newRow("min length") << "minLength" << 2 << "minLength";
        QTest::newRow("min length above") << "minLength" << 65 << "minLength";
        QTest::newRow("no delimiter") << "numDelimiters" << 0 << "numDelimiters";
        QTest::newRow("topic too big") << "topicSize" << 60 << "content tokens";
        QTest::newRow("negative topic") << "topicSize" << -1 << "topicSize";
        QTest::newRow("delimiter rate") << "delimiterRate" << 1 << "delimiterRate";
        QTest::newRow("operator rate") << "operatorRate" << -1 << "operatorRate";
        QTest::newRow("repeated offset") << "copyOffsets" << 3 << "listed twice";
        QTest::newRow("zero offset") << "copyOffsets" << 0 << "copy offset 0";
        QTest::newRow("batch size") << "batchSize" << 0 << "batch size";
    }
    void syntheticOptionErrors()
    {
        QFETCH(QString, field);
        QFETCH(int, value);
        QFETCH(QString, mustContain);
        SyntheticTaskOptions o;
        int batchSize = 4;
        if (field == "vocabSize") o.vocabSize = value;
        if (field == "seqLength") o.seqLength = value;
        if (field == "minLength") o.minLength = value;
        if (field == "numDelimiters") o.numDelimiters = value;
        if (field == "topicSize") o.topicSize = value;
        if (field == "delimiterRate") o.delimiterRate = value;
        if (field == "operatorRate") o.operatorRate = value;
        if (field == "copyOffsets") o.copyOffsets = {1, 3, value};
        if (field == "batchSize") batchSize = value;
        at::Generator gen = generator(0);
        const QString msg = errorOf([&] { syntheticBatch(o, batchSize, gen); });
        QVERIFY2(msg.contains(mustContain), qPrintable(msg));
        QVERIFY(msg.startsWith("synthetic task:"));
    }

    void sentencePairLayout()
    {
        SyntheticTaskOptions o;
        o.sentencePairs = true;
        o.minLength = 20;
        const SyntheticVocabularyLayout v = syntheticVocabularyLayout(o);
        at::Generator gen = generator(5);
        const int b = 256;
        const SyntheticBatch batch = syntheticBatch(o, b, gen);
        std::set<int> splits;
        for (int s = 0; s < b; ++s) {
            const auto ids = row(batch.inputIds, s), types = row(batch.tokenTypeIds, s),
                       mask = row(batch.attentionMask, s), labels = row(batch.labels, s);
            const int length = int(std::count(mask.begin(), mask.end(), 1));
            QCOMPARE(ids[0], v.clsId);
            QCOMPARE(ids[std::size_t(length - 1)], v.sepId);
            // Exactly one more [SEP], in the middle third of the inner positions.
            std::vector<int> seps;
            for (int i = 1; i < length - 1; ++i)
                if (ids[std::size_t(i)] == v.sepId) seps.push_back(i);
            QCOMPARE(seps.size(), std::size_t(1));
            const int m = seps[0], inner = length - 2;
            QVERIFY2(m >= 1 + inner / 3 && m <= inner - inner / 3,
                     qPrintable(QString("%1 of %2").arg(m).arg(length)));
            splits.insert(m);
            QCOMPARE(labels[std::size_t(m)], std::int64_t(-100)); // a free token, never scored
            // Token types: 0 up to the middle [SEP], 1 after it up to the last [SEP], 0 on padding.
            for (int i = 0; i < o.seqLength; ++i)
                QCOMPARE(types[std::size_t(i)], std::int64_t(i > m && i < length ? 1 : 0));
            // A copy target is never the middle [SEP].
            for (int i = 1; i < length - 1; ++i)
                if (batch.attentionNeeded[s][i].item<bool>()) QVERIFY(ids[std::size_t(i)] != v.sepId);
        }
        QVERIFY(splits.size() > 5); // the split point varies
        // Without the option the same generator state gives single sequences (the draw is extra).
        SyntheticTaskOptions single;
        at::Generator g2 = generator(5);
        QVERIFY(syntheticBatch(single, 4, g2).tokenTypeIds.eq(0).all().item<bool>());
    }

    void successorLabels()
    {
        SyntheticTaskOptions o;
        o.successorLabels = true;
        const SyntheticVocabularyLayout v = syntheticVocabularyLayout(o);
        at::Generator a = generator(9), b = generator(9);
        const SyntheticBatch shifted = syntheticBatch(o, 64, a);
        const SyntheticBatch plain = syntheticBatch(SyntheticTaskOptions{}, 64, b);
        QVERIFY(torch::equal(shifted.inputIds, plain.inputIds)); // the same sequences, other labels
        std::int64_t contents = 0, wrapped = 0;
        for (int s = 0; s < 64; ++s) {
            const auto ids = row(shifted.inputIds, s), labels = row(shifted.labels, s),
                       same = row(plain.labels, s);
            for (std::size_t i = 0; i < ids.size(); ++i) {
                const bool target = shifted.attentionNeeded[s][std::int64_t(i)].item<bool>();
                if (ids[i] >= v.firstContent && !target) {
                    const std::int64_t next =
                        ids[i] + 1 == v.firstContent + v.numContent ? v.firstContent : ids[i] + 1;
                    QCOMPARE(labels[i], next);
                    ++contents;
                    wrapped += next == v.firstContent ? 1 : 0;
                } else {
                    QCOMPARE(labels[i], same[i]); // copies, operators, free tokens: as before
                }
            }
        }
        QVERIFY(contents > 1000 && wrapped > 0);
    }

    void wordTokensAndExampleText()
    {
        SyntheticTaskOptions o;
        o.sentencePairs = true;
        o.wordTokens = true;
        const std::vector<std::string> vocab = syntheticVocabulary(o);
        QCOMPARE(std::set<std::string>(vocab.begin(), vocab.end()).size(), vocab.size());
        QCOMPARE(vocab[10], std::string("cat"));
        for (std::size_t i = 10; i < vocab.size(); ++i) // lower-case letters (and digits): one WordPiece word
            QVERIFY2(std::all_of(vocab[i].begin(), vocab[i].end(),
                                 [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }),
                     vocab[i].c_str());
        // The text of example N, through BertTokenizer on this vocabulary, is the example's ids and types.
        const BertTokenizer tok = tokenizerOf(vocab);
        for (std::uint64_t seed : {1, 2, 16}) {
            const std::string text = syntheticExampleText(o, seed);
            const auto tab = text.find('\t');
            QVERIFY(tab != std::string::npos && text.find('\t', tab + 1) == std::string::npos);
            const Encoding e = tok.encode(text.substr(0, tab), text.substr(tab + 1));
            at::Generator gen = generator(seed);
            const SyntheticBatch b = syntheticBatch(o, 1, gen);
            const std::int64_t length = b.attentionMask.sum().item<std::int64_t>();
            const std::vector<std::int64_t> ids = row(b.inputIds, 0), types = row(b.tokenTypeIds, 0);
            QCOMPARE(e.inputIds, std::vector<std::int64_t>(ids.begin(), ids.begin() + length));
            QCOMPARE(e.tokenTypeIds, std::vector<std::int64_t>(types.begin(), types.begin() + length));
        }
        // Single sequences have no tab.
        SyntheticTaskOptions single;
        QVERIFY(syntheticExampleText(single, 1).find('\t') == std::string::npos);
    }
};

QTEST_APPLESS_MAIN(TstSyntheticData)
#include "tst_synthetic_data.moc"
