#include "model_catalog.h"

#include "analysis/showcase.h"
#include "analysis/stats_runner.h"

#include "paths.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSettings>

#include <algorithm>
#include <optional>
#include <utility>

namespace outlierlens {
namespace {

const char* const kVariants[] = {"vanilla", "clipped", "gated"};
const char* const kKinds[] = {"bert-mnli", "vit-fmnist", "synthetic", "backcopy"};

QString placeholderModel()
{
    return QDir(QCoreApplication::applicationDirPath())
        .absoluteFilePath(QStringLiteral("../models/random-bert-mini"));
}

bool isModelFolder(const QString& dir)
{
    return QFileInfo::exists(dir + QStringLiteral("/config.json"));
}

} // namespace

QString ModelCatalog::modelsDir()
{
    const std::string data = sampleDataDir();
    return data.empty() ? QString() : QString::fromStdString(data) + QStringLiteral("/models");
}

QVector<ModelEntry> ModelCatalog::knownModels()
{
    QVector<ModelEntry> out, contrasts;
    const QDir models(modelsDir());
    // Demo models that show no outliers are labelled as contrasts (models/catalog.json) and listed last.
    QJsonObject contrastNotes;
    QFile catalog(models.absoluteFilePath(QStringLiteral("catalog.json")));
    if (catalog.open(QIODevice::ReadOnly))
        contrastNotes =
            QJsonDocument::fromJson(catalog.readAll()).object().value(QStringLiteral("contrasts")).toObject();
    for (const QString& name : models.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name)) {
        if (!isModelFolder(models.absoluteFilePath(name))) continue;
        const QString note = contrastNotes.value(name).toString();
        if (note.isEmpty())
            out.push_back({QStringLiteral("demo: ") + name, models.absoluteFilePath(name)});
        else
            contrasts.push_back(
                {QStringLiteral("demo: %1 (%2)").arg(name, note), models.absoluteFilePath(name)});
    }
    out += contrasts;
    if (isModelFolder(placeholderModel()))
        out.push_back({QStringLiteral("random-weight placeholder (bert-mini)"),
                       QFileInfo(placeholderModel()).canonicalFilePath()});
    for (const QString& dir : QSettings().value(QStringLiteral("models/recent")).toStringList())
        if (isModelFolder(dir) &&
            std::none_of(out.begin(), out.end(), [&](const ModelEntry& e) { return e.dir == dir; }))
            out.push_back({dir, dir});
    return out;
}

QString ModelCatalog::defaultModel()
{
    // The model where the mechanism is plainest (docs/demo-models.md), then the BERT of the paper's task.
    for (const char* name : {"backcopy-vanilla", "bert-mnli-vanilla"}) {
        const QString demo = modelsDir() + QStringLiteral("/") + QString::fromLatin1(name);
        if (isModelFolder(demo)) return demo;
    }
    if (isModelFolder(placeholderModel())) return QFileInfo(placeholderModel()).canonicalFilePath();
    const QVector<ModelEntry> all = knownModels();
    return all.isEmpty() ? QString() : all.first().dir;
}

QString ModelCatalog::startModel()
{
    for (const QString& dir : QSettings().value(QStringLiteral("models/recent")).toStringList())
        if (isModelFolder(dir)) return dir;
    return defaultModel();
}

QVector<ModelEntry> ModelCatalog::demoTrio(const QString& kind)
{
    QVector<ModelEntry> out;
    for (const char* variant : kVariants) {
        const QString dir =
            modelsDir() + QStringLiteral("/") + kind + QStringLiteral("-") + QString::fromLatin1(variant);
        if (isModelFolder(dir))
            out.push_back({kind + QStringLiteral(" ") + QString::fromLatin1(variant), dir});
    }
    return out;
}

QString ModelCatalog::demoKindOf(const QString& dir)
{
    const QString name = QFileInfo(dir).fileName();
    for (const char* kind : kKinds)
        if (name.startsWith(QString::fromLatin1(kind) + QStringLiteral("-")))
            return QString::fromLatin1(kind);
    return {};
}

QString ModelCatalog::sampleInput(const QString& dir, int index)
{
    try {
        const std::vector<std::string> lines = readSampleInputs(dir.toStdString());
        return index >= 0 && std::size_t(index) < lines.size()
                   ? QString::fromStdString(lines[std::size_t(index)])
                   : QString();
    } catch (const std::exception&) {
        return {}; // an unreadable file: the app shows another first input
    }
}

StartPoint ModelCatalog::startPoint(const ModelInfo& model)
{
    StartPoint start;
    start.layer = std::max(0, model.layers - 2);
    if (!model.takesText()) return start;
    std::optional<Showcase> showcase;
    try {
        showcase = readShowcase(model.dir.toStdString());
    } catch (const std::exception& e) {
        start.ignored = QString::fromStdString(e.what());
    }
    if (showcase) start.layer = showcase->layer, start.head = showcase->head;
    start.sample = sampleInput(model.dir, showcase ? showcase->input : 0);
    return start;
}

