#include "analysis/stats_runner.h"

#include "analysis/bert_batch.h"
#include "analysis/dataset_statistics.h"
#include "analysis/decoder_inspection.h"
#include "analysis/metrics.h"
#include "analysis/recording_sink.h"
#include "analysis/systematic_statistics.h"
#include "analysis/vit_inspection.h"
#include "common/error.h"
#include "common/input_file.h"
#include "io/hdf5_store.h"
#include "io/image.h"
#include "model/bert_network.h"
#include "model/decoder_network.h"
#include "model/vit_network.h"
#include "text/imagenet.h"
#include "text/mnli.h"
#include "text/wordpiece.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <thread>

namespace outlierlens {
namespace fs = std::filesystem;

namespace {

/// Accuracy is never counted from NaN or Inf logits: the run stops with the notice instead.
void refuseNonFiniteLogits(const torch::Tensor& logits, const std::string& modelDir)
{
    if (const std::string notice = nonFiniteOutputNotice(logits); !notice.empty())
        throw Error(modelDir + ": " + notice);
}

std::vector<int> resolveLayers(const std::vector<int>& requested, int numLayers)
{
    if (requested.empty()) {
        std::vector<int> all(static_cast<std::size_t>(numLayers));
        std::iota(all.begin(), all.end(), 0);
        return all;
    }
    for (int l : requested)
        if (l < 0 || l >= numLayers)
            throw Error("layer " + std::to_string(l) + " does not exist (the model has layers 0.." +
                        std::to_string(numLayers - 1) + ", 0-based)");
    return requested;
}

/// Records the captures the statistics read and adds each selected layer to the statistics as soon as
/// the forward pass has moved past it, for every sample of the batch; then lets that layer's activations
/// go (only its output stays, as the next layer's "previous output"). The batch's activations are never
/// all alive at once, so the allocator hands the same blocks from layer to layer instead of faulting
/// fresh pages in for every batch (bert-base, 16 x 64 tokens: ~20 MB instead of ~250 MB).
class StreamingStatisticsSink : public ActivationSink
{
public:
    StreamingStatisticsSink(DatasetStatistics& stats, const std::set<std::string>& names)
        : m_stats(stats)
        , m_names(names)
    {
        m_selected = stats.options().layers;
    }

    /// Also An et al.'s systematic outliers, whose captures join `names`.
    void addSystematic(SystematicStatistics& systematic)
    {
        m_systematic = &systematic;
        for (const std::string& name : systematic.requiredCaptures())
            m_names.insert(name);
    }

    /// Starts a batch: `lengths` real tokens of each row and (text) their token strings; with
    /// systematic statistics, `categories` of each row's tokens.
    void begin(const std::vector<std::int64_t>& lengths,
               const std::vector<const std::vector<std::string>*>& tokens,
               const std::vector<std::vector<TokenCategory>>& categories = {})
    {
        m_categories = categories;
        m_tensors.clear();
        m_lengths = lengths;
        m_samples.clear();
        static const std::vector<std::string> none;
        for (std::size_t r = 0; r < lengths.size(); ++r)
            m_samples.push_back(
                m_stats.beginSample(lengths[r], r < tokens.size() && tokens[r] ? *tokens[r] : none));
        m_next = 0;
    }

    bool wants(CapturePoint point, int layer) const override
    {
        return m_names.count(captureName(point, layer)) > 0;
    }

    void put(CapturePoint point, int layer, const at::Tensor& batched) override
    {
        if (layer >= 0) flushBefore(layer); // the pass has moved on to `layer`
        m_tensors[captureName(point, layer)] = batched;
    }

    /// After the forward pass: the remaining layers, then the samples are counted.
    void finish()
    {
        flushBefore(std::numeric_limits<int>::max());
        for (std::size_t r = 0; r < m_samples.size(); ++r) {
            m_stats.endSample();
            if (m_systematic) m_systematic->endSample();
        }
    }

