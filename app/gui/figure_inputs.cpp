#include "figure_inputs.h"

#include "inspection_worker.h"
#include "model_catalog.h"

#include "analysis/showcase.h"
#include "analysis/statistics_file.h"
#include "analysis/stats_runner.h"
#include "common/error.h"
#include "paths.h"
#include "tasks/data/image_data.h"
#include "text/mnli.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QRegularExpression>

namespace outlierlens {

FigureModel::FigureModel(const QString& dir, const OutlierCriterion& rule, Precision precision)
    : m_worker(std::make_unique<InspectionWorker>())
{
    // Direct connections: the worker runs on this thread, so each call has emitted before it returns.
    QObject::connect(m_worker.get(), &InspectionWorker::modelLoaded,
                     [this](quint64, const ModelInfo& info) { m_info = info; });
    QObject::connect(m_worker.get(), &InspectionWorker::inspected,
                     [this](quint64, const SnapshotPtr& snapshot) { m_last = snapshot; });
    QObject::connect(m_worker.get(), &InspectionWorker::failed,
                     [this](quint64, const QString& message) { m_error = message; });
    m_worker->setOutlierRule(rule);
    m_worker->setFastMode(precision == Precision::Bf16);
    m_worker->loadModel(++m_generation, dir);
    check();
    if (m_info.dir.isEmpty()) throw Error(dir.toStdString() + ": the model did not load");
}

FigureModel::~FigureModel() = default;

void FigureModel::check()
{
    if (m_error.isEmpty()) return;
    const QString message = m_error;
    m_error.clear();
    throw Error(message.toStdString());
}

SnapshotPtr FigureModel::inspectLifecycle(const FigureInput& input, const QVector<int>& layers)
{
    m_worker->setLifecycleLayers(layers);
    QStringList key;
    for (int l : layers)
        key << QString::number(l);
    try {
        const SnapshotPtr s = inspect(input, QStringLiteral("lifecycle ") + key.join(QLatin1Char(',')));
        m_worker->setLifecycleLayers({});
        return s;
    } catch (...) {
        m_worker->setLifecycleLayers({});
        throw;
    }
}

SnapshotPtr FigureModel::inspect(const FigureInput& input, const QString& variant)
{
    const QString key = QString::number(int(input.kind)) + QLatin1Char('\x1f') + input.first +
                        QLatin1Char('\x1f') + input.second + QLatin1Char('\x1f') +
                        QString::number(input.seed) + QLatin1Char('\x1f') + variant;
    if (const auto it = m_cache.find(key); it != m_cache.end()) return it->second;
    m_last.reset();
    switch (input.kind) {
    case FigureInput::Kind::Pair:
    case FigureInput::Kind::Text:
        m_worker->inspectText(++m_generation, input.first, input.second);
        break;
    case FigureInput::Kind::Image:
        m_worker->inspectImage(++m_generation, input.first, QString());
        break;
    case FigureInput::Kind::Synthetic:
        m_worker->inspectSyntheticExample(++m_generation, input.seed);
        break;
    }
    check();
    if (!m_last) throw Error(input.label.toStdString() + ": the inspection gave no result");
    m_cache[key] = m_last;
    return m_last;
}

namespace {

QVector<FigureInput> pairInputs(const std::string& path, int count)
{
    QVector<FigureInput> inputs;
    int index = 0;
    for (const NliPair& p : readNliPairs(path, std::size_t(count))) {
        ++index;
        inputs << FigureInput{FigureInput::Kind::Pair, QString::fromStdString(p.premise),
                              QString::fromStdString(p.hypothesis), 0,
                              QStringLiteral("pair #%1 of %2")
                                  .arg(index)
                                  .arg(QFileInfo(QString::fromStdString(path)).fileName())};
    }
    return inputs;
}

/// Consecutive chunks of 48 words: short enough for a readable attention matrix.
QVector<FigureInput> textInputs(const std::string& path, int count)
{
    QFile file(QString::fromStdString(path));
    if (!file.open(QIODevice::ReadOnly))
        throw Error(path + ": cannot read: " + file.errorString().toStdString());
    const QStringList words = QString::fromUtf8(file.read(1 << 20))
                                  .split(QRegularExpression(QStringLiteral("\\s+")), Qt::SkipEmptyParts);
    constexpr int kWords = 48;
    QVector<FigureInput> inputs;
    for (int i = 0; i < count && i * kWords < words.size(); ++i)
        inputs << FigureInput{FigureInput::Kind::Text, words.mid(i * kWords, kWords).join(QLatin1Char(' ')),
                              QString(), 0,
                              QStringLiteral("words %1-%2 of %3")
                                  .arg(i * kWords + 1)
                                  .arg(std::min<int>((i + 1) * kWords, words.size()))
                                  .arg(QFileInfo(file).fileName())};
    return inputs;
}

} // namespace

QVector<FigureInput> figureInputs(const ModelInfo& model, const QString& dataSpec, int count)
{
    QVector<FigureInput> inputs;
    // The model's own inputs (sample_inputs.txt: decoders' texts, pair models' "premise<TAB>hypothesis").
    const std::vector<std::string> lines =
        model.takesImages() ? std::vector<std::string>() : readSampleInputs(model.dir.toStdString());
    if (model.synthetic && lines.empty() && !dataSpec.isEmpty()) {
        DataSpec::parse(dataSpec.toStdString()); // a malformed spec says what is wrong with it first
        throw Error("--data '" + dataSpec.toStdString() + "': " + model.name.toStdString() +
                    " was trained on the synthetic task; its figures are drawn from generated examples of "
                    "that task, so it takes no --data");
    }
    if (model.synthetic && lines.empty()) {
        for (int i = 0; i < count; ++i)
            inputs << FigureInput{FigureInput::Kind::Synthetic,
                                  {},
                                  {},
                                  quint64(i + 1),
                                  QStringLiteral("generated example (seed %1)").arg(i + 1)};
        return inputs;
    }
    const std::optional<DataSpec> spec =
        dataSpec.isEmpty() ? std::nullopt : std::optional<DataSpec>(DataSpec::parse(dataSpec.toStdString()));
    // The data set is its first N inputs when the spec says N: the figures' "#16" is the data's.
    if (spec && spec->limit > 0) count = int(std::min<std::size_t>(std::size_t(count), spec->limit));
    if (model.takesImages()) {
        // The model's own images (sample_images/) when it has them: a canvas model's figures show canvases.
        const std::string dir =
            spec ? spec->path
                 : ModelCatalog::imageGallery(model, QString::fromStdString(sampleDataDir() + "/images"))
                       .toStdString();
        for (const LabelledImage& image :
             listImageDataset(dir, std::size_t(count), [](const std::string&) { return -1; }))
            inputs << FigureInput{
                FigureInput::Kind::Image,
                QString::fromStdString(image.path),
                {},
                0,
                QStringLiteral("image %1").arg(QFileInfo(QString::fromStdString(image.path)).fileName())};
        return inputs;
    }
    // The model's own sample inputs when it ships them and no other data is named (the showcase input
    // first): a pair model's lines are pairs, a decoder's texts.
    if (!lines.empty() && !spec) {
        std::optional<Showcase> showcase;
        try {
            showcase = readShowcase(model.dir.toStdString());
        } catch (const Error&) {
        }
        const int first = showcase ? showcase->input : 0;
        for (int i = 0; i < count && i < int(lines.size()); ++i) {
            const int line = (first + i) % int(lines.size());
            const QString text = QString::fromStdString(lines[std::size_t(line)]);
            const int tab = model.takesPairs() ? int(text.indexOf(QLatin1Char('\t'))) : -1;
            inputs << FigureInput{tab >= 0 ? FigureInput::Kind::Pair : FigureInput::Kind::Text,
                                  tab >= 0 ? text.left(tab) : text, tab >= 0 ? text.mid(tab + 1) : QString(),
                                  0, QStringLiteral("sample_inputs.txt line %1").arg(line + 1)};
        }
        return inputs;
    }
    if (model.takesPairs())
        return pairInputs(spec && spec->kind == DataSpec::Kind::Mnli
                              ? spec->path
                              : sampleDataFile("mnli/mnli_dev_matched.jsonl"),
                          count);
    return textInputs(spec ? spec->path : sampleDataFile("text/wiki_en_valid.txt"), count);
}

QString fashionMnistData(const ModelInfo& model, const QString& outDir, int count)
{
    static const QStringList kClasses{QStringLiteral("T-shirt/top"), QStringLiteral("Trouser"),
                                      QStringLiteral("Pullover"),    QStringLiteral("Dress"),
                                      QStringLiteral("Coat"),        QStringLiteral("Sandal"),
                                      QStringLiteral("Shirt"),       QStringLiteral("Sneaker"),
                                      QStringLiteral("Bag"),         QStringLiteral("Ankle boot")};
    if (!model.takesImages() || model.classNames != kClasses) return {};
    if (QFileInfo(model.dir + QStringLiteral("/sample_images")).isDir()) return {}; // its own images
    const QString dir = QDir(outDir).filePath(QStringLiteral("data/fashion-mnist-test"));
    // A complete folder has its marker, written last: an interrupted run writes it again.
    const QString marker = QDir(dir).filePath(QStringLiteral("SOURCE.txt"));
    if (QFileInfo::exists(marker)) return QStringLiteral("images:") + dir;
    const QString temp = dir + QStringLiteral(".tmp");
    QDir(temp).removeRecursively();
    if (!QDir().mkpath(temp)) throw Error(temp.toStdString() + ": cannot create the folder");
    QString source;
    try {
        const ImageDataset test = ImageDataset::fashionMnist(kDebianFashionMnistDir, false);
        const std::int64_t n = std::min<std::int64_t>(count, test.size());
        for (std::int64_t i = 0; i < n; ++i) {
            const RgbImage rgb = test.image(i);
            const QImage image(rgb.pixels.data(), rgb.width, rgb.height, 3 * rgb.width,
                               QImage::Format_RGB888);
            const QString name =
                QStringLiteral("%1-%2.png")
                    .arg(i + 1, 4, 10, QLatin1Char('0'))
                    .arg(QString::fromStdString(test.classNames()[std::size_t(test.label(i))])
                             .replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9]+")),
                                      QStringLiteral("-")));
            if (!image.save(QDir(temp).filePath(name)))
                throw Error(QDir(temp).filePath(name).toStdString() + ": cannot write");
        }
        source = QStringLiteral("The first %1 images of the Fashion-MNIST test set (%2/t10k-*), in order.\n")
                     .arg(n)
                     .arg(QLatin1String(kDebianFashionMnistDir));
    } catch (const Error& e) {
        // No Debian package: the Fashion-MNIST pictures bundled with the sample images.
        const QDir bundled(QString::fromStdString(sampleDataDir() + "/images"));
        for (const QString& name :
             bundled.entryList({QStringLiteral("fmnist_*.png")}, QDir::Files, QDir::Name))
            QFile::copy(bundled.filePath(name), QDir(temp).filePath(name));
        source = QStringLiteral("The Fashion-MNIST pictures of %1 (fmnist_*.png): %2\n")
                     .arg(bundled.path(), QString::fromStdString(e.what()));
    }
    QFile file(QDir(temp).filePath(QStringLiteral("SOURCE.txt")));
    if (!file.open(QIODevice::WriteOnly) || file.write(source.toUtf8()) < 0)
        throw Error(file.fileName().toStdString() + ": cannot write");
    file.close();
    QDir(dir).removeRecursively();
    if (!QDir().rename(temp, dir)) throw Error(dir.toStdString() + ": cannot create the folder");
    return QStringLiteral("images:") + dir;
}

