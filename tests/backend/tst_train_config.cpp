// TrainConfig (tasks/config): every field by flag and by JSON, round trips, unknown keys, wrong types,
// validation, presets, --help; the tensors a run's metrics use; and how numbers, shapes and names
// are written in messages (common/text_format).

#include "../common/expect_error.h"
#include "common/error.h"
#include "common/text_format.h"
#include "tasks/config/train_config.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <set>

using namespace outlierlens;
using outlierlens::test::expectError;

namespace {

const std::vector<std::string> kPresetNames = {"demo-vit-fmnist", "demo-vit-canvas", "demo-bert-mlm",
                                               "demo-bert-nli",   "demo-synthetic",  "demo-clm",
                                               "demo-backcopy",   "paper-opt-125m",  "paper-bert-base-mlm",
                                               "paper-bert-6l",   "paper-vit-s16"};

/// A valid masked-LM config for the validation cases to break.
TrainConfig validMlm()
{
    TrainConfig c;
    c.output = "out";
    c.corpus = "corpus.txt";
    c.preset = "bert-mini";
    return c;
}

/// Fills the data paths a preset leaves to the user.
TrainConfig withDataPaths(TrainConfig c)
{
    if (c.task == TrainTask::MaskedLm && c.corpus.empty()) c.corpus = "/data/wiki_and_books.txt";
    if ((c.task == TrainTask::Image || c.task == TrainTask::Nli) && c.data.empty()) c.data = "/data/set";
    if (c.task == TrainTask::Nli && c.init.empty()) c.init = "/models/bert";
    if (c.task == TrainTask::CausalLm && c.corpus.empty()) c.corpus = "/data/wiki_and_books.txt";
    if (c.task == TrainTask::CausalLm && c.tokenizer.empty()) c.tokenizer = "/models/opt-125m";
    return c;
}

QJsonObject jsonObjectOf(const std::string& text)
{
    return QJsonDocument::fromJson(QByteArray::fromStdString(text)).object();
}

} // namespace

