#include "model_catalog.h"

#include "analysis/showcase.h"

#include "paths.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSettings>

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
    QVector<ModelEntry> out;
    const QDir models(modelsDir());
    for (const QString& name : models.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name))
        if (isModelFolder(models.absoluteFilePath(name)))
            out.push_back({QStringLiteral("demo: ") + name, models.absoluteFilePath(name)});
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
