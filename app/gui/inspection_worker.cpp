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
#include "quant/intervention.h"
#include "quant/transforms.h"
#include "systematic_snapshot.h"
#include "tasks/data/synthetic_data.h"
#include "text/imagenet.h"
#include "text/wordpiece.h"
#include "through_sinks.h"

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
void fillOutliers(InspectionSnapshot& s, const RecordingSink& sink, const SiteRecorder* norms)
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
    QVector<TensorOutliers> attnIn; // perLayerNames()'s last
    for (int l = 0; norms && !s.attnIn.isEmpty() && l < s.model.layers; ++l)
        attnIn << tensorOutliers(norms->at(QuantSite::AttnNorm, l)[0], criterion);
    s.outliers << attnIn;
}

/// [L][T][d]: what the Q/K/V projections of each layer read, as `norms` recorded it; empty when a layer
/// never passed it (no recorder, or a post-LN model).
QVector<float> stackAttnInputs(const SiteRecorder* norms, int layers)
{
    QVector<float> out;
    for (int l = 0; norms && l < layers; ++l) {
        const torch::Tensor x = norms->at(QuantSite::AttnNorm, l);
        if (!x.defined()) return {};
        out += toFloats(x[0]);
    }
    return out;
}

/// `norms` (may be null) recorded the AttnNorm site of a pre-LN model's forward pass.
void fillActivations(InspectionSnapshot& s, const RecordingSink& sink, const SiteRecorder* norms)
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
    s.attnIn = stackAttnInputs(norms, L);
    fillOutliers(s, sink, norms);
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
        std::unique_ptr<Model> model = loadFolder(dirText);
        m_view.reset();
        m_model = std::move(model);
        Q_EMIT modelLoaded(generation, m_model->info);
    } catch (const std::exception& e) {
        Q_EMIT failed(generation, QString::fromStdString(e.what()));
    }
}

namespace {

/// The network's module, as transforms and An et al.'s weight statistics read it.
template<class M>
torch::nn::Module& moduleOf(M& m)
{
    if (m.decoder) return m.decoder->module();
    if (m.bert) return m.bert->module();
    return *m.vit->module();
}

/// Why `transform` does not apply to `module` (checkTransformApplies's refusal); empty where it does.
QString refusalOf(torch::nn::Module& module, const ModelTransform& transform)
{
    try {
        checkTransformApplies(module, transform);
        return {};
    } catch (const std::exception& e) {
        return QString::fromStdString(e.what());
    }
}

} // namespace

