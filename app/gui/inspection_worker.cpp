#include "inspection_worker.h"

#include "tasks/task_common.h"

#include "analysis/bert_batch.h"
#include "analysis/bert_inspection.h"
#include "analysis/decoder_inspection.h"
#include "analysis/metrics.h"
#include "analysis/statistics_file.h"
#include "analysis/systematic_statistics.h"
#include "analysis/vit_inspection.h"
#include "common/error.h"
#include "common/json_util.h"
#include "model/bert_network.h"
#include "model/decoder_network.h"
#include "model/model_family.h"
#include "model/runtime.h"
#include "model/vit_network.h"
#include "paths.h"
#include "systematic_snapshot.h"
#include "tasks/data/synthetic_data.h"
#include "text/imagenet.h"
#include "text/wordpiece.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <QFile>
#include <QFileInfo>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

namespace outlierlens {

struct InspectionWorker::Model
{
    ModelInfo info;
    std::unique_ptr<BertNetwork> bert;
    std::unique_ptr<BertTokenizer> tokenizer;
    std::unique_ptr<DecoderNetwork> decoder;
    std::unique_ptr<DecoderTokenizer> decoderTokenizer;
    SystematicWeightsPtr systematicWeights; ///< W_down's numbers, on the model's first input
    std::unique_ptr<VitNetwork> vit;
    std::unique_ptr<ImagePreprocessing> preprocessing;
    std::vector<std::string> classNames;
    std::optional<SyntheticTaskOptions> synthetic;
};

namespace {

/// Emits requestFinished(generation) when a slot returns, however it returns.
class FinishGuard
{
public:
    FinishGuard(InspectionWorker* worker, quint64 generation)
        : m_worker(worker)
        , m_generation(generation)
    {}
    ~FinishGuard()
    {
        if (m_armed) Q_EMIT m_worker->requestFinished(m_generation);
    }
    void dismiss() { m_armed = false; }

private:
    bool m_armed = true;
    InspectionWorker* m_worker;
    quint64 m_generation;
};

QVector<float> toFloats(const torch::Tensor& t)
{
    const torch::Tensor c = t.detach().to(torch::kFloat).contiguous();
    return QVector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

/// [1, L-stacked captures] -> one flat array per kind, layers concatenated in order.
QVector<float> stackLayers(const RecordingSink& sink, CapturePoint point, int layers)
{
    QVector<float> out;
    for (int l = 0; l < layers; ++l) {
        const std::string name = captureName(point, l);
        if (!sink.contains(name)) return {};
        out += toFloats(sink.at(name)[0]);
    }
    return out;
}

/// The capture names a snapshot holds (fillActivations): everything but down_in and the logits,
/// which for a decoder are [T, vocabulary] and not shown.
std::set<std::string> snapshotCaptureNames(int layers)
{
    std::set<std::string> names{captureName(CapturePoint::Embeddings)};
    for (int l = 0; l < layers; ++l)
        for (CapturePoint p : perLayerCapturePoints())
            if (p != CapturePoint::DownIn) names.insert(captureName(p, l));
    return names;
}

/// Per layer, head and query: the lowest and highest score over the keys the query sees.
QVector<float> scoreRanges(const RecordingSink& sink, int layers, bool causal)
{
    QVector<float> out;
    for (int l = 0; l < layers; ++l) {
        torch::Tensor scores = sink.at(captureName(CapturePoint::AttnScores, l))[0].to(torch::kFloat);
        if (causal) {
            // Masked keys are no softmax input: leave them out of both ends.
            const auto T = scores.size(-1);
            const torch::Tensor future = torch::ones({T, T}, torch::kBool).triu(1);
            const float inf = std::numeric_limits<float>::infinity();
            const torch::Tensor lo = scores.masked_fill(future, inf).amin(-1);
            const torch::Tensor hi = scores.masked_fill(future, -inf).amax(-1);
            out += toFloats(torch::stack({lo, hi}, -1));
        } else {
            out += toFloats(torch::stack({scores.amin(-1), scores.amax(-1)}, -1));
        }
    }
    return out;
}

/// One float32 [T][T] array per layer and head.
QVector<QVector<float>> perHead(const RecordingSink& sink, CapturePoint point, int layers)
{
    QVector<QVector<float>> out;
    for (int l = 0; l < layers; ++l) {
        const torch::Tensor t = sink.at(captureName(point, l))[0];
        for (std::int64_t h = 0; h < t.size(0); ++h)
            out.append(toFloats(t[h]));
    }
    return out;
}

QVector<int> toInts(const std::vector<std::int64_t>& v)
{
    QVector<int> out;
    out.reserve(qsizetype(v.size()));
    for (std::int64_t x : v)
        out << int(x);
    return out;
}

/// The dashboard's numbers of one [T, d] tensor, by analysis/metrics.
TensorOutliers tensorOutliers(const torch::Tensor& x, const OutlierCriterion& criterion)
{
    const SampleSummary s = summariseSample(x, criterion);
    TensorOutliers o;
    o.perDimension = toInts(s.perDim);
    o.perToken = toInts(s.perToken);
    o.positions = toInts(s.positions);
    o.maxInfNorm = s.maxInfNorm;
    o.kurtosis = s.kurtosis;
    return o;
}

/// Outliers of every per-layer tensor the snapshot keeps, in every layer, by the default criterion.
/// Memory stays small: counts of [d] and [T] and the outliers' positions (at most 1/k^2 of the
/// values, Chebyshev) per tensor and layer, beside the [T][d] values the snapshot holds anyway.
void fillOutliers(InspectionSnapshot& s, const RecordingSink& sink)
{
    const OutlierCriterion& criterion = s.outlierRule;
    static const CapturePoint kPoints[] = {CapturePoint::AttnOut, CapturePoint::FfnOut,
                                           CapturePoint::Residual, CapturePoint::Out};
    s.outliers.clear();
    for (CapturePoint point : kPoints) {
        QVector<TensorOutliers> layers;
        for (int l = 0; l < s.model.layers; ++l) {
            const std::string name = captureName(point, l);
            if (!sink.contains(name)) {
                layers.clear();
                break;
            }
            layers << tensorOutliers(sink.at(name)[0], criterion);
        }
        s.outliers << layers;
    }
}

void fillActivations(InspectionSnapshot& s, const RecordingSink& sink)
{
    const int L = s.model.layers;
    s.embeddings = toFloats(sink.at("embeddings")[0]);
    s.scoreRanges = scoreRanges(sink, L, s.model.isDecoder());
    s.probs = perHead(sink, CapturePoint::AttnProbs, L);
    s.values = stackLayers(sink, CapturePoint::AttnValues, L);
    s.context = stackLayers(sink, CapturePoint::AttnContext, L);
    s.gates = stackLayers(sink, CapturePoint::AttnGate, L);
    s.attnOut = stackLayers(sink, CapturePoint::AttnOut, L);
    s.ffnOut = stackLayers(sink, CapturePoint::FfnOut, L);
    s.residual = stackLayers(sink, CapturePoint::Residual, L);
    s.out = stackLayers(sink, CapturePoint::Out, L);
    fillOutliers(s, sink);
}

/// What every family reports alike: its attention variant, geometry and checkpoint hash.
void describeAttention(ModelInfo& info, const AttentionVariant& variant, int layers, int heads, int hidden,
                       int headDim, const std::string& sha256)
{
    info.variant = QString::fromStdString(variant.describe());
    info.sha256 = QString::fromStdString(sha256);
    info.layers = layers, info.heads = heads, info.hidden = hidden, info.headDim = headDim;
    info.clipped = variant.softmax == SoftmaxKind::Clipped;
    info.gated = variant.gate != GateKind::None;
}

QString readCard(const std::string& dir)
{
    QFile file(QString::fromStdString((std::filesystem::path(dir) / "README.md").string()));
    return file.open(QIODevice::ReadOnly) ? QString::fromUtf8(file.readAll()) : QString();
}

} // namespace

InspectionWorker::InspectionWorker() = default;
InspectionWorker::~InspectionWorker() = default;

void InspectionWorker::ensureThreads()
{
    if (!m_threadsConfigured) {
        configureTorchThreads(); // OpenMP settings are per thread: this worker's own
        m_threadsConfigured = true;
    }
}

void InspectionWorker::loadModel(quint64 generation, const QString& dirText)
{
    const FinishGuard guard(this, generation);
    try {
        ensureThreads();
        const std::string dir = dirText.toStdString();
        auto model = std::make_unique<Model>();
        ModelInfo& info = model->info;
        info.dir = dirText;
        info.name = QFileInfo(dirText).fileName();
        info.card = readCard(dir);
        const ModelFamily& family = modelFamilyOfDir(dir);
        info.family = &family;
        if (family.engine == FamilyEngine::Decoder) {
            model->decoder = std::make_unique<DecoderNetwork>(DecoderNetwork::load(dir));
            // A folder without tokenizer files runs token ids (as `inspect --input-ids`).
            if (DecoderTokenizer::existsIn(dir))
                model->decoderTokenizer = DecoderTokenizer::fromModelDir(dir);
            const DecoderConfig& c = model->decoder->config();
            if (model->decoderTokenizer && model->decoderTokenizer->vocabSize() > c.vocabSize)
                throw Error(dir + ": the tokenizer has " +
                            std::to_string(model->decoderTokenizer->vocabSize()) +
                            " tokens but the model's vocab_size is " + std::to_string(c.vocabSize));
            info.head =
                QString::fromStdString(c.architectures.empty() ? toString(c.arch) : c.architectures.front());
            describeAttention(info, c.variant, c.numLayers, c.numHeads, c.hiddenSize, c.headDim(),
                              model->decoder->checkpointSha256());
            info.preLayerNorm = c.preLayerNorm();
            info.slidingWindow = c.slidingWindow;
            info.windowOnEvenLayersOnly = c.slidingWindowAlternates;
            if (model->decoderTokenizer)
                info.tokenizerKind = QString::fromStdString(model->decoderTokenizer->kind());
            info.noTokenizer = !model->decoderTokenizer;
        } else if (family.engine == FamilyEngine::Bert) {
            model->bert = std::make_unique<BertNetwork>(BertNetwork::load(dir));
            model->tokenizer = std::make_unique<BertTokenizer>(BertTokenizer::fromModelDir(dir));
            const BertConfig& c = model->bert->config();
            if (model->tokenizer->vocabSize() != c.vocabSize)
                throw Error(dir + "/vocab.txt has " + std::to_string(model->tokenizer->vocabSize()) +
                            " tokens but the model's vocab_size is " + std::to_string(c.vocabSize));
            info.head = QString::fromStdString(toString(model->bert->head()));
            describeAttention(info, c.variant, c.numLayers, c.numHeads, c.hiddenSize, c.headDim(),
                              model->bert->checkpointSha256());
            for (const auto& l : c.id2label)
                info.classNames << QString::fromStdString(l);
            model->synthetic = readSyntheticOptions(dir);
            info.synthetic = model->synthetic.has_value();
        } else {
            model->vit = std::make_unique<VitNetwork>(VitNetwork::load(dir));
            model->preprocessing =
                std::make_unique<ImagePreprocessing>(ImagePreprocessing::fromModelDir(dir));
            const VitConfig& c = model->vit->config();
            info.head = QString::fromStdString(c.architecture);
            describeAttention(info, c.variant, c.numLayers, c.numHeads, c.hiddenSize, c.headDim(),
                              model->vit->checkpointSha256());
            info.imageSize = c.imageSize, info.gridSize = c.gridSize();
            info.registers = c.numRegisters;
            info.preLayerNorm = true;
            if (!c.id2label.empty())
                model->classNames = c.id2label;
            else if (c.numClasses == 1000)
                model->classNames =
                    ImageNetClasses::fromFiles(sampleDataFile("imagenet/imagenet_classes_ILSVRC2012.txt"))
                        .names();
            for (const auto& l : model->classNames)
                info.classNames << QString::fromStdString(l);
        }
        m_model = std::move(model);
        Q_EMIT modelLoaded(generation, m_model->info);
    } catch (const std::exception& e) {
        Q_EMIT failed(generation, QString::fromStdString(e.what()));
    }
}

void InspectionWorker::inspectText(quint64 generation, const QString& text, const QString& pair)
{
    const FinishGuard guard(this, generation);
    try {
        ensureThreads();
        if (m_model && m_model->decoder) {
            inspectDecoderText(generation, text);
            return;
        }
        if (!m_model || !m_model->bert) throw Error("load a BERT model or a decoder to run text");
        const std::optional<std::string> second =
            pair.isEmpty() ? std::nullopt : std::optional<std::string>(pair.toStdString());
        auto s = std::make_shared<InspectionSnapshot>();
        s->outlierRule = m_outlierRule;
        const AutocastScope autocast(forwardPrecision(*s));
        const BertInspection r = inspectBert(*m_model->bert, *m_model->tokenizer, text.toStdString(), second);
        s->generation = generation;
        s->model = m_model->info;
        s->input = pair.isEmpty() ? text : text + QStringLiteral(" ||| ") + pair;
        for (const auto& t : r.encoding.tokens)
            s->tokens << QString::fromStdString(t);
        s->T = s->tokens.size();
        fillActivations(*s, r.activations);
        fillSystematic(*s, r.activations, m_model->bert->module(), false,
                       wordPieceCategories(r.encoding.tokens), m_model->systematicWeights);
        s->probabilities = QVector<double>(r.probabilities.begin(), r.probabilities.end());
        if (r.predicted >= 0) s->prediction << s->model.classNames.value(r.predicted);
        s->outputNotice = QString::fromStdString(r.outputNotice);
        s->inputNotice = QString::fromStdString(
            truncationNotice(r.fullLength, std::int64_t(r.encoding.inputIds.size()), second.has_value()));
        Q_EMIT inspected(generation, s);
    } catch (const std::exception& e) {
        Q_EMIT failed(generation, QString::fromStdString(e.what()));
    }
}

void InspectionWorker::inspectDecoderText(quint64 generation, const QString& text)
{
    const int layers = m_model->info.layers;
    // The snapshot keeps every layer's [H, T, T] scores and probabilities: bound T so that a long text
    // file on a large model cannot take the machine's memory (GPT-2 at 512 tokens: 300 MB).
    const int positions = m_model->decoder->config().maxPositions;
    const int limit = positions > 0 ? std::min(positions, kMaxDecoderTokens) : kMaxDecoderTokens;
    auto s = std::make_shared<InspectionSnapshot>();
    s->outlierRule = m_outlierRule;
    // Decoders compute in bf16 themselves (weights and activations), as `inspect --precision bf16`.
    m_model->decoder->setComputeDtype(forwardPrecision(*s) == Precision::Bf16 ? torch::kBFloat16
                                                                              : torch::kFloat);
    std::set<std::string> captures = snapshotCaptureNames(layers);
    captures.merge(systematicCaptureNames(layers));
    const DecoderTokenizer* tokenizer = m_model->decoderTokenizer.get();
    const DecoderInspection r =
        tokenizer
            ? inspectDecoder(*m_model->decoder, *tokenizer, text.toStdString(), limit, true, captures)
            : inspectDecoderIds(*m_model->decoder, parseTokenIds(text.toStdString()), nullptr, captures);
    s->generation = generation;
    s->model = m_model->info;
    s->input = text;
    s->inputNotice =
        QString::fromStdString(truncationNotice(r.fullLength, std::int64_t(r.encoding.inputIds.size())));
    if (!s->inputNotice.isEmpty())
        s->input = QStringLiteral("%1 (first %2 tokens)").arg(text.left(2000)).arg(r.labels.size());
    for (const auto& t : r.labels)
        s->tokens << QString::fromStdString(t);
    s->T = s->tokens.size();
    fillActivations(*s, r.activations);
    std::vector<std::string> decoded; // as `stats` categorises a decoder's tokens
    for (std::int64_t id : r.encoding.inputIds)
        decoded.push_back(tokenizer ? tokenizer->displayToken(id) : std::to_string(id));
    fillSystematic(*s, r.activations, m_model->decoder->module(), m_model->info.family->conv1dWeights,
                   tokenCategories(decoded), m_model->systematicWeights);
    s->outputNotice = QString::fromStdString(r.outputNotice);
    for (const auto& [id, p] : r.nextTokens)
        s->prediction << QStringLiteral("%1 (%2)")
                             .arg(tokenizer ? QString::fromStdString(decoderTokenLabel(*tokenizer, id))
                                            : QStringLiteral("#%1").arg(id))
                             .arg(p, 0, 'f', 3);
    Q_EMIT inspected(generation, s);
}

void InspectionWorker::inspectImage(quint64 generation, const QString& path, const QString& credit)
{
    const FinishGuard guard(this, generation);
    try {
        ensureThreads();
        if (!m_model || !m_model->vit) throw Error("load a ViT model to run images");
        auto s = std::make_shared<InspectionSnapshot>();
        s->outlierRule = m_outlierRule;
        const AutocastScope autocast(forwardPrecision(*s));
        const VitInspection r = inspectVit(*m_model->vit, *m_model->preprocessing, path.toStdString());
        s->generation = generation;
        s->model = m_model->info;
        s->input = path;
        s->imageCredit = credit;
        for (const auto& t : m_model->vit->config().tokenLabels())
            s->tokens << QString::fromStdString(t);
        s->T = s->tokens.size();
        s->image = QImage(r.resized.pixels.data(), r.resized.width, r.resized.height, r.resized.width * 3,
                          QImage::Format_RGB888)
                       .copy();
        fillActivations(*s, r.activations);
        const VitConfig& c = m_model->vit->config();
        fillSystematic(*s, r.activations, *m_model->vit->module(), false,
                       imageTokenCategories(c.numRegisters, c.numPatches()), m_model->systematicWeights);
        s->probabilities = QVector<double>(r.probabilities.begin(), r.probabilities.end());
        s->outputNotice = QString::fromStdString(r.outputNotice);
        for (int k : r.top)
            s->prediction << QStringLiteral("%1 (%2)")
                                 .arg(s->model.classNames.value(k, QStringLiteral("class %1").arg(k)))
                                 .arg(r.probabilities[std::size_t(k)], 0, 'f', 3);
        Q_EMIT inspected(generation, s);
    } catch (const std::exception& e) {
        Q_EMIT failed(generation, QString::fromStdString(e.what()));
    }
}

void InspectionWorker::inspectSyntheticExample(quint64 generation, quint64 seed)
{
    const FinishGuard guard(this, generation);
    try {
        ensureThreads();
        if (!m_model || !m_model->bert || !m_model->synthetic)
            throw Error("the loaded model was not trained on the synthetic task");
        at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
        const SyntheticBatch b = syntheticBatch(*m_model->synthetic, 1, gen);
        const std::int64_t length = b.attentionMask.sum().item<std::int64_t>();
        using torch::indexing::Slice;
        const torch::Tensor ids = b.inputIds.index({Slice(), Slice(0, length)});
        const torch::Tensor types = b.tokenTypeIds.index({Slice(), Slice(0, length)}); // pairs: 1 after [SEP]
        RecordingSink sink;
        auto s = std::make_shared<InspectionSnapshot>();
        s->outlierRule = m_outlierRule;
        {
            const AutocastScope autocast(forwardPrecision(*s));
            c10::InferenceMode guard;
            m_model->bert->forward(ids, types, torch::ones_like(ids), &sink);
        }
        s->generation = generation;
        s->model = m_model->info;
        for (std::int64_t i = 0; i < length; ++i)
            s->tokens << QString::fromStdString(
                m_model->tokenizer->idToToken(ids[0][i].item<std::int64_t>()));
        s->T = s->tokens.size();
        s->input = QStringLiteral("synthetic example %1: ").arg(seed) + s->tokens.join(QLatin1Char(' '));
        fillActivations(*s, sink);
        std::vector<std::string> tokens;
        for (const QString& t : s->tokens)
            tokens.push_back(t.toStdString());
        fillSystematic(*s, sink, m_model->bert->module(), false, wordPieceCategories(tokens),
                       m_model->systematicWeights);
        Q_EMIT inspected(generation, s);
    } catch (const std::exception& e) {
        Q_EMIT failed(generation, QString::fromStdString(e.what()));
    }
}

void InspectionWorker::predictPairs(quint64 generation, const QStringList& premises,
                                    const QStringList& hypotheses, int next)
{
    FinishGuard guard(this, generation);
    try {
        ensureThreads();
        if (!m_model || !m_model->bert || m_model->bert->head() != BertHead::SequenceClassification)
            return; // nothing to predict with
        BertNetwork& net = *m_model->bert;
        const int total = int(premises.size());
        if (m_predictionGeneration != generation) {
            m_predictionGeneration = generation;
            m_predicted = QVector<bool>(total, false);
            m_predictedCount = 0;
        }
        if (m_cancel || m_predictedCount >= total) return;
        // The rows the user looks at first; else the first row not done from `next` on, wrapping.
        int start = m_priorityRow.exchange(-1);
        if (start < 0 || start >= total || m_predicted[start]) {
            start = -1;
            for (int k = 0; k < total && start < 0; ++k)
                if (!m_predicted[(next + k) % total]) start = (next + k) % total;
        }
        constexpr int kBatch = 8; // small: an inspection asked for meanwhile waits for one batch at most
        int count = 0;
        while (count < kBatch && start + count < total && !m_predicted[start + count])
            ++count;
        std::vector<Encoding> encodings;
        for (int i = 0; i < count; ++i)
            encodings.push_back(m_model->tokenizer->encode(premises[start + i].toStdString(),
                                                           hypotheses[start + i].toStdString(),
                                                           net.config().maxPositions));
        std::vector<const Encoding*> rows;
        for (const Encoding& e : encodings)
            rows.push_back(&e);
        const PaddedBertBatch input = padBertBatch(rows, m_model->tokenizer->padId());
        torch::Tensor predicted;
        {
            // Background work: leave a core to the GUI thread (redraws stay smooth while the
            // table fills). Inspections, which the user waits for, get every core again.
            struct FewerThreads
            {
                int threads = at::get_num_threads();
                FewerThreads() { at::set_num_threads(std::max(1, threads - 1)); }
                ~FewerThreads() { at::set_num_threads(threads); }
            } fewer;
            c10::InferenceMode guard;
            predicted = net.forward(input.inputIds, input.tokenTypeIds, input.attentionMask)
                            .logits.argmax(-1)
                            .contiguous();
        }
        QVector<int> labels;
        for (int i = 0; i < count; ++i) {
            labels << int(predicted[i].item<std::int64_t>());
            m_predicted[start + i] = true;
        }
        m_predictedCount += count;
        Q_EMIT predictionsReady(generation, start, labels);
        Q_EMIT progress(generation, m_predictedCount, total);
        if (m_predictedCount < total) {
            guard.dismiss(); // the continuation finishes the request
            QMetaObject::invokeMethod(
                this,
                [this, generation, premises, hypotheses, after = (start + count) % total] {
                    predictPairs(generation, premises, hypotheses, after);
                },
                Qt::QueuedConnection);
        }
    } catch (const std::exception& e) {
        Q_EMIT failed(generation, QString::fromStdString(e.what()));
    }
}

void InspectionWorker::setFastMode(bool on)
{
    m_fastMode = on;
}

void InspectionWorker::setOutlierRule(const OutlierCriterion& rule)
{
    m_outlierRule = rule;
}

Precision InspectionWorker::forwardPrecision(InspectionSnapshot& snapshot) const
{
    if (!m_fastMode) return Precision::Fp32;
    std::string notice;
    const Precision p = effectivePrecision(Precision::Bf16, &notice);
    snapshot.precision = QString::fromStdString(toString(p));
    snapshot.precisionNotice = QString::fromStdString(notice);
    return p;
}

void InspectionWorker::loadStatistics(quint64 generation, const QString& path)
{
    const FinishGuard guard(this, generation);
    try {
        auto file = std::make_shared<StatisticsFile>(readStatisticsFile(path.toStdString()));
        Q_EMIT statisticsLoaded(generation, file, path);
    } catch (const std::exception& e) {
        Q_EMIT failed(generation, QString::fromStdString(e.what()));
    }
}

namespace {

/// Index of a per-layer tensor in perLayerNames(); anything unknown is ffn_out.
int perLayerIndex(const QString& name)
{
    const int i = int(InspectionSnapshot::perLayerNames().indexOf(name));
    return i < 0 ? 1 : i;
}

} // namespace

const QStringList& InspectionSnapshot::perLayerNames()
{
    static const QStringList names = {QStringLiteral("attn_out"), QStringLiteral("ffn_out"),
                                      QStringLiteral("residual"), QStringLiteral("out")};
    return names;
}

const QVector<float>& InspectionSnapshot::perLayer(const QString& name) const
{
    const QVector<float>* tensors[] = {&attnOut, &ffnOut, &residual, &out};
    return *tensors[perLayerIndex(name)];
}

const TensorOutliers& InspectionSnapshot::outliersOf(const QString& name, int layer) const
{
    static const TensorOutliers kNone;
    const int i = perLayerIndex(name);
    if (i >= outliers.size() || layer < 0 || layer >= outliers[i].size()) return kNone;
    return outliers[i][layer];
}

} // namespace outlierlens