    bool contains(const std::string& name) const { return m_tensors.count(name) > 0; }
    const torch::Tensor& at(const std::string& name) const
    {
        const auto it = m_tensors.find(name);
        if (it == m_tensors.end()) throw Error("activation '" + name + "' was not recorded");
        return it->second;
    }

private:
    void flushBefore(int layer)
    {
        while (m_next < m_selected.size() && m_selected[m_next] < layer) {
            const int l = m_selected[m_next++];
            for (std::size_t r = 0; r < m_samples.size(); ++r) {
                std::map<std::string, torch::Tensor> sample;
                for (const auto& [name, batched] : m_tensors) {
                    const auto parsed = parseCaptureName(name);
                    if (parsed && (parsed->second == l || name == previousName(l)))
                        sample.emplace(name, sampleOf(parsed->first, batched, std::int64_t(r), m_lengths[r]));
                }
                m_stats.addSampleLayer(m_samples[r], l, sample);
                if (m_systematic)
                    m_systematic->addSampleLayer(l, sample.at(captureName(CapturePoint::Out, l)),
                                                 sample.at(captureName(CapturePoint::DownIn, l)),
                                                 sample.at(captureName(CapturePoint::AttnProbs, l)),
                                                 m_categories.at(r));
            }
            // Everything up to layer l goes, except its output (the next layer's previous output).
            const std::string keep = captureName(CapturePoint::Out, l);
            for (auto it = m_tensors.begin(); it != m_tensors.end();) {
                const auto parsed = parseCaptureName(it->first);
                const bool done = parsed && it->first != keep && it->first != "logits" &&
                                  (parsed->second <= l || it->first == "embeddings");
                it = done ? m_tensors.erase(it) : std::next(it);
            }
        }
    }
    static std::string previousName(int layer)
    {
        return layer == 0 ? captureName(CapturePoint::Embeddings) : captureName(CapturePoint::Out, layer - 1);
    }