std::unique_ptr<InspectionWorker::Model> InspectionWorker::loadFolder(const QString& dirText)
{
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
        if (DecoderTokenizer::existsIn(dir)) model->decoderTokenizer = DecoderTokenizer::fromModelDir(dir);
        const DecoderConfig& c = model->decoder->config();
        if (model->decoderTokenizer && model->decoderTokenizer->vocabSize() > c.vocabSize)
            throw Error(dir + ": the tokenizer has " + std::to_string(model->decoderTokenizer->vocabSize()) +
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
        model->preprocessing = std::make_unique<ImagePreprocessing>(ImagePreprocessing::fromModelDir(dir));
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
    ModelTransform smoothing, rotation;
    smoothing.smoothQuantAlpha = 0.5;
    rotation.rotate = true;
    info.smoothQuantRefusal = refusalOf(moduleOf(*model), smoothing);
    info.rotationRefusal = refusalOf(moduleOf(*model), rotation);
    return model;
}

InspectionWorker::Model&
InspectionWorker::viewModel(const std::function<void(Model&, ActivationSink&)>& calibrate)
{
    if (!m_transform.any()) return *m_model;
    // SmoothQuant's scales are this input's: a fresh copy for each input. A rotation needs no data.
    if (!m_view || m_transform.smoothQuantAlpha || m_viewTransform != m_transform) {
        m_view.reset();
        std::unique_ptr<Model> view = loadFolder(m_model->info.dir);
        applyTransform(moduleOf(*view), m_transform, [&](ActivationSink& sink) { calibrate(*view, sink); });
        m_view = std::move(view);
        m_viewTransform = m_transform;
    }
    return *m_view;
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
        Model& m = viewModel([&](Model& v, ActivationSink& sink) {
            inspectBert(*v.bert, *v.tokenizer, text.toStdString(), second, 0, {"embeddings"}, &sink);
        });
        ThroughSinks sinks(m_intervention, true, false);
        BertInspection r =
            inspectBert(*m.bert, *m.tokenizer, text.toStdString(), second, 0, {}, sinks.through());
        sinks.showIntervened(r.activations);
        s->transform = QString::fromStdString(m_transform.describe());
        s->intervention = ThroughSinks::describe(m_intervention);
        s->generation = generation;
        s->model = m_model->info;
        s->input = pair.isEmpty() ? text : text + QStringLiteral(" ||| ") + pair;
        for (const auto& t : r.encoding.tokens)
            s->tokens << QString::fromStdString(t);
        s->T = s->tokens.size();
        fillActivations(*s, r.activations, nullptr); // post-LN: no pre-norm
        fillSystematic(*s, r.activations, m.bert->module(), false, wordPieceCategories(r.encoding.tokens),
                       m.systematicWeights);
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
    const torch::ScalarType dtype =
        forwardPrecision(*s) == Precision::Bf16 ? torch::kBFloat16 : torch::kFloat;
    std::set<std::string> captures = snapshotCaptureNames(layers);
    captures.merge(systematicCaptureNames(layers));
    const DecoderTokenizer* tokenizer = m_model->decoderTokenizer.get();
    const auto run = [&](Model& m, const std::set<std::string>& names, ActivationSink* through) {
        m.decoder->setComputeDtype(dtype);
        return tokenizer ? inspectDecoder(*m.decoder, *tokenizer, text.toStdString(), limit, true, names, 5,
                                          through)
                         : inspectDecoderIds(*m.decoder, parseTokenIds(text.toStdString()), nullptr, names, 5,
                                             through);
    };
    Model& m = viewModel([&](Model& v, ActivationSink& sink) { run(v, {"embeddings"}, &sink); });
    ThroughSinks sinks(m_intervention, false, m.info.preLayerNorm, m_lifecycleLayers);
    DecoderInspection r = run(m, captures, sinks.through());
    sinks.showIntervened(r.activations);
    s->transform = QString::fromStdString(m_transform.describe());
    s->intervention = ThroughSinks::describe(m_intervention);
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
    fillActivations(*s, r.activations, sinks.norms());
    s->lifecycle = lifecycleOf(r.activations, sinks.recorder(), m_lifecycleLayers, layers, m.info.headDim);
    std::vector<std::string> decoded; // as `stats` categorises a decoder's tokens
    for (std::int64_t id : r.encoding.inputIds)
        decoded.push_back(tokenizer ? tokenizer->displayToken(id) : std::to_string(id));
    fillSystematic(*s, r.activations, m.decoder->module(), m.info.family->conv1dWeights,
                   tokenCategories(decoded), m.systematicWeights);
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
        Model& m = viewModel([&](Model& v, ActivationSink& sink) {
            inspectVit(*v.vit, *v.preprocessing, path.toStdString(), {"embeddings"}, &sink);
        });
        ThroughSinks sinks(m_intervention, false, true);
        VitInspection r = inspectVit(*m.vit, *m.preprocessing, path.toStdString(), {}, sinks.through());
        sinks.showIntervened(r.activations);
        s->transform = QString::fromStdString(m_transform.describe());
        s->intervention = ThroughSinks::describe(m_intervention);
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
        fillActivations(*s, r.activations, sinks.norms());
        const VitConfig& c = m.vit->config();
        fillSystematic(*s, r.activations, *m.vit->module(), false,
                       imageTokenCategories(c.numRegisters, c.numPatches()), m.systematicWeights);
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
        Model* model = m_model.get();
        {
            const AutocastScope autocast(forwardPrecision(*s));
            c10::InferenceMode guard;
            model = &viewModel([&](Model& v, ActivationSink& calibration) {
                v.bert->forward(ids, types, torch::ones_like(ids), &calibration);
            });
            ThroughSinks sinks(m_intervention, true, false);
            const ThroughScope scope(sink, sinks.through());
            model->bert->forward(ids, types, torch::ones_like(ids), &sink);
            sinks.showIntervened(sink);
        }
        s->transform = QString::fromStdString(m_transform.describe());
        s->intervention = ThroughSinks::describe(m_intervention);
        s->generation = generation;
        s->model = m_model->info;
        for (std::int64_t i = 0; i < length; ++i)
            s->tokens << QString::fromStdString(
                m_model->tokenizer->idToToken(ids[0][i].item<std::int64_t>()));
        s->T = s->tokens.size();
        s->input = QStringLiteral("synthetic example %1: ").arg(seed) + s->tokens.join(QLatin1Char(' '));
        fillActivations(*s, sink, nullptr); // post-LN: no pre-norm
        std::vector<std::string> tokens;
        for (const QString& t : s->tokens)
            tokens.push_back(t.toStdString());
        fillSystematic(*s, sink, model->bert->module(), false, wordPieceCategories(tokens),
                       model->systematicWeights);
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

void InspectionWorker::setIntervention(const std::optional<Intervention>& intervention)
{
    m_intervention = intervention;
}

void InspectionWorker::setLifecycleLayers(const QVector<int>& layers)
{
    m_lifecycleLayers = layers;
}

void InspectionWorker::setTransform(const ModelTransform& transform)
{
    m_transform = transform;
    if (!transform.any()) m_view.reset(); // its memory back
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
                                      QStringLiteral("residual"), QStringLiteral("out"),
                                      QStringLiteral("attn_in")};
    return names;
}

const QVector<float>& InspectionSnapshot::perLayer(const QString& name) const
{
    const QVector<float>* tensors[] = {&attnOut, &ffnOut, &residual, &out, &attnIn};
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