class TstTrainConfig : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void fieldTableDescribesTheJson()
    {
        const QJsonObject json = jsonObjectOf(trainConfigToJson(TrainConfig()));
        const auto& fields = trainFields();
        QCOMPARE(json.size(), int(fields.size()));
        std::set<std::string> names;
        for (const TrainFieldInfo& f : fields) {
            QVERIFY2(names.insert(f.name).second, f.name.c_str());
            QVERIFY2(json.contains(QString::fromStdString(f.name)), f.name.c_str());
            QVERIFY(!f.help.empty() && !f.group.empty() && !f.type.empty());
            QCOMPARE(f.choices.empty(), f.type != "choice");
        }
        // The JSON keeps the table's order.
        QCOMPARE(trainConfigToJson(TrainConfig()).find("\"task\""), std::size_t(4));
        const auto field = [&](const std::string& name) {
            for (const TrainFieldInfo& f : fields)
                if (f.name == name) return f;
            return TrainFieldInfo();
        };
        QCOMPARE(field("lr").defaultText, std::string("0.001"));
        QCOMPARE(field("adam_eps").defaultText, std::string("1e-08"));
        QCOMPARE(field("task").choices,
                 (std::vector<std::string>{"mlm", "nli", "image", "synthetic", "clm"}));
        QCOMPARE(field("gate").choices,
                 (std::vector<std::string>{"none", "linear", "mlp", "all_heads_linear"}));
        QCOMPARE(field("alpha").defaultText, std::string("none"));
        QCOMPARE(field("augment").type, std::string("bool"));
        QCOMPARE(field("steps").defaultText, std::string("1000"));
        QCOMPARE(field("output").defaultText, std::string());
    }

    void everyFieldByFlagAndByJson_data()
    {
        QTest::addColumn<QString>("name");
        for (const TrainFieldInfo& f : trainFields())
            QTest::newRow(f.name.c_str()) << QString::fromStdString(f.name);
    }

    void everyFieldByFlagAndByJson()
    {
        QFETCH(QString, name);
        const std::string key = name.toStdString();
        TrainFieldInfo info;
        for (const TrainFieldInfo& f : trainFields())
            if (f.name == key) info = f;

        // A value other than the default, written as a flag would take it.
        std::string value;
        if (info.type == "text")
            value = "some/path with space";
        else if (info.type == "bool")
            value = info.defaultText == "true" ? "false" : "true";
        else if (info.type == "integer")
            value = std::to_string(std::stoll(info.defaultText) + 7);
        else if (info.type == "number")
            value = "0.3125";
        else if (info.type == "number or none")
            value = "2.5";
        else
            for (const std::string& choice : info.choices)
                if (choice != info.defaultText) value = choice;
        QVERIFY(!value.empty() && value != info.defaultText);

        const QJsonObject defaults = jsonObjectOf(trainConfigToJson(TrainConfig()));
        TrainConfig byFlag;
        applyTrainFlag(byFlag, "--" + key, value);
        const std::string flagJson = trainConfigToJson(byFlag);
        const QJsonObject changed = jsonObjectOf(flagJson);
        for (auto it = defaults.begin(); it != defaults.end(); ++it)
            if (it.key() != name) QCOMPARE(changed.value(it.key()), it.value());
        QVERIFY(changed.value(name) != defaults.value(name));
        const QJsonValue v = changed.value(name);
        const QString shown = v.isString() ? v.toString()
                              : v.isBool() ? (v.toBool() ? QStringLiteral("true") : QStringLiteral("false"))
                                           : QString::number(v.toDouble(), 'g', 17);
        QCOMPARE(shown, QString::fromStdString(value));

        // The same value as the only key of a JSON file, and the whole resolved JSON, read back.
        QJsonObject single;
        single.insert(name, v);
        const std::string singleJson = QJsonDocument(single).toJson().toStdString();
        QCOMPARE(trainConfigToJson(parseTrainConfig(singleJson, "single.json")), flagJson);
        QCOMPARE(trainConfigToJson(parseTrainConfig(flagJson, "run.json")), flagJson);

        // Flags take '-' for '_' and work without the dashes.
        TrainConfig dashed;
        applyTrainFlag(dashed, "--" + name.replace('_', '-').toStdString(), value);
        applyTrainFlag(dashed, key, value);
        QCOMPARE(trainConfigToJson(dashed), flagJson);
    }

    void roundTripOfAFullConfig()
    {
        TrainConfig c = presetConfig("paper-bert-base-mlm");
        c.corpus = "/data/ünïcode \"quoted\".txt";
        c.variant.softmax = SoftmaxKind::Clipped;
        c.variant.alpha = 4.0;
        c.variant.maxSeqLength = 128;
        c.lr = 0.1 + 0.2; // a double without a short decimal
        c.seed = 18446744073709551615ull;
        c.nliTrainPairs = 9007199254740993; // above 2^53
        const std::string json = trainConfigToJson(c);
        QCOMPARE(json.back(), '\n');
        const TrainConfig back = parseTrainConfig(json, "run.json");
        QCOMPARE(trainConfigToJson(back), json);
        QCOMPARE(back.lr, 0.1 + 0.2);
        QCOMPARE(back.seed, std::uint64_t(18446744073709551615ull));
        QCOMPARE(back.nliTrainPairs, std::int64_t(9007199254740993));
        QCOMPARE(back.corpus, c.corpus);
        QVERIFY(back.variant.alpha && *back.variant.alpha == 4.0);

        TrainConfig partial = parseTrainConfig(R"({"task": "image", "steps": 1e4, "alpha": null})", "x.json");
        QVERIFY(partial.task == TrainTask::Image);
        QCOMPARE(partial.steps, std::int64_t(10000));
        QCOMPARE(partial.batchSize, TrainConfig().batchSize);
        TrainConfig flags;
        applyTrainFlag(flags, "--steps", "1e6");
        QCOMPARE(flags.steps, std::int64_t(1000000));
        applyTrainFlag(flags, "--alpha", "4");
        applyTrainFlag(flags, "--alpha", "none");
        QVERIFY(!flags.variant.alpha);
        applyTrainFlag(flags, "--augment", "off");
        QVERIFY(!flags.augment);
        applyTrainFlag(flags, "--seed", "18446744073709551615");
        QCOMPARE(flags.seed, std::numeric_limits<std::uint64_t>::max());
    }

    void unknownNamesSuggestTheClosest_data()
    {
        QTest::addColumn<QString>("typed");
        QTest::addColumn<QString>("suggested");
        QTest::newRow("typo") << "bach_size"
                              << "batch_size";
        QTest::newRow("prefix") << "warmup"
                                << "warmup_steps";
        QTest::newRow("dashes") << "weight-decay"
                                << "weight_decay";
        QTest::newRow("short") << "seq_len"
                               << "seq_length";
        QTest::newRow("Hugging Face name") << "learning_rate"
                                           << "lr";
        QTest::newRow("paper script name") << "max_grad_norm"
                                           << "grad_clip";
        QTest::newRow("one letter") << "lrr"
                                    << "lr";
    }

    void unknownNamesSuggestTheClosest()
    {
        QFETCH(QString, typed);
        QFETCH(QString, suggested);
        const std::string json = "{\"output\": \"x\", \"" + typed.toStdString() + "\": 1}";
        expectError([&] { parseTrainConfig(json, "my.json"); },
                    {"my.json: unknown field '" + typed + "'", "did you mean '" + suggested + "'?"});
        if (typed == QLatin1String("weight-decay")) return; // a valid flag spelling
        TrainConfig c;
        expectError([&] { applyTrainFlag(c, "--" + typed.toStdString(), "1"); },
                    {"unknown option --" + typed, "did you mean --" + suggested + "?"});
    }

    void wrongTypesNameKeyAndExpectation_data()
    {
        QTest::addColumn<QString>("json");
        QTest::addColumn<QStringList>("parts");
        QTest::newRow("string for number")
            << R"({"lr": "fast"})" << QStringList{"field 'lr' must be a finite number", "\"fast\""};
        QTest::newRow("fraction for integer")
            << R"({"steps": 1.5})" << QStringList{"field 'steps' must be an integer", "1.5"};
        QTest::newRow("number for bool")
            << R"({"augment": 1})" << QStringList{"field 'augment' must be true or false"};
        QTest::newRow("unknown choice")
            << R"({"task": "mlmm"})"
            << QStringList{"field 'task' must be one of mlm, nli, image, synthetic", "\"mlmm\""};
        QTest::newRow("int overflow")
            << R"({"hidden_size": 3000000000})"
            << QStringList{"field 'hidden_size' must be an integer in [-2147483648, 2147483647]"};
        QTest::newRow("negative seed")
            << R"({"seed": -1})" << QStringList{"field 'seed' must be a non-negative integer"};
        QTest::newRow("string alpha")
            << R"({"alpha": "4"})" << QStringList{"field 'alpha' must be a finite number or none"};
        QTest::newRow("number for text")
            << R"({"output": 5})" << QStringList{"field 'output' must be a string, found 5"};
        QTest::newRow("null for number")
            << R"({"lr": null})" << QStringList{"field 'lr' must be a finite number, found null"};
        QTest::newRow("not an object") << R"([1, 2])" << QStringList{"expected a JSON object", "array"};
        QTest::newRow("malformed") << R"({"lr": )" << QStringList{"malformed JSON"};
    }

    void wrongTypesNameKeyAndExpectation()
    {
        QFETCH(QString, json);
        QFETCH(QStringList, parts);
        parts.prepend(QStringLiteral("cfg.json: "));
        expectError([&] { parseTrainConfig(json.toStdString(), "cfg.json"); }, parts);
    }

    void wrongFlagValues_data()
    {
        QTest::addColumn<QString>("flag");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("expected");
        QTest::newRow("integer")
            << "--steps"
            << "abc"
            << "--steps: expected an integer in [-9223372036854775808, 9223372036854775807], found 'abc'";
        QTest::newRow("non-integral") << "--batch_size"
                                      << "1.5e0"
                                      << "--batch_size: expected an integer";
        QTest::newRow("trailing junk") << "--lr"
                                       << "1e-3x"
                                       << "--lr: expected a finite number, found '1e-3x'";
        QTest::newRow("infinite") << "--lr"
                                  << "inf"
                                  << "--lr: expected a finite number";
        QTest::newRow("bool") << "--augment"
                              << "maybe"
                              << "--augment: expected true or false, found 'maybe'";
        QTest::newRow("choice") << "--decay"
                                << "step"
                                << "--decay: expected one of linear, cosine, constant, found 'step'";
        QTest::newRow("negative unsigned") << "--seed"
                                           << "-3"
                                           << "--seed: expected a non-negative integer";
        QTest::newRow("int range") << "--hidden-size"
                                   << "3000000000"
                                   << "--hidden-size: expected an integer in [-2147483648, 2147483647]";
        QTest::newRow("empty number") << "--zeta"
                                      << ""
                                      << "--zeta: expected a finite number, found ''";
    }

    void wrongFlagValues()
    {
        QFETCH(QString, flag);
        QFETCH(QString, value);
        QFETCH(QString, expected);
        TrainConfig c;
        const std::string before = trainConfigToJson(c);
        expectError([&] { applyTrainFlag(c, flag.toStdString(), value.toStdString()); }, {expected});
        QCOMPARE(trainConfigToJson(c), before);
    }

    // ---- Validation --------------------------------------------------------------------------------

    void validConfigsPass()
    {
        validateTrainConfig(validMlm());
        TrainConfig clipped = validMlm();
        applyTrainFlag(clipped, "--softmax", "clipped");
        applyTrainFlag(clipped, "--alpha", "4");
        validateTrainConfig(clipped);
        const BertConfig b = trainBertConfig(clipped);
        QCOMPARE(b.variant.maxSeqLength, 128);
        QCOMPARE(b.variant.gamma, -4.0 / 128);
        QCOMPARE(b.hiddenSize, 256);

        TrainConfig gated = validMlm();
        gated.preset.clear(); // the task's default size
        applyTrainFlag(gated, "--gate", "mlp");
        applyTrainFlag(gated, "--n_hid", "16");
        applyTrainFlag(gated, "--num_layers", "2");
        applyTrainFlag(gated, "--seq_length", "600");
        validateTrainConfig(gated);
        const BertConfig g = trainBertConfig(gated);
        QCOMPARE(g.numLayers, 2);
        QCOMPARE(g.hiddenSize, BertConfig::preset(defaultModelPreset(TrainTask::MaskedLm)).hiddenSize);
        QCOMPARE(g.maxPositions, 600);

        TrainConfig image;
        image.task = TrainTask::Image;
        image.output = "out";
        image.data = "fashion-mnist";
        image.variant.softmax = SoftmaxKind::Clipped;
        image.variant.alpha = 2.0;
        validateTrainConfig(image);
        const VitConfig v = trainVitConfig(image);
        QCOMPARE(v.variant.maxSeqLength, 50); // 7 x 7 patches + CLS
        QCOMPARE(v.hiddenSize, 128);
        expectError([&] { trainBertConfig(image); }, {"ViT"});
        expectError([&] { trainVitConfig(validMlm()); }, {"BERT"});

        TrainConfig nli;
        nli.task = TrainTask::Nli;
        nli.output = "out";
        nli.data = "mnli.jsonl";
        nli.init = "runs/mlm/final";
        validateTrainConfig(nli);
        expectError([&] { trainBertConfig(nli); }, {"runs/mlm/final"});
    }

    void validationErrors_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addColumn<QString>("expected");
        auto row = [](const char* name, QStringList flags, const char* expected) {
            QTest::newRow(name) << flags << QString::fromUtf8(expected);
        };
        row("no output", {"--output", ""}, "output: the run folder is required");
        row("mlm without corpus", {"--corpus", ""}, "corpus: task mlm needs a training text file");
        row("steps < 1", {"--steps", "0"}, "steps: must be at least 1, found 0");
        row("batch < 1", {"--batch_size", "0"}, "batch_size: must be at least 1, found 0");
        row("unknown preset", {"--preset", "bert-mni"},
            "preset: unknown model size 'bert-mni' (did you mean 'bert-mini'?");
        row("ViT size for mlm", {"--preset", "vit-small"},
            "preset: task mlm trains a BERT model, but 'vit-small' is a ViT size");
        row("BERT size for image",
            {"--task", "image", "--corpus", "", "--data", "fashion-mnist", "--preset", "bert-mini"},
            "preset: task image trains a ViT, but 'bert-mini' is a BERT size");
        row("warm-up > steps", {"--steps", "10", "--warmup_steps", "20"},
            "warmup_steps: 20 is more than the 10 steps");
        row("negative warm-up", {"--warmup_steps", "-1"}, "warmup_steps: must be at least 0");
        row("lr 0", {"--lr", "0"}, "lr: must be in (0, inf), found 0");
        row("beta2 1", {"--beta2", "1"}, "beta2: must be in [0, 1), found 1");
        row("beta1 negative", {"--beta1", "-0.1"}, "beta1: must be in [0, 1)");
        row("negative weight decay", {"--weight_decay", "-0.01"}, "weight_decay: must be in [0, inf)");
        row("adam_eps 0", {"--adam_eps", "0"}, "adam_eps: must be in (0, inf)");
        row("negative clipping", {"--grad_clip", "-1"}, "grad_clip: must be in [0, inf)");
        row("mask probability 1", {"--mask_probability", "1"}, "mask_probability: must be in (0, 1)");
        row("dropout 1", {"--dropout", "1"}, "dropout: must be in [0, 1)");
        row("log_every 0", {"--log_every", "0"}, "log_every: must be at least 1");
        row("eval_every 0", {"--eval_every", "0"}, "eval_every: must be at least 1");
        row("checkpoint_every 0", {"--checkpoint_every", "0"}, "checkpoint_every: must be at least 1");
        row("eval_batches 0", {"--eval_batches", "0"}, "eval_batches: must be at least 1");
        row("keep_checkpoints 0", {"--keep_checkpoints", "0"}, "keep_checkpoints: must be at least 1");
        row("negative threads", {"--threads", "-1"}, "threads: must be at least 0");
        row("nli_train_pairs 0", {"--nli_train_pairs", "0"}, "nli_train_pairs: must be at least 1");
        row("gamma without clipped softmax", {"--gamma", "-0.025"},
            "gamma: only used by clipped softmax: add --softmax clipped");
        row("alpha without clipped softmax", {"--alpha", "4"}, "alpha: only used by clipped softmax");
        row("gamma and alpha", {"--softmax", "clipped", "--gamma", "-0.1", "--alpha", "4"},
            "alpha: give gamma or alpha");
        row("positive gamma", {"--softmax", "clipped", "--gamma", "0.1"},
            "attention: clipped softmax gamma must be <= 0");
        row("zeta < 1", {"--softmax", "clipped", "--zeta", "0.5"},
            "attention: clipped softmax zeta must be >= 1");
        row("T without alpha", {"--softmax", "clipped", "--max_seq_length", "128"},
            "max_seq_length: only used with alpha");
        row("pi_init without gate", {"--pi_init", "0.5"},
            "pi_init: only used by gated attention: add --gate linear");
        row("mlp gate without n_hid", {"--gate", "mlp"}, "n_hid: the mlp gate needs hidden units > 0");
        row("n_hid without mlp gate", {"--gate", "linear", "--n_hid", "8"},
            "n_hid: only used by the mlp gate");
        row("pi_init 1", {"--gate", "linear", "--pi_init", "1"}, "attention: pi_init must be in (0, 1)");
        row("An et al.'s bias on BERT", {"--attention", "fixed-bias"},
            "bias: An et al.'s fixed-bias is implemented for the decoders of task clm only");
        row("sigmoid on ViT",
            {"--task", "image", "--corpus", "", "--data", "fashion-mnist", "--softmax", "sigmoid"},
            "softmax: An et al.'s sigmoid attention is implemented for the decoders of task clm only");
        row("context scale and a gate",
            {"--task", "clm", "--preset", "gpt2-tiny", "--tokenizer", "t", "--context_scale", "true",
             "--gate", "linear"},
            "attention: context-scale is a gate of its own");
        row("sigmoid and a bias",
            {"--task", "clm", "--preset", "gpt2-tiny", "--tokenizer", "t", "--softmax", "sigmoid", "--bias",
             "context"},
            "attention: sigmoid attention cannot be combined with a bias variant");
        row("heads do not divide", {"--num_heads", "3"},
            "num_heads: hidden size 256 is not a multiple of 3 heads");
        row("negative size", {"--hidden_size", "-1"}, "hidden_size: must be at least 0");
        row("image size for mlm", {"--image_size", "32"}, "image_size: only used by task image");
        row("sequence too short", {"--seq_length", "2"}, "seq_length: must be at least 4");
        row("data for mlm", {"--data", "x"}, "data: only used by tasks nli and image, not by task mlm");
        row("init for mlm", {"--init", "m"}, "init: only used by tasks nli and clm");
        row("nli without data", {"--task", "nli", "--corpus", "", "--preset", "", "--init", "m"},
            "data: task nli needs an MNLI file");
        row("nli without init", {"--task", "nli", "--corpus", "", "--preset", "", "--data", "d"},
            "init: task nli fine-tunes a pre-trained model");
        row("nli with a size", {"--task", "nli", "--corpus", "", "--data", "d", "--init", "m"},
            "preset: task nli fine-tunes the model in init (m)");
        row("nli with layers",
            {"--task", "nli", "--corpus", "", "--preset", "", "--data", "d", "--init", "m", "--num_layers",
             "2"},
            "num_layers: task nli fine-tunes");
        row("corpus for nli", {"--task", "nli", "--preset", "", "--data", "d", "--init", "m"},
            "corpus: only used by tasks mlm and clm");
        row("image without data", {"--task", "image", "--corpus", "", "--preset", ""},
            "data: task image needs");
        row("vocab for image",
            {"--task", "image", "--corpus", "", "--preset", "", "--data", "fashion-mnist", "--vocab",
             "v.txt"},
            "vocab: only used by the BERT tasks");
        row("patch does not divide",
            {"--task", "image", "--corpus", "", "--preset", "", "--data", "fashion-mnist", "--patch_size",
             "5"},
            "patch_size: image size 28 is not a multiple of patch size 5");
        row("corpus for synthetic", {"--task", "synthetic", "--preset", ""},
            "corpus: only used by tasks mlm and clm, not by task synthetic");
    }

    void validationErrors()
    {
        QFETCH(QStringList, flags);
        QFETCH(QString, expected);
        TrainConfig c = validMlm();
        for (int i = 0; i + 1 < flags.size(); i += 2)
            applyTrainFlag(c, flags[i].toStdString(), flags[i + 1].toStdString());
        expectError([&] { validateTrainConfig(c); }, {expected});
    }

    // ---- Presets and help --------------------------------------------------------------------------

    void presetsValidate()
    {
        std::vector<std::string> names;
        for (const TrainPreset& p : trainPresets()) {
            names.push_back(p.name);
            QVERIFY(!p.description.empty());
            const TrainConfig c = withDataPaths(p.config);
            try {
                validateTrainConfig(c);
            } catch (const Error& e) {
                QFAIL(qPrintable(QString::fromStdString(p.name + ": " + e.what())));
            }
            QCOMPARE(trainConfigToJson(parseTrainConfig(trainConfigToJson(c), p.name)), trainConfigToJson(c));
            QCOMPARE(trainConfigToJson(presetConfig(p.name)), trainConfigToJson(p.config));
        }
        QCOMPARE(names, kPresetNames);
        expectError([] { presetConfig("demo-vit"); },
                    {"unknown training preset 'demo-vit'", "did you mean 'demo-vit-fmnist'"});
    }

    void paperPresetsCarryThePublishedRecipe()
    {
        const TrainConfig bert = presetConfig("paper-bert-base-mlm");
        QVERIFY(bert.task == TrainTask::MaskedLm);
        QCOMPARE(bert.preset, std::string("bert-base"));
        QCOMPARE(bert.steps, std::int64_t(1000000));
        QCOMPARE(bert.batchSize, 256);
        QCOMPARE(bert.seqLength, 128);
        QCOMPARE(bert.lr, 1e-4);
        QCOMPARE(bert.warmupSteps, std::int64_t(10000));
        QVERIFY(bert.decay == DecayKind::Linear);
        QCOMPARE(bert.weightDecay, 0.01);
        QCOMPARE(bert.gradClip, 1.0);
        QCOMPARE(bert.maskProbability, 0.15);
        QVERIFY(bert.corpus.empty()); // left for the user
        QCOMPARE(presetConfig("paper-bert-6l").preset, std::string("bert-6l"));
        const TrainConfig vit = presetConfig("paper-vit-s16");
        QVERIFY(vit.task == TrainTask::Image);
        QCOMPARE(vit.preset, std::string("vit-small"));
        QCOMPARE(vit.steps, std::int64_t(300 * 2502));
        QCOMPARE(vit.batchSize, 512);
        QCOMPARE(trainVitConfig(withDataPaths(vit)).numTokens(), 197);
        QVERIFY(vit.data.empty());
        const TrainConfig demo = presetConfig("demo-vit-fmnist");
        QCOMPARE(demo.data, std::string("fashion-mnist"));
        QCOMPARE(trainVitConfig(demo).hiddenSize, 128);
        QCOMPARE(trainBertConfig(presetConfig("demo-synthetic")).numLayers, 4);
    }

    void taskNames()
    {
        QVERIFY(parseTrainTask(toString(TrainTask::Synthetic)) == TrainTask::Synthetic);
        expectError([] { parseTrainTask("cls"); }, {"unknown task 'cls'"});
    }

    /// common/text_format: how numbers, shapes and names from files are written in messages and flags.
    void textFormat()
    {
        QCOMPARE(numberText(0.1), std::string("0.1"));
        QCOMPARE(numberText(3e-5), std::string("3e-05"));
        QCOMPARE(numberText(1000), std::string("1000"));
        QCOMPARE(numberText(-3), std::string("-3"));
        QCOMPARE(numberText(0.30000000000000004), std::string("0.30000000000000004"));
        QCOMPARE(numberText(2.5e20), std::string("2.5e+20"));
        QCOMPARE(numberText(std::nan("")), std::string("nan"));
        QCOMPARE(numberText(-std::numeric_limits<double>::infinity()), std::string("-inf"));
        std::mt19937_64 engine(7);
        std::uniform_real_distribution<double> exponent(-30, 30);
        for (int i = 0; i < 1000; ++i) {
            const double v = std::pow(10.0, exponent(engine)) * (i % 2 ? -1 : 1);
            QCOMPARE(std::strtod(numberText(v).c_str(), nullptr), v); // reads back exactly
        }
        QCOMPARE(shapeText({2, 3, 768}), std::string("[2, 3, 768]"));
        QCOMPARE(shapeText({}), std::string("[]"));
        QCOMPARE(printableText(std::string("a\nb\\c\xff\x00", 7)), std::string("a\\x0ab\\x5cc\\xff\\x00"));
        QCOMPARE(printableText(std::string(150, 'x')), std::string(100, 'x') + "...");
        QCOMPARE(numberFromText("-0.025"), std::optional<double>(-0.025));
        QCOMPARE(numberFromText("+1e3"), std::optional<double>(1000));
        for (const char* bad : {"", "1x", "nan", "inf", "0,5"})
            QVERIFY2(!numberFromText(bad), bad);
        QCOMPARE(integerFromText<int>("1e6"), std::optional<int>(1000000));
        QVERIFY(!integerFromText<int>("4294967296"));
        QVERIFY(!integerFromText<int>("1.5"));
        QCOMPARE(switchFromText("on"), std::optional<bool>(true));
        QVERIFY(!switchFromText("maybe"));
    }

    /// The attention variant's keys are written once (model/variant_fields): the training fields are
    /// its rows, in the "attention variant" group; --attention takes An et al.'s names.
    void trainingVariantFieldsComeFromTheVariantTable()
    {
        std::set<std::string> trained;
        for (const TrainFieldInfo& f : trainFields())
            if (f.group == "attention variant" && f.name != "clip_warmup_steps") trained.insert(f.name);
        QCOMPARE(trained, (std::set<std::string>{"softmax", "gamma", "zeta", "alpha", "max_seq_length",
                                                 "clip_per_query", "gate", "n_hid", "pi_init", "bias",
                                                 "context_scale"}));
        TrainConfig c;
        applyTrainFlag(c, "--n-hid", "16");
        applyTrainFlag(c, "--alpha", "none");
        applyTrainFlag(c, "--context-scale", "yes");
        QCOMPARE(c.variant.nHid, 16);
        QVERIFY(!c.variant.alpha);
        QVERIFY(c.variant.contextScale);
        applyTrainFlag(c, "--attention", "attention-bias");
        QVERIFY(c.variant.bias == BiasKind::Attention);
        applyTrainFlag(c, "--attention", "sigmoid");
        QVERIFY(c.variant.softmax == SoftmaxKind::Sigmoid);
        expectError([&] { applyTrainFlag(c, "--attention", "flash"); },
                    {"--attention: unknown variant 'flash'", "fixed-bias", "context-scale"});
        expectError([&] { applyTrainFlag(c, "--bias", "learnt"); }, {"--bias: expected one of none, fixed"});
    }

    /// DESIGN.md, Metrics: a BERT model's max inf norm is that of its FFN outputs, and its avg kurtosis
    /// averages FFN and block outputs; ViT and decoders use the block output for both.
    void eachTaskHasItsFigureTensor_data()
    {
        QTest::addColumn<QString>("task");
        QTest::addColumn<QString>("figure");
        QTest::addColumn<QStringList>("kurtosis");
        const QStringList bert{"ffn_out", "out"}, block{"out"};
        QTest::newRow("mlm") << "mlm"
                             << "ffn_out" << bert;
        QTest::newRow("nli") << "nli"
                             << "ffn_out" << bert;
        QTest::newRow("synthetic") << "synthetic"
                                   << "ffn_out" << bert;
        QTest::newRow("image") << "image"
                               << "out" << block;
        QTest::newRow("clm") << "clm"
                             << "out" << block;
    }

    void eachTaskHasItsFigureTensor()
    {
        QFETCH(QString, task);
        QFETCH(QString, figure);
        QFETCH(QStringList, kurtosis);
        const TrainTask t = parseTrainTask(task.toStdString());
        QCOMPARE(QString::fromStdString(pointName(figureTensorOf(t))), figure);
        QStringList names;
        for (CapturePoint p : kurtosisTensorsOf(t))
            names << QString::fromStdString(pointName(p));
        QCOMPARE(names, kurtosis);
    }
};

QTEST_APPLESS_MAIN(TstTrainConfig)
#include "tst_train_config.moc"