    DatasetStatistics& m_stats;
    SystematicStatistics* m_systematic = nullptr;
    std::vector<std::vector<TokenCategory>> m_categories;
    std::set<std::string> m_names;
    std::vector<int> m_selected;
    std::size_t m_next = 0;
    std::vector<std::int64_t> m_lengths;
    std::vector<DatasetStatistics::SampleKeys> m_samples;
    std::map<std::string, torch::Tensor> m_tensors;
};

struct Workers
{
    int count = 1;
    int threadsPerWorker = 1;
};

/// Forward passes side by side (--workers), the intra-op threads shared between them. One by default:
/// on an idle two-core machine one pass with both threads was 3-15% faster than two passes with one
/// thread each (bert-base, 128 MNLI pairs); when other processes keep the cores busy, two single-threaded
/// passes were 2.6x faster, as they never wait at an OpenMP barrier for a descheduled thread.
Workers workerCount(const StatsRunOptions& o)
{
    const int threads = std::max(1, at::get_num_threads());
    Workers w;
    w.count = o.workers > 0 ? std::min(o.workers, threads) : 1;
    w.threadsPerWorker = std::max(1, threads / w.count);
    return w;
}

class Stopwatch
{
public:
    double seconds() const
    {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
    }

private:
    std::chrono::steady_clock::time_point m_start = std::chrono::steady_clock::now();
};

/// Runs job(worker, index) for every index in [0, count) on `workers` threads (worker 0 is the calling
/// thread), each with `threadsPerWorker` intra-op threads: on a small machine two forward passes side
/// by side with one thread each keep both cores busy where one pass with two threads waits at every
/// small operator's barrier. Worker w takes the indices w, w + workers, ... (a fixed assignment, so
/// the results do not depend on timing). `afterMainJob` runs on the calling thread after each of its
/// jobs (progress). The first exception (Cancelled included) stops the others and is rethrown here.
void forEachBatch(std::size_t count, int workers, int threadsPerWorker, const std::atomic<bool>& cancel,
                  const std::function<void(int, std::size_t)>& job, const std::function<void()>& afterMainJob)
{
    workers = std::max(1, std::min<int>(workers, int(count)));
    const int previousThreads = at::get_num_threads();
    std::atomic<bool> failed{false};
    std::atomic<int> ready{0};
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(workers));
    auto run = [&](int w) {
        try {
            // Everyone sets its thread count before anyone computes (the call is not free of global
            // effects), then works through its share.
            at::set_num_threads(threadsPerWorker);
            ++ready;
            while (ready.load() < workers)
                std::this_thread::yield();
            for (std::size_t i = std::size_t(w); i < count && !failed; i += std::size_t(workers)) {
                if (cancel) throw Cancelled();
                job(w, i);
                if (w == 0) afterMainJob();
            }
        } catch (...) {
            errors[std::size_t(w)] = std::current_exception();
            failed = true;
        }
    };
    std::vector<std::thread> threads;
    for (int w = 1; w < workers; ++w)
        threads.emplace_back(run, w);
    run(0);
    for (auto& t : threads)
        t.join();
    at::set_num_threads(previousThreads);
    for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
}

void writeFile(const StatsRunOptions& o, const DatasetStatistics& stats, const std::string& modelName,
               const std::string& sha256, const StatsRunResult& result,
               const SystematicStatistics* systematic = nullptr)
{
    Hdf5Writer writer(o.outPath);
    stats.write(writer);
    if (systematic) systematic->write(writer);
    writer.setAttribute("/", "model", o.modelDir);
    writer.setAttribute("/", "model_name", modelName);
    writer.setAttribute("/", "checkpoint_sha256", sha256);
    writer.setAttribute("/", "data", o.data.describe());
    writer.setAttribute("/", "app_version", std::string(OUTLIERLENS_VERSION));
    writer.setAttribute("/", "precision", toString(o.precision));
    writer.setAttribute("/", "skipped_inputs", result.skipped);
    if (result.accuracy) writer.setAttribute("/", "accuracy_top1", *result.accuracy);
    if (result.top5) writer.setAttribute("/", "accuracy_top5", *result.top5);
    writer.commit();
}

/// An et al.'s systematic statistics for the layers and criterion of `so` (tau: the criterion's).
SystematicOptions systematicOptionsFor(const StatisticsOptions& so)
{
    SystematicOptions options;
    options.layers = so.layers;
    options.numHeads = so.numHeads;
    options.tau = so.criterion.tau;
    options.attentionFraction = so.criterion.attentionFraction;
    return options;
}

StatsRunResult runText(const StatsRunOptions& o, const std::atomic<bool>& cancel,
                       const std::function<void(std::int64_t, std::int64_t)>& progress)
{
    Stopwatch clock;
    BertNetwork network = BertNetwork::load(o.modelDir, o.variant);
    const BertTokenizer tokenizer = BertTokenizer::fromModelDir(o.modelDir);
    const BertConfig& c = network.config();
    const int maxLength = o.maxLength > 0 ? std::min(o.maxLength, c.maxPositions) : c.maxPositions;
    const std::vector<NliPair> pairs = readNliPairs(o.data.path, o.data.limit);
    if (pairs.empty()) throw Error(o.data.path + ": no sentence pairs");

    StatisticsOptions so;
    so.kind = InputKind::Text;
    so.layers = resolveLayers(o.layers, c.numLayers);
    so.numLayers = c.numLayers, so.numHeads = c.numHeads, so.hiddenSize = c.hiddenSize,
    so.headDim = c.headDim();
    so.criterion = o.criterion;
    // Only what the statistics read, plus the classifier's logits for the accuracy. Other heads are not
    // run at all: a masked-LM head's [B, T, vocab] logits would cost more than a small encoder.
    const bool classifier = network.head() == BertHead::SequenceClassification;
    std::set<std::string> captures = requiredCaptures(so);
    if (classifier) captures.insert("logits");

    // One accumulator, sink and accuracy count per worker, merged in worker order at the end.
    const Workers workers = workerCount(o);
    std::vector<DatasetStatistics> stats(std::size_t(workers.count), DatasetStatistics(so));
    std::vector<SystematicStatistics> systematic(std::size_t(workers.count),
                                                 SystematicStatistics(systematicOptionsFor(so)));
    std::vector<StreamingStatisticsSink> sinks;
    for (std::size_t w = 0; w < stats.size(); ++w) {
        sinks.emplace_back(stats[w], captures);
        if (o.systematic) sinks.back().addSystematic(systematic[w]);
    }
    std::vector<std::int64_t> correct(std::size_t(workers.count), 0), labelled(correct);

    // Chunks of pairs, sorted by length inside each chunk so batches need little padding, while
    // memory stays bounded by the chunk.
    constexpr std::size_t kChunk = 1024;
    const auto total = std::int64_t(pairs.size());
    std::atomic<std::int64_t> done{0};
    Stopwatch loop;
    for (std::size_t start = 0; start < pairs.size(); start += kChunk) {
        const std::size_t end = std::min(pairs.size(), start + kChunk);
        std::vector<Encoding> encodings;
        for (std::size_t i = start; i < end; ++i)
            encodings.push_back(tokenizer.encode(pairs[i].premise, pairs[i].hypothesis, maxLength));
        std::vector<std::size_t> order(encodings.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return encodings[a].inputIds.size() < encodings[b].inputIds.size();
        });
        // Up to batchSize inputs, fewer for long ones: the recorded attention grows with B * T^2.
        std::vector<std::pair<std::size_t, std::size_t>> batches; // [b0, b1) of `order`
        for (std::size_t b0 = 0, b1 = 0; b0 < order.size(); b0 = b1) {
            for (b1 = b0; b1 < order.size() && b1 - b0 < std::size_t(o.batchSize); ++b1) {
                const auto length = std::int64_t(encodings[order[b1]].inputIds.size());
                if (b1 > b0 && std::int64_t(b1 - b0 + 1) * length > o.tokenBudget) break;
            }
            batches.emplace_back(b0, b1);
        }
        auto runBatch = [&](int w, std::size_t batch) {
            const auto [b0, b1] = batches[batch];
            const auto B = std::int64_t(b1 - b0);
            std::vector<const Encoding*> rows;
            std::vector<std::int64_t> lengths;
            std::vector<const std::vector<std::string>*> tokens;
            std::vector<std::vector<TokenCategory>> categories;
            for (std::size_t i = b0; i < b1; ++i) {
                const Encoding& e = encodings[order[i]];
                rows.push_back(&e);
                lengths.push_back(std::int64_t(e.inputIds.size()));
                tokens.push_back(&e.tokens);
                if (o.systematic) categories.push_back(wordPieceCategories(e.tokens));
            }
            const PaddedBertBatch input = padBertBatch(rows, tokenizer.padId());
            StreamingStatisticsSink& sink = sinks[std::size_t(w)];
            sink.begin(lengths, tokens, categories);
            {
                c10::InferenceMode guard;
                const AutocastScope autocast(o.precision); // thread-local: set where the forward runs
                if (classifier)
                    network.forward(input.inputIds, input.tokenTypeIds, input.attentionMask, &sink);
                else
                    network.encoder()->forward(input.inputIds, input.tokenTypeIds, input.attentionMask,
                                               &sink);
            }
            sink.finish();
            if (classifier) {
                refuseNonFiniteLogits(sink.at("logits"), o.modelDir);
                for (std::int64_t r = 0; r < B; ++r) {
                    const int gold = goldLabelId(c.id2label, pairs[start + order[b0 + std::size_t(r)]].label);
                    if (gold >= 0) {
                        ++labelled[std::size_t(w)];
                        correct[std::size_t(w)] += sink.at("logits")[r].argmax().item<std::int64_t>() == gold;
                    }
                }
            }
            sink.begin({}, {}); // give the batch's activations back before the next one is assembled
            done += B;
        };
        forEachBatch(batches.size(), workers.count, workers.threadsPerWorker, cancel, runBatch,
                     [&] { progress(done, total); });
        progress(done, total);
    }
    const double loopSeconds = loop.seconds();
    for (std::size_t w = 1; w < stats.size(); ++w) {
        stats.front().merge(stats[w]);
        systematic.front().merge(systematic[w]);
        correct.front() += correct[w];
        labelled.front() += labelled[w];
    }
    StatsRunResult result;
    result.samples = stats.front().samples();
    result.loopSeconds = loopSeconds;
    if (labelled.front() > 0) result.accuracy = double(correct.front()) / double(labelled.front());
    writeFile(o, stats.front(), toString(network.head()), network.checkpointSha256(), result,
              o.systematic ? &systematic.front() : nullptr);
    result.seconds = clock.seconds();
    return result;
}

