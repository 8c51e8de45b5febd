// WordPiece tokenizer: golden cases made by Hugging Face's slow BertTokenizer (transformers v4.31,
// full bert-base-uncased vocab), plus the vocabulary loader, truncation and error paths.

#include "../common/sequence_compare.h"
#include "common/error.h"
#include "text/mnli.h"
#include "text/wordpiece.h"

#include <nlohmann/json.hpp>

#include <QElapsedTimer>
#include <QFile>
#include <QtTest>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

using outlierlens::BertTokenizer;
using outlierlens::Encoding;

using outlierlens::test::errorOf;
using outlierlens::test::firstDifference;

namespace {

const std::string kTestData = OUTLIERLENS_TEST_DATA;
const std::string kSourceDir = OUTLIERLENS_SOURCE_DIR;
const std::string kFullVocab = kSourceDir + "/sample_data/bert/vocab.txt";

// The message of the outlierlens::Error that fn throws, or "" if it throws none.
#define COMPARE_VECTORS(got, want, what)                                                                     \
    do {                                                                                                     \
        const std::string diff_ = firstDifference(got, want);                                                \
        QVERIFY2(diff_.empty(), (std::string(what) + ": " + diff_).c_str());                                 \
    } while (false)

std::vector<std::string> words(int count, const std::string& word)
{
    std::vector<std::string> w(static_cast<std::size_t>(count), word);
    return w;
}

std::string join(const std::vector<std::string>& parts)
{
    std::string s;
    for (const std::string& p : parts)
        s += (s.empty() ? "" : " ") + p;
    return s;
}

} // namespace

class TstTokenizer : public QObject
{
    Q_OBJECT

private:
    const BertTokenizer& tok() const { return *m_tokenizer; }
    std::optional<BertTokenizer> m_tokenizer;

private Q_SLOTS:
    void initTestCase() { m_tokenizer = BertTokenizer::fromVocabFile(kFullVocab); }

    // ---- golden cases ----------------------------------------------------------------------------

    void goldenCases_data()
    {
        QTest::addColumn<QByteArray>("line");
        QFile file(QString::fromStdString(kTestData + "/tokenizer_cases.jsonl"));
        QVERIFY2(file.open(QIODevice::ReadOnly), "cannot open tokenizer_cases.jsonl");
        int rows = 0;
        while (!file.atEnd()) {
            const QByteArray line = file.readLine().trimmed();
            if (line.isEmpty()) continue;
            const auto c = nlohmann::json::parse(line.toStdString());
            QTest::newRow(c.at("id").get<std::string>().c_str()) << line;
            ++rows;
        }
        QCOMPARE(rows, 48);
    }
    void goldenCases()
    {
        QFETCH(QByteArray, line);
        const auto c = nlohmann::json::parse(line.toStdString());
        const std::string text = c.at("text").get<std::string>();
        std::optional<std::string> pair;
        if (!c.at("text_pair").is_null()) pair = c.at("text_pair").get<std::string>();
        int maxLength = 0;
        const auto& truncation = c.at("truncation");
        if (!truncation.is_null() && truncation != false) {
            QVERIFY(truncation == true || truncation == "longest_first");
            maxLength = c.at("max_length").is_null() ? 512 : c.at("max_length").get<int>();
        }
        const Encoding enc = tok().encode(text, pair, maxLength, c.at("add_special_tokens").get<bool>());
        COMPARE_VECTORS(enc.tokens, c.at("tokens").get<std::vector<std::string>>(), "tokens");
        COMPARE_VECTORS(enc.inputIds, c.at("input_ids").get<std::vector<std::int64_t>>(), "input_ids");
        COMPARE_VECTORS(enc.tokenTypeIds, c.at("token_type_ids").get<std::vector<std::int64_t>>(),
                        "token_type_ids");
        COMPARE_VECTORS(enc.attentionMask, c.at("attention_mask").get<std::vector<std::int64_t>>(),
                        "attention_mask");

        // The intermediate stages of each segment, before truncation.
        std::vector<std::string> segments = {text};
        if (pair) segments.push_back(*pair);
        const auto basic = c.at("basic_tokens").get<std::vector<std::vector<std::string>>>();
        const auto pieces = c.at("wordpieces").get<std::vector<std::vector<std::string>>>();
        QCOMPARE(basic.size(), segments.size());
        QCOMPARE(pieces.size(), segments.size());
        for (std::size_t s = 0; s < segments.size(); ++s) {
            COMPARE_VECTORS(tok().basicTokenize(segments[s]), basic[s],
                            "basic tokens of segment " + std::to_string(s));
            COMPARE_VECTORS(tok().tokenize(segments[s]), pieces[s],
                            "wordpieces of segment " + std::to_string(s));
        }
    }

