// The bundled Bigram-Backcopy demo models (sample_data/models/backcopy-*) show the paper's story on
// their own sample inputs, measured with the app's metrics (analysis/metrics.h):
// - vanilla: a no-op head (>= 0.5 of its attention on BOS) and, in some layer, an outlier on BOS:
//   max |x| >= 20 x median |x|, Pearson kurtosis >= 30 (means over the inputs), the max on BOS in >= 90%
//   of the inputs, and the 6-sigma outliers in <= 4 hidden dimensions (median over the inputs: an odd
//   input with one more dimension over 6 sigma is reported in the mean, not counted against it);
// - gated attention and sigmoid attention (An et al.'s): next-token loss within 2% of vanilla's, and in
//   the same layer and tensor max |x| <= 1/4 of vanilla's and kurtosis <= 10, no dead head;
// - clipped softmax: the same loss and no dead head; its outlier figures are printed, not bounded (it
//   does not remove the outlier here: docs/demo-models.md).
// The synthetic-task BERT trio (sample_data/models/synthetic-*, when it ships its sample pairs) likewise
// on its pairs: vanilla's no-op heads on [CLS], [SEP] and punctuation and the FFN-output outliers on those
// tokens; clipped softmax and gated attention at the same accuracy without them.
// It prints the figures docs/demo-models.md quotes. If the models are retrained, this says whether
// they still teach what the docs claim.

#include "analysis/bert_inspection.h"
#include "analysis/metrics.h"
#include "analysis/recording_sink.h"
#include "analysis/showcase.h"
#include "model/bert_network.h"
#include "model/decoder_network.h"
#include "tasks/data/clm_data.h"
#include "text/decoder_tokenizer.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>

using namespace outlierlens;