StatsRunResult runImages(const StatsRunOptions& o, const std::atomic<bool>& cancel,
                         const std::function<void(std::int64_t, std::int64_t)>& progress,
                         const std::function<void(const std::string&)>& warn)
{
    Stopwatch clock;
    VitNetwork network = VitNetwork::load(o.modelDir, o.variant);
    const ImagePreprocessing preprocessing = ImagePreprocessing::fromModelDir(o.modelDir);
    const VitConfig& c = network.config();
    std::function<int(const std::string&)> wnidToIndex;
    std::optional<ImageNetClasses> imagenet;
    if (c.numClasses == 1000 && !o.imagenetNames.empty()) {
        imagenet = ImageNetClasses::fromFiles(o.imagenetNames, o.imagenetIndex);
        wnidToIndex = [&](const std::string& wnid) { return imagenet->indexOfWnid(wnid); };
    }
    const std::vector<LabelledImage> images = listImageDataset(o.data.path, o.data.limit, wnidToIndex);

    StatisticsOptions so;
    so.kind = InputKind::Image;
    so.layers = resolveLayers(o.layers, c.numLayers);
    so.numLayers = c.numLayers, so.numHeads = c.numHeads, so.hiddenSize = c.hiddenSize,
    so.headDim = c.headDim();
    so.gridRows = so.gridCols = c.gridSize();
    so.registers = c.numRegisters;
    so.criterion = o.criterion;
    DatasetStatistics stats(so);
    std::set<std::string> captures = requiredCaptures(so);
    captures.insert("logits");
    StreamingStatisticsSink sink(stats, captures);
    SystematicStatistics systematic(systematicOptionsFor(so));
    if (o.systematic) sink.addSystematic(systematic);
    const std::vector<TokenCategory> patchCategories = imageTokenCategories(c.numRegisters, c.numPatches());

    StatsRunResult result;
    std::int64_t top1 = 0, top5 = 0, labelled = 0, done = 0;
    const auto total = std::int64_t(images.size());
    Stopwatch loop;
    for (std::size_t b0 = 0; b0 < images.size(); b0 += std::size_t(o.batchSize)) {
        if (cancel) throw Cancelled();
        const std::size_t b1 = std::min(images.size(), b0 + std::size_t(o.batchSize));
        std::vector<torch::Tensor> pixels;
        std::vector<int> labels;
        for (std::size_t i = b0; i < b1; ++i) {
            try {
                pixels.push_back(preprocessImage(decodeImageFile(images[i].path), preprocessing));
                labels.push_back(images[i].label);
            } catch (const Error& e) {
                ++result.skipped;
                warn(std::string("skipped: ") + e.what());
            }
        }
        done += std::int64_t(b1 - b0);
        if (!pixels.empty()) {
            sink.begin(std::vector<std::int64_t>(pixels.size(), c.numTokens()), {},
                       std::vector<std::vector<TokenCategory>>(pixels.size(), patchCategories));
            {
                c10::InferenceMode guard;
                const AutocastScope autocast(o.precision);
                network.forward(torch::stack(pixels), &sink);
            }
            sink.finish();
            if (sink.contains("logits")) refuseNonFiniteLogits(sink.at("logits"), o.modelDir);
            for (std::size_t r = 0; r < pixels.size(); ++r) {
                if (labels[r] >= 0 && sink.contains("logits")) {
                    ++labelled;
                    const torch::Tensor ranked = std::get<1>(sink.at("logits")[std::int64_t(r)].topk(5));
                    top1 += ranked[0].item<std::int64_t>() == labels[r];
                    top5 += (ranked == labels[r]).any().item<bool>();
                }
            }
        }
        progress(done, total);
    }
    if (stats.samples() == 0)
        throw Error(o.data.path + ": none of the " + std::to_string(images.size()) + " images could be read");
    result.samples = stats.samples();
    result.loopSeconds = loop.seconds();
    if (labelled > 0) {
        result.accuracy = double(top1) / double(labelled);
        result.top5 = double(top5) / double(labelled);
    }
    writeFile(o, stats, c.architecture, network.checkpointSha256(), result,
              o.systematic ? &systematic : nullptr);
    result.seconds = clock.seconds();
    return result;
}