FigureStatistics figureStatistics(const ModelInfo& model, const QString& dataSpec,
                                  const OutlierCriterion& rule, Precision precision, const QString& dir,
                                  const std::atomic<bool>& cancel,
                                  const std::function<void(qint64 done, qint64 total)>& progress)
{
    StatsRunOptions o;
    o.modelDir = model.dir.toStdString();
    o.data = DataSpec::parse(dataSpec.toStdString());
    o.criterion = rule;
    o.systematic = true;
    o.precision = precision;
    if (o.data.kind == DataSpec::Kind::Images) {
        o.imagenetNames = sampleDataFile("imagenet/imagenet_classes_ILSVRC2012.txt");
        o.imagenetIndex = sampleDataFile("imagenet/imagenet_class_index.json");
    }
    const QFileInfo data(QString::fromStdString(o.data.path));
    // The weights' hash names the file; config.json is in the key: a clipped or gated variant with the
    // same weights as vanilla (another softmax or gate in its config) computes other activations.
    QFile config(QDir(model.dir).filePath(QStringLiteral("config.json")));
    const QByteArray configText = config.open(QIODevice::ReadOnly) ? config.readAll() : QByteArray();
    const QString key =
        dataSpec + QLatin1Char('|') + QString::fromStdString(o.criterion.describe()) + QLatin1Char('|') +
        QString::fromLatin1(QCryptographicHash::hash(configText, QCryptographicHash::Sha256).toHex()) +
        QStringLiteral("|fraction %1|%2|%3")
            .arg(rule.attentionFraction)
            .arg(data.size())
            .arg(data.lastModified().toMSecsSinceEpoch()) +
        // fp32 keys are those of the files written before there was a choice.
        (precision == Precision::Bf16 ? QStringLiteral("|bf16") : QString());
    const QString name =
        model.sha256.left(16) + QLatin1Char('-') +
        QString::fromLatin1(
            QCryptographicHash::hash(key.toUtf8(), QCryptographicHash::Sha256).toHex().left(16)) +
        QStringLiteral(".h5");
    const bool created = !QFileInfo::exists(dir);
    if (!QDir().mkpath(dir)) throw Error(dir.toStdString() + ": cannot create the folder");
    FigureStatistics result{QDir(dir).filePath(name), false};
    if (QFileInfo::exists(result.path)) {
        result.reused = true;
        return result;
    }
    o.outPath = result.path.toStdString();
    try {
        runStatistics(
            o, cancel, [&](std::int64_t done, std::int64_t total) { progress(done, total); },
            [](const std::string&) {});
    } catch (...) {
        if (created) QDir().rmdir(dir); // only if empty: a failed pass leaves no empty statistics/ behind
        throw;
    }
    return result;
}

std::vector<ComparedStatistics>
comparedStatistics(const QVector<ModelInfo>& models, const QString& dataSpec, const OutlierCriterion& rule,
                   Precision precision, const QString& dir, const std::atomic<bool>& cancel,
                   const std::function<void(qint64 done, qint64 total)>& progress)
{
    std::vector<ComparedStatistics> out;
    for (const ModelInfo& model : models) {
        ComparedStatistics c;
        try {
            const FigureStatistics f =
                figureStatistics(model, dataSpec, rule, precision, dir, cancel, progress);
            c.stats = readStatisticsFile(f.path.toStdString());
            c.path = f.path;
        } catch (const Cancelled&) {
            throw;
        } catch (const Error& e) {
            if (cancel) throw Cancelled();
            c.note = QString::fromStdString(e.what());
        }
        out.push_back(std::move(c));
    }
    return out;
}

QString runFolderOf(const QString& dir)
{
    QDir d(dir);
    for (int up = 0; up < 3; ++up) {
        if (QFileInfo::exists(d.filePath(QStringLiteral("metrics.jsonl")))) return d.absolutePath();
        if (!d.cdUp()) break;
    }
    return {};
}

} // namespace outlierlens
