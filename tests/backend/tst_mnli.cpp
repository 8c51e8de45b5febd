// MNLI readers: GLUE TSV, JSONL and plain pair lines, bad inputs, and the shipped dev_matched sample.

#include "common/error.h"
#include "text/mnli.h"

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <map>
#include <string>

using outlierlens::NliPair;
using outlierlens::readNliPairs;

namespace {

const std::string kText = std::string(OUTLIERLENS_TEST_DATA) + "/text/";
const std::string kSample = std::string(OUTLIERLENS_SOURCE_DIR) + "/sample_data/mnli/mnli_dev_matched.jsonl";

template<typename Fn>
QString errorOf(Fn fn)
{
    try {
        fn();
    } catch (const outlierlens::Error& e) {
        return QString::fromStdString(e.what());
    }
    return {};
}

} // namespace

class TstMnli : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void glueTsv_data()
    {
        QTest::addColumn<QString>("file");
        QTest::newRow("LF") << "mnli_dev_matched_sample.tsv";
        QTest::newRow("CRLF") << "mnli_dev_matched_crlf.tsv";
    }
    void glueTsv()
    {
        QFETCH(QString, file);
        const auto pairs = readNliPairs(kText + file.toStdString());
        // Six rows, one with gold_label "-" (no annotator majority) skipped.
        QCOMPARE(pairs.size(), std::size_t(5));
        QCOMPARE(pairs[0].premise, std::string("The new rights are nice enough"));
        QCOMPARE(pairs[0].hypothesis,
                 std::string("Everyone really likes the newest benefits ")); // trailing space kept
        QCOMPARE(pairs[0].label, std::string("neutral"));
        QCOMPARE(pairs[1].label, std::string("contradiction"));
        QCOMPARE(pairs[2].label, std::string("entailment"));
        QCOMPARE(pairs[3].premise, std::string("i don't know um do you do a lot of camping"));
        for (const NliPair& p : pairs)
            QVERIFY(!p.premise.empty() && !p.hypothesis.empty() && !p.label.empty());
    }

    void tsvWithoutLabels()
    {
        // The GLUE test layout: no label columns at all.
        const auto pairs = readNliPairs(kText + "mnli_test_matched_sample.tsv");
        QCOMPARE(pairs.size(), std::size_t(3));
        for (const NliPair& p : pairs)
            QCOMPARE(p.label, std::string());
        QCOMPARE(pairs[2].hypothesis,
                 std::string("I like him for the most part, but would still enjoy seeing someone beat him."));
    }

    void jsonl()
    {
        const auto pairs = readNliPairs(kText + "mnli_sample.jsonl");
        // Six objects and a blank line; the one labelled "-" is skipped.
        QCOMPARE(pairs.size(), std::size_t(5));
        QCOMPARE(pairs[0].label, std::string("neutral"));
        QCOMPARE(pairs[1].premise, std::string("Café au lait — naïve “quotes”"));
        QCOMPARE(pairs[1].label, std::string("entailment"));    // integer id 0
        QCOMPARE(pairs[2].label, std::string("contradiction")); // integer id 2
        QCOMPARE(pairs[3].label, std::string());                // -1: unlabelled
        QCOMPARE(pairs[4].label, std::string());                // no "label" field
        QCOMPARE(pairs[4].premise, std::string("No label field."));
    }

    void plainPairs()
    {
        // A model folder's sample_inputs.txt: no header, "premise<TAB>hypothesis" per line.
        QTemporaryDir dir;
        const std::string path = dir.filePath("sample_inputs.txt").toStdString();
        {
            std::ofstream out(path, std::ios::binary);
            out << "cat dog . back3 sun\tsun tree , house\r\n\nfish bird\train\n";
        }
        const auto pairs = readNliPairs(path);
        QCOMPARE(pairs.size(), std::size_t(2));
        QCOMPARE(pairs[0].premise, std::string("cat dog . back3 sun"));
        QCOMPARE(pairs[0].hypothesis, std::string("sun tree , house"));
        QCOMPARE(pairs[1].premise, std::string("fish bird"));
        QCOMPARE(pairs[1].label, std::string());
        // A later line without its tab is an error naming the line.
        {
            std::ofstream out(path, std::ios::binary);
            out << "a b\tc d\nno tab here\n";
        }
        const QString msg = errorOf([&] { readNliPairs(path); });
        QVERIFY2(msg.contains("sample_inputs.txt:2:") && msg.contains("found 1"), qPrintable(msg));
    }

    void limit()
    {
        QCOMPARE(readNliPairs(kText + "mnli_sample.jsonl", 2).size(), std::size_t(2));
        QCOMPARE(readNliPairs(kText + "mnli_dev_matched_sample.tsv", 4).size(), std::size_t(4));
        QCOMPARE(readNliPairs(kText + "mnli_dev_matched_sample.tsv", 100).size(), std::size_t(5));
        const auto first = readNliPairs(kSample, 1);
        QCOMPARE(first.size(), std::size_t(1));
        QCOMPARE(first[0].premise, std::string("The new rights are nice enough"));
    }

    void badInput_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QStringList>("mustContain");
        QTest::newRow("missing file") << "no_such_file.tsv" << QStringList{"no_such_file.tsv", "cannot open"};
        QTest::newRow("empty file") << "empty.jsonl" << QStringList{"empty.jsonl", "empty file"};
        QTest::newRow("blank file") << "blank.tsv" << QStringList{"blank.tsv", "empty file"};
        QTest::newRow("missing column")
            << "bad_missing_column.tsv" << QStringList{"bad_missing_column.tsv:1:", "sentence2"};
        QTest::newRow("short row") << "bad_short_row.tsv" << QStringList{"bad_short_row.tsv:3:", "found 12"};
        QTest::newRow("malformed json")
            << "bad_malformed.jsonl" << QStringList{"bad_malformed.jsonl:3:", "malformed JSON"};
        QTest::newRow("missing field")
            << "bad_missing_field.jsonl" << QStringList{"bad_missing_field.jsonl:2:", "hypothesis"};
        QTest::newRow("json array") << "bad_array.json" << QStringList{"bad_array.json", "JSONL"};
        QTest::newRow("bad label id") << "bad_label.jsonl" << QStringList{"bad_label.jsonl:3:", "label id 7"};
    }
    void badInput()
    {
        QFETCH(QString, file);
        QFETCH(QStringList, mustContain);
        const QString msg = errorOf([&] { readNliPairs(kText + file.toStdString()); });
        QVERIFY2(!msg.isEmpty(), "no error thrown");
        QVERIFY2(!msg.contains('\n'), qPrintable(msg));
        for (const QString& part : mustContain)
            QVERIFY2(msg.contains(part), qPrintable(QStringLiteral("'%1' lacks '%2'").arg(msg, part)));
    }

    void shippedDevMatched()
    {
        const auto pairs = readNliPairs(kSample);
        QCOMPARE(pairs.size(), std::size_t(9815));
        std::map<std::string, int> counts;
        for (const NliPair& p : pairs)
            ++counts[p.label];
        QCOMPARE(counts.size(), std::size_t(3));
        QCOMPARE(counts["entailment"], 3479);
        QCOMPARE(counts["neutral"], 3123);
        QCOMPARE(counts["contradiction"], 3213);
    }

    void labelNames()
    {
        const auto& names = outlierlens::nliLabelNames();
        QCOMPARE(names.size(), std::size_t(3));
        QCOMPARE(names[0], std::string("entailment"));
        QCOMPARE(names[1], std::string("neutral"));
        QCOMPARE(names[2], std::string("contradiction"));
    }
};

QTEST_APPLESS_MAIN(TstMnli)
#include "tst_mnli.moc"