/// Token ids of the start of a text file: enough for `chunks` chunks of `tokens`, read in growing
/// pieces so a large corpus is not tokenized whole. Encoded without special tokens, as An et al.
/// take their chunks.
std::vector<std::int64_t> tokenizeFileStart(const std::string& path, const DecoderTokenizer& tokenizer,
                                            std::size_t chunks, std::size_t tokens)
{
    std::ifstream in = openInputFile(path);
    if (!in) throw Error(path + ": cannot open the text file");
    in.seekg(0, std::ios::end);
    const auto size = std::size_t(std::max<std::streamoff>(0, in.tellg()));
    in.seekg(0);
    const std::size_t wanted = chunks * tokens;
    std::size_t bytes = std::min(size, std::max<std::size_t>(wanted * 8, 1 << 16));
    while (true) {
        std::string text(bytes, '\0');
        in.clear();
        in.seekg(0);
        in.read(text.data(), std::streamsize(bytes));
        text.resize(std::size_t(in.gcount()));
        if (bytes < size) {
            // Cut at the last line break so no word (or UTF-8 sequence) is split.
            const auto cut = text.rfind('\n');
            if (cut != std::string::npos && cut > 0) text.resize(cut + 1);
        }
        std::vector<std::int64_t> ids;
        try {
            ids = tokenizer.encode(text, std::nullopt, 0, false).inputIds;
        } catch (const Error& e) {
            throw Error(path + ": " + e.what()); // which file holds the bad byte (its offset is the file's)
        }
        if (ids.size() >= wanted || bytes >= size) return ids;
        bytes = std::min(size, bytes * 2);
    }
}

