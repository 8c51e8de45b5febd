// The model catalogue's start-up policy (ModelCatalog): which input a model opens on after another
// one, rule by rule, and where it starts (layer, head, sample) from the showcase stored with it.
// Plain functions: no window, no model is loaded.

#include "input_request.h"
#include "model_catalog.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

using namespace outlierlens;

namespace {

const QString kModel = QStringLiteral(OUTLIERLENS_TEST_DATA "/bert/hf");

} // namespace

class TstModelCatalog : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    /// The input a model opens on (ModelCatalog::firstInput), rule by rule: a model reruns the last
    /// input when it takes that kind, else starts on its own kind of input.
    void firstInputFitsTheModel_data()
    {
        using Kind = InputRequest::Kind;
        using Action = FirstInput::Action;
        QTest::addColumn<QString>("family"); // the registry row's id
        QTest::addColumn<bool>("synthetic");
        QTest::addColumn<QStringList>("classNames");
        QTest::addColumn<QString>("sample"); // StartPoint::sample
        QTest::addColumn<int>("lastKind");
        QTest::addColumn<QString>("lastText");
        QTest::addColumn<QString>("lastPair");
        QTest::addColumn<QString>("lastPath");
        QTest::addColumn<bool>("lastWasSample");
        QTest::addColumn<bool>("havePairs");
        QTest::addColumn<int>("action");
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("path");
        QTest::addColumn<int>("seed");
        QTest::addColumn<bool>("isSample");
        const QStringList mnli{QStringLiteral("entailment"), QStringLiteral("neutral"),
                               QStringLiteral("contradiction")};
        const QStringList fmnist{QStringLiteral("T-shirt/top"), QStringLiteral("Ankle boot")};
        const QString gallery = QStringLiteral("/gallery");
        const QString none, userText = QStringLiteral("my text"), pair = QStringLiteral("my pair");
        const QString cat = gallery + QStringLiteral("/chelsea_cat.png");
        const QString probe = QStringLiteral("Summer is warm. Winter is cold.");
        // clang-format off
        QTest::newRow("bert, nothing run yet: first pair")       << QStringLiteral("bert") << false << mnli << none << int(Kind::None) << none << none << none << false << true << int(Action::SelectPair) << none << none << 0 << false;
        QTest::newRow("bert, no pairs loaded: nothing")          << QStringLiteral("bert") << false << mnli << none << int(Kind::None) << none << none << none << false << false << int(Action::None) << none << none << 0 << false;
        QTest::newRow("bert, user's pair: rerun")                << QStringLiteral("bert") << false << mnli << none << int(Kind::Text) << userText << pair << none << false << true << int(Action::Run) << userText << none << 0 << false;
        QTest::newRow("bert, a decoder's sample: first pair")    << QStringLiteral("bert") << false << mnli << none << int(Kind::Text) << userText << none << none << true << true << int(Action::SelectPair) << none << none << 0 << false;
        QTest::newRow("bert, after an image: first pair")        << QStringLiteral("bert") << false << mnli << none << int(Kind::Image) << none << none << cat << false << true << int(Action::SelectPair) << none << none << 0 << false;
        QTest::newRow("synthetic, after text: example 1")        << QStringLiteral("bert") << true << QStringList() << none << int(Kind::Text) << userText << none << none << false << true << int(Action::Run) << none << none << 1 << false;
        QTest::newRow("vit fmnist, after a pair: a boot")        << QStringLiteral("vit") << false << fmnist << none << int(Kind::Text) << userText << pair << none << false << true << int(Action::Run) << none << gallery + QStringLiteral("/fmnist_boot.png") << 0 << false;
        QTest::newRow("vit imagenet, nothing run: the cat")      << QStringLiteral("vit") << false << QStringList() << none << int(Kind::None) << none << none << none << false << true << int(Action::Run) << none << cat << 0 << false;
        QTest::newRow("vit, user's image: rerun")                << QStringLiteral("vit") << false << fmnist << none << int(Kind::Image) << none << none << QStringLiteral("/mine.png") << false << true << int(Action::Run) << none << QStringLiteral("/mine.png") << 0 << false;
        QTest::newRow("decoder, user's free text: carried over") << QStringLiteral("gpt2") << false << QStringList() << QStringLiteral("abc") << int(Kind::Text) << userText << none << none << false << true << int(Action::RunAsText) << userText << none << 0 << false;
        QTest::newRow("decoder, after a bert pair: its sample")  << QStringLiteral("opt") << false << QStringList() << QStringLiteral("abc") << int(Kind::Text) << userText << pair << none << false << true << int(Action::RunAsText) << QStringLiteral("abc") << none << 0 << true;
        QTest::newRow("decoder, after a sample: its own sample") << QStringLiteral("opt") << false << QStringList() << QStringLiteral("abc") << int(Kind::Text) << userText << none << none << true << true << int(Action::RunAsText) << QStringLiteral("abc") << none << 0 << true;
        QTest::newRow("decoder, no sample: the probe sentence")  << QStringLiteral("llama") << false << QStringList() << none << int(Kind::Image) << none << none << cat << false << true << int(Action::RunAsText) << probe << none << 0 << false;
        // clang-format on
    }

    void firstInputFitsTheModel()
    {
        QFETCH(QString, family);
        QFETCH(bool, synthetic);
        QFETCH(QStringList, classNames);
        QFETCH(QString, sample);
        QFETCH(int, lastKind);
        QFETCH(QString, lastText);
        QFETCH(QString, lastPair);
        QFETCH(QString, lastPath);
        QFETCH(bool, lastWasSample);
        QFETCH(bool, havePairs);
        QFETCH(int, action);
        QFETCH(QString, text);
        QFETCH(QString, path);
        QFETCH(int, seed);
        QFETCH(bool, isSample);
        ModelInfo model;
        model.family = &modelFamily(family.toStdString());
        model.synthetic = synthetic;
        model.classNames = classNames;
        StartPoint start;
        start.sample = sample;
        const InputRequest last{InputRequest::Kind(lastKind), lastText, lastPair, lastPath, {}, 0};
        const FirstInput first = ModelCatalog::firstInput(model, start, last, lastWasSample, havePairs,
                                                          QStringLiteral("/gallery"));
        QCOMPARE(int(first.action), action);
        QCOMPARE(first.isSample, isSample);
        if (action == int(FirstInput::Action::Run) || action == int(FirstInput::Action::RunAsText)) {
            const InputRequest::Kind kind = seed > 0          ? InputRequest::Kind::Synthetic
                                            : !path.isEmpty() ? InputRequest::Kind::Image
                                                              : InputRequest::Kind::Text;
            QCOMPARE(int(first.input.kind), int(kind));
            QCOMPARE(first.input.text, text);
            QCOMPARE(first.input.path, path);
            QCOMPARE(int(first.input.seed), seed);
            if (kind == InputRequest::Kind::Text && action == int(FirstInput::Action::Run))
                QCOMPARE(first.input.pair, lastPair); // a rerun keeps the pair
        }
    }

    /// A pair model with its own sample inputs ("premise<TAB>hypothesis", e.g. a synthetic-task BERT)
    /// opens on its showcase pair, as its own sample, unless the user's text ran last.
    void pairModelOpensOnItsSample()
    {
        ModelInfo model;
        model.family = &modelFamily("bert");
        model.synthetic = true;
        StartPoint start;
        start.sample = QStringLiteral("cat dog . back3 sun\tsun tree");
        const InputRequest image{InputRequest::Kind::Image, {}, {}, QStringLiteral("/x.png"), {}, 0};
        FirstInput first = ModelCatalog::firstInput(model, start, image, false, true, QStringLiteral("/g"));
        QCOMPARE(int(first.action), int(FirstInput::Action::Run));
        QVERIFY(first.isSample);
        QCOMPARE(int(first.input.kind), int(InputRequest::Kind::Text));
        QCOMPARE(first.input.text, QStringLiteral("cat dog . back3 sun"));
        QCOMPARE(first.input.pair, QStringLiteral("sun tree"));
        // The user's text from another model does not reach a synthetic model (not its vocabulary), but
        // a generated example reruns; a BERT trained on real text reruns the user's pair.
        const InputRequest mine{
            InputRequest::Kind::Text, QStringLiteral("dog"), QStringLiteral("cat"), {}, {}, 0};
        first = ModelCatalog::firstInput(model, start, mine, false, true, QStringLiteral("/g"));
        QVERIFY(first.isSample);
        QCOMPARE(first.input.pair, QStringLiteral("sun tree"));
        const InputRequest example{InputRequest::Kind::Synthetic, {}, {}, {}, {}, 7};
        first = ModelCatalog::firstInput(model, start, example, false, true, QStringLiteral("/g"));
        QCOMPARE(int(first.input.kind), int(InputRequest::Kind::Synthetic));
        QCOMPARE(int(first.input.seed), 7);
        model.synthetic = false;
        first = ModelCatalog::firstInput(model, start, mine, false, true, QStringLiteral("/g"));
        QVERIFY(!first.isSample);
        QCOMPARE(first.input.text, QStringLiteral("dog"));
        QCOMPARE(first.input.pair, QStringLiteral("cat"));
    }

    /// Where a model starts (ModelCatalog::startPoint), against its showcase.json and
    /// sample_inputs.txt read here as plain JSON and lines.
    void startPointIsTheShowcase()
    {
        const QString dir = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/backcopy-gated");
        QFile json(dir + QStringLiteral("/showcase.json")), lines(dir + QStringLiteral("/sample_inputs.txt"));
        QVERIFY(json.open(QIODevice::ReadOnly) && lines.open(QIODevice::ReadOnly | QIODevice::Text));
        const QJsonObject showcase = QJsonDocument::fromJson(json.readAll()).object();
        const QStringList samples = QString::fromUtf8(lines.readAll()).split(QLatin1Char('\n'));
        ModelInfo decoder;
        decoder.dir = dir;
        decoder.family = &modelFamily("opt");
        decoder.layers = 3, decoder.heads = 2;
        const StartPoint start = ModelCatalog::startPoint(decoder);
        QCOMPARE(start.layer, showcase[QStringLiteral("layer")].toInt());
        QCOMPARE(start.head, showcase[QStringLiteral("head")].toInt());
        QCOMPARE(start.sample, samples.value(showcase[QStringLiteral("input")].toInt()));
        QVERIFY(start.ignored.isEmpty());
        // A BERT has no showcase: the second-to-last layer, head 1, no sample.
        ModelInfo bert;
        bert.dir = kModel;
        bert.family = &modelFamily("bert");
        bert.layers = 4, bert.heads = 4;
        const StartPoint bertStart = ModelCatalog::startPoint(bert);
        QCOMPARE(bertStart.layer, 2);
        QCOMPARE(bertStart.head, 0);
        QVERIFY(bertStart.sample.isEmpty());
        // An unreadable showcase.json is said, and the defaults stand.
        QTemporaryDir broken;
        QFile bad(broken.path() + QStringLiteral("/showcase.json"));
        QVERIFY(bad.open(QIODevice::WriteOnly));
        bad.write("{ not json");
        bad.close();
        decoder.dir = broken.path();
        const StartPoint brokenStart = ModelCatalog::startPoint(decoder);
        QVERIFY(!brokenStart.ignored.isEmpty());
        QCOMPARE(brokenStart.layer, 1);
        QCOMPARE(brokenStart.head, 0);
    }

    /// Issue #40.14: the app reopens the last model used (the first recent one still there), else the
    /// default.
    void startModelIsTheLastOneUsed()
    {
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName(QStringLiteral("OutlierLensTest"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_model_catalog"));
        QSettings().remove(QStringLiteral("models/recent"));
        QCOMPARE(ModelCatalog::startModel(), ModelCatalog::defaultModel());
        const QString gated = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/backcopy-gated");
        ModelCatalog::addRecent(gated);
        ModelCatalog::addRecent(QStringLiteral("/no/such/model")); // the newest, but gone
        QCOMPARE(ModelCatalog::startModel(), gated);
        QSettings().remove(QStringLiteral("models/recent"));
    }

    /// Issue #37: the bundled models that show nothing (BERT at chance on MNLI, the Fashion-MNIST ViTs) are
    /// labelled plainly as contrasts in the model picker and listed after the models that show the effect.
    void contrastsAreLabelledAndLast()
    {
        const QVector<ModelEntry> all = ModelCatalog::knownModels();
        int lastShowing = -1, firstContrast = int(all.size()), contrasts = 0;
        for (int i = 0; i < all.size(); ++i) {
            const QString name = QFileInfo(all[i].dir).fileName();
            if (!all[i].name.startsWith(QStringLiteral("demo: "))) continue;
            const bool contrast = all[i].name.contains(QStringLiteral("(contrast: "));
            QCOMPARE(contrast, name.startsWith(QStringLiteral("bert-mnli-")) ||
                                   name.startsWith(QStringLiteral("vit-fmnist-")));
            if (contrast) {
                firstContrast = std::min(firstContrast, i);
                ++contrasts;
            } else {
                lastShowing = i;
                QCOMPARE(all[i].name, QStringLiteral("demo: ") + name);
            }
        }
        QCOMPARE(contrasts, 6);
        QVERIFY2(lastShowing >= 0 && lastShowing < firstContrast, "contrasts come last");
        QCOMPARE(QFileInfo(ModelCatalog::defaultModel()).fileName(), QStringLiteral("backcopy-vanilla"));
    }

    /// Issue #37/#39.8: a ViT with images of its own (sample_images/, written by `train` for the canvas task)
    /// is shown, counted and drawn with them; one without, with the bundled gallery.
    void ownImagesBeforeTheGallery()
    {
        QTemporaryDir model;
        ModelInfo vit;
        vit.dir = model.path();
        vit.family = &modelFamily("vit");
        const QString gallery = QStringLiteral("/somewhere/images");
        QCOMPARE(ModelCatalog::imageGallery(vit, gallery), gallery);
        QCOMPARE(ModelCatalog::statisticsData(vit, gallery), QStringLiteral("images:") + gallery);
        QVERIFY(QDir(model.path()).mkdir(QStringLiteral("sample_images")));
        QCOMPARE(ModelCatalog::imageGallery(vit, gallery), model.path() + QStringLiteral("/sample_images"));
        QCOMPARE(ModelCatalog::statisticsData(vit, gallery),
                 QStringLiteral("images:") + model.path() + QStringLiteral("/sample_images"));
    }
};

QTEST_GUILESS_MAIN(TstModelCatalog)
#include "tst_model_catalog.moc"