namespace {

const std::string kModels = OUTLIERLENS_SOURCE_DIR "/sample_data/models";

/// Averages over the sample inputs of one model.
struct LayerFigures
{
    double maxAbs = 0, ratio = 0, kurtosis = 0; ///< max |x|, max / median |x|, Pearson kurtosis
    double bosShare = 0;                        ///< inputs whose max |x| sits on BOS (position 0)
    double outlierDims = 0;           ///< hidden dimensions holding 6-sigma outliers (mean over inputs)
    std::vector<double> dimsPerInput; ///< the same, per input (the criterion takes their median)
    double medianDims() const
    {
        std::vector<double> v = dimsPerInput;
        std::sort(v.begin(), v.end());
        return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    }
};

struct ModelFigures
{
    double loss = 0;                                          ///< mean next-token cross entropy
    std::map<std::string, std::vector<LayerFigures>> tensors; ///< "out", "ffn_out" -> per layer
    std::vector<std::vector<double>> bosAttention;            ///< [layer][head]: mean attention on BOS
    std::vector<std::vector<double>> contextMax;              ///< [layer][head]: max |P V| (0 = dead head)
};

ModelFigures measure(const std::string& dir)
{
    torch::NoGradGuard noGrad;
    DecoderNetwork net = DecoderNetwork::load(dir);
    const auto tok = DecoderTokenizer::fromModelDir(dir);
    const std::vector<std::string> lines = readSampleInputs(dir);
    if (lines.empty()) throw std::runtime_error(dir + ": no sample_inputs.txt");

    const int layers = net.config().numLayers, heads = net.config().numHeads;
    ModelFigures f;
    for (const char* t : {"out", "ffn_out"})
        f.tensors[t].assign(std::size_t(layers), {});
    f.bosAttention.assign(std::size_t(layers), std::vector<double>(std::size_t(heads), 0));
    f.contextMax.assign(std::size_t(layers), std::vector<double>(std::size_t(heads), 0));
    const double n = double(lines.size());
    for (const std::string& line : lines) {
        const torch::Tensor ids = torch::tensor(tok->encode(line).inputIds).unsqueeze(0);
        RecordingSink sink;
        const torch::Tensor logits = net.forward(ids, {}, &sink, true).logits;
        f.loss += nextTokenCrossEntropy(logits, ids).item<double>() / n;
        for (int l = 0; l < layers; ++l) {
            const std::string prefix = "layer" + std::to_string(l) + "/";
            for (auto& [name, perLayer] : f.tensors) {
                const torch::Tensor x = sink.at(prefix + name)[0].to(torch::kDouble); // [T, d]
                const torch::Tensor a = x.abs();
                LayerFigures& g = perLayer[std::size_t(l)];
                const double max = maxInfNorm(x);
                g.maxAbs += max / n;
                g.ratio += max / a.median().item<double>() / n;
                g.kurtosis += pearsonKurtosis(x) / n;
                const std::int64_t argmax = a.argmax().item<std::int64_t>();
                g.bosShare += (argmax / x.size(1) == 0 ? 1.0 : 0.0) / n;
                const double dims = double(outlierMask(x, {}).any(0).sum().item<std::int64_t>());
                g.outlierDims += dims / n;
                g.dimsPerInput.push_back(dims);
            }
            const torch::Tensor probs = sink.at(prefix + "attn_probs")[0];     // [H, T, T]
            const torch::Tensor context = sink.at(prefix + "attn_context")[0]; // [H, T, d_head]
            for (int h = 0; h < heads; ++h) {
                // Queries 1.. (BOS can only attend to itself).
                f.bosAttention[std::size_t(l)][std::size_t(h)] +=
                    probs[h].narrow(0, 1, probs.size(1) - 1).select(1, 0).mean().item<double>() / n;
                f.contextMax[std::size_t(l)][std::size_t(h)] = std::max(
                    f.contextMax[std::size_t(l)][std::size_t(h)], context[h].abs().max().item<double>());
            }
        }
    }
    return f;
}

void print(const std::string& name, const ModelFigures& f)
{
    qInfo("%s: next-token loss %.4f on its %s", name.c_str(), f.loss, "sample inputs");
    for (std::size_t l = 0; l < f.bosAttention.size(); ++l) {
        QString heads;
        for (double v : f.bosAttention[l])
            heads += QString::number(v, 'f', 2) + " ";
        for (const auto& [tensor, perLayer] : f.tensors) {
            const LayerFigures& g = perLayer[l];
            qInfo("  layer %zu %-7s max|x| %7.1f  max/median %6.1f  kurtosis %6.1f  on BOS %3.0f%%  "
                  "outlier dims %4.1f (median %.1f)",
                  l + 1, tensor.c_str(), g.maxAbs, g.ratio, g.kurtosis, 100 * g.bosShare, g.outlierDims,
                  g.medianDims());
        }
        qInfo("  layer %zu attention on BOS per head: %s", l + 1, qPrintable(heads));
        QString context;
        for (double v : f.contextMax[l])
            context += QString::number(v, 'g', 3) + " ";
        qInfo("  layer %zu max |P V| per head: %s", l + 1, qPrintable(context));
    }
}

/// What a model's card (README.md, section "On the bundled inputs") stores of `f`: one JSON object.
QJsonObject cardJson(const ModelFigures& f)
{
    QJsonObject o{{QStringLiteral("next_token_loss"), f.loss}};
    for (const auto& [tensor, perLayer] : f.tensors) {
        QJsonArray maxAbs, ratio, kurtosis, bos, dims;
        for (const LayerFigures& g : perLayer) {
            maxAbs << g.maxAbs;
            ratio << g.ratio;
            kurtosis << g.kurtosis;
            bos << g.bosShare;
            dims << g.outlierDims;
        }
        o[QString::fromStdString(tensor)] = QJsonObject{{QStringLiteral("max_abs"), maxAbs},
                                                        {QStringLiteral("max_over_median"), ratio},
                                                        {QStringLiteral("kurtosis"), kurtosis},
                                                        {QStringLiteral("max_on_bos_share"), bos},
                                                        {QStringLiteral("outlier_dims"), dims}};
    }
    QJsonArray attention;
    for (const auto& perHead : f.bosAttention) {
        QJsonArray heads;
        for (double v : perHead)
            heads << v;
        attention << heads;
    }
    o[QStringLiteral("bos_attention")] = attention;
    return o;
}

/// The JSON block under "## On the bundled inputs" in the model's README.md; empty when there is none.
QJsonObject storedCard(const std::string& dir)
{
    std::ifstream in(dir + "/README.md");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto section = text.find("## On the bundled inputs");
    if (section == std::string::npos) return {};
    const auto begin = text.find("```json\n", section);
    const auto end = begin == std::string::npos ? begin : text.find("```", begin + 8);
    if (end == std::string::npos) return {};
    return QJsonDocument::fromJson(QByteArray::fromStdString(text.substr(begin + 8, end - begin - 8)))
        .object();
}

/// Every number of `stored` equals the one in `now` (same keys) to 1e-4 relative: what the card says is
/// what the shipped weights give today. Returns the first difference, or empty.
QString cardDifference(const QJsonValue& stored, const QJsonValue& now, const QString& path)
{
    if (stored.isObject()) {
        const QJsonObject a = stored.toObject(), b = now.toObject();
        if (a.keys() != b.keys()) return path + QStringLiteral(": keys differ");
        for (const QString& key : a.keys())
            if (const QString d = cardDifference(a[key], b[key], path + QLatin1Char('.') + key); !d.isEmpty())
                return d;
        return {};
    }
    if (stored.isArray()) {
        const QJsonArray a = stored.toArray(), b = now.toArray();
        if (a.size() != b.size()) return path + QStringLiteral(": lengths differ");
        for (int i = 0; i < a.size(); ++i)
            if (const QString d = cardDifference(a[i], b[i], path + QStringLiteral("[%1]").arg(i));
                !d.isEmpty())
                return d;
        return {};
    }
    const double x = stored.toDouble(), y = now.toDouble();
    if (!stored.isDouble() || std::abs(x - y) > 1e-4 * std::max(1.0, std::abs(y)))
        return QStringLiteral("%1: the card says %2, the model gives %3")
            .arg(path)
            .arg(x, 0, 'g', 10)
            .arg(y, 0, 'g', 10);
    return {};
}

/// The synthetic-task BERT trio (sample_data/models/synthetic-*), measured on its own sample pairs.
struct EncoderFigures
{
    double accuracy = 0; ///< of the masked-LM head at the scored positions, labels derived from the text
    std::map<std::string, std::vector<LayerFigures>> tensors; ///< "ffn_out", "out" -> per layer; bosShare
                                                              ///< here: the share of 6-sigma values on sinks
    std::vector<std::vector<double>> sinkAttention; ///< [layer][head]: ordinary tokens' attention on sinks
    std::vector<std::vector<double>> contextMax;    ///< [layer][head]: max |P V| (0 = dead head)
};

bool isSinkToken(const std::string& t)
{
    return t == "[CLS]" || t == "[SEP]" || (t.size() == 1 && std::ispunct(static_cast<unsigned char>(t[0])));
}

EncoderFigures measureEncoder(const std::string& dir)
{
    torch::NoGradGuard noGrad;
    BertNetwork net = BertNetwork::load(dir);
    const BertTokenizer tok = BertTokenizer::fromModelDir(dir);
    const std::vector<std::string> lines = readSampleInputs(dir);
    if (lines.empty()) throw std::runtime_error(dir + ": no sample_inputs.txt");
    // The task's labels from the text (tasks/data/synthetic_data.h): after "backK" the token K before it;
    // a content token its successor in the vocabulary (successor_labels) or itself; an operator itself.
    QFile configFile(QString::fromStdString(dir + "/config.json"));
    configFile.open(QIODevice::ReadOnly);
    const QJsonObject task = QJsonDocument::fromJson(configFile.readAll())
                                 .object()[QStringLiteral("outlierlens_synthetic")]
                                 .toObject();
    const bool successor = task[QStringLiteral("successor_labels")].toBool();
    std::int64_t firstContent = 0;
    while (tok.idToToken(firstContent).rfind("back", 0) != 0)
        ++firstContent;
    while (tok.idToToken(firstContent).rfind("back", 0) == 0)
        ++firstContent;
    const std::int64_t vocab = tok.vocabSize();

    const int layers = net.config().numLayers, heads = net.config().numHeads;
    EncoderFigures f;
    for (const char* t : {"out", "ffn_out"})
        f.tensors[t].assign(std::size_t(layers), {});
    f.sinkAttention.assign(std::size_t(layers), std::vector<double>(std::size_t(heads), 0));
    f.contextMax.assign(std::size_t(layers), std::vector<double>(std::size_t(heads), 0));
    const double n = double(lines.size());
    std::int64_t correct = 0, scored = 0;
    for (const std::string& line : lines) {
        const auto tab = line.find('\t');
        const BertInspection r = inspectBert(
            net, tok, line.substr(0, tab),
            tab == std::string::npos ? std::nullopt : std::optional<std::string>(line.substr(tab + 1)));
        const std::vector<std::string>& tokens = r.encoding.tokens;
        const std::vector<std::int64_t>& ids = r.encoding.inputIds;
        const std::int64_t T = std::int64_t(tokens.size());
        std::vector<bool> sink(tokens.size());
        for (std::size_t i = 0; i < tokens.size(); ++i)
            sink[i] = isSinkToken(tokens[i]);
        const torch::Tensor logits =
            net.forward(torch::tensor(ids).unsqueeze(0), torch::tensor(r.encoding.tokenTypeIds).unsqueeze(0),
                        torch::ones({1, T}, torch::kLong))
                .logits[0];
        const torch::Tensor argmax = logits.argmax(-1);
        for (std::int64_t i = 1; i + 1 < T; ++i) {
            if (sink[std::size_t(i)]) continue;
            std::int64_t label = ids[std::size_t(i)];
            const std::string& before = tokens[std::size_t(i - 1)];
            if (before.rfind("back", 0) == 0)
                label = ids[std::size_t(i - 1 - std::stoll(before.substr(4)))];
            else if (successor && label >= firstContent)
                label = label + 1 == vocab ? firstContent : label + 1;
            correct += argmax[i].item<std::int64_t>() == label ? 1 : 0;
            ++scored;
        }
        for (int l = 0; l < layers; ++l) {
            const std::string prefix = "layer" + std::to_string(l) + "/";
            for (auto& [name, perLayer] : f.tensors) {
                const torch::Tensor x = r.activations.at(prefix + name)[0].to(torch::kDouble); // [T, d]
                LayerFigures& g = perLayer[std::size_t(l)];
                const double max = maxInfNorm(x);
                g.maxAbs += max / n;
                g.ratio += max / x.abs().median().item<double>() / n;
                g.kurtosis += pearsonKurtosis(x) / n;
                const torch::Tensor mask = outlierMask(x, {});
                const double all = double(mask.sum().item<std::int64_t>());
                double onSinks = 0;
                for (std::int64_t i = 0; i < T; ++i)
                    if (sink[std::size_t(i)]) onSinks += double(mask[i].sum().item<std::int64_t>());
                g.bosShare += (all > 0 ? onSinks / all : 0.0) / n;
                const double dims = double(mask.any(0).sum().item<std::int64_t>());
                g.outlierDims += dims / n;
                g.dimsPerInput.push_back(dims);
            }
            const torch::Tensor probs = r.activations.at(prefix + "attn_probs")[0];     // [H, T, T]
            const torch::Tensor context = r.activations.at(prefix + "attn_context")[0]; // [H, T, dh]
            for (int h = 0; h < heads; ++h) {
                double sum = 0;
                int queries = 0;
                for (std::int64_t i = 0; i < T; ++i) {
                    if (sink[std::size_t(i)]) continue;
                    ++queries;
                    for (std::int64_t j = 0; j < T; ++j)
                        if (sink[std::size_t(j)]) sum += probs[h][i][j].item<double>();
                }
                f.sinkAttention[std::size_t(l)][std::size_t(h)] += sum / std::max(1, queries) / n;
                f.contextMax[std::size_t(l)][std::size_t(h)] = std::max(
                    f.contextMax[std::size_t(l)][std::size_t(h)], context[h].abs().max().item<double>());
            }
        }
    }
    f.accuracy = double(correct) / double(std::max<std::int64_t>(scored, 1));
    return f;
}

void printEncoder(const std::string& name, const EncoderFigures& f)
{
    qInfo("%s: accuracy %.4f on its sample pairs", name.c_str(), f.accuracy);
    for (std::size_t l = 0; l < f.sinkAttention.size(); ++l) {
        QString heads, context;
        for (double v : f.sinkAttention[l])
            heads += QString::number(v, 'f', 2) + " ";
        for (double v : f.contextMax[l])
            context += QString::number(v, 'g', 3) + " ";
        for (const auto& [tensor, perLayer] : f.tensors) {
            const LayerFigures& g = perLayer[l];
            qInfo(
                "  layer %zu %-7s max|x| %7.2f  max/median %6.1f  kurtosis %6.1f  6-sigma on sinks %3.0f%%  "
                "outlier dims %4.1f (median %.1f)",
                l + 1, tensor.c_str(), g.maxAbs, g.ratio, g.kurtosis, 100 * g.bosShare, g.outlierDims,
                g.medianDims());
        }
        qInfo("  layer %zu attention of ordinary tokens on sinks per head: %s", l + 1, qPrintable(heads));
        qInfo("  layer %zu max |P V| per head: %s", l + 1, qPrintable(context));
    }
}

/// What a synthetic-task model's card stores of `f`.
QJsonObject encoderCardJson(const EncoderFigures& f)
{
    QJsonObject o{{QStringLiteral("accuracy"), f.accuracy}};
    for (const auto& [tensor, perLayer] : f.tensors) {
        QJsonArray maxAbs, ratio, kurtosis, sinks, dims;
        for (const LayerFigures& g : perLayer) {
            maxAbs << g.maxAbs;
            ratio << g.ratio;
            kurtosis << g.kurtosis;
            sinks << g.bosShare;
            dims << g.outlierDims;
        }
        o[QString::fromStdString(tensor)] = QJsonObject{{QStringLiteral("max_abs"), maxAbs},
                                                        {QStringLiteral("max_over_median"), ratio},
                                                        {QStringLiteral("kurtosis"), kurtosis},
                                                        {QStringLiteral("outliers_on_sinks_share"), sinks},
                                                        {QStringLiteral("outlier_dims"), dims}};
    }
    QJsonArray attention;
    for (const auto& perHead : f.sinkAttention) {
        QJsonArray heads;
        for (double v : perHead)
            heads << v;
        attention << heads;
    }
    o[QStringLiteral("sink_attention")] = attention;
    return o;
}

/// The demo models measured here: the backcopy decoders, and the synthetic-task BERT trio when it ships
/// its sample pairs.
QStringList demoModels()
{
    QStringList models{"backcopy-vanilla", "backcopy-clipped", "backcopy-gated", "backcopy-sigmoid",
                       "backcopy-clipped-per-query"};
    for (const char* v : {"synthetic-vanilla", "synthetic-clipped", "synthetic-gated"})
        if (std::filesystem::exists(kModels + "/" + v + "/sample_inputs.txt"))
            models << QString::fromLatin1(v);
    return models;
}

} // namespace

