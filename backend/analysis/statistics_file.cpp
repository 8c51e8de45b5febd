#include "analysis/statistics_file.h"

#include "common/error.h"
#include "common/text_format.h"
#include "io/hdf5_store.h"

#include <algorithm>

#include <torch/torch.h>

namespace outlierlens {
namespace {

/// Reads datasets of a statistics file, checking each one's shape against what the root
/// attributes promise, so that a malformed file gives an error naming the dataset.
class FileReader
{
public:
    explicit FileReader(const std::string& path)
        : m_reader(path)
    {}

    const Hdf5Reader& hdf5() const { return m_reader; }

    torch::Tensor tensor(const std::string& dataset, const std::vector<std::int64_t>& shape) const
    {
        if (!m_reader.exists(dataset)) throw Error(m_reader.path() + ": no dataset '" + dataset + "'");
        const std::vector<std::int64_t> found = m_reader.shape(dataset);
        if (found != shape)
            throw Error(m_reader.path() + ": dataset '" + dataset + "' has shape " + shapeText(found) +
                        ", expected " + shapeText(shape));
        return m_reader.readTensor(dataset);
    }

    std::vector<std::int64_t> ints(const std::string& dataset, const std::vector<std::int64_t>& shape) const
    {
        const torch::Tensor t = tensor(dataset, shape).to(torch::kLong).contiguous();
        return std::vector<std::int64_t>(t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + t.numel());
    }

    std::vector<double> doubles(const std::string& dataset, const std::vector<std::int64_t>& shape) const
    {
        const torch::Tensor t = tensor(dataset, shape).to(torch::kDouble).contiguous();
        return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
    }

    std::int64_t intScalar(const std::string& dataset) const { return ints(dataset, {}).front(); }
    double doubleScalar(const std::string& dataset) const { return doubles(dataset, {}).front(); }

