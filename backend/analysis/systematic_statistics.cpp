#include "analysis/systematic_statistics.h"

#include "analysis/element_access.h"
#include "common/error.h"
#include "common/text_format.h"
#include "io/hdf5_store.h"
#include "model/capture.h"

#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

namespace outlierlens {
namespace {

// Their lists (pos_activation_outliers_layer.py and its siblings).
const std::set<std::string>& strongDelimiters()
{
    static const std::set<std::string> marks = {".", "<0x0A>", ",", ";", ":", "!", "?", "-", "--", "---",
                                                "'", "\"",     "(", ")", "[", "]", "{", "}", "/",  "\\",
                                                "|", "*",      "&", "^", "%", "$", "#", "@", "~",  "`"};
    return marks;
}

const std::set<std::string>& weakSemanticWords()
{
    static const std::set<std::string> words = {"",   "and",  "from", "of", "1",   "2",   "3",    "4",  "5",
                                                "6",  "7",    "8",    "9",  "the", "a",   "an",   "in", "on",
                                                "at", "for",  "with", "is", "was", "are", "were", "to", "by",
                                                "as", "that", "this", "it", "but", "or",  "if",   "not"};
    return words;
}

std::string stripped(const std::string& text)
{
    const auto isSpace = [](unsigned char c) { return std::isspace(c) != 0; };
    std::size_t begin = 0, end = text.size();
    while (begin < end && isSpace(text[begin]))
        ++begin;
    while (end > begin && isSpace(text[end - 1]))
        --end;
    return text.substr(begin, end - begin);
}

void checkShape(const torch::Tensor& x, const std::vector<std::int64_t>& shape, const std::string& name)
{
    if (!x.defined() || x.sizes().vec() != shape)
        throw Error("systematic statistics: " + name + " must have shape " + shapeText(shape) + ", found " +
                    (x.defined() ? shapeText(x.sizes().vec()) : std::string("none")));
}

/// Adds v's `N` largest values (descending; missing ones count 0) and its lower median (as
/// torch.median) to the sums; reorders v.
template<std::size_t N, typename V>
void addTopAndMedian(std::vector<V>& v, std::array<double, N>& sumTop, double& sumMedian)
{
    if (v.empty()) return;
    const std::size_t k = std::min(N, v.size());
    std::partial_sort(v.begin(), v.begin() + std::ptrdiff_t(k), v.end(), std::greater<V>());
    for (std::size_t i = 0; i < k; ++i)
        sumTop[i] += double(v[i]);
    // The lower median is the element of rank (n - 1) / 2 in ascending order, i.e. n - 1 - (n - 1) / 2
    // in descending order; the k largest are already in front of it.
    const std::size_t rank = v.size() - 1 - (v.size() - 1) / 2;
    if (rank >= k)
        std::nth_element(v.begin() + std::ptrdiff_t(k), v.begin() + std::ptrdiff_t(rank), v.end(),
                         std::greater<V>());
    sumMedian += double(v[rank]);
}

/// The element of ascending rank k of non-negative floats, exactly, in O(n): non-negative floats order
/// as their bit patterns do, so two 65536-bin histograms (high, then low 16 bits) find it.
float selectRank(const std::vector<float>& v, std::size_t k)
{
    const auto bits = [](float f) {
        std::uint32_t u = 0;
        std::memcpy(&u, &f, sizeof u);
        return u;
    };
    std::vector<std::size_t> histogram(65536, 0);
    for (float f : v)
        ++histogram[bits(f) >> 16];
    std::size_t below = 0;
    std::uint32_t high = 0;
    while (below + histogram[high] <= k)
        below += histogram[high++];
    std::fill(histogram.begin(), histogram.end(), 0);
    for (float f : v) {
        const std::uint32_t u = bits(f);
        if ((u >> 16) == high) ++histogram[u & 0xFFFFu];
    }
    std::uint32_t low = 0;
    while (below + histogram[low] <= k)
        below += histogram[low++];
    const std::uint32_t u = (high << 16) | low;
    float f = 0;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

/// One pass over x [T, C] (any floating dtype and strides, read where it lies): its top-3 and median
/// |x|, and the heavy tokens (max_c |x_tc| > tau * mean |x|) by category. `scratch` is reused.
std::vector<bool> addActivation(SystematicStatistics::ActivationAccumulator& acc, const torch::Tensor& x,
                                double tau, const std::vector<TokenCategory>& categories,
                                std::vector<float>& scratch)
{
    const std::int64_t T = x.size(0), C = x.size(1);
    std::vector<double> rowMax(static_cast<std::size_t>(T), 0.0);
    double sum = 0;
    std::array<double, 3> top{}; // descending
    scratch.resize(std::size_t(T * C));
    elements::withElements(x, [&](const auto* first, c10::IntArrayRef strides) {
        for (std::int64_t t = 0; t < T; ++t) {
            float* out = scratch.data() + t * C;
            double max = 0, rowSum = 0;
            elements::forRow(first + t * strides[0], C, strides[1], [&](std::int64_t j, double v) {
                const double a = std::fabs(v);
                out[j] = float(a); // exact: the values are stored in float or narrower
                max = std::max(max, a);
                rowSum += a;
                if (a > top[2]) {
                    top[2] = a;
                    if (top[2] > top[1]) std::swap(top[1], top[2]);
                    if (top[1] > top[0]) std::swap(top[0], top[1]);
                }
            });
            rowMax[std::size_t(t)] = max;
            sum += rowSum;
        }
    });
    const double threshold = tau * sum / double(T * C);
    std::vector<bool> heavy(rowMax.size());
    for (std::size_t t = 0; t < heavy.size(); ++t) {
        heavy[t] = rowMax[t] > threshold;
        if (heavy[t]) ++acc.heavy[std::size_t(categories[t])];
    }
    for (std::size_t i = 0; i < top.size(); ++i)
        acc.sumTop[i] += top[i];
    if (!scratch.empty()) acc.sumMedian += selectRank(scratch, (scratch.size() - 1) / 2); // lower median
    return heavy;
}

void writeCategories(Hdf5Writer& writer, const std::string& path,
                     const std::array<std::int64_t, kTokenCategories>& counts)
{
    writer.writeInt64(path, counts.data(), {kTokenCategories});
}

} // namespace

std::string tokenCategoryName(TokenCategory category)
{
    switch (category) {
    case TokenCategory::Initial:
        return "initial_token";
    case TokenCategory::StrongDelimiter:
        return "strong_delimiter";
    case TokenCategory::WeakSemantic:
        return "weak_semantic";
    case TokenCategory::Other:
        return "other";
    case TokenCategory::Register:
        return "register";
    }
    return "other";
}

TokenCategory tokenCategory(const std::string& decoded, std::int64_t position)
{
    if (position == 0) return TokenCategory::Initial;
    const std::string text = stripped(decoded);
    if (strongDelimiters().count(text) || (text.empty() && decoded.find('\n') != std::string::npos))
        return TokenCategory::StrongDelimiter;
    std::string lower = text;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    if (weakSemanticWords().count(lower)) return TokenCategory::WeakSemantic;
    return TokenCategory::Other;
}

TokenCategory wordPieceCategory(const std::string& token, std::int64_t position)
{
    if (position > 0 && token == "[SEP]") return TokenCategory::StrongDelimiter;
    return tokenCategory(token.rfind("##", 0) == 0 ? token.substr(2) : token, position);
}

std::vector<TokenCategory> tokenCategories(const std::vector<std::string>& decoded)
{
    std::vector<TokenCategory> categories;
    for (std::size_t t = 0; t < decoded.size(); ++t)
        categories.push_back(tokenCategory(decoded[t], std::int64_t(t)));
    return categories;
}

std::vector<TokenCategory> imageTokenCategories(int registers, int patches)
{
    std::vector<TokenCategory> categories{TokenCategory::Initial};
    categories.insert(categories.end(), std::size_t(std::max(registers, 0)), TokenCategory::Register);
    categories.insert(categories.end(), std::size_t(std::max(patches, 0)), TokenCategory::Other);
    return categories;
}

std::vector<TokenCategory> wordPieceCategories(const std::vector<std::string>& tokens)
{
    std::vector<TokenCategory> categories;
    for (std::size_t t = 0; t < tokens.size(); ++t)
        categories.push_back(wordPieceCategory(tokens[t], std::int64_t(t)));
    return categories;
}

std::vector<bool> sinkTokens(const std::vector<TokenCategory>& categories,
                             const std::vector<bool>& background)
{
    std::vector<bool> sink(categories.size(), false);
    for (std::size_t t = 0; t < categories.size(); ++t)
        sink[t] = categories[t] == TokenCategory::Initial ||
                  categories[t] == TokenCategory::StrongDelimiter ||
                  categories[t] == TokenCategory::Register || (t < background.size() && background[t]);
    return sink;
}

std::vector<bool> backgroundPatchTokens(const std::uint8_t* rgb, int width, int height, int stride, int patch,
                                        int registers)
{
    if (patch <= 0 || width % patch != 0 || height % patch != 0)
        throw Error("background patches: a " + std::to_string(width) + " x " + std::to_string(height) +
                    " image is no grid of " + std::to_string(patch) + " px patches");
    std::vector<bool> background(std::size_t(1 + std::max(registers, 0)), false); // [CLS], registers
    for (int row = 0; row < height / patch; ++row)
        for (int col = 0; col < width / patch; ++col) {
            double sum = 0, squares = 0;
            for (int y = row * patch; y < (row + 1) * patch; ++y) {
                const std::uint8_t* line =
                    rgb + std::size_t(y) * std::size_t(stride) + std::size_t(col) * patch * 3;
                for (int i = 0; i < patch * 3; ++i) {
                    sum += line[i];
                    squares += double(line[i]) * line[i];
                }
            }
            const double n = double(patch) * patch * 3;
            const double variance = std::max(0.0, squares / n - (sum / n) * (sum / n));
            background.push_back(std::sqrt(variance) < kBackgroundPatchStd);
        }
    return background;
}

SystematicStatistics::SystematicStatistics(SystematicOptions options)
    : m_options(std::move(options))
{
    SystematicOptions& o = m_options;
    std::sort(o.layers.begin(), o.layers.end());
    o.layers.erase(std::unique(o.layers.begin(), o.layers.end()), o.layers.end());
    if (o.layers.empty() || o.layers.front() < 0)
        throw Error("systematic statistics: select at least one layer, none negative");
    if (o.numHeads <= 0) throw Error("systematic statistics: the number of heads must be positive");
    if (!(o.tau > 0) || !(o.attentionFraction > 0))
        throw Error("systematic statistics: tau and the attention fraction must be positive, found " +
                    numberText(o.tau) + " and " + numberText(o.attentionFraction));
    for (int layer : o.layers) {
        LayerAccumulator acc;
        acc.layer = layer;
        acc.attention.sumOutlierKeyShare.assign(std::size_t(o.numHeads), 0.0);
        acc.attention.headOutlierKeys.assign(std::size_t(o.numHeads), 0);
        acc.attention.sumConsistency.assign(std::size_t(o.numHeads), 0.0);
        m_layers.push_back(std::move(acc));
    }
    m_last.resize(m_layers.size());
}

std::set<std::string> SystematicStatistics::requiredCaptures() const
{
    std::set<std::string> names;
    for (int layer : m_options.layers)
        for (CapturePoint p : {CapturePoint::Out, CapturePoint::DownIn, CapturePoint::AttnProbs})
            names.insert(captureName(p, layer));
    return names;
}

void SystematicStatistics::addSampleLayer(int layer, const torch::Tensor& h, const torch::Tensor& xDown,
                                          const torch::Tensor& probs,
                                          const std::vector<TokenCategory>& categories)
{
    const auto it = std::find_if(m_layers.begin(), m_layers.end(),
                                 [&](const LayerAccumulator& a) { return a.layer == layer; });
    if (it == m_layers.end())
        throw Error("systematic statistics: layer " + std::to_string(layer) + " was not selected");
    if (!h.defined() || h.dim() != 2) throw Error("systematic statistics: out must be [T, d]");
    const std::int64_t T = h.size(0), H = m_options.numHeads;
    if (!xDown.defined() || xDown.dim() != 2 || xDown.size(0) != T)
        throw Error("systematic statistics: down_in must be [" + std::to_string(T) + ", d_ff], found " +
                    (xDown.defined() ? shapeText(xDown.sizes().vec()) : std::string("none")));
    checkShape(probs, {H, T, T}, "attn_probs");
    if (std::int64_t(categories.size()) != T)
        throw Error("systematic statistics: " + std::to_string(categories.size()) + " token categories for " +
                    std::to_string(T) + " tokens");

    LayerAccumulator& acc = *it;
    for (TokenCategory c : categories)
        ++acc.tokens[std::size_t(c)];

    SampleLayer& last = m_last[std::size_t(it - m_layers.begin())];
    const std::vector<bool> heavy = addActivation(acc.out, h, m_options.tau, categories, m_scratch);
    last.heavyOut = heavy;
    last.heavyDown = addActivation(acc.downIn, xDown, m_options.tau, categories, m_scratch);

    // Attention: per head, the attention each key receives summed over queries.
    std::vector<double> r(std::size_t(H * T), 0.0); // [H, T]
    elements::withElements(probs, [&](const auto* first, c10::IntArrayRef strides) {
        for (std::int64_t hd = 0; hd < H; ++hd)
            for (std::int64_t i = 0; i < T; ++i)
                elements::forRow(first + hd * strides[0] + i * strides[1], T, strides[2],
                                 [&](std::int64_t j, double v) { r[std::size_t(hd * T + j)] += v; });
    });
    std::vector<double> a(static_cast<std::size_t>(T), 0.0); // head mean
    for (std::int64_t hd = 0; hd < H; ++hd)
        for (std::int64_t j = 0; j < T; ++j)
            a[std::size_t(j)] += r[std::size_t(hd * T + j)] / double(H);
    std::vector<double> sorted = a;
    addTopAndMedian(sorted, acc.attention.sumTop, acc.attention.sumMedian);
    const double threshold = m_options.attentionFraction * double(T);
    std::vector<bool> outlierKey(static_cast<std::size_t>(T));
    for (std::int64_t j = 0; j < T; ++j) {
        outlierKey[std::size_t(j)] = a[std::size_t(j)] >= threshold;
        if (outlierKey[std::size_t(j)]) ++acc.attention.outlierKeys[std::size_t(categories[std::size_t(j)])];
    }
    last.outlierKey = outlierKey;
    last.received = a;
    std::int64_t heavyCount = 0;
    for (bool b : heavy)
        heavyCount += b;
    if (heavyCount > 0) ++acc.attention.consistencySamples;
    for (std::int64_t hd = 0; hd < H; ++hd) {
        double total = 0, onOutliers = 0;
        std::int64_t overlap = 0;
        for (std::int64_t j = 0; j < T; ++j) {
            const double v = r[std::size_t(hd * T + j)];
            total += v;
            if (outlierKey[std::size_t(j)]) onOutliers += v;
            if (v >= threshold) {
                ++acc.attention.headOutlierKeys[std::size_t(hd)];
                if (heavy[std::size_t(j)]) ++overlap;
            }
        }
        if (total > 0) acc.attention.sumOutlierKeyShare[std::size_t(hd)] += onOutliers / total;
        if (heavyCount > 0)
            acc.attention.sumConsistency[std::size_t(hd)] += double(overlap) / double(heavyCount);
    }
}

void SystematicStatistics::merge(const SystematicStatistics& other)
{
    if (other.m_options.layers != m_options.layers || other.m_options.numHeads != m_options.numHeads)
        throw Error("systematic statistics: cannot merge accumulators of other layers or heads");
    const auto add = [](auto& to, const auto& from) {
        for (std::size_t i = 0; i < to.size(); ++i)
            to[i] += from[i];
    };
    for (std::size_t k = 0; k < m_layers.size(); ++k) {
        LayerAccumulator& a = m_layers[k];
        const LayerAccumulator& b = other.m_layers[k];
        add(a.tokens, b.tokens);
        for (auto [to, from] : {std::pair{&a.out, &b.out}, std::pair{&a.downIn, &b.downIn}}) {
            add(to->sumTop, from->sumTop);
            to->sumMedian += from->sumMedian;
            add(to->heavy, from->heavy);
        }
        AttentionAccumulator& x = a.attention;
        const AttentionAccumulator& y = b.attention;
        add(x.sumTop, y.sumTop);
        x.sumMedian += y.sumMedian;
        add(x.outlierKeys, y.outlierKeys);
        add(x.sumOutlierKeyShare, y.sumOutlierKeyShare);
        add(x.headOutlierKeys, y.headOutlierKeys);
        add(x.sumConsistency, y.sumConsistency);
        x.consistencySamples += y.consistencySamples;
    }
    m_samples += other.m_samples;
}

SystematicData SystematicStatistics::data() const
{
    SystematicData d;
    d.tau = m_options.tau;
    d.attentionFraction = m_options.attentionFraction;
    d.samples = m_samples;
    const double n = double(std::max<std::int64_t>(m_samples, 1));
    const auto nan = std::numeric_limits<double>::quiet_NaN();
    for (const LayerAccumulator& acc : m_layers) {
        SystematicLayerData l;
        l.layer = acc.layer;
        l.tokens = acc.tokens;
        for (auto [from, to] : {std::pair{&acc.out, &l.out}, std::pair{&acc.downIn, &l.downIn}}) {
            for (std::size_t i = 0; i < 3; ++i)
                to->meanTop[i] = from->sumTop[i] / n;
            to->meanMedian = from->sumMedian / n;
            to->heavy = from->heavy;
        }
        const AttentionAccumulator& att = acc.attention;
        SystematicAttentionData& a = l.attention;
        for (std::size_t i = 0; i < 2; ++i)
            a.meanTop[i] = att.sumTop[i] / n;
        a.meanMedian = att.sumMedian / n;
        a.outlierKeys = att.outlierKeys;
        a.headOutlierKeys = att.headOutlierKeys;
        a.consistencySamples = att.consistencySamples;
        for (std::size_t hd = 0; hd < att.sumOutlierKeyShare.size(); ++hd) {
            a.outlierKeyShare.push_back(att.sumOutlierKeyShare[hd] / n);
            a.consistency.push_back(
                att.consistencySamples ? att.sumConsistency[hd] / double(att.consistencySamples) : nan);
        }
        d.layers.push_back(std::move(l));
    }
    return d;
}

void SystematicStatistics::write(Hdf5Writer& writer) const
{
    if (m_samples == 0) throw Error("systematic statistics: no sample was added");
    const SystematicData d = data();
    writer.createGroup("systematic");
    writer.setAttribute("systematic", "tau", d.tau);
    writer.setAttribute("systematic", "attention_fraction", d.attentionFraction);
    writer.setAttribute("systematic", "samples", d.samples);
    std::vector<std::string> names;
    for (int c = 0; c < kTokenCategories; ++c)
        names.push_back(tokenCategoryName(TokenCategory(c)));
    writer.writeStrings("systematic/categories", names);
    for (const SystematicLayerData& l : d.layers) {
        const std::string group = "systematic/layer" + std::to_string(l.layer);
        writeCategories(writer, group + "/tokens_by_category", l.tokens);
        for (const auto& [name, a] : {std::pair<const char*, const SystematicActivationData*>{"out", &l.out},
                                      {"down_in", &l.downIn}}) {
            writer.writeFloat64(group + "/" + name + "/mean_top_abs", a->meanTop.data(), {3});
            writer.writeFloat64(group + "/" + name + "/mean_median_abs", &a->meanMedian, {});
            writeCategories(writer, group + "/" + name + "/heavy_tokens_by_category", a->heavy);
        }
        const SystematicAttentionData& att = l.attention;
        const std::string ag = group + "/attention";
        writer.writeFloat64(ag + "/mean_top_abs", att.meanTop.data(), {2});
        writer.writeFloat64(ag + "/mean_median_abs", &att.meanMedian, {});
        writeCategories(writer, ag + "/outlier_keys_by_category", att.outlierKeys);
        const std::vector<std::int64_t> heads = {std::int64_t(att.outlierKeyShare.size())};
        writer.writeFloat64(ag + "/mean_outlier_key_share", att.outlierKeyShare.data(), heads);
        writer.writeInt64(ag + "/head_outlier_keys", att.headOutlierKeys.data(), heads);
        writer.writeFloat64(ag + "/consistency", att.consistency.data(), heads);
        writer.writeInt64(ag + "/consistency_samples", &att.consistencySamples, {});
    }
}

} // namespace outlierlens
