// The tokenizer.json reader (TokenizerJsonTokenizer): every golden case of the real LLaMA 3, Qwen 3
// and Gemma 2 tokenizers (made by transformers.js, tests/fixtures/tokenizers/README.md) and of two
// small Unigram tokenizers (made by Hugging Face's tokenizers, tokenizers/unigram-tiny/README.md),
// how DecoderTokenizer::fromModelDir picks it, and one clear error for each kind of bad file.

#include "../common/sequence_compare.h"
#include "common/error.h"
#include "text/decoder_tokenizer.h"
#include "text/tokenizer_json.h"
#include "text/unicode_regex.h"

#include <nlohmann/json.hpp>

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace outlierlens;
namespace fs = std::filesystem;

using outlierlens::test::errorOf;
using outlierlens::test::firstDifference;

namespace {

const std::string kTokenizers = std::string(OUTLIERLENS_TEST_DATA) + "/tokenizers";
const char* const kNames[] = {"llama3", "qwen3", "gemma2"};

void writeFile(const std::string& path, const std::string& data)
{
    std::ofstream out(path, std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

std::string readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// A small byte-level pipeline to break in the bad-input tests.
nlohmann::json tinyTokenizerJson()
{
    return nlohmann::json::parse(R"({
      "version": "1.0", "added_tokens": [{"id": 5, "content": "<s>", "special": true, "normalized": false,
        "lstrip": false, "rstrip": false, "single_word": false}],
      "normalizer": {"type": "NFC"},
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\p{N}"}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
      "post_processor": {"type": "ByteLevel"},
      "decoder": {"type": "ByteLevel"},
      "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "1": 3, "Ġ": 4}, "merges": [["a", "b"]]}
    })");
}

// A Unigram model.vocab: a list of [piece, score] (a braced list of pairs would be a JSON object).
nlohmann::json unigramVocab(const std::vector<std::pair<std::string, nlohmann::json>>& pieces)
{
    nlohmann::json list = nlohmann::json::array();
    for (const auto& [piece, score] : pieces)
        list.push_back(nlohmann::json::array({piece, score}));
    return list;
}

} // namespace

class TstTokenizerJson : public QObject
{
    Q_OBJECT

private:
    std::map<std::string, std::unique_ptr<DecoderTokenizer>> m_tokenizers;
    std::map<std::string, std::unique_ptr<DecoderTokenizer>> m_unigram; // unigram-tiny, loaded on use

private Q_SLOTS:
    void initTestCase()
    {
        for (const char* name : kNames) {
            QElapsedTimer timer;
            timer.start();
            m_tokenizers[name] = DecoderTokenizer::fromModelDir(kTokenizers + "/" + name);
            qInfo("%s: tokenizer.json (%.1f MB) loaded in %lld ms", name,
                  static_cast<double>(fs::file_size(kTokenizers + "/" + name + "/tokenizer.json")) / 1e6,
                  static_cast<long long>(timer.elapsed()));
        }
    }

    // ---- the golden cases ------------------------------------------------------------------------

    void goldenCases_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QByteArray>("line");
        for (const char* name : kNames) {
            std::ifstream in(kTokenizers + "/tokenizer_cases_" + name + ".jsonl");
            QVERIFY(in.good());
            std::string line;
            int count = 0;
            while (std::getline(in, line)) {
                if (line.empty()) continue;
                const auto c = nlohmann::json::parse(line);
                QTest::newRow(c.at("id").get<std::string>().c_str())
                    << QString::fromLatin1(name) << QByteArray::fromStdString(line);
                ++count;
            }
            QCOMPARE(count, 68);
        }
    }
    void goldenCases()
    {
        QFETCH(QString, name);
        QFETCH(QByteArray, line);
        const auto c = nlohmann::json::parse(line.toStdString());
        const DecoderTokenizer& tok = *m_tokenizers.at(name.toStdString());
        QVERIFY(c.at("text_pair").is_null());
        const Encoding enc = tok.encode(c.at("text").get<std::string>(), std::nullopt, 0,
                                        c.at("add_special_tokens").get<bool>());
        const std::string id = c.at("id").get<std::string>();
        std::string diff = firstDifference(enc.inputIds, c.at("input_ids").get<std::vector<std::int64_t>>());
        QVERIFY2(diff.empty(), (id + ": input_ids: " + diff).c_str());
        diff = firstDifference(enc.tokens, c.at("tokens").get<std::vector<std::string>>());
        QVERIFY2(diff.empty(), (id + ": tokens: " + diff).c_str());
        QCOMPARE(enc.attentionMask, std::vector<std::int64_t>(enc.inputIds.size(), 1));
    }