class TstDemoModels : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { torch::set_num_threads(1); }

    /// The layer, head and input each demo decoder opens on (showcase.json, written when it was
    /// trained) are what the model gives today: recomputed from the model and its sample inputs.
    void showcaseIsRecomputedFromTheModel_data()
    {
        QTest::addColumn<QString>("model");
        for (const QString& m : demoModels())
            QTest::newRow(qPrintable(m)) << m;
    }
    void showcaseIsRecomputedFromTheModel()
    {
        QFETCH(QString, model);
        const std::string dir = kModels + "/" + model.toStdString();
        const std::optional<Showcase> stored = readShowcase(dir);
        QVERIFY2(stored, "no showcase.json");
        const Showcase now = computeShowcase(dir);
        qInfo("%s: layer %d, head %d, input %d: %s %.4f (mean %.4f)", qPrintable(model), now.layer + 1,
              now.head + 1, now.input + 1, now.measureName(), now.inputAttention, now.meanAttention);
        if (stored->inputAttention < 1e-3) {
            // No head attends to the first token anywhere (backcopy-sigmoid: at most 2e-4): the place
            // is the first maximum among values near 0, which other BLAS kernels may order differently.
            // Only that it is still so is checked.
            QVERIFY(now.inputAttention < 1e-3 && now.meanAttention < 1e-3);
        } else {
            QCOMPARE(now.layer, stored->layer);
            QCOMPARE(now.head, stored->head);
            QCOMPARE(now.input, stored->input);
            QVERIFY(std::abs(now.meanAttention - stored->meanAttention) < 1e-5);
            QVERIFY(std::abs(now.inputAttention - stored->inputAttention) < 1e-5);
        }
        if (model == QLatin1String("backcopy-vanilla") || model == QLatin1String("synthetic-vanilla"))
            QVERIFY2(now.meanAttention >= 0.5, "the vanilla model's showcase head is a sink");
        if (model == QLatin1String("backcopy-gated") || model == QLatin1String("backcopy-sigmoid") ||
            model == QLatin1String("backcopy-clipped-per-query"))
            QVERIFY2(now.meanAttention < 0.1, "the gated, sigmoid and per-query clipped models need no sink");
    }

    /// A BERT folder with sample pairs gets the head whose ordinary tokens put the most attention on
    /// [CLS], [SEP] and punctuation (docs/metrics.md), recomputed here in plain loops over the attention
    /// of a small random model, and showcase.json stores it under the sink-token names.
    void encoderShowcaseIsTheSinkHead()
    {
        QTemporaryDir dir;
        const std::string path = dir.path().toStdString();
        BertConfig c = BertConfig::preset("bert-tiny");
        const std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".",
                                                ",",     "cat",   "dog",   "sun",   "tree",   "road"};
        c.vocabSize = int(vocab.size()), c.numLayers = 3, c.maxPositions = 32;
        c.architectures = {"BertForMaskedLM"};
        BertNetwork::create(c, BertHead::MaskedLM, 21).save(path);
        {
            std::ofstream v(path + "/vocab.txt"), lines(path + "/sample_inputs.txt");
            for (const std::string& t : vocab)
                v << t << '\n';
            lines << "cat dog . sun\ttree , road cat\nsun sun\tdog\nroad . tree dog cat\tcat , sun .\n";
        }
        const Showcase s = computeShowcase(path);
        QCOMPARE(int(s.measure), int(Showcase::Measure::SinkTokens));

        BertNetwork net = BertNetwork::load(path);
        const BertTokenizer tok = BertTokenizer::fromModelDir(path);
        const std::vector<std::pair<std::string, std::string>> pairs = {
            {"cat dog . sun", "tree , road cat"}, {"sun sun", "dog"}, {"road . tree dog cat", "cat , sun ."}};
        const int L = 3, H = c.numHeads;
        std::vector<std::vector<std::vector<double>>> share(pairs.size()); // [input][layer][head]
        for (std::size_t n = 0; n < pairs.size(); ++n) {
            const BertInspection r = inspectBert(net, tok, pairs[n].first, pairs[n].second);
            const std::vector<std::string>& tokens = r.encoding.tokens;
            const auto isSink = [&](std::size_t j) {
                return tokens[j] == "[CLS]" || tokens[j] == "[SEP]" || tokens[j] == "." || tokens[j] == ",";
            };
            share[n].assign(L, std::vector<double>(std::size_t(H), 0.0));
            for (int l = 0; l < L; ++l) {
                const torch::Tensor p = r.activations.at("layer" + std::to_string(l) + "/attn_probs")[0];
                for (int h = 0; h < H; ++h) {
                    double sum = 0;
                    int queries = 0;
                    for (std::size_t i = 0; i < tokens.size(); ++i) {
                        if (isSink(i)) continue;
                        ++queries;
                        for (std::size_t j = 0; j < tokens.size(); ++j)
                            if (isSink(j)) sum += p[h][std::int64_t(i)][std::int64_t(j)].item<double>();
                    }
                    share[n][std::size_t(l)][std::size_t(h)] = sum / queries;
                }
            }
        }
        // The best (layer, head) of the first two layers (the last is not a candidate) by the mean.
        int bestLayer = 0, bestHead = 0;
        double best = -1;
        for (int l = 0; l < L - 1; ++l)
            for (int h = 0; h < H; ++h) {
                double mean = 0;
                for (const auto& input : share)
                    mean += input[std::size_t(l)][std::size_t(h)] / double(share.size());
                if (mean > best) best = mean, bestLayer = l, bestHead = h;
            }
        QCOMPARE(s.layer, bestLayer);
        QCOMPARE(s.head, bestHead);
        QVERIFY2(std::abs(s.meanAttention - best) < 1e-6,
                 qPrintable(QString::number(s.meanAttention - best)));
        int bestInput = 0;
        for (std::size_t n = 1; n < share.size(); ++n)
            if (share[n][std::size_t(bestLayer)][std::size_t(bestHead)] >
                share[std::size_t(bestInput)][std::size_t(bestLayer)][std::size_t(bestHead)])
                bestInput = int(n);
        QCOMPARE(s.input, bestInput);

        writeShowcase(path, s);
        const std::optional<Showcase> read = readShowcase(path);
        QVERIFY(read && read->measure == Showcase::Measure::SinkTokens && read->layer == s.layer &&
                std::abs(read->inputAttention - s.inputAttention) < 1e-12);
        std::ifstream json(path + "/showcase.json");
        const std::string text((std::istreambuf_iterator<char>(json)), std::istreambuf_iterator<char>());
        QVERIFY(text.find("mean_sink_token_attention") != std::string::npos);
    }

    /// The numbers each demo decoder's card (README.md) states for its bundled inputs are what the shipped
    /// weights give today, recomputed with the app's metrics: a model or code change that loses the effect
    /// fails here. (The block was written from this test's output: it prints it.)
    void cardNumbersAreRecomputed_data() { showcaseIsRecomputedFromTheModel_data(); }
    void cardNumbersAreRecomputed()
    {
        QFETCH(QString, model);
        const std::string dir = kModels + "/" + model.toStdString();
        const QJsonObject now = model.startsWith(QLatin1String("synthetic-"))
                                    ? encoderCardJson(measureEncoder(dir))
                                    : cardJson(measure(dir));
        qInfo("%s card block:\n%s", qPrintable(model),
              QJsonDocument(now).toJson(QJsonDocument::Indented).constData());
        const QJsonObject stored = storedCard(dir);
        QVERIFY2(!stored.isEmpty(), "README.md has no \"## On the bundled inputs\" JSON block");
        const QString difference = cardDifference(stored, now, model);
        QVERIFY2(difference.isEmpty(), qPrintable(difference));
    }

    /// The synthetic-task BERT trio on its own sample pairs (the paper's Figs 1 and 2 on a BERT): vanilla
    /// has a no-op head (>= 0.5 of ordinary tokens' attention on [CLS], [SEP], punctuation) and, at some
    /// layer's FFN output, max |x| >= 20 x median, kurtosis >= 30, <= 6 dimensions (median over inputs) and
    /// >= 80% of the 6-sigma values on sink tokens; clipped softmax and gated attention reach its accuracy
    /// within 1 point; gated attention there has max |x| <= 1/4 of vanilla's and kurtosis <= 10 and live
    /// heads; clipped softmax less than half the max and a quarter of the kurtosis (not the target; it
    /// also switches heads of layer 1 off).
    void syntheticFamilyTellsThePapersStory()
    {
        const std::string vanillaDir = kModels + "/synthetic-vanilla";
        if (!std::filesystem::exists(vanillaDir + "/sample_inputs.txt"))
            QSKIP("synthetic-vanilla has no sample pairs (a model of the task before sentence pairs)");
        const EncoderFigures vanilla = measureEncoder(vanillaDir);
        printEncoder("synthetic-vanilla", vanilla);
        int layer = -1;
        const auto& ffn = vanilla.tensors.at("ffn_out");
        for (std::size_t l = 0; l < ffn.size() && layer < 0; ++l)
            if (ffn[l].ratio >= 20 && ffn[l].kurtosis >= 30 && ffn[l].bosShare >= 0.8 &&
                ffn[l].medianDims() <= 6)
                layer = int(l);
        QVERIFY2(layer >= 0, "no layer of synthetic-vanilla has sink-token outliers in its FFN output");
        double noOp = 0;
        for (const auto& perHead : vanilla.sinkAttention)
            for (double v : perHead)
                noOp = std::max(noOp, v);
        QVERIFY2(noOp >= 0.5, qPrintable(QString("strongest sink attention %1 < 0.5").arg(noOp)));
        const LayerFigures& v = ffn[std::size_t(layer)];
        for (const char* variant : {"clipped", "gated"}) {
            const std::string dir = kModels + "/synthetic-" + variant;
            QVERIFY2(std::filesystem::exists(dir + "/config.json"), dir.c_str());
            const EncoderFigures f = measureEncoder(dir);
            printEncoder(std::string("synthetic-") + variant, f);
            const LayerFigures& g = f.tensors.at("ffn_out")[std::size_t(layer)];
            qInfo("%s vs vanilla at layer %d ffn_out: max|x| %.2f vs %.2f (%.2f x), kurtosis %.1f vs %.1f",
                  variant, layer + 1, g.maxAbs, v.maxAbs, g.maxAbs / v.maxAbs, g.kurtosis, v.kurtosis);
            QVERIFY2(
                f.accuracy >= vanilla.accuracy - 0.01,
                qPrintable(
                    QString("%1: accuracy %2 vs %3").arg(variant).arg(f.accuracy).arg(vanilla.accuracy)));
            const QString numbers = QString("%1: max|x| %2 vs vanilla %3, kurtosis %4 vs %5")
                                        .arg(variant)
                                        .arg(g.maxAbs)
                                        .arg(v.maxAbs)
                                        .arg(g.kurtosis)
                                        .arg(v.kurtosis);
            if (std::string(variant) == "gated") {
                QVERIFY2(g.maxAbs <= v.maxAbs / 4 && g.kurtosis <= 10, qPrintable(numbers));
            } else {
                // Clipped softmax takes the sink away and shrinks the outlier, but not to the target
                // (docs/demo-models.md): less than half of vanilla's max and a quarter of its kurtosis is
                // what is claimed.
                QVERIFY2(g.maxAbs < v.maxAbs / 2 && g.kurtosis < v.kurtosis / 4, qPrintable(numbers));
            }
            const std::optional<Showcase> opens = readShowcase(dir);
            QVERIFY2(opens, qPrintable(QString("%1: no showcase.json").arg(variant)));
            // Gated attention keeps every head of the layer the app opens it at alive. Clipped softmax
            // switches whole heads off in layer 1 (max |P V| 0: docs/demo-models.md), so it is not checked.
            if (std::string(variant) == "gated")
                for (double m : f.contextMax[std::size_t(opens->layer)])
                    QVERIFY2(m > 1e-3,
                             qPrintable(
                                 QString("%1: a dead head in layer %2").arg(variant).arg(opens->layer + 1)));
        }
    }

    void backcopyFamilyTellsThePapersStory()
    {
        const std::string vanillaDir = kModels + "/backcopy-vanilla";
        QVERIFY2(std::filesystem::exists(vanillaDir + "/config.json"), "backcopy-vanilla is not bundled");
        const ModelFigures vanilla = measure(vanillaDir);
        print("backcopy-vanilla", vanilla);

        // The vanilla model's outlier: the first (layer, tensor) that meets every condition.
        int layer = -1;
        std::string tensor;
        for (std::size_t l = 0; l < vanilla.bosAttention.size() && layer < 0; ++l)
            for (const auto& [name, perLayer] : vanilla.tensors) {
                const LayerFigures& g = perLayer[l];
                if (g.ratio >= 20 && g.kurtosis >= 30 && g.bosShare >= 0.9 && g.medianDims() <= 4) {
                    layer = int(l);
                    tensor = name;
                    break;
                }
            }
        QVERIFY2(layer >= 0,
                 "no layer of backcopy-vanilla has a BOS outlier (>= 20 x median, kurtosis >= 30, "
                 "<= 4 dimensions)");
        double noOp = 0;
        for (const auto& perHead : vanilla.bosAttention)
            for (double v : perHead)
                noOp = std::max(noOp, v);
        QVERIFY2(noOp >= 0.5, qPrintable(QString("strongest BOS attention %1 < 0.5").arg(noOp)));
        qInfo("vanilla outlier: layer %d %s", layer + 1, tensor.c_str());
        const LayerFigures& v = vanilla.tensors.at(tensor)[std::size_t(layer)];

        // Gated and sigmoid attention remove the outlier. Clipped softmax does not, in this causal model
        // (nor did it for the paper's OPT): docs/demo-models.md says so, and only what it claims is checked.
        // Clipped softmax with each query's gamma = -alpha / (its keys) removes the sink and the heavy tail
        // (kurtosis) but halves the max rather than quartering it: only those two are checked.
        int fixes = 0;
        for (const char* variant : {"gated", "sigmoid", "clipped", "clipped-per-query"}) {
            const std::string dir = kModels + "/backcopy-" + variant;
            const bool removes = std::string(variant) == "gated" || std::string(variant) == "sigmoid";
            const bool perQuery = std::string(variant) == "clipped-per-query";
            if (!std::filesystem::exists(dir + "/config.json")) continue;
            fixes += removes ? 1 : 0;
            const ModelFigures f = measure(dir);
            print(std::string("backcopy-") + variant, f);
            const LayerFigures& g = f.tensors.at(tensor)[std::size_t(layer)];
            qInfo("%s vs vanilla at layer %d %s: max|x| %.1f vs %.1f (%.2f x), kurtosis %.1f vs %.1f",
                  variant, layer + 1, tensor.c_str(), g.maxAbs, v.maxAbs, g.maxAbs / v.maxAbs, g.kurtosis,
                  v.kurtosis);
            QVERIFY2(
                f.loss <= vanilla.loss * 1.02,
                qPrintable(QString("%1: loss %2 vs vanilla %3").arg(variant).arg(f.loss).arg(vanilla.loss)));
            // No dead head at the layer the app opens the model at (the "default layer"). Other
            // layers may switch a head off: sigmoid attention turns both of layer 1's off entirely (max
            // |P V| below 2e-4), as gated attention's closed layer-1 gates do (P V is read before the
            // gate, so this would not see those).
            const std::optional<Showcase> opens = readShowcase(dir);
            QVERIFY2(opens, qPrintable(QString("%1: no showcase.json").arg(variant)));
            for (double m : f.contextMax[std::size_t(opens->layer)])
                QVERIFY2(m > 1e-3,
                         qPrintable(QString("%1: a head whose output is zero in layer %2, where the "
                                            "app opens it")
                                        .arg(variant)
                                        .arg(opens->layer + 1)));
            if (perQuery) {
                QVERIFY2(g.kurtosis <= 10,
                         qPrintable(QString("%1: kurtosis %2").arg(variant).arg(g.kurtosis)));
                for (const auto& perHead : f.bosAttention)
                    for (double a : perHead)
                        QVERIFY2(
                            a < 0.1,
                            qPrintable(
                                QString("%1: a head with %2 of its attention on BOS").arg(variant).arg(a)));
            }
            if (!removes) continue;
            QVERIFY2(
                g.maxAbs <= v.maxAbs / 4,
                qPrintable(QString("%1: max|x| %2 vs vanilla %3").arg(variant).arg(g.maxAbs).arg(v.maxAbs)));
            QVERIFY2(g.kurtosis <= 10, qPrintable(QString("%1: kurtosis %2").arg(variant).arg(g.kurtosis)));
        }
        QVERIFY2(fixes >= 2, "backcopy-gated or backcopy-sigmoid is not bundled");
    }
};

QTEST_GUILESS_MAIN(TstDemoModels)
#include "tst_demo_models.moc"