    // ---- vocabulary ------------------------------------------------------------------------------

    void vocabularyAndSpecialIds()
    {
        QCOMPARE(tok().vocabSize(), std::int64_t(30522));
        QCOMPARE(tok().padId(), std::int64_t(0));
        QCOMPARE(tok().unkId(), std::int64_t(100));
        QCOMPARE(tok().clsId(), std::int64_t(101));
        QCOMPARE(tok().sepId(), std::int64_t(102));
        QCOMPARE(tok().maskId(), std::int64_t(103));
        QVERIFY(tok().lowerCase());
    }

    void idsRoundTrip()
    {
        for (std::int64_t id = 0; id < tok().vocabSize(); ++id) {
            if (tok().tokenToId(tok().idToToken(id)) != id)
                QFAIL(qPrintable(QStringLiteral("id %1 does not round trip").arg(id)));
        }
        QCOMPARE(tok().idToToken(7592), std::string("hello"));
        QCOMPARE(tok().tokenToId("##ing"), std::int64_t(2075));
        QCOMPARE(tok().tokenToId("definitely-not-a-token"), tok().unkId());
        QCOMPARE(tok().tokenToId(""), tok().unkId());
        QVERIFY(errorOf([&] { tok().idToToken(-1); }).contains("out of range"));
        QVERIFY(errorOf([&] { tok().idToToken(30522); }).contains("30522"));
    }

    void missingVocabFile()
    {
        const std::string path = kTestData + "/text/no_such_vocab.txt";
        const QString msg = errorOf([&] { BertTokenizer::fromVocabFile(path); });
        QVERIFY2(msg.contains(QString::fromStdString(path)) && msg.contains("cannot open"), qPrintable(msg));
        const QString dirMsg =
            errorOf([&] { BertTokenizer::fromModelDir(kTestData + "/text/no_such_model"); });
        QVERIFY2(dirMsg.contains("no_such_model/vocab.txt"), qPrintable(dirMsg));
    }

    void emptyVocabFile()
    {
        const std::string path = kTestData + "/text/empty_vocab.txt";
        const QString msg = errorOf([&] { BertTokenizer::fromVocabFile(path); });
        QVERIFY2(msg.contains("empty_vocab.txt") && msg.contains("empty"), qPrintable(msg));
    }

    void vocabWithoutUnknownToken()
    {
        const QString msg =
            errorOf([&] { BertTokenizer::fromVocabFile(kTestData + "/text/vocab_no_unk.txt"); });
        QVERIFY2(msg.contains("vocab_no_unk.txt") && msg.contains("[UNK]"), qPrintable(msg));
    }

    void crlfVocabAndGreedyMatching()
    {
        // \r\n and a final lone \r end lines, as in Python's text-mode readlines().
        const BertTokenizer small = BertTokenizer::fromVocabFile(kTestData + "/text/vocab_crlf.txt");
        QCOMPARE(small.vocabSize(), std::int64_t(8));
        QCOMPARE(small.tokenToId("hello"), std::int64_t(5));
        QCOMPARE(small.tokenToId("world"), std::int64_t(7));
        // "helloworld": "hello" matches but "##world" does not, so the whole word is [UNK].
        const std::vector<std::string> want = {"hello", "##s", "world", "##s", "[UNK]", "[UNK]"};
        COMPARE_VECTORS(small.tokenize("Hellos WORLDS helloworld xyz"), want, "tokens");
    }