    // ---- what the tokenizer says about itself ----------------------------------------------------

    void specialIds_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<qint64>("vocab");
        QTest::addColumn<qint64>("bos");
        QTest::addColumn<qint64>("eos");
        QTest::addColumn<qint64>("pad");
        QTest::addColumn<QString>("kind");
        // tokenizer_config.json: LLaMA 3 <|begin_of_text|>/<|end_of_text|>, no pad; Qwen 3 no bos,
        // eos <|im_end|>, pad <|endoftext|>; Gemma 2 <bos> 2, <eos> 1, <pad> 0.
        QTest::newRow("llama3") << "llama3" << qint64(128256) << qint64(128000) << qint64(128001)
                                << qint64(-1) << "byte-level BPE (tokenizer.json)";
        QTest::newRow("qwen3") << "qwen3" << qint64(151669) << qint64(-1) << qint64(151645) << qint64(151643)
                               << "byte-level BPE (tokenizer.json)";
        QTest::newRow("gemma2") << "gemma2" << qint64(256000) << qint64(2) << qint64(1) << qint64(0)
                                << "BPE (tokenizer.json)";
    }
    void specialIds()
    {
        QFETCH(QString, name);
        QFETCH(qint64, vocab);
        QFETCH(qint64, bos);
        QFETCH(qint64, eos);
        QFETCH(qint64, pad);
        QFETCH(QString, kind);
        const DecoderTokenizer& tok = *m_tokenizers.at(name.toStdString());
        QCOMPARE(tok.vocabSize(), vocab);
        QCOMPARE(tok.bosId(), bos);
        QCOMPARE(tok.eosId(), eos);
        QCOMPARE(tok.padId(), pad);
        QCOMPARE(QString::fromStdString(tok.kind()), kind);
        QVERIFY(errorOf([&] { tok.idToToken(vocab); }).contains(QString::number(vocab)));
        QVERIFY(!errorOf([&] { tok.idToToken(-1); }).isEmpty());
    }

    void displayTokens()
    {
        // Byte-level symbols back to text; "▁" as a space and <0xNN> as its byte for Gemma 2.
        const DecoderTokenizer& llama = *m_tokenizers.at("llama3");
        QCOMPARE(llama.displayToken(4062), std::string(" quick"));
        QCOMPARE(llama.displayToken(128000), std::string("<|begin_of_text|>"));
        const DecoderTokenizer& gemma = *m_tokenizers.at("gemma2");
        const Encoding enc = gemma.encode("quick brown", std::nullopt, 0, false);
        QCOMPARE(gemma.displayToken(enc.inputIds.back()), std::string(" brown"));
        const auto& json = dynamic_cast<const TokenizerJsonTokenizer&>(gemma);
        QCOMPARE(gemma.displayToken(json.tokenToId("<0x41>")), std::string("A"));
        QCOMPARE(gemma.displayToken(json.tokenToId("<0x0A>")), std::string("\\n"));
    }

    void pairAndTruncation()
    {
        // Gemma 2's TemplateProcessing: "<bos> A" and "<bos> A <bos> B"; truncation counts them.
        const DecoderTokenizer& gemma = *m_tokenizers.at("gemma2");
        const auto a = gemma.encode("one two three", std::nullopt, 0, false).inputIds;
        const auto b = gemma.encode("four", std::nullopt, 0, false).inputIds;
        std::vector<std::int64_t> want = {2};
        want.insert(want.end(), a.begin(), a.end());
        want.push_back(2);
        want.insert(want.end(), b.begin(), b.end());
        QCOMPARE(gemma.encode("one two three", std::string("four")).inputIds, want);
        const Encoding cut = gemma.encode("one two three", std::nullopt, 3);
        QCOMPARE(cut.inputIds, (std::vector<std::int64_t>{2, a[0], a[1]}));
        QCOMPARE(cut.tokens.front(), std::string("<bos>"));
        // LLaMA 3's post-processor is ByteLevel alone: no special tokens even when asked for.
        const DecoderTokenizer& llama = *m_tokenizers.at("llama3");
        QCOMPARE(llama.encode("hi", std::string("there")).inputIds.size(),
                 llama.encode("hi there", std::nullopt, 0, false).inputIds.size());
        QVERIFY(!errorOf([&] { llama.encode("bad \xFF"); }).isEmpty());
    }

    // ---- how a folder is read --------------------------------------------------------------------

    void onlyTokenizerJsonFolder()
    {
        // `tokenize --model DIR` on a folder holding only tokenizer.json + tokenizer_config.json.
        QTemporaryDir dir;
        const std::string d = dir.path().toStdString();
        for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
            fs::copy_file(kTokenizers + "/qwen3/" + file, d + "/" + file);
        QVERIFY(DecoderTokenizer::existsIn(d));
        const auto tok = DecoderTokenizer::fromModelDir(d);
        QCOMPARE(QString::fromStdString(tok->kind()), QStringLiteral("byte-level BPE (tokenizer.json)"));
        const Encoding want = m_tokenizers.at("qwen3")->encode("Year 2026: 你好 <|im_start|>");
        QCOMPARE(tok->encode("Year 2026: 你好 <|im_start|>").inputIds, want.inputIds);
        QCOMPARE(tok->eosId(), qint64(151645));
    }

    void qwen2HubFolderUsesTokenizerJson()
    {
        // vocab.json + merges.txt beside a tokenizer.json whose pre-tokenizer is not GPT-2's (Qwen2 hub
        // folders): the tokenizer.json pipeline is used, so "2026" is four digits as the model saw it.
        QTemporaryDir dir;
        const std::string d = dir.path().toStdString();
        fs::copy_file(kTokenizers + "/qwen3/tokenizer.json", d + "/tokenizer.json");
        const auto json = nlohmann::json::parse(readFile(d + "/tokenizer.json"));
        writeFile(d + "/vocab.json", json.at("model").at("vocab").dump());
        std::string merges = "#version: 0.2\n";
        for (const auto& m : json.at("model").at("merges"))
            merges += m[0].get<std::string>() + " " + m[1].get<std::string>() + "\n";
        writeFile(d + "/merges.txt", merges);
        const auto tok = DecoderTokenizer::fromModelDir(d);
        QCOMPARE(QString::fromStdString(tok->kind()), QStringLiteral("byte-level BPE (tokenizer.json)"));
        QCOMPARE(tok->encode("2026", std::nullopt, 0, false).inputIds.size(), std::size_t(4));
    }

    void tinyFixture()
    {
        // tokenizers/tiny (the fuzz target's seed): Qwen 3's pipeline with a 656-token vocabulary and a
        // TemplateProcessing that puts <|im_start|> before each segment.
        const auto tok = DecoderTokenizer::fromModelDir(kTokenizers + "/tiny");
        QCOMPARE(QString::fromStdString(tok->kind()), QStringLiteral("byte-level BPE (tokenizer.json)"));
        QCOMPARE(tok->vocabSize(), qint64(659));
        QCOMPARE(tok->eosId(), qint64(658));
        QCOMPARE(tok->padId(), qint64(656));
        const Encoding enc = tok->encode("in 2026<|im_end|>", std::string("x"));
        QCOMPARE(enc.tokens.front(), std::string("<|im_start|>"));
        // Qwen's regex isolates every digit; the added token is cut out whole.
        const std::vector<std::string> digits{"2", "0", "2", "6", "<|im_end|>", "<|im_start|>", "x"};
        QVERIFY(enc.tokens.size() > digits.size());
        QCOMPARE(std::vector<std::string>(enc.tokens.end() - 7, enc.tokens.end()), digits);
        QCOMPARE(tok->encode("in 2026", std::nullopt, 0, false).tokens.front(), std::string("in"));
    }

    void whiteSpaceClass()
    {
        // \s is White_Space as the tokenizers library's Oniguruma reads it: U+0085 and U+3000 are in it,
        // U+180E (PCRE2's own \s has it) and U+FEFF (JavaScript's has it; fixture case space_bom) are not.
        using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;
        const std::string text = "a\u180E\u0085 \u3000b\uFEFF";
        QCOMPARE(UnicodeRegex("\\s+", "t").findAll(text), (Ranges{{4, 10}}));
        QCOMPARE(UnicodeRegex("\\S+", "t").findAll(text), (Ranges{{0, 4}, {10, 14}}));
        QCOMPARE(UnicodeRegex("[^\\s\\p{L}]+", "t").findAll(text), (Ranges{{1, 4}, {11, 14}}));
        QVERIFY(errorOf([] {
                    UnicodeRegex("(\\p{L}", "where");
                }).startsWith("where: invalid regular expression"));
    }

    // ---- Unigram -------------------------------------------------------------------------------

    void unigramCases_data()
    {
        // unigram-tiny: every case as Hugging Face's tokenizers 0.22.2 gives it (README.md there).
        QTest::addColumn<QByteArray>("line");
        std::ifstream in(kTokenizers + "/unigram-tiny/cases.jsonl");
        QVERIFY(in.good());
        std::string line;
        int count = 0, byteFallback = 0;
        while (std::getline(in, line)) {
            if (line.empty()) continue;
            const auto c = nlohmann::json::parse(line);
            QTest::newRow(c.at("id").get<std::string>().c_str()) << QByteArray::fromStdString(line);
            ++count;
            if (!c.at("transformers_js_agrees").get<bool>()) ++byteFallback;
        }
        QCOMPARE(count, 84);
        // transformers.js has no Unigram byte fallback: it differs on those cases only.
        QCOMPARE(byteFallback, 18);
    }
    void unigramCases()
    {
        QFETCH(QByteArray, line);
        const auto c = nlohmann::json::parse(line.toStdString());
        const std::string name = c.at("tokenizer").get<std::string>();
        // Through the app's entry point: a Unigram model goes to the tokenizer.json pipeline even where its
        // normalizer and pre-tokenizer look like LLaMA's (byte-fallback/).
        if (m_unigram.count(name) == 0) {
            m_unigram[name] = DecoderTokenizer::fromModelDir(kTokenizers + "/unigram-tiny/" + name);
            QCOMPARE(QString::fromStdString(m_unigram[name]->kind()),
                     QStringLiteral("Unigram (tokenizer.json)"));
        }
        const DecoderTokenizer& tok = *m_unigram.at(name);
        const Encoding enc = tok.encode(c.at("text").get<std::string>(), std::nullopt, 0,
                                        c.at("add_special_tokens").get<bool>());
        const std::string id = c.at("id").get<std::string>();
        if (!c.at("transformers_js_agrees").get<bool>())
            QVERIFY(c.at("tokenizer").get<std::string>() == "byte-fallback");
        std::string diff = firstDifference(enc.inputIds, c.at("input_ids").get<std::vector<std::int64_t>>());
        QVERIFY2(diff.empty(), (id + ": input_ids: " + diff).c_str());
        diff = firstDifference(enc.tokens, c.at("tokens").get<std::vector<std::string>>());
        QVERIFY2(diff.empty(), (id + ": tokens: " + diff).c_str());
    }

    void unigramTokenizerInfo()
    {
        const auto plain = DecoderTokenizer::fromModelDir(kTokenizers + "/unigram-tiny/plain");
        QCOMPARE(QString::fromStdString(plain->kind()), QStringLiteral("Unigram (tokenizer.json)"));
        QCOMPARE(plain->vocabSize(), qint64(58));
        QCOMPARE(plain->eosId(), qint64(1));
        QCOMPARE(plain->padId(), qint64(0));
        QCOMPARE(plain->bosId(), qint64(-1));
        QCOMPARE(plain->idToToken(3), std::string("\u2581"));
        QCOMPARE(plain->displayToken(18), std::string(" hello"));
        const auto bytes = TokenizerJsonTokenizer::fromModelDir(kTokenizers + "/unigram-tiny/byte-fallback");
        QCOMPARE(bytes->vocabSize(), qint64(313));
        QCOMPARE(bytes->displayToken(bytes->tokenToId("<0x41>")), std::string("A"));
        QCOMPARE(bytes->tokenToId("<0xF3>"), std::int64_t(-1));
        // A pair: "$A </s> $B </s>".
        QCOMPARE(bytes->encode("the", std::string("the")).tokens,
                 (std::vector<std::string>{"\u2581the", "</s>", "\u2581the", "</s>"}));
    }

    void unigramRules()
    {
        // Small models whose results follow from tokenizers' rules by hand (no pre-tokenizer, so the
        // whole text is one piece for the model).
        QTemporaryDir dir;
        const std::string d = dir.path().toStdString();
        const auto load = [&](const nlohmann::json& model) {
            nlohmann::json j = {{"version", "1.0"}, {"model", model}};
            writeFile(d + "/tokenizer.json", j.dump());
            return DecoderTokenizer::fromModelDir(d);
        };
        const auto tokens = [](const DecoderTokenizer& tok, const std::string& text) {
            return tok.encode(text, std::nullopt, 0, false).tokens;
        };
        using Tokens = std::vector<std::string>;
        // tokenizers' own doc example (models/unigram/model.rs): "abcd" 10 beats "abc" 5 + "d" 0;
        // then "a" 0 + "cd" 1 = 1 beats "a" + "c" + "d" = 0; "xx" is two unknown characters fused.
        const auto doc = load({{"type", "Unigram"},
                               {"unk_id", 0},
                               {"vocab", unigramVocab({{"<unk>", 0.0},
                                                       {"a", 0.0},
                                                       {"b", 0.0},
                                                       {"c", 0.0},
                                                       {"d", 0.0},
                                                       {"cd", 1.0},
                                                       {"ab", 2.0},
                                                       {"abc", 5.0},
                                                       {"abcd", 10.0}})}});
        QCOMPARE(doc->encode("abcdacdxx", std::nullopt, 0, false).inputIds,
                 (std::vector<std::int64_t>{8, 1, 5, 0}));
        // Not the longest match: "ab" -1 + "cd" -1 = -2 beats "abc" -3 + "d" -1 = -4.
        const auto scores = load({{"type", "Unigram"},
                                  {"unk_id", 0},
                                  {"vocab", unigramVocab({{"<unk>", 0.0},
                                                          {"ab", -1.0},
                                                          {"cd", -1.0},
                                                          {"abc", -3.0},
                                                          {"d", -1.0},
                                                          {"a", -2.0},
                                                          {"c", -2.0},
                                                          {"b", -2.0}})}});
        QCOMPARE(tokens(*scores, "abcd"), (Tokens{"ab", "cd"}));
        // "é" and "e" have no piece: each is an <unk> node scored min - 10 = -13, and the two
        // adjacent ones are fused into one <unk> ("ée" is no piece and there is no byte fallback).
        QCOMPARE(tokens(*scores, "a\u00e9eab"), (Tokens{"a", "<unk>", "ab"}));
        // Equal scores (-2): the path to the end is set by "bc" from position 1 first, and "c" from
        // position 2 is not strictly better, so "a" + "bc" (tokenizers keeps the first found).
        const auto ties =
            load({{"type", "Unigram"},
                  {"unk_id", 0},
                  {"vocab",
                   unigramVocab({{"<unk>", 0.0}, {"a", -1.0}, {"bc", -1.0}, {"ab", -1.0}, {"c", -1.0}})}});
        QCOMPARE(tokens(*ties, "abc"), (Tokens{"a", "bc"}));
        // No unk_id: an unknown character is an error, as tokenizers' MissingUnkId.
        const auto noUnk = load({{"type", "Unigram"}, {"vocab", unigramVocab({{"a", -1.0}})}});
        QCOMPARE(tokens(*noUnk, "aa"), (Tokens{"a", "a"}));
        const QString msg = errorOf([&] { noUnk->encode("ab"); });
        QVERIFY2(msg.contains("'b'") && msg.contains("unk_id"), qPrintable(msg));
    }

    // ---- bad input -------------------------------------------------------------------------------

    void badTokenizerJson_data()
    {
        QTest::addColumn<QByteArray>("content");
        QTest::addColumn<QStringList>("expected");
        const auto edited = [](const std::function<void(nlohmann::json&)>& edit) {
            nlohmann::json j = tinyTokenizerJson();
            edit(j);
            return QByteArray::fromStdString(j.dump());
        };
        QTest::newRow("normalizer") << edited([](auto& j) {
            j["normalizer"] = {{"type", "Sequence"},
                               {"normalizers", {{{"type", "NFC"}}, {{"type", "BertNormalizer"}}}}};
        }) << QStringList{"tokenizer.json", "normalizer.normalizers[1]", "'BertNormalizer'", "not supported"};
        QTest::newRow("pre-tokenizer") << edited([](auto& j) {
            j["pre_tokenizer"]["pretokenizers"][1] = {{"type", "Whitespace"}};
        })
                                       << QStringList{"tokenizer.json", "pre_tokenizer.pretokenizers[1]",
                                                      "'Whitespace'", "not supported"};
        QTest::newRow("model") << edited([](auto& j) {
            j["model"] = {{"type", "WordPiece"}, {"vocab", {{"a", 0}}}, {"unk_token", "a"}};
        }) << QStringList{"tokenizer.json", "model", "'WordPiece'", "not supported"};
        // T5's and ALBERT's normalizer: SentencePiece's compiled character map, not read yet.
        QTest::newRow("precompiled") << edited([](auto& j) {
            j["normalizer"] = {
                {"type", "Sequence"},
                {"normalizers", {{{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}}}}};
        }) << QStringList{"tokenizer.json", "normalizer.normalizers[0]", "'Precompiled'", "not supported"};
        const auto unigram = [](nlohmann::json model) {
            nlohmann::json j = tinyTokenizerJson();
            j["model"] = std::move(model);
            return QByteArray::fromStdString(j.dump());
        };
        QTest::newRow("unigram vocab object")
            << unigram({{"type", "Unigram"}, {"vocab", {{"a", 0}}}, {"unk_id", 0}})
            << QStringList{"tokenizer.json", "model", "'vocab'", "[piece, score]"};
        QTest::newRow("unigram vocab entry")
            << unigram(
                   {{"type", "Unigram"}, {"vocab", unigramVocab({{"a", -1.0}, {"b", "low"}})}, {"unk_id", 0}})
            << QStringList{"tokenizer.json", "model.vocab[1]", "[piece, score]"};
        QTest::newRow("unigram unk_id")
            << unigram({{"type", "Unigram"}, {"vocab", unigramVocab({{"a", -1.0}})}, {"unk_id", 1}})
            << QStringList{"tokenizer.json", "model", "unk_id 1"};
        QTest::newRow("unigram empty")
            << unigram({{"type", "Unigram"}, {"vocab", nlohmann::json::array()}, {"unk_id", 0}})
            << QStringList{"tokenizer.json", "model", "empty"};
        QTest::newRow("post-processor") << edited([](auto& j) {
            j["post_processor"] = {{"type", "Sequence"},
                                   {"processors", {{{"type", "ByteLevel"}}, {{"type", "Frobnicate"}}}}};
        }) << QStringList{"tokenizer.json", "post_processor.processors[1]", "'Frobnicate'", "not supported"};
        QTest::newRow("split behavior")
            << edited([](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways"; })
            << QStringList{"tokenizer.json", "pre_tokenizer.pretokenizers[0]", "Sideways"};
        QTest::newRow("regex") << edited([](auto& j) {
            j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "(\\p{L}"}};
        }) << QStringList{"tokenizer.json", "pre_tokenizer.pretokenizers[0].pattern", "regular expression"};
        QTest::newRow("merge not in vocab") << edited([](auto& j) {
            j["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"a", "z"})});
        }) << QStringList{"tokenizer.json", "model.merges[0]", "'z'"};
        QTest::newRow("merge string")
            << edited([](auto& j) { j["model"]["merges"] = nlohmann::json::array({"a b c"}); })
            << QStringList{"tokenizer.json", "model.merges[0]"};
        QTest::newRow("vocab id") << edited([](auto& j) { j["model"]["vocab"]["b"] = "one"; })
                                  << QStringList{"tokenizer.json", "model.vocab", "'b'"};
        QTest::newRow("unk") << edited([](auto& j) { j["model"]["unk_token"] = "<unk>"; })
                             << QStringList{"tokenizer.json", "unk_token", "<unk>"};
        QTest::newRow("no model") << edited([](auto& j) { j.erase("model"); })
                                  << QStringList{"tokenizer.json", "'model'"};
        QTest::newRow("added tokens") << edited([](auto& j) { j["added_tokens"] = "none"; })
                                      << QStringList{"tokenizer.json", "added_tokens"};
        QTest::newRow("template") << edited([](auto& j) {
            j["post_processor"] = {{"type", "TemplateProcessing"},
                                   {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}}},
                                   {"pair", nlohmann::json::array()},
                                   {"special_tokens", nlohmann::json::object()}};
        }) << QStringList{"tokenizer.json", "post_processor.single[0]", "<s>"};
        const QByteArray valid = QByteArray::fromStdString(tinyTokenizerJson().dump());
        QTest::newRow("truncated") << valid.left(valid.size() / 2)
                                   << QStringList{"tokenizer.json", "malformed JSON"};
        QTest::newRow("not an object") << QByteArray("[1, 2]") << QStringList{"tokenizer.json", "object"};
        QTest::newRow("empty") << QByteArray("") << QStringList{"tokenizer.json"};
    }
    void badTokenizerJson()
    {
        QFETCH(QByteArray, content);
        QFETCH(QStringList, expected);
        QTemporaryDir dir;
        writeFile(dir.path().toStdString() + "/tokenizer.json", content.toStdString());
        const QString msg = errorOf([&] { DecoderTokenizer::fromModelDir(dir.path().toStdString()); });
        for (const QString& part : expected)
            QVERIFY2(msg.contains(part), qPrintable(QStringLiteral("'%1' lacks '%2'").arg(msg, part)));
    }

    void tinyPipeline()
    {
        // The pipeline the bad-input tests break, intact: digits isolated, "ab" merged, <s> cut out.
        QTemporaryDir dir;
        writeFile(dir.path().toStdString() + "/tokenizer.json", tinyTokenizerJson().dump());
        const auto tok = DecoderTokenizer::fromModelDir(dir.path().toStdString());
        QCOMPARE(tok->encode("ab1<s>ba").inputIds, (std::vector<std::int64_t>{2, 3, 5, 1, 0}));
        QCOMPARE(tok->encode("ab1<s>ba").tokens, (std::vector<std::string>{"ab", "1", "<s>", "b", "a"}));
        QCOMPARE(tok->bosId(), qint64(-1));
    }
};

QTEST_GUILESS_MAIN(TstTokenizerJson)
#include "tst_tokenizer_json.moc"
