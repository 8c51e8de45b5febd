#include "analysis/weight_outliers.h"

#include "common/error.h"
#include "common/json_util.h"
#include "common/text_format.h"
#include "io/safetensors.h"
#include "io/state_dict.h"
#include "io/torch_bin.h"
#include "model/model_family.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <numeric>

namespace outlierlens {
namespace fs = std::filesystem;

namespace {

/// Elements read per piece before its pages are released (8 to 32 MB of storage).
constexpr std::int64_t kPieceElements = std::int64_t(1) << 22;
/// An et al.'s epsilon in the ratio's denominator.
constexpr double kEpsilon = 1e-8;

double maxOf(const std::vector<double>& v)
{
    return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}

/// max / (mean + eps) elementwise, mean = sum / count.
std::vector<double> ratios(const std::vector<double>& max, const std::vector<double>& sum, std::int64_t count)
{
    std::vector<double> out(max.size());
    for (std::size_t k = 0; k < max.size(); ++k)
        out[k] = max[k] / (sum[k] / double(count) + kEpsilon);
    return out;
}

/// Tells the kernel that the resident pages wholly inside [data, data + bytes) are no longer
/// needed. For a memory-mapped (MAP_PRIVATE, never written) tensor they are dropped and would be
/// read again from the file; a tensor copied to the heap is about to be freed, so its contents do
/// not matter.
void releasePages(const void* data, std::size_t bytes)
{
    static const std::uintptr_t page = std::uintptr_t(::sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<std::uintptr_t>(data);
    const std::uintptr_t first = (begin + page - 1) / page * page, last = (begin + bytes) / page * page;
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

/// Max and sum of |W| along both axes of a matrix stored row-major [R, C].
struct AxisSums
{
    std::vector<double> rowMax, rowSum, colMax, colSum;
};

/// A stored element as double: exact for float32, float16, bfloat16 and float64.
template<typename T>
double valueOf(T x)
{
    return double(static_cast<float>(x));
}
template<>
double valueOf<double>(double x)
{
    return x;
}

/// One pass over stored rows [r0, r0 + n): every element is read once, as stored.
template<typename T>
void accumulateRows(const T* data, std::int64_t r0, std::int64_t n, std::int64_t C, AxisSums& s)
{
    double* colMax = s.colMax.data();
    double* colSum = s.colSum.data();
    for (std::int64_t r = r0; r < r0 + n; ++r) {
        const T* row = data + r * C;
        double max = 0, sum = 0;
        for (std::int64_t j = 0; j < C; ++j) {
            const double v = std::fabs(valueOf(row[j]));
            max = std::max(max, v);
            sum += v;
            colMax[j] = std::max(colMax[j], v);
            colSum[j] += v;
        }
        s.rowMax[std::size_t(r)] = max;
        s.rowSum[std::size_t(r)] = sum;
    }
}

/// so-paper over stored rows [r0, r0 + n): entry (r, c) is an outlier iff |w| > tau * mean, with
/// mean = rowMean[r] (nn.Linear: stored rows are output units) or colMean[c] (Conv1D).
template<typename T>
void collectPositions(const T* data, std::int64_t r0, std::int64_t n, std::int64_t C,
                      const std::vector<double>& mean, bool conv1d, const WeightOutlierOptions& options,
                      WeightMatrixStats& out)
{
    for (std::int64_t r = r0; r < r0 + n; ++r) {
        const T* row = data + r * C;
        for (std::int64_t c = 0; c < C; ++c) {
            const double m = mean[std::size_t(conv1d ? c : r)];
            const double w = valueOf(row[c]);
            if (!(std::fabs(w) > options.tau * m)) continue;
            ++out.paperCount;
            WeightPosition p;
            p.row = conv1d ? c : r;
            p.column = conv1d ? r : c;
            p.value = w;
            p.ratio = std::fabs(w) / m;
            out.paperPositions.push_back(p);
        }
    }
    // Keep the list bounded while scanning: the largest ratios survive.
    auto& ps = out.paperPositions;
    if (ps.size() > 2 * options.maxPositions + 1024) {
        std::stable_sort(ps.begin(), ps.end(),
                         [](const WeightPosition& x, const WeightPosition& y) { return x.ratio > y.ratio; });
        ps.resize(options.maxPositions);
    }
}

/// analyzeWeightMatrix() on the stored elements; `release`: drop each piece's pages once read.
template<typename T>
void analyzeStored(const T* data, std::int64_t R, std::int64_t C, const WeightOutlierOptions& options,
                   bool conv1d, bool release, WeightMatrixStats& out)
{
    const bool paper = options.rule == WeightRule::SoPaper;
    AxisSums s;
    s.rowMax.assign(std::size_t(R), 0.0);
    s.rowSum.assign(std::size_t(R), 0.0);
    s.colMax.assign(std::size_t(C), 0.0);
    s.colSum.assign(std::size_t(C), 0.0);
    const std::int64_t step = std::max<std::int64_t>(1, kPieceElements / C);
    std::vector<double> rowMean;
    for (std::int64_t r0 = 0; r0 < R; r0 += step) {
        const std::int64_t n = std::min(step, R - r0);
        accumulateRows(data, r0, n, C, s);
        if (paper && !conv1d) {
            // Stored rows are output units: their means are complete within the piece.
            rowMean.resize(std::size_t(r0 + n));
            for (std::int64_t r = r0; r < r0 + n; ++r)
                rowMean[std::size_t(r)] = s.rowSum[std::size_t(r)] / double(C);
            collectPositions(data, r0, n, C, rowMean, false, options, out);
        }
        if (release && (!paper || !conv1d)) releasePages(data + r0 * C, std::size_t(n * C) * sizeof(T));
    }
    if (paper && conv1d) {
        // Stored columns are output units: their means are known only now, so a second pass.
        std::vector<double> colMean(static_cast<std::size_t>(C));
        for (std::int64_t c = 0; c < C; ++c)
            colMean[std::size_t(c)] = s.colSum[std::size_t(c)] / double(R);
        for (std::int64_t r0 = 0; r0 < R; r0 += step) {
            const std::int64_t n = std::min(step, R - r0);
            collectPositions(data, r0, n, C, colMean, true, options, out);
            if (release) releasePages(data + r0 * C, std::size_t(n * C) * sizeof(T));
        }
    }
    // The so-code ratios in nn.Linear layout: columns j are inputs, rows i outputs.
    out.columnRatio = conv1d ? ratios(s.rowMax, s.rowSum, C) : ratios(s.colMax, s.colSum, R);
    out.rowRatio = conv1d ? ratios(s.colMax, s.colSum, R) : ratios(s.rowMax, s.rowSum, C);
}

} // namespace

std::string toString(WeightRule rule)
{
    return rule == WeightRule::SoCode ? "so-code" : "so-paper";
}

WeightRule weightRuleFromString(const std::string& text)
{
    if (text == "so-code") return WeightRule::SoCode;
    if (text == "so-paper") return WeightRule::SoPaper;
    throw Error("unknown weight-outlier rule '" + printableText(text) + "' (expected so-code or so-paper)");
}

double WeightMatrixStats::maxColumnRatio() const
{
    return maxOf(columnRatio);
}

double WeightMatrixStats::medianColumnRatio() const
{
    if (columnRatio.empty()) return 0.0;
    std::vector<double> v = columnRatio;
    const auto mid = v.begin() + std::ptrdiff_t((v.size() - 1) / 2);
    std::nth_element(v.begin(), mid, v.end());
    return *mid;
}

double WeightMatrixStats::maxRowRatio() const
{
    return maxOf(rowRatio);
}

double WeightMatrixStats::moduleRatio() const
{
    return std::max(maxRowRatio(), maxColumnRatio());
}

std::vector<std::int64_t> WeightMatrixStats::topColumns(std::size_t n) const
{
    std::vector<std::int64_t> order(columnRatio.size());
    std::iota(order.begin(), order.end(), std::int64_t(0));
    n = std::min(n, order.size());
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(n), order.end(),
                      [&](std::int64_t a, std::int64_t b) {
                          const double x = columnRatio[std::size_t(a)], y = columnRatio[std::size_t(b)];
                          return x > y || (x == y && a < b);
                      });
    order.resize(n);
    return order;
}

namespace {

/// analyzeWeightMatrix(); `release`: the weight is a memory-mapped tensor that nobody else uses, whose
/// resident pages may be dropped piece by piece (never for a caller's tensor: heap pages would be zeroed).
WeightMatrixStats analyze(const torch::Tensor& weight, const WeightOutlierOptions& options, bool conv1d,
                          bool release)
{
    if (weight.dim() != 2 || !weight.is_floating_point())
        throw Error("weight outliers need a 2-D floating tensor, found " + shapeString(weight) + " " +
                    std::string(c10::toString(weight.scalar_type())));
    const torch::Tensor stored = weight.contiguous();
    release = release && stored.data_ptr() == weight.data_ptr();
    const std::int64_t R = stored.size(0), C = stored.size(1);
    WeightMatrixStats out;
    out.outFeatures = conv1d ? C : R;
    out.inFeatures = conv1d ? R : C;
    if (options.rule == WeightRule::SoPaper) out.paperCount = 0;
    if (R == 0 || C == 0) return out;
    switch (stored.scalar_type()) {
    case torch::kFloat:
        analyzeStored(stored.data_ptr<float>(), R, C, options, conv1d, release, out);
        break;
    case torch::kHalf:
        analyzeStored(stored.data_ptr<c10::Half>(), R, C, options, conv1d, release, out);
        break;
    case torch::kBFloat16:
        analyzeStored(stored.data_ptr<c10::BFloat16>(), R, C, options, conv1d, release, out);
        break;
    case torch::kDouble:
        analyzeStored(stored.data_ptr<double>(), R, C, options, conv1d, release, out);
        break;
    default:
        throw Error("weight outliers: unsupported dtype " + std::string(c10::toString(stored.scalar_type())));
    }
    auto& ps = out.paperPositions;
    std::stable_sort(ps.begin(), ps.end(), [](const WeightPosition& x, const WeightPosition& y) {
        if (x.ratio != y.ratio) return x.ratio > y.ratio;
        return x.row != y.row ? x.row < y.row : x.column < y.column;
    });
    if (ps.size() > options.maxPositions) ps.resize(options.maxPositions);
    return out;
}

} // namespace

WeightMatrixStats analyzeWeightMatrix(const at::Tensor& weight, const WeightOutlierOptions& options,
                                      bool conv1d)
{
    return analyze(weight, options, conv1d, /*release=*/false);
}

bool isDownProjection(const std::string& module)
{
    for (const char* name :
         {"mlp.down_proj", "fc2", "mlp.c_proj", "output.dense", "mlp.fc2", "mlp.dense_4h_to_h"})
        if (module == name) return true;
    return false;
}

namespace {

bool allDigits(const std::string& s)
{
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

} // namespace

std::pair<int, std::string> weightLayerAndModule(const std::string& name)
{
    std::vector<std::string> parts;
    for (std::size_t start = 0;;) {
        const std::size_t dot = name.find('.', start);
        parts.push_back(name.substr(start, dot - start));
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    if (!parts.empty() && parts.back() == "weight") parts.pop_back();
    const auto join = [&](std::size_t from) {
        std::string s;
        for (std::size_t k = from; k < parts.size(); ++k)
            s += (s.empty() ? "" : ".") + parts[k];
        return s;
    };
    for (std::size_t k = 0; k + 1 < parts.size(); ++k) {
        const std::string& p = parts[k];
        if ((p == "layers" || p == "layer" || p == "h" || p == "blocks") && allDigits(parts[k + 1]) &&
            parts[k + 1].size() < 7)
            return {std::stoi(parts[k + 1]), join(k + 2)};
    }
    return {-1, join(0)};
}

namespace {

bool isEmbedding(const std::string& module)
{
    const std::string last = module.substr(module.rfind('.') + 1);
    return module.find("embed") != std::string::npos || last == "wte" || last == "wpe";
}

std::string dtypeName(const torch::Tensor& t)
{
    switch (t.scalar_type()) {
    case torch::kFloat:
        return "float32";
    case torch::kHalf:
        return "float16";
    case torch::kBFloat16:
        return "bfloat16";
    case torch::kDouble:
        return "float64";
    default:
        return c10::toString(t.scalar_type());
    }
}

/// One storage under two names, as torch.save writes a tied head (values are not compared: that
/// would widen two vocabulary-sized matrices).
bool sameStorage(const torch::Tensor& a, const torch::Tensor& b)
{
    return a.sizes() == b.sizes() && a.data_ptr() == b.data_ptr();
}

} // namespace

WeightScan scanWeightOutliers(const std::string& modelDir, const WeightOutlierOptions& options,
                              WeightModules modules, const WeightScanProgress& progress,
                              const std::atomic<bool>* cancel)
{
    if (!(options.tau > 0) || !std::isfinite(options.tau))
        throw Error("tau must be a positive finite number, found " + numberText(options.tau));
    WeightScan scan;
    scan.modelDir = modelDir;
    scan.options = options;
    scan.modules = modules;
    scan.weightsFile = findWeightsFile(modelDir); // names the folder; a sharded checkpoint's index
    const fs::path configPath = fs::path(modelDir) / "config.json";
    bool tied = true; // Hugging Face's PretrainedConfig default
    if (fs::exists(configPath)) {
        const nlohmann::json config = jsonutil::parseFile(configPath.string());
        if (!config.is_object()) throw Error(configPath.string() + ": expected a JSON object");
        scan.modelType = jsonutil::getString(config, "model_type", configPath.string(), std::string());
        tied = jsonutil::getBool(config, "tie_word_embeddings", configPath.string(), true);
    }
    bool gpt2 = false; // Conv1D weights [I, O]; a family the registry does not know scans as nn.Linear
    try {
        gpt2 = modelFamilyOfDir(modelDir).conv1dWeights;
    } catch (const Error&) {
    }

    const bool mapped = isSafetensorsCheckpoint(scan.weightsFile);
    StateDict tensors = mapStateDict(scan.weightsFile);

    struct Planned
    {
        std::string name;
        int layer;
        std::string module;
    };
    std::vector<Planned> plan;
    std::vector<const torch::Tensor*> embeddings;
    for (const auto& [name, t] : tensors) {
        if (t.dim() != 2 || !t.is_floating_point()) continue;
        const auto [layer, module] = weightLayerAndModule(name);
        if (isEmbedding(module)) {
            scan.skipped.push_back(name + ": embedding");
            embeddings.push_back(&t);
        }
    }
    for (const auto& [name, t] : tensors) {
        if (t.dim() != 2 || !t.is_floating_point()) continue;
        const auto [layer, module] = weightLayerAndModule(name);
        if (isEmbedding(module)) continue;
        if (layer < 0) {
            const bool head = module == "lm_head" || module == "cls.predictions.decoder";
            const torch::Tensor& weight = t; // a lambda may not capture a structured binding (C++17)
            const bool sameAsEmbedding =
                std::any_of(embeddings.begin(), embeddings.end(),
                            [&](const torch::Tensor* e) { return sameStorage(weight, *e); });
            if ((head && tied) || sameAsEmbedding) {
                scan.skipped.push_back(name + ": output head tied to the token embeddings");
                continue;
            }
        }
        if (modules == WeightModules::Down && !(layer >= 0 && isDownProjection(module))) {
            scan.skipped.push_back(name + ": not a down projection (--modules all scans it)");
            continue;
        }
        plan.push_back({name, layer, module});
    }
    if (plan.empty())
        throw Error(scan.weightsFile + ": no " +
                    (modules == WeightModules::Down ? "down-projection weights (layers.N.mlp.down_proj, fc2, "
                                                      "mlp.c_proj, output.dense, ...)"
                                                    : "2-D linear weights") +
                    " found");

    int done = 0;
    for (const Planned& p : plan) {
        if (cancel && cancel->load()) throw Cancelled();
        auto it = tensors.find(p.name);
        WeightModuleStats r;
        r.tensor = p.name;
        r.layer = p.layer;
        r.module = p.module;
        r.dtype = dtypeName(it->second);
        r.down = p.layer >= 0 && isDownProjection(p.module);
        r.conv1d = gpt2 && p.layer >= 0 &&
                   (p.module == "attn.c_attn" || p.module == "attn.c_proj" || p.module == "mlp.c_fc" ||
                    p.module == "mlp.c_proj" || p.module == "crossattention.c_attn" ||
                    p.module == "crossattention.q_attn" || p.module == "crossattention.c_proj");
        try {
            r.stats = analyze(it->second, options, r.conv1d, /*release=*/mapped);
        } catch (const Error& e) {
            throw Error(scan.weightsFile + ": tensor '" + p.name + "': " + e.what());
        }
        scan.results.push_back(std::move(r));
        if (mapped) tensors.erase(it); // the .bin reader's tensors may share storage: kept until the end
        if (progress) progress(++done, int(plan.size()));
    }
    std::stable_sort(scan.results.begin(), scan.results.end(),
                     [](const WeightModuleStats& a, const WeightModuleStats& b) {
                         const unsigned la = unsigned(a.layer), lb = unsigned(b.layer); // -1 last
                         if (la != lb) return la < lb;
                         return a.module < b.module;
                     });
    return scan;
}

} // namespace outlierlens