    int intAttribute(const std::string& name) const { return int(m_reader.numberAttribute("/", name)); }

private:
    Hdf5Reader m_reader;
};

std::vector<std::string> split(const std::string& text)
{
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = text.find(',', start);
        const std::size_t end = comma == std::string::npos ? text.size() : comma;
        if (end > start) parts.push_back(text.substr(start, end - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return parts;
}

TensorStatisticsData readTensor(const FileReader& file, const StatisticsFile& f, const std::string& group)
{
    TensorStatisticsData t;
    t.outliersPerDim = file.ints(group + "/outliers_per_dim", {f.hiddenSize});
    t.valuesExamined = file.intScalar(group + "/values_examined");
    t.outliers = file.intScalar(group + "/outliers");
    t.meanMaxInfNorm = file.doubleScalar(group + "/mean_max_inf_norm");
    t.meanKurtosis = file.doubleScalar(group + "/mean_kurtosis");
    if (f.kind == "text") {
        const std::vector<std::int64_t> shape = {std::int64_t(f.tokens.size())};
        t.tokenOutliers = file.ints(group + "/token_outliers", shape);
        t.tokenOutlierOccurrences = file.ints(group + "/token_outlier_occurrences", shape);
        t.delimiterOutliers = file.intScalar(group + "/delimiter_outliers");
        t.delimiterShare = file.doubleScalar(group + "/delimiter_share");
        t.delimiterOccurrenceShare = file.doubleScalar(group + "/delimiter_occurrence_share");
    } else {
        const std::vector<std::int64_t> grid = {f.gridRows, f.gridCols};
        t.patchOutliers = file.ints(group + "/patch_outliers", grid);
        t.patchOutlierOccurrences = file.ints(group + "/patch_outlier_occurrences", grid);
        t.clsOutliers = file.intScalar(group + "/cls_outliers");
        t.clsOutlierOccurrences = file.intScalar(group + "/cls_outlier_occurrences");
        if (f.registers > 0) {
            t.registerOutliers = file.ints(group + "/register_outliers", {f.registers});
            t.registerOutlierOccurrences = file.ints(group + "/register_outlier_occurrences", {f.registers});
        }
        if (file.hdf5().exists(group + "/mean_token_norm")) { // `out`; files of earlier versions lack it
            const std::vector<std::int64_t> tokens = {1 + f.registers +
                                                      std::int64_t(f.gridRows) * f.gridCols};
            t.meanTokenNorm = file.doubles(group + "/mean_token_norm", tokens);
            t.highNormTokens = file.ints(group + "/high_norm_tokens", tokens);
            const std::vector<std::int64_t> histogram = file.hdf5().shape(group + "/norm_histogram");
            if (histogram.size() != 1 || histogram[0] < 1 || histogram[0] > 100000)
                throw Error(file.hdf5().path() + ": dataset '" + group + "/norm_histogram' has shape " +
                            shapeText(histogram) + ", expected [bins]");
            const std::int64_t bins = histogram[0];
            t.normBinEdges = file.doubles(group + "/norm_bin_edges", {bins + 1});
            t.normHistogram = file.ints(group + "/norm_histogram", {bins});
            t.normHistogramHighNorm = file.ints(group + "/norm_histogram_high_norm", {bins});
        }
    }
    return t;
}

HeadStatisticsData readHeads(const FileReader& file, const StatisticsFile& f, const std::string& group)
{
    HeadStatisticsData h;
    const std::int64_t heads = f.numHeads;
    h.previousOutput = file.hdf5().stringAttribute(group, "previous_output");
    h.keysExamined = file.intScalar(group + "/keys_examined");
    h.attentionOutliers = file.ints(group + "/attention_outliers", {heads});
    if (f.kind == "text") {
        const std::vector<std::int64_t> shape = {heads, std::int64_t(f.tokens.size())};
        h.meanCumulativeAttention = file.doubles(group + "/mean_cumulative_attention", shape);
        h.attentionOutliersByKey = file.ints(group + "/attention_outliers_by_token", shape);
    } else {
        const std::vector<std::int64_t> shape = {heads, f.gridRows, f.gridCols};
        h.meanCumulativeAttention = file.doubles(group + "/mean_cumulative_attention", shape);
        h.attentionOutliersByKey = file.ints(group + "/attention_outliers_by_patch", shape);
        h.clsMeanCumulativeAttention = file.doubles(group + "/cls_mean_cumulative_attention", {heads});
        h.clsAttentionOutliers = file.ints(group + "/cls_attention_outliers", {heads});
        if (f.registers > 0) {
            h.registerMeanCumulativeAttention =
                file.doubles(group + "/register_mean_cumulative_attention", {heads, f.registers});
            h.registerAttentionOutliers =
                file.ints(group + "/register_attention_outliers", {heads, f.registers});
        }
    }
    h.outlierKeys = file.intScalar(group + "/outlier_keys");
    h.otherKeys = file.intScalar(group + "/other_keys");
    h.meanAbsValueOutlierKeys = file.doubles(group + "/mean_abs_value_outlier_keys", {heads});
    h.meanAbsValueOtherKeys = file.doubles(group + "/mean_abs_value_other_keys", {heads});
    if (file.hdf5().exists(group + "/mean_gate")) {
        h.meanGate = file.doubles(group + "/mean_gate", {heads});
        h.gateTokens = file.intScalar(group + "/gate_tokens");
    }
    return h;
}

CategoryCounts readCategories(const FileReader& file, const std::string& dataset)
{
    // Four categories in files written before the register category (a fifth, 0 there).
    const bool four =
        file.hdf5().exists(dataset) && file.hdf5().shape(dataset) == std::vector<std::int64_t>{4};
    const std::vector<std::int64_t> v =
        file.ints(dataset, {four ? 4 : std::int64_t(std::tuple_size<CategoryCounts>::value)});
    CategoryCounts c{};
    std::copy(v.begin(), v.end(), c.begin());
    return c;
}

SystematicActivationData readSystematicActivation(const FileReader& file, const std::string& group)
{
    SystematicActivationData a;
    const std::vector<double> top = file.doubles(group + "/mean_top_abs", {3});
    std::copy(top.begin(), top.end(), a.meanTop.begin());
    a.meanMedian = file.doubleScalar(group + "/mean_median_abs");
    a.heavy = readCategories(file, group + "/heavy_tokens_by_category");
    return a;
}

/// Group `systematic`: one entry per `layer{l}` member, in ascending layer order.
SystematicData readSystematic(const FileReader& file, const StatisticsFile& f)
{
    const Hdf5Reader& r = file.hdf5();
    SystematicData d;
    d.tau = r.numberAttribute("systematic", "tau");
    d.attentionFraction = r.numberAttribute("systematic", "attention_fraction");
    d.samples = std::int64_t(r.numberAttribute("systematic", "samples"));
    const std::vector<std::int64_t> heads = {f.numHeads};
    for (const std::string& member : r.members("systematic")) {
        if (member.rfind("layer", 0) != 0) continue;
        const std::string group = "systematic/" + member;
        SystematicLayerData l;
        const std::optional<int> layer = integerFromText<int>(member.substr(5));
        if (!layer || *layer < 0 || *layer >= f.numLayers)
            throw Error(r.path() + ": group '" + group + "' does not name a layer of the model");
        l.layer = *layer;
        l.tokens = readCategories(file, group + "/tokens_by_category");
        l.out = readSystematicActivation(file, group + "/out");
        l.downIn = readSystematicActivation(file, group + "/down_in");
        SystematicAttentionData& a = l.attention;
        const std::string ag = group + "/attention";
        const std::vector<double> top = file.doubles(ag + "/mean_top_abs", {2});
        std::copy(top.begin(), top.end(), a.meanTop.begin());
        a.meanMedian = file.doubleScalar(ag + "/mean_median_abs");
        a.outlierKeys = readCategories(file, ag + "/outlier_keys_by_category");
        a.outlierKeyShare = file.doubles(ag + "/mean_outlier_key_share", heads);
        a.headOutlierKeys = file.ints(ag + "/head_outlier_keys", heads);
        a.consistency = file.doubles(ag + "/consistency", heads);
        a.consistencySamples = file.intScalar(ag + "/consistency_samples");
        d.layers.push_back(std::move(l));
    }
    std::sort(d.layers.begin(), d.layers.end(),
              [](const SystematicLayerData& a, const SystematicLayerData& b) { return a.layer < b.layer; });
    return d;
}

} // namespace

StatisticsFile readStatisticsFile(const std::string& path)
{
    const FileReader file(path);
    const Hdf5Reader& r = file.hdf5();
    if (!r.hasAttribute("/", "format") || r.stringAttribute("/", "format") != "outlierlens-stats")
        throw Error(path + ": not an OutlierLens statistics file (root attribute 'format' is not "
                           "'outlierlens-stats')");
    const int version = file.intAttribute("format_version");
    if (version != 1)
        throw Error(path + ": statistics format version " + std::to_string(version) + ", expected 1");

    StatisticsFile f;
    f.kind = r.stringAttribute("/", "kind");
    if (f.kind != "text" && f.kind != "image")
        throw Error(path + ": root attribute 'kind' is '" + f.kind + "', expected 'text' or 'image'");
    f.samples = std::int64_t(r.numberAttribute("/", "samples"));
    f.numLayers = file.intAttribute("num_layers");
    f.numHeads = file.intAttribute("num_heads");
    f.hiddenSize = file.intAttribute("hidden_size");
    f.headDim = file.intAttribute("head_dim");
    if (f.kind == "image") {
        const std::vector<std::int64_t> grid = r.intArrayAttribute("/", "grid");
        if (grid.size() != 2) throw Error(path + ": root attribute 'grid' must hold [rows, cols]");
        f.gridRows = int(grid[0]);
        f.gridCols = int(grid[1]);
        if (r.hasAttribute("/", "registers")) f.registers = file.intAttribute("registers");
        if (f.registers < 0 || f.registers > 1024)
            throw Error(path + ": root attribute 'registers' is " + std::to_string(f.registers));
    }
    try {
        f.outlierRule.rule = parseOutlierRule(r.stringAttribute("/", "rule"));
        f.outlierRule.k = r.numberAttribute("/", "k");
        f.outlierRule.tau = r.numberAttribute("/", "tau");
        f.outlierRule.attentionFraction = r.numberAttribute("/", "attention_fraction");
        f.outlierRule.validate();
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
    f.criterion = r.stringAttribute("/", "criterion");
    for (const char* name : {"model", "model_name", "checkpoint_sha256", "data", "app_version", "precision"})
        if (r.hasAttribute("/", name)) f.provenance[name] = r.stringAttribute("/", name);

    if (f.kind == "text") {
        f.tokens = r.readStrings("tokens");
        f.tokenOccurrences = file.ints("token_occurrences", {std::int64_t(f.tokens.size())});
        f.delimiters = r.readStrings("delimiters");
    }

    for (std::int64_t layer : r.intArrayAttribute("/", "layers")) {
        LayerStatisticsData data;
        data.layer = int(layer);
        const std::string group = "layer" + std::to_string(layer);
        for (const std::string& member : r.members(group))
            if (member != "heads") data.tensors[member] = readTensor(file, f, group + "/" + member);
        data.heads = readHeads(file, f, group + "/heads");
        f.layers.push_back(std::move(data));
    }

    StatisticsSummaryData& s = f.summary;
    s.infNormTensor = r.stringAttribute("summary", "inf_norm_tensor");
    s.kurtosisTensors = split(r.stringAttribute("summary", "kurtosis_tensors"));
    const std::vector<std::int64_t> shape = {std::int64_t(f.layers.size())};
    for (std::int64_t layer : file.ints("summary/layers", shape))
        s.layers.push_back(int(layer));
    s.meanMaxInfNorm = file.doubles("summary/mean_max_inf_norm", shape);
    s.meanKurtosis = file.doubles("summary/mean_kurtosis", shape);
    s.maxInfNorm = file.doubleScalar("summary/max_inf_norm");
    s.maxInfNormLayer = int(file.intScalar("summary/max_inf_norm_layer"));
    s.avgKurtosis = file.doubleScalar("summary/avg_kurtosis");
    s.maxKurtosis = file.doubleScalar("summary/max_kurtosis");
    if (r.exists("systematic")) f.systematic = readSystematic(file, f);
    return f;
}

} // namespace outlierlens
