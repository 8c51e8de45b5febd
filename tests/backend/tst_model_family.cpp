// The registry of model families (model/model_family): each fixture folder, written by Hugging Face or
// timm, is found as its family from config.json's model_type, architectures or timm's architecture; the
// rows say what the rest of the app asks; unknown families fail with one clear message.

#include "../common/expect_error.h"
#include "model/decoder_config.h"
#include "model/model_family.h"

#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <set>

using namespace outlierlens;
using outlierlens::test::expectError;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& relative)
{
    return std::string(OUTLIERLENS_TEST_DATA) + "/" + relative;
}

std::string folderWithConfig(const QTemporaryDir& tmp, const std::string& json)
{
    std::ofstream(fs::path(tmp.path().toStdString()) / "config.json") << json;
    return tmp.path().toStdString();
}

} // namespace

class TstModelFamily : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void fixturesFindTheirFamily_data()
    {
        QTest::addColumn<QString>("folder");
        QTest::addColumn<QString>("family");
        QTest::newRow("BERT (HF)") << "bert/hf"
                                   << "bert";
        QTest::newRow("ViT (HF)") << "vit/hf"
                                  << "vit";
        QTest::newRow("GPT-2") << "decoders/gpt2-seed0/hf"
                               << "gpt2";
        QTest::newRow("OPT") << "decoders/opt-seed0/hf"
                             << "opt";
        QTest::newRow("OPT post-LN") << "decoders/opt-postln-proj-seed0/hf"
                                     << "opt";
        QTest::newRow("LLaMA") << "decoders/llama-seed0/hf"
                               << "llama";
    }
    void fixturesFindTheirFamily()
    {
        QFETCH(QString, folder);
        QFETCH(QString, family);
        const ModelFamily& f = modelFamilyOfDir(fixture(folder.toStdString()));
        QCOMPARE(QString::fromStdString(f.id), family);
        QCOMPARE(&f, &modelFamily(family.toStdString())); // one row, found by id too
    }

    void configWithoutModelType()
    {
        // Older or hand-written configs: architectures only (exact names, or BERT's/ViT's prefixes);
        // timm's config.json has "architecture" and no model_type.
        const std::pair<const char*, const char*> cases[] = {
            {R"({"architectures": ["OPTForCausalLM"]})", "opt"},
            {R"({"architectures": ["GPT2LMHeadModel"]})", "gpt2"},
            {R"({"architectures": ["BertForSequenceClassification"]})", "bert"},
            {R"({"architectures": ["ViTModel"]})", "vit"},
            {R"({"architecture": "vit_small_patch16_224", "num_classes": 1000})", "vit"},
        };
        for (const auto& [json, id] : cases) {
            QTemporaryDir tmp;
            QCOMPARE(QString::fromStdString(modelFamilyOfDir(folderWithConfig(tmp, json)).id),
                     QString::fromLatin1(id));
        }
    }

    void unknownFamilyIsOneClearError()
    {
        QTemporaryDir tmp;
        const std::string dir =
            folderWithConfig(tmp, R"({"model_type": "bloom", "architectures": ["BloomForCausalLM"]})");
        expectError([&] { modelFamilyOfDir(dir); },
                    {"config.json", "unknown model family", "bloom", "BloomForCausalLM", "gpt2", "llama"});
        QVERIFY(!isModelDirOf(dir, FamilyEngine::Decoder));
        QTemporaryDir empty;
        expectError([&] { modelFamilyOfDir(empty.path().toStdString()); }, {"no config.json"});
        QTemporaryDir bad;
        expectError([&] { modelFamilyOfDir(folderWithConfig(bad, "[1, 2]")); }, {"expected a JSON object"});
        expectError([&] { modelFamily("mamba"); }, {"unknown model family 'mamba'", "bert", "vit"});
        // The decoder's config reader asks the same registry: a BERT config is named as one.
        expectError([&] { DecoderConfig::fromFile(fixture("bert/hf/config.json")); },
                    {"a BERT model, not a decoder", "qwen2"});
    }

    void rowsSayWhatTheAppAsks()
    {
        std::set<std::string> ids;
        for (const ModelFamily& f : modelFamilies()) {
            QVERIFY2(ids.insert(f.id).second, f.id.c_str()); // ids are unique
            QVERIFY(!f.name.empty() && !f.sinkTokens.empty() && !f.demoTrio.empty());
            // A decoder reads free text causally; a sentence-pair model reads text; images are not text.
            QCOMPARE(f.causal, f.engine == FamilyEngine::Decoder);
            QVERIFY(!f.sentencePairs || f.takesText());
            QCOMPARE(f.takesImages(), !f.takesText());
            // Its default data is of its own kind.
            const std::string kind = f.defaultData.substr(0, f.defaultData.find(':'));
            QCOMPARE(QString::fromStdString(kind), QString::fromLatin1(f.takesImages()   ? "images"
                                                                       : f.sentencePairs ? "mnli"
                                                                                         : "text"));
        }
        QVERIFY(modelFamily("gpt2").conv1dWeights); // Conv1D [in, out]
        QVERIFY(!modelFamily("opt").conv1dWeights && !modelFamily("llama").conv1dWeights);
        QVERIFY(isModelDirOf(fixture("decoders/opt-seed0/hf"), FamilyEngine::Decoder));
        QVERIFY(!isModelDirOf(fixture("bert/hf"), FamilyEngine::Decoder));
    }
};

QTEST_GUILESS_MAIN(TstModelFamily)
#include "tst_model_family.moc"