FirstInput ModelCatalog::firstInput(const ModelInfo& model, const StartPoint& start, const InputRequest& last,
                                    bool lastWasSample, bool havePairs, const QString& galleryDir)
{
    using Action = FirstInput::Action;
    using Kind = InputRequest::Kind;
    const auto run = [](InputRequest input) { return FirstInput{Action::Run, std::move(input), false}; };
    const auto runText = [](const QString& text, bool isSample = false) {
        return FirstInput{Action::RunAsText, {Kind::Text, text, {}, {}, {}, 0}, isSample};
    };
    const auto image = [&](const char* file, const QString& credit) {
        return run({Kind::Image, {}, {}, galleryDir + QLatin1Char('/') + QLatin1String(file), credit, 0});
    };
    const bool text = model.takesText();
    const bool userText = last.kind == Kind::Text && !lastWasSample;
    // A pair model's own kind of pair (sample_inputs.txt: "premise<TAB>hypothesis"), its showcase line;
    // a synthetic-task model reads only its own vocabulary, so the user's text from another model does
    // not carry over to it (a generated example does).
    if (model.takesPairs() && !start.sample.isEmpty() && last.kind != Kind::Synthetic &&
        (!userText || model.synthetic)) {
        const int tab = int(start.sample.indexOf(QLatin1Char('\t')));
        return FirstInput{Action::Run,
                          {Kind::Text,
                           tab >= 0 ? start.sample.left(tab) : start.sample,
                           tab >= 0 ? start.sample.mid(tab + 1) : QString(),
                           {},
                           {},
                           0},
                          true};
    }
    if (model.synthetic)
        return run(last.kind == Kind::Synthetic ? last : InputRequest{Kind::Synthetic, {}, {}, {}, {}, 1});
    if (model.takesTokenIds()) // no tokenizer files: a few ids of the vocabulary's start
        return runText(QStringLiteral("1, 5, 9, 14, 20, 3, 7, 11, 2, 16"), true);
    if (model.isDecoder()) {
        if (userText && last.pair.isEmpty())
            return runText(last.text); // free text carries over between decoders
        if (!start.sample.isEmpty()) return runText(start.sample, true); // the model's own kind of input
        // An et al.'s probe sentence: short, two strong delimiters, and a first token to sink on.
        return runText(QStringLiteral("Summer is warm. Winter is cold."));
    }
    if (text && userText) return run(last);
    if (text) return havePairs ? FirstInput{Action::SelectPair, {}, false} : FirstInput{};
    if (last.kind == Kind::Image) return run(last);
    // A Fashion-MNIST model: one of its own kind of images.
    if (model.classNames.contains(QStringLiteral("Ankle boot")))
        return image("fmnist_boot.png",
                     QCoreApplication::translate(
                         "ModelCatalog", "Fashion-MNIST test image 0 (Zalando Research, MIT licence)"));
    return image("chelsea_cat.png",
                 QCoreApplication::translate("ModelCatalog", "Photo: Stefan van der Walt (CC0)"));
}

QString ModelCatalog::compareKind(const ModelInfo& model)
{
    const QString kind = demoKindOf(model.dir);
    if (!kind.isEmpty()) return kind;
    return model.family ? QString::fromStdString(model.family->demoTrio) : QString();
}

QString ModelCatalog::imageGallery(const ModelInfo& model, const QString& galleryDir)
{
    const QString own = model.dir + QStringLiteral("/sample_images");
    return !model.dir.isEmpty() && QFileInfo(own).isDir() ? own : galleryDir;
}

QString ModelCatalog::statisticsData(const ModelInfo& model, const QString& galleryDir)
{
    if (!model.family) return {};
    // A pair model's own inputs when it ships them (sample_inputs.txt: its kind of sentence pairs).
    if (model.takesPairs() && !sampleInput(model.dir, 0).isEmpty())
        return QStringLiteral("mnli:") + QDir(model.dir).filePath(QStringLiteral("sample_inputs.txt"));
    // The family's default data (a path in sample_data/); images from the model's own gallery.
    const DataSpec spec = DataSpec::parse(model.family->defaultData);
    if (spec.kind == DataSpec::Kind::Images)
        return QStringLiteral("images:") + imageGallery(model, galleryDir);
    DataSpec inSampleData = spec;
    inSampleData.path = sampleDataFile(spec.path);
    return QString::fromStdString(inSampleData.describe());
}

void ModelCatalog::addRecent(const QString& dir)
{
    QSettings settings;
    QStringList recent = settings.value(QStringLiteral("models/recent")).toStringList();
    recent.removeAll(dir);
    recent.prepend(dir);
    while (recent.size() > 10)
        recent.removeLast();
    settings.setValue(QStringLiteral("models/recent"), recent);
}

} // namespace outlierlens