StatsRunResult runDecoderText(const StatsRunOptions& o, const std::atomic<bool>& cancel,
                              const std::function<void(std::int64_t, std::int64_t)>& progress)
{
    Stopwatch clock;
    DecoderNetwork network = DecoderNetwork::load(o.modelDir, o.variant);
    if (o.precision == Precision::Bf16) network.setComputeDtype(torch::kBFloat16); // as inspect does
    const std::unique_ptr<DecoderTokenizer> tokenizer = DecoderTokenizer::fromModelDir(o.modelDir);
    const DecoderConfig& c = network.config();
    const int maxPositions = c.maxPositions > 0 ? c.maxPositions : 512;
    const int seqLen = o.seqLen > 0 ? o.seqLen : std::min(512, maxPositions);
    if (seqLen > maxPositions)
        throw Error("--seq-len " + std::to_string(seqLen) + " exceeds the model's " +
                    std::to_string(maxPositions) + " positions");
    if (o.bos && tokenizer->bosId() < 0) throw Error(o.modelDir + ": the tokenizer has no BOS token (--bos)");
    const std::size_t body = std::size_t(seqLen - (o.bos ? 1 : 0));
    if (body < 1) throw Error("--seq-len must leave room for at least one text token");
    const std::size_t wantedChunks = o.data.limit > 0 ? o.data.limit : 100;
    const std::vector<std::int64_t> ids = tokenizeFileStart(o.data.path, *tokenizer, wantedChunks, body);
    const std::size_t chunks = std::min(wantedChunks, ids.size() / body);
    if (chunks == 0)
        throw Error(o.data.path + ": " + std::to_string(ids.size()) + " tokens, fewer than one chunk of " +
                    std::to_string(body));
    for (std::int64_t id : ids)
        if (id < 0 || id >= c.vocabSize)
            throw Error("token id " + std::to_string(id) + " is outside the model's vocabulary of " +
                        std::to_string(c.vocabSize));

    StatisticsOptions so;
    so.kind = InputKind::Text;
    so.decoder = true;
    so.layers = resolveLayers(o.layers, c.numLayers);
    so.numLayers = c.numLayers, so.numHeads = c.numHeads, so.hiddenSize = c.hiddenSize,
    so.headDim = c.headDim();
    so.criterion = o.criterion;
    DatasetStatistics stats(so);
    SystematicStatistics systematic(systematicOptionsFor(so));
    StreamingStatisticsSink sink(stats, requiredCaptures(so));
    sink.addSystematic(systematic);
    std::map<std::int64_t, std::string> labels; // token id -> label, cached
    auto labelOf = [&](std::int64_t id) -> const std::string& {
        auto it = labels.find(id);
        if (it == labels.end()) it = labels.emplace(id, decoderTokenLabel(*tokenizer, id)).first;
        return it->second;
    };
    std::map<std::int64_t, std::string> decoded; // token id -> its text, for An et al.'s categories
    auto categoryOf = [&](std::int64_t id, std::int64_t position) {
        auto it = decoded.find(id);
        if (it == decoded.end()) it = decoded.emplace(id, tokenizer->displayToken(id)).first;
        return tokenCategory(it->second, position);
    };

    // Every chunk has the same length: batches need no padding; the token budget bounds memory.
    const std::int64_t perBatch =
        std::max<std::int64_t>(1, std::min<std::int64_t>(o.batchSize, o.tokenBudget / seqLen));
    const auto total = std::int64_t(chunks);
    Stopwatch loop;
    for (std::int64_t b0 = 0; b0 < total; b0 += perBatch) {
        if (cancel) throw Cancelled();
        const std::int64_t B = std::min(perBatch, total - b0);
        torch::Tensor batch = torch::empty({B, seqLen}, torch::kLong);
        for (std::int64_t r = 0; r < B; ++r) {
            std::int64_t* row = batch[r].data_ptr<std::int64_t>();
            std::int64_t k = 0;
            if (o.bos) row[k++] = tokenizer->bosId();
            std::copy_n(ids.begin() + std::ptrdiff_t(std::size_t(b0 + r) * body), body, row + k);
        }
        std::vector<std::vector<std::string>> tokens(static_cast<std::size_t>(B));
        std::vector<std::vector<TokenCategory>> categories(static_cast<std::size_t>(B));
        std::vector<const std::vector<std::string>*> tokenPointers;
        for (std::int64_t r = 0; r < B; ++r) {
            std::vector<std::string>& labelsOfRow = tokens[std::size_t(r)];
            labelsOfRow.reserve(std::size_t(seqLen));
            const std::int64_t* row = batch[r].data_ptr<std::int64_t>();
            for (std::int64_t t = 0; t < seqLen; ++t) {
                labelsOfRow.push_back(labelOf(row[t]));
                categories[std::size_t(r)].push_back(categoryOf(row[t], t));
            }
            tokenPointers.push_back(&labelsOfRow);
        }
        sink.begin(std::vector<std::int64_t>(std::size_t(B), seqLen), tokenPointers, categories);
        {
            c10::InferenceMode guard;
            network.forward(batch, {}, &sink, false);
        }
        sink.finish();
        sink.begin({}, {});
        progress(b0 + B, total);
    }
    StatsRunResult result;
    result.samples = stats.samples();
    result.loopSeconds = loop.seconds();
    writeFile(o, stats, c.architectures.empty() ? toString(c.arch) : c.architectures.front(),
              network.checkpointSha256(), result, &systematic);
    result.seconds = clock.seconds();
    return result;
}

} // namespace

StatsRunResult runStatistics(const StatsRunOptions& options, const std::atomic<bool>& cancel,
                             const std::function<void(std::int64_t, std::int64_t)>& progress,
                             const std::function<void(const std::string&)>& warn)
{
    if (options.batchSize < 1) throw Error("batch size must be at least 1");
    if (options.outPath.empty()) throw Error("no output file given");
    StatsRunOptions o = options;
    std::string notice;
    o.precision = effectivePrecision(options.precision, &notice);
    if (!notice.empty()) warn(notice);
    const ModelFamily& family = modelFamilyOfDir(o.modelDir);
    const DataSpec::Kind wanted = DataSpec::kindFor(family);
    if (o.data.kind != wanted)
        throw Error(o.modelDir + " is a " + family.name + " model, which reads " +
                    DataSpec::describe(wanted) + ": use --data " + DataSpec::usage(wanted));
    switch (family.engine) {
    case FamilyEngine::Decoder:
        return runDecoderText(o, cancel, progress);
    case FamilyEngine::Bert:
        return runText(o, cancel, progress);
    case FamilyEngine::Vit:
        break;
    }
    return runImages(o, cancel, progress, warn);
}

} // namespace outlierlens