    void modelDirectories()
    {
        const BertTokenizer tiny = BertTokenizer::fromModelDir(kTestData + "/bert/hf");
        QCOMPARE(tiny.vocabSize(), std::int64_t(2048));
        QVERIFY(tiny.lowerCase());
        QCOMPARE(tiny.clsId(), std::int64_t(101));

        // do_lower_case false (and an AddedToken object for cls_token): no lower-casing and, with
        // strip_accents null, no accent stripping.
        const BertTokenizer cased = BertTokenizer::fromModelDir(kTestData + "/text/cased_model");
        QVERIFY(!cased.lowerCase());
        const std::vector<std::string> want = {"Hello", "hello", ",", "Café", "Cafe", "cafe", "!", "[UNK]"};
        COMPARE_VECTORS(cased.tokenize("Hello hello, Café Cafe cafe! HELLO"), want, "cased tokens");
        // NFC: 'e' + COMBINING ACUTE becomes 'é' before the vocabulary lookup.
        COMPARE_VECTORS(cased.tokenize("Cafe\xCC\x81"), std::vector<std::string>{"Café"}, "NFC");
    }

    // ---- Unicode details that the golden cases do not reach --------------------------------------

    void unicodeDetails_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QStringList>("basic");
        // v4.31 lower-cases one character at a time, so Python's final-sigma rule never fires.
        QTest::newRow("capital sigma") << QStringLiteral("ΟΔΟΣ ΣΑΣ.") << QStringList{"οδοσ", "σασ", "."};
        // 'İ'.lower() is 'i' + U+0307; the dot is then stripped as an accent.
        QTest::newRow("dotted capital I") << QStringLiteral("İstanbul") << QStringList{"istanbul"};
        // Python's str.split() also splits on LINE/PARAGRAPH SEPARATOR (Zl/Zp).
        QTest::newRow("line separator") << QStringLiteral("a\u2028b\u2029c") << QStringList{"a", "b", "c"};
        // Soft hyphen and zero-width space are Cf controls: removed, words join.
        QTest::newRow("format chars")
            << QStringLiteral("co\u00ADop zero\u200Bwidth") << QStringList{"coop", "zerowidth"};
        // A special token stays whole in the middle of a word (cut from the raw text).
        QTest::newRow("special inside word") << QStringLiteral("x[MASK]y") << QStringList{"x", "[MASK]", "y"};
        // A control character inside a special token: not special in the raw text, so it is
        // lower-cased before cleaning and no longer matches "[MASK]".
        QTest::newRow("special after cleaning")
            << QStringLiteral("a [MA\u0001SK] b") << QStringList{"a", "[", "mask", "]", "b"};
        // CJK ideographs (incl. compatibility ideographs, NFC-mapped) are separate words; kana and hangul are
        // not.
        QTest::newRow("cjk") << QStringLiteral("漢字かな\uF900") << QStringList{"漢", "字", "かな", "\u8C48"};
        // NFD splits Hangul syllables into jamo (Lo, not Mn): they stay decomposed.
        QTest::newRow("hangul") << QStringLiteral("한글")
                                << QStringList{"\u1112\u1161\u11AB\u1100\u1173\u11AF"};
        // Combining marks of other scripts are Mn and stripped; Mc stay.
        QTest::newRow("lone combining mark") << QStringLiteral("a \u0301 b") << QStringList{"a", "b"};
    }
    void unicodeDetails()
    {
        QFETCH(QString, text);
        QFETCH(QStringList, basic);
        std::vector<std::string> want;
        for (const QString& s : basic)
            want.push_back(s.toStdString());
        COMPARE_VECTORS(tok().basicTokenize(text.toStdString()), want, "basic tokens");
    }

    void specialTokenAfterCleaningInCasedModel()
    {
        // Without lower-casing, a whitespace-delimited word that equals "[MASK]" once cleaned is
        // never_split by the BasicTokenizer, then found whole by WordPiece; glued to other
        // characters it is split at its brackets like any word.
        const BertTokenizer cased = BertTokenizer::fromModelDir(kTestData + "/text/cased_model");
        COMPARE_VECTORS(cased.tokenize("Hello [MA\x01SK] !"),
                        (std::vector<std::string>{"Hello", "[MASK]", "!"}), "separate word");
        COMPARE_VECTORS(cased.tokenize("[MA\x01SK]!"),
                        (std::vector<std::string>{"[UNK]", "[UNK]", "[UNK]", "!"}), "glued word");
    }

    void wordLongerThan100CodePoints()
    {
        COMPARE_VECTORS(tok().tokenize(std::string(101, 'b')), std::vector<std::string>{"[UNK]"}, "101 b");
        // 100 code points of two bytes each is still split.
        std::string accented;
        for (int i = 0; i < 100; ++i)
            accented += "\xC3\xA9"; // é -> e after accent stripping
        QVERIFY(tok().tokenize(accented).size() > 1);
    }

    void invalidUtf8()
    {
        const QString msg = errorOf([&] { tok().tokenize("ok \xC3\x28 bad"); });
        QVERIFY2(msg.contains("UTF-8") && msg.contains("byte 3"), qPrintable(msg));
        QVERIFY(!errorOf([&] { tok().tokenize("\xED\xA0\x80"); }).isEmpty()); // a surrogate
        QVERIFY(!errorOf([&] { tok().tokenize("\xC0\xAF"); }).isEmpty());     // overlong '/'
    }

    // ---- encode and truncation -------------------------------------------------------------------

    void truncation_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("pair");
        QTest::addColumn<int>("maxLength");
        QTest::addColumn<QStringList>("tokens");
        QTest::addColumn<int>("firstSegmentLength"); // incl. [CLS] and the first [SEP]

        const QString five = QStringLiteral("one two three four five");
        QTest::newRow("single fits") << five << QString() << 7
                                     << QStringList{"[CLS]", "one", "two", "three", "four", "five", "[SEP]"}
                                     << 7;
        QTest::newRow("single minus 1")
            << five << QString() << 6 << QStringList{"[CLS]", "one", "two", "three", "four", "[SEP]"} << 6;
        QTest::newRow("single to 1 token")
            << five << QString() << 3 << QStringList{"[CLS]", "one", "[SEP]"} << 3;
        QTest::newRow("pair fits") << five << QStringLiteral("six seven") << 10
                                   << QStringList{"[CLS]", "one",   "two", "three", "four",
                                                  "five",  "[SEP]", "six", "seven", "[SEP]"}
                                   << 7;
        // 5 vs 2 tokens, remove 4: three from the longer first (to equal length), then one each
        // way with the pair segment taking the odd one.
        QTest::newRow("pair longest first")
            << five << QStringLiteral("six seven") << 6
            << QStringList{"[CLS]", "one", "two", "[SEP]", "six", "[SEP]"} << 4;
        // Equal lengths, remove 3: the pair segment loses 2, the first 1.
        QTest::newRow("pair tie") << QStringLiteral("a b c") << QStringLiteral("d e f") << 6
                                  << QStringList{"[CLS]", "a", "b", "[SEP]", "d", "[SEP]"} << 4;
        QTest::newRow("pair longer second") << QStringLiteral("a") << QStringLiteral("b c d e f") << 6
                                            << QStringList{"[CLS]", "a", "[SEP]", "b", "c", "[SEP]"} << 3;
        QTest::newRow("pair to specials only")
            << five << QStringLiteral("six") << 3 << QStringList{"[CLS]", "[SEP]", "[SEP]"} << 2;
        QTest::newRow("empty single max 2")
            << QString() << QString() << 2 << QStringList{"[CLS]", "[SEP]"} << 2;
    }
    void truncation()
    {
        QFETCH(QString, text);
        QFETCH(QString, pair);
        QFETCH(int, maxLength);
        QFETCH(QStringList, tokens);
        QFETCH(int, firstSegmentLength);
        std::optional<std::string> p;
        if (!pair.isNull()) p = pair.toStdString();
        const Encoding enc = tok().encode(text.toStdString(), p, maxLength);
        std::vector<std::string> want;
        for (const QString& t : tokens)
            want.push_back(t.toStdString());
        COMPARE_VECTORS(enc.tokens, want, "tokens");
        QVERIFY(int(enc.inputIds.size()) <= maxLength);
        for (std::size_t i = 0; i < enc.tokens.size(); ++i) {
            QCOMPARE(enc.inputIds[i], tok().tokenToId(enc.tokens[i]));
            QCOMPARE(enc.tokenTypeIds[i], std::int64_t(int(i) < firstSegmentLength ? 0 : 1));
            QCOMPARE(enc.attentionMask[i], std::int64_t(1));
        }
    }

    void truncationTooShort_data()
    {
        QTest::addColumn<bool>("isPair");
        QTest::addColumn<int>("maxLength");
        QTest::newRow("single 2") << false << 2;
        QTest::newRow("single 1") << false << 1;
        QTest::newRow("pair 2") << true << 2;
        QTest::newRow("pair 1") << true << 1;
        QTest::newRow("negative") << false << -5;
    }
    void truncationTooShort()
    {
        QFETCH(bool, isPair);
        QFETCH(int, maxLength);
        const std::optional<std::string> pair = isPair ? std::optional<std::string>("a pair") : std::nullopt;
        const QString msg = errorOf([&] { tok().encode("some text", pair, maxLength); });
        QVERIFY2(msg.contains("max length") && msg.contains(QString::number(maxLength)), qPrintable(msg));
    }

    void limit512()
    {
        const std::string longText = join(words(600, "word"));
        const Encoding single = tok().encode(longText, std::nullopt, 512);
        QCOMPARE(single.inputIds.size(), std::size_t(512));
        QCOMPARE(single.inputIds.front(), tok().clsId());
        QCOMPARE(single.inputIds.back(), tok().sepId());
        QCOMPARE(tok().encode(longText).inputIds.size(), std::size_t(602)); // 0 = no truncation

        const Encoding pair = tok().encode(longText, join(words(300, "other")), 512);
        QCOMPARE(pair.inputIds.size(), std::size_t(512));
        // longest_first: 300 tokens off the longer text to even them out, then the remaining 91
        // alternately (the pair segment first): 509 text tokens split 255 / 254.
        const auto firstSep = std::find(pair.inputIds.begin(), pair.inputIds.end(), tok().sepId());
        QCOMPARE(std::distance(pair.inputIds.begin(), firstSep), std::ptrdiff_t(1 + 255));
        QCOMPARE(std::count(pair.tokenTypeIds.begin(), pair.tokenTypeIds.end(), 1), std::ptrdiff_t(254 + 1));
    }

    void withoutSpecialTokens()
    {
        const Encoding enc = tok().encode("Hello world", std::string("again"), 0, false);
        COMPARE_VECTORS(enc.tokens, (std::vector<std::string>{"hello", "world", "again"}), "tokens");
        // Hugging Face gives the pair segment type 0 too when no special tokens are added.
        COMPARE_VECTORS(enc.tokenTypeIds, (std::vector<std::int64_t>{0, 0, 0}), "token types");
        COMPARE_VECTORS(tok().encode("a b c d", std::nullopt, 2, false).tokens,
                        (std::vector<std::string>{"a", "b"}), "truncated without special tokens");
    }

    // ---- speed on the shipped MNLI sample --------------------------------------------------------

    void sampleMnliThroughput()
    {
        const auto pairs = outlierlens::readNliPairs(kSourceDir + "/sample_data/mnli/mnli_dev_matched.jsonl");
        QCOMPARE(pairs.size(), std::size_t(9815));
        QElapsedTimer timer;
        timer.start();
        std::size_t tokens = 0, longest = 0;
        for (const auto& p : pairs) {
            const Encoding enc = tok().encode(p.premise, p.hypothesis);
            tokens += enc.inputIds.size();
            longest = std::max(longest, enc.inputIds.size());
        }
        const qint64 ms = timer.elapsed();
        qInfo("encoded %zu MNLI pairs (%zu tokens, longest %zu) in %lld ms", pairs.size(), tokens, longest,
              ms);
        // The first pair is golden case pair_mnli_like.
        QCOMPARE(tok().encode(pairs[0].premise, pairs[0].hypothesis).inputIds.size(), std::size_t(15));
    }
};

QTEST_APPLESS_MAIN(TstTokenizer)
#include "tst_tokenizer.moc"
