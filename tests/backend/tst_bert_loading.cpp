// Strict checkpoint loading: every kind of mismatch is an error naming the tensor, expected and
// found; the known harmless extras of real Hugging Face checkpoints are left out and reported;
// a checkpoint we save loads back identically.

#include "../common/tensor_compare.h"

#include "common/error.h"
#include "io/hdf5_store.h"
#include "io/safetensors.h"
#include "model/bert_network.h"
#include "model/runtime.h"

#include <QtTest>

#include <filesystem>
#include <fstream>

using namespace outlierlens;
using outlierlens::test::fixture;
namespace fs = std::filesystem;

namespace {

/// A model folder in `dir` with the fixture's config and vocabulary and the given tensors.
void writeModel(const QString& dir, const StateDict& tensors, const std::string& configFrom = "bert/hf")
{
    const fs::path out = dir.toStdString();
    fs::copy_file(fixture(configFrom + "/config.json"), out / "config.json",
                  fs::copy_options::overwrite_existing);
    fs::copy_file(fixture(configFrom + "/vocab.txt"), out / "vocab.txt",
                  fs::copy_options::overwrite_existing);
    writeSafetensors((out / "model.safetensors").string(), tensors);
}

QString loadError(const QString& dir)
{
    try {
        BertNetwork::load(dir.toStdString());
    } catch (const Error& e) {
        return QString::fromStdString(e.what());
    }
    return QString();
}

torch::Tensor logitsOf(BertNetwork& net, const std::string& referenceFile = "bert/reference.h5")
{
    Hdf5Reader ref(fixture(referenceFile));
    c10::InferenceMode guard;
    return net
        .forward(ref.readTensor("inputs/input_ids"), ref.readTensor("inputs/token_type_ids"),
                 ref.readTensor("inputs/attention_mask"))
        .logits.clone();
}

} // namespace

class TstBertLoading : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { configureTorchThreads(); }

    void strictErrors_data()
    {
        QTest::addColumn<QString>("change");
        QTest::addColumn<QStringList>("mustMention");
        QTest::newRow("missing") << "missing"
                                 << QStringList{"missing tensor", "bert.encoder.layer.1.output.dense.weight",
                                                "[128, 512]"};
        QTest::newRow("unexpected") << "unexpected"
                                    << QStringList{"unexpected tensor", "bert.encoder.layer.0.extra.weight"};
        QTest::newRow("shape") << "shape"
                               << QStringList{"classifier.weight", "[4, 128]", "expected [3, 128]"};
        QTest::newRow("dtype") << "dtype" << QStringList{"bert.pooler.dense.bias", "Long", "Float"};
    }
    void strictErrors()
    {
        QFETCH(QString, change);
        QFETCH(QStringList, mustMention);
        StateDict t = readSafetensors(fixture("bert/hf/model.safetensors"));
        if (change == "missing")
            t.erase("bert.encoder.layer.1.output.dense.weight");
        else if (change == "unexpected")
            t["bert.encoder.layer.0.extra.weight"] = torch::zeros({2, 2});
        else if (change == "shape")
            t["classifier.weight"] = torch::zeros({4, 128});
        else if (change == "dtype")
            t["bert.pooler.dense.bias"] = torch::zeros({128}, torch::kLong);
        QTemporaryDir dir;
        writeModel(dir.path(), t);
        const QString message = loadError(dir.path());
        QVERIFY2(!message.isEmpty(), "loading must fail");
        QVERIFY2(!message.contains('\n'), qPrintable(message));
        QVERIFY2(message.contains("model.safetensors"), qPrintable(message));
        for (const QString& word : mustMention)
            QVERIFY2(message.contains(word), qPrintable(message + "  -- lacks: " + word));
    }

    void legacyLayerNormNamesLoadIdentically()
    {
        StateDict t = readSafetensors(fixture("bert/hf/model.safetensors"));
        StateDict legacy;
        for (auto& [name, tensor] : t) {
            std::string n = name;
            if (n.find("LayerNorm.weight") != std::string::npos)
                n.replace(n.find("LayerNorm.weight"), 16, "LayerNorm.gamma");
            else if (n.find("LayerNorm.bias") != std::string::npos)
                n.replace(n.find("LayerNorm.bias"), 14, "LayerNorm.beta");
            legacy.emplace(n, tensor);
        }
        QVERIFY(legacy.count("bert.embeddings.LayerNorm.gamma"));
        QTemporaryDir dir;
        writeModel(dir.path(), legacy);
        BertNetwork net = BertNetwork::load(dir.path().toStdString());
        QCOMPARE(net.loadReport().renamed.size(), std::size_t(2 + 2 * 2 * 2)); // embeddings + 2 per layer
        BertNetwork original = BertNetwork::load(fixture("bert/hf"));
        QVERIFY(torch::equal(logitsOf(net), logitsOf(original)));
    }

    /// A sharded checkpoint as save_pretrained writes one (index + shards, here the encoder in one
    /// shard and the rest in another) loads as the single file does; a shard the index names outside
    /// the folder is refused.
    void shardedCheckpointLoads()
    {
        const StateDict t = readSafetensors(fixture("bert/hf/model.safetensors"));
        StateDict first, second;
        std::string map;
        for (const auto& [name, tensor] : t) {
            const bool encoder = name.find(".encoder.") != std::string::npos;
            (encoder ? first : second).emplace(name, tensor);
            map += std::string(map.empty() ? "" : ", ") + "\"" + name + "\": \"" +
                   (encoder ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors") + "\"";
        }
        QVERIFY(!first.empty() && !second.empty());
        QTemporaryDir dir;
        writeModel(dir.path(), first);
        const fs::path out = dir.path().toStdString();
        fs::rename(out / "model.safetensors", out / "model-00001-of-00002.safetensors");
        writeSafetensors((out / "model-00002-of-00002.safetensors").string(), second);
        std::ofstream(out / "model.safetensors.index.json")
            << "{\"metadata\": {}, \"weight_map\": {" << map << "}}";
        BertNetwork sharded = BertNetwork::load(dir.path().toStdString());
        BertNetwork original = BertNetwork::load(fixture("bert/hf"));
        QVERIFY(torch::equal(logitsOf(sharded), logitsOf(original)));

        std::ofstream(out / "model.safetensors.index.json")
            << "{\"weight_map\": {\"bert.pooler.dense.bias\": \"../model-00002-of-00002.safetensors\"}}";
        QVERIFY2(loadError(dir.path()).contains("outside the model folder"),
                 qPrintable(loadError(dir.path())));
    }

    void positionIdsBuffer()
    {
        StateDict t = readSafetensors(fixture("bert/hf/model.safetensors"));
        t["bert.embeddings.position_ids"] = torch::arange(512, torch::kLong).unsqueeze(0);
        QTemporaryDir dir;
        writeModel(dir.path(), t);
        BertNetwork net = BertNetwork::load(dir.path().toStdString());
        QCOMPARE(net.loadReport().ignored.size(), std::size_t(1));

        t["bert.embeddings.position_ids"] = torch::arange(512, torch::kLong).flip(0).unsqueeze(0);
        writeModel(dir.path(), t);
        QVERIFY(loadError(dir.path()).contains("bert.embeddings.position_ids"));
    }

    void configDeclaresHeadTheWeightsLack()
    {
        StateDict t = readSafetensors(fixture("bert/hf/model.safetensors"));
        t.erase("classifier.weight");
        t.erase("classifier.bias");
        QTemporaryDir dir;
        writeModel(dir.path(), t);
        const QString message = loadError(dir.path());
        QVERIFY2(message.contains("BertForSequenceClassification"), qPrintable(message));
    }

    void maskedLmPretrainingCheckpoint()
    {
        // Shaped like bert-base-uncased's checkpoint: MLM head, NSP head, pooler, tied decoder.
        BertConfig config = BertConfig::preset("bert-tiny");
        config.vocabSize = 2048;
        config.architectures = {"BertForMaskedLM"};
        BertNetwork made = BertNetwork::create(config, BertHead::MaskedLM, 7);
        QTemporaryDir dir;
        made.save(dir.path().toStdString());
        StateDict t = readSafetensors((dir.path() + "/model.safetensors").toStdString());
        t["cls.seq_relationship.weight"] = torch::randn({2, 128});
        t["cls.seq_relationship.bias"] = torch::randn({2});
        t["bert.pooler.dense.weight"] = torch::randn({128, 128});
        t["bert.pooler.dense.bias"] = torch::randn({128});
        t["cls.predictions.decoder.weight"] = t.at("bert.embeddings.word_embeddings.weight").clone();
        t["cls.predictions.decoder.bias"] = t.at("cls.predictions.bias").clone();
        writeSafetensors((dir.path() + "/model.safetensors").toStdString(), t);
        BertNetwork net = BertNetwork::load(dir.path().toStdString());
        QVERIFY(net.head() == BertHead::MaskedLM);
        QCOMPARE(net.loadReport().ignored.size(), std::size_t(6));

        const torch::Tensor ids = torch::randint(0, 2048, {2, 9}, torch::kLong);
        c10::InferenceMode guard;
        QVERIFY(torch::equal(net.forward(ids, {}, {}).logits, made.forward(ids, {}, {}).logits));

        t["cls.predictions.decoder.weight"] = torch::randn({2048, 128});
        writeSafetensors((dir.path() + "/model.safetensors").toStdString(), t);
        QVERIFY(loadError(dir.path()).contains("cls.predictions.decoder.weight"));
    }

    void savedGatedCheckpointLoadsBackIdentically_data()
    {
        QTest::addColumn<QString>("variant");
        QTest::newRow("linear") << "bert-gated-linear";
        QTest::newRow("mlp") << "bert-gated-mlp";
        QTest::newRow("all heads") << "bert-gated-all-heads-linear";
        QTest::newRow("clipped alpha") << "bert-clipped-alpha";
    }
    void savedGatedCheckpointLoadsBackIdentically()
    {
        QFETCH(QString, variant);
        const std::string dir = "variants/" + variant.toStdString();
        BertNetwork original = BertNetwork::load(fixture(dir + "/hf"));
        QTemporaryDir out;
        original.save(out.path().toStdString());
        BertNetwork reloaded = BertNetwork::load(out.path().toStdString());
        QCOMPARE(reloaded.config().variant.describe(), original.config().variant.describe());
        QVERIFY(torch::equal(logitsOf(reloaded, dir + "/reference.h5"),
                             logitsOf(original, dir + "/reference.h5")));
        OL_COMPARE_TENSORS("logits", logitsOf(reloaded, dir + "/reference.h5"),
                           Hdf5Reader(fixture(dir + "/reference.h5")).readTensor("outputs/logits"), 1e-4);
    }

    void variantOverrideReproducesThePaperCode()
    {
        // The variant fixtures share bert/hf's weights: overriding the softmax on the vanilla
        // checkpoint must give the clipped model's reference logits.
        VariantOverride o;
        o.set("softmax", "clipped");
        o.set("gamma", "-0.025");
        o.set("zeta", "1");
        BertNetwork net = BertNetwork::load(fixture("bert/hf"), o);
        OL_COMPARE_TENSORS(
            "logits", logitsOf(net),
            Hdf5Reader(fixture("variants/bert-clipped-gamma/reference.h5")).readTensor("outputs/logits"),
            1e-4);
    }

    void badConfigs_data()
    {
        QTest::addColumn<QString>("config");
        QTest::addColumn<QString>("mustMention");
        QTest::newRow("malformed") << "{\"hidden_size\": 128,"
                                   << "malformed JSON";
        QTest::newRow("missing field") << "{\"vocab_size\": 10}"
                                       << "hidden_size";
        QTest::newRow("heads") << "{\"vocab_size\": 2048, \"hidden_size\": 128, \"num_hidden_layers\": 2, "
                                  "\"num_attention_heads\": 3, \"intermediate_size\": 512}"
                               << "not a multiple";
        QTest::newRow("bad gamma")
            << "{\"vocab_size\": 2048, \"hidden_size\": 128, \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 2, \"intermediate_size\": 512, "
               "\"outlierlens\": {\"softmax\": \"clipped\", \"gamma\": 0.5}}"
            << "gamma must be <= 0";
        QTest::newRow("unknown gate")
            << "{\"vocab_size\": 2048, \"hidden_size\": 128, \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 2, \"intermediate_size\": 512, "
               "\"outlierlens\": {\"gate\": \"conv\"}}"
            << "unknown gate 'conv'";
        QTest::newRow("huge")
            << "{\"vocab_size\": 2000000000, \"hidden_size\": 100000, \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 2, \"intermediate_size\": 512}"
            << "implausibly large";
        // Issue #15.5: values cut to 32 bits, unchecked ids and probabilities, and sizes that the
        // weights contradict, all refused before a model is allocated.
        const auto fixtureConfig = [](const QString& field, const QString& value) {
            QString c =
                QStringLiteral("{\"vocab_size\": 2048, \"hidden_size\": 128, \"num_hidden_layers\": 2, "
                               "\"num_attention_heads\": 2, \"intermediate_size\": 512");
            return c + QStringLiteral(", \"%1\": %2}").arg(field, value);
        };
        QTest::newRow("hidden_size 2^32 + 128")
            << "{\"vocab_size\": 2048, \"hidden_size\": 4294967424, \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 2, \"intermediate_size\": 512}"
            << "field 'hidden_size' is 4294967424, outside the 32-bit range";
        QTest::newRow("num_hidden_layers 2^64 - 1")
            << "{\"vocab_size\": 2048, \"hidden_size\": 128, \"num_hidden_layers\": 18446744073709551615, "
               "\"num_attention_heads\": 2, \"intermediate_size\": 512}"
            << "outside the 64-bit integer range";
        QTest::newRow("pad_token_id -5")
            << fixtureConfig("pad_token_id", "-5") << "pad_token_id -5 is not a token";
        QTest::newRow("pad_token_id 1e9")
            << fixtureConfig("pad_token_id", "1000000000") << "pad_token_id 1000000000 is not a token";
        QTest::newRow("dropout 1.5") << fixtureConfig("hidden_dropout_prob", "1.5")
                                     << "hidden_dropout_prob must be a probability in [0, 1], found 1.5";
        QTest::newRow("type_vocab_size 1e9")
            << fixtureConfig("type_vocab_size", "1000000000") << "implausibly large";
        QTest::newRow("max_position_embeddings 2^20")
            << fixtureConfig("max_position_embeddings", "1048576")
            << "max_position_embeddings x hidden_size implies embeddings.position_embeddings.weight of shape "
               "[1048576, 128] but";
        QTest::newRow("type_vocab_size 1000")
            << fixtureConfig("type_vocab_size", "1000") << "type_vocab_size x hidden_size implies";
        QTest::newRow("more layers than the weights")
            << "{\"vocab_size\": 2048, \"hidden_size\": 128, \"num_hidden_layers\": 900, "
               "\"num_attention_heads\": 2, \"intermediate_size\": 512}"
            << "the config asks for 900 layers but";
    }
    void badConfigs()
    {
        QFETCH(QString, config);
        QFETCH(QString, mustMention);
        QTemporaryDir dir;
        {
            std::ofstream out((dir.path() + "/config.json").toStdString());
            out << config.toStdString();
        }
        fs::copy_file(fixture("bert/hf/model.safetensors"),
                      (dir.path() + "/model.safetensors").toStdString());
        const QString message = loadError(dir.path());
        QVERIFY2(message.contains("config.json"), qPrintable(message));
        QVERIFY2(message.contains(mustMention), qPrintable(message));
    }

    void missingWeights()
    {
        QTemporaryDir dir;
        fs::copy_file(fixture("bert/hf/config.json"), (dir.path() + "/config.json").toStdString());
        QVERIFY(loadError(dir.path()).contains("no model.safetensors, pytorch_model.bin or sharded index"));
        QVERIFY(loadError(dir.path() + "/nonexistent").contains("config.json"));
    }
};

QTEST_APPLESS_MAIN(TstBertLoading)
#include "tst_bert_loading.moc"
