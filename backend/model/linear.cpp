#include "model/linear.h"

#include "common/error.h"
#include "model/onednn_ops.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

// Exported by libdnnl 2.x (oneDNN's bf16 GEMM: bf16 operands, float32 accumulation and result; row-major
// like dnnl_sgemm) but not declared in its public header. tst_linear checks it against the exact product.
extern "C" dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N,
                                               dnnl_dim_t K, float alpha, const std::uint16_t* A,
                                               dnnl_dim_t lda, const std::uint16_t* B, dnnl_dim_t ldb,
                                               float beta, float* C, dnnl_dim_t ldc);

namespace outlierlens {
namespace {

enum class Route { Sgemm, Bf16F32, Torch };

using onednn::torchRouteForced;

/// bf16 autocast inference (no gradients) on our route: where the activations' own products run in
/// float32.
bool float32ProductsInAutocast()
{
    return !torchRouteForced() && at::autocast::is_cpu_enabled() && !torch::GradMode::is_enabled();
}

Route routeFor(const torch::Tensor& x, const torch::Tensor& weight)
{
    if (torchRouteForced() || !x.device().is_cpu() || !weight.device().is_cpu() || x.dim() < 1 ||
        x.numel() == 0 || weight.numel() == 0)
        return Route::Torch;
    if (at::autocast::is_cpu_enabled()) {
        // Inference only: autocast's own bf16 route keeps training's backward as PyTorch records it.
        const bool floatIn = x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kBFloat16;
        return at::autocast::get_autocast_cpu_dtype() == at::kBFloat16 && !torch::GradMode::is_enabled() &&
                       floatIn && weight.scalar_type() == torch::kFloat
                   ? Route::Bf16F32
                   : Route::Torch;
    }
    return x.scalar_type() == torch::kFloat && weight.scalar_type() == torch::kFloat ? Route::Sgemm
                                                                                     : Route::Torch;
}

void check(dnnl_status_t status, const char* what)
{
    if (status != dnnl_success)
        throw Error(std::string("oneDNN ") + what + " failed (status " + std::to_string(int(status)) + ")");
}

/// fn(r0, r1, c0, c1) for blocks of an [m, n] output, rows [r0, r1) and columns [c0, c1), that cover it:
/// with more than one intra-op thread (outside a parallel region) at::parallel_for splits the larger of m
/// and n in one block per thread (at least 64 long), side by side; else one block. oneDNN runs one thread
/// inside a parallel region, so each block is a one-thread GEMM. On the AMD CPU of docs/performance.md
/// oneDNN's own two-thread split ran bert-base's FFN down projection (128 x 3,072 -> 768) at 0.7 x
/// OpenBLAS's speed; this split runs every BERT and demo-model shape there at least as fast as either
/// (bench/linear_routes.cpp times the three).
template<typename Fn>
void forOutputBlocks(std::int64_t m, std::int64_t n, Fn&& fn)
{
    const bool byRows = m > n;
    at::parallel_for(0, byRows ? m : n, 64, [&](std::int64_t b0, std::int64_t b1) {
        if (byRows)
            fn(b0, b1, std::int64_t(0), n);
        else
            fn(std::int64_t(0), m, b0, b1);
    });
}

/// Row-major C [m, n] = op(A) op(B) (+ the row `bias` [n] on every row, else + beta C), float32, on
/// forOutputBlocks(). The bias rows are written some rows at a time right before their product, which
/// then reads them from the cache (filling the whole output first read and wrote it through memory once
/// more).
void sgemm(bool transA, bool transB, std::int64_t m, std::int64_t n, std::int64_t k, const torch::Tensor& a,
           const torch::Tensor& b, float beta, torch::Tensor& c, const float* bias = nullptr)
{
    const float* ap = a.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* cp = c.data_ptr<float>();
    const std::int64_t lda = a.size(1), ldb = b.size(1), ldc = c.size(1);
    const char ta = transA ? 'T' : 'N', tb = transB ? 'T' : 'N';
    // Rows [r0, r1) of op(A) (columns of A when transA) times columns [c0, c1) of op(B) (rows of B when
    // transB).
    auto multiply = [&](std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1, float addTo) {
        check(dnnl_sgemm(ta, tb, r1 - r0, c1 - c0, k, 1.0f, ap + (transA ? r0 : r0 * lda), lda,
                         bp + (transB ? c0 * ldb : c0), ldb, addTo, cp + r0 * ldc + c0, ldc),
              "sgemm");
    };
    forOutputBlocks(m, n, [&](std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
        if (!bias) {
            multiply(r0, r1, c0, c1, beta);
            return;
        }
        const std::int64_t rowsAtOnce = std::max<std::int64_t>(64, (std::int64_t(1) << 17) / (c1 - c0));
        for (std::int64_t first = r0; first < r1; first += rowsAtOnce) {
            const std::int64_t last = std::min(r1, first + rowsAtOnce);
            for (std::int64_t r = first; r < last; ++r)
                std::copy(bias + c0, bias + c1, cp + r * ldc + c0);
            multiply(first, last, c0, c1, 1.0f);
        }
    });
}

/// dnnl_gemm_bf16bf16f32 on row-major bf16 tensors: c [m, n] = a [m, k] op(w)^T + beta c, float32 c, on
/// forOutputBlocks().
void gemmBf16(const torch::Tensor& a, const torch::Tensor& wb, bool inByOut, float beta, torch::Tensor& c)
{
    const auto* ap = reinterpret_cast<const std::uint16_t*>(a.data_ptr<at::BFloat16>());
    const auto* wp = reinterpret_cast<const std::uint16_t*>(wb.data_ptr<at::BFloat16>());
    float* cp = c.data_ptr<float>();
    const std::int64_t k = a.size(1), ldw = wb.size(1), ldc = c.size(1);
    forOutputBlocks(
        a.size(0), c.size(1), [&](std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
            check(dnnl_gemm_bf16bf16f32('N', inByOut ? 'N' : 'T', r1 - r0, c1 - c0, k, 1.0f, ap + r0 * k, k,
                                        wp + (inByOut ? c0 : c0 * ldw), ldw, beta, cp + r0 * ldc + c0, ldc),
                  "gemm_bf16bf16f32");
        });
}

/// x rounded to bf16's bits, to nearest even as torch's conversion (NaN: a quiet NaN); `back` gets the
/// rounded value as a float. No branches, so that the loops calling it are vectorised.
inline std::uint16_t toBf16(float x, float& back)
{
    std::uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    std::memcpy(&back, &rounded, sizeof back);
    return x != x ? std::uint16_t(0x7fc0) : std::uint16_t(rounded >> 16);
}

/// out = bf16(x) for n values, and for each column sum += x, rounding += x - bf16(x) (exact in float32
/// where x is finite). The AVX2 clone does 8 at a time.
__attribute__((target_clones("avx2", "default"))) void roundRow(const float* __restrict x,
                                                                std::uint16_t* __restrict out,
                                                                float* __restrict sum,
                                                                float* __restrict rounding, std::int64_t n)
{
    for (std::int64_t j = 0; j < n; ++j) {
        float back;
        out[j] = toBf16(x[j], back);
        sum[j] += x[j];
        rounding[j] += x[j] - back;
    }
}

/// One block's two bf16 rows from its column sums over `rows` rows: the mean of its bf16-rounded rows,
/// xm - mean(x - bf16(x)), as g1 + g2 (to about 2^-17), `stride` apart; `mean` gets the mean xm.
__attribute__((target_clones("avx2", "default"))) void
meanParts(const float* __restrict sum, const float* __restrict rounding, float rows, float* __restrict mean,
          std::uint16_t* __restrict parts, std::int64_t stride, std::int64_t n)
{
    for (std::int64_t j = 0; j < n; ++j) {
        const float xm = sum[j] / rows;
        const float roundedMean = xm - rounding[j] / rows;
        mean[j] = xm;
        float g1, unused;
        parts[j] = toBf16(roundedMean, g1);
        parts[stride + j] = toBf16(roundedMean - g1, unused);
    }
}

/// bf16 inference where x2's M rows are `groups` equal blocks, one sample's tokens each: xb [M + 2 groups,
/// k] gets x2's rows rounded to bf16 (as torch's conversion) and then, per block, the mean of its
/// rounded rows as two bf16 parts (meanParts()); xm [groups, k] gets the mean of its rows. A block
/// holding a value that is not finite gets zero parts and mean: no correction.
void roundRowsWithMeans(const torch::Tensor& x2, std::int64_t groups, torch::Tensor& xb, torch::Tensor& xm)
{
    const std::int64_t m = x2.size(0), k = x2.size(1), rows = m / groups;
    // Whole rows per task (strided column blocks ran slower); where there are fewer blocks than
    // threads, a block's rows are split in chunks, each with its own sums.
    const std::int64_t chunks = std::min<std::int64_t>(
        rows, std::max<std::int64_t>(1, (2 * at::get_num_threads() + groups - 1) / groups));
    const std::int64_t chunkRows = (rows + chunks - 1) / chunks;
    std::vector<float> sums(std::size_t(2 * groups * chunks * k));
    const float* xp = x2.data_ptr<float>();
    std::uint16_t* bp = reinterpret_cast<std::uint16_t*>(xb.data_ptr<at::BFloat16>());
    float* mp = xm.data_ptr<float>();
    at::parallel_for(0, groups * chunks, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t task = begin; task < end; ++task) {
            float* sum = sums.data() + 2 * task * k;
            float* rounding = sum + k;
            const std::int64_t first = (task / chunks) * rows + (task % chunks) * chunkRows;
            const std::int64_t last = std::min((task / chunks) * rows + rows, first + chunkRows);
            for (std::int64_t r = first; r < last; ++r)
                roundRow(xp + r * k, bp + r * k, sum, rounding, k);
        }
    });
    at::parallel_for(0, groups, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t g = begin; g < end; ++g) {
            float* sum = sums.data() + 2 * g * chunks * k; // the block's chunks summed into its first
            float* rounding = sum + k;
            for (std::int64_t c = 1; c < chunks; ++c)
                for (std::int64_t j = 0; j < k; ++j) {
                    sum[j] += sum[2 * c * k + j];
                    rounding[j] += rounding[2 * c * k + j];
                }
            bool finite = true;
            for (std::int64_t j = 0; j < k; ++j)
                finite = finite && std::isfinite(sum[j]) && std::isfinite(rounding[j]);
            if (!finite) {
                std::fill(sum, sum + 2 * k, 0.0f);
            }
            meanParts(sum, rounding, float(rows), mp + g * k, bp + (m + g) * k, groups * k, k);
        }
    });
}

/// y [M, out] = x2 [M, in] W^T (+ b) in float32 or, for Bf16F32, bf16 inputs and a float32 result.
/// There, `groups` > 0 splits the rows into that many equal blocks, one sample's tokens each, and adds
/// to each block's rows the bf16 route's error on the block's mean row: the float32 product of the mean
/// row xm minus what the route gives for the mean of the bf16-rounded rows, xm W^T - (xm - mean e) wb^T
/// with e = x2 - bf16(x2). The block's mean output is then the float32 one: what the roundings of W and
/// of the inputs do alike to every token of a sample (most of their error where the tokens share a
/// large common part, as after the attention's averaging or a GELU) is gone, and what differs from token
/// to token stays. The bf16 rows of roundRowsWithMeans() go through the same product as the tokens'
/// rows, so the weights are read once for both; xm W^T is one float32 product of `groups` rows.
torch::Tensor product(const torch::Tensor& x2, const torch::Tensor& w, const torch::Tensor& b, bool inByOut,
                      Route route, std::int64_t groups = 0)
{
    const std::int64_t m = x2.size(0), k = x2.size(1), n = inByOut ? w.size(1) : w.size(0);
    if (route == Route::Sgemm) {
        torch::Tensor y = torch::empty({m, n}, torch::kFloat);
        if (!b.defined()) {
            sgemm(false, !inByOut, m, n, k, x2, w, 0.0f, y);
            return y;
        }
        const torch::Tensor bias = b.to(torch::kFloat).contiguous();
        sgemm(false, !inByOut, m, n, k, x2, w, 0.0f, y, bias.data_ptr<float>());
        return y;
    }
    // The weights' bf16 copies are kept for the autocast region, as autocast itself keeps them.
    const torch::Tensor wb = at::autocast::cached_cast(at::kBFloat16, w, c10::DeviceType::CPU).contiguous();
    if (groups <= 0 || m % groups != 0) {
        const torch::Tensor xb = x2.to(torch::kBFloat16).contiguous();
        torch::Tensor y = b.defined() ? b.to(torch::kFloat).expand({m, n}).contiguous()
                                      : torch::empty({m, n}, torch::kFloat);
        gemmBf16(xb, wb, inByOut, b.defined() ? 1.0f : 0.0f, y);
        return y;
    }
    torch::Tensor xb = torch::empty({m + 2 * groups, k}, torch::kBFloat16);
    torch::Tensor xm = torch::empty({groups, k}, torch::kFloat);
    roundRowsWithMeans(x2, groups, xb, xm);
    torch::Tensor all = torch::empty({m + 2 * groups, n}, torch::kFloat);
    gemmBf16(xb, wb, inByOut, 0.0f, all);
    torch::Tensor c = torch::empty({groups, n}, torch::kFloat); // xm W^T
    sgemm(false, !inByOut, groups, n, k, xm, w, 0.0f, c);
    const torch::Tensor bias = b.defined() ? b.to(torch::kFloat).contiguous() : torch::zeros({n});
    float* cp = c.data_ptr<float>();
    float* yp = all.data_ptr<float>();
    const float* bp = bias.data_ptr<float>();
    for (std::int64_t g = 0; g < groups; ++g) // c = xm W^T - (g1 + g2) wb^T + b
        for (std::int64_t j = 0; j < n; ++j)
            cp[g * n + j] += bp[j] - yp[(m + g) * n + j] - yp[(m + groups + g) * n + j];
    const std::int64_t rows = m / groups;
    at::parallel_for(0, m, std::max<std::int64_t>(1, (std::int64_t(1) << 15) / n),
                     [=](std::int64_t begin, std::int64_t end) {
                         for (std::int64_t r = begin; r < end; ++r) {
                             const float* add = cp + (r / rows) * n;
                             float* row = yp + r * n;
                             for (std::int64_t j = 0; j < n; ++j)
                                 row[j] += add[j];
                         }
                     });
    return all.narrow(0, 0, m);
}

/// max(y, 0) in place, float32 contiguous; NaN stays NaN, as torch::relu keeps it.
void reluInPlace(torch::Tensor& y)
{
    float* p = y.data_ptr<float>();
    at::parallel_for(0, y.numel(), 1 << 15, [p](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i)
            p[i] = p[i] < 0.0f ? 0.0f : p[i];
    });
}

/// The gradient through a ReLU whose output was y: torch's threshold_backward(g, y, 0), y <= 0 ? 0 : g.
torch::Tensor reluBackward(const torch::Tensor& grad, const torch::Tensor& y)
{
    const torch::Tensor g = grad.contiguous();
    torch::Tensor out = torch::empty_like(y);
    const float* gp = g.data_ptr<float>();
    const float* yp = y.data_ptr<float>();
    float* op = out.data_ptr<float>();
    at::parallel_for(0, y.numel(), 1 << 15, [=](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) { // both loads unconditional: a vectorised select
            const float g = gp[i];
            op[i] = yp[i] <= 0.0f ? 0.0f : g;
        }
    });
    return out;
}

/// The float32 product with its backward pass, both on oneDNN's sgemm.
class SgemmLinear : public torch::autograd::Function<SgemmLinear>
{
public:
    /// relu: the layer's output goes through a ReLU, applied in place on the product (a ReLU after
    /// the layer would read and write it once more, and its backward once more).
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x2,
                                 const torch::Tensor& w, const torch::Tensor& b, bool inByOut, bool relu)
    {
        // No bias comes as an empty tensor: autograd functions take no undefined inputs.
        torch::Tensor y = product(x2, w, b.numel() > 0 ? b : torch::Tensor(), inByOut, Route::Sgemm);
        if (relu) {
            reluInPlace(y);
            ctx->save_for_backward({x2, w, y});
        } else {
            ctx->save_for_backward({x2, w});
        }
        ctx->saved_data["in_by_out"] = inByOut;
        ctx->saved_data["has_bias"] = b.numel() > 0;
        return y;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads)
    {
        const auto saved = ctx->get_saved_variables();
        const torch::Tensor& x2 = saved[0];
        const torch::Tensor& w = saved[1];
        const bool inByOut = ctx->saved_data["in_by_out"].toBool();
        // [M, out]; through the ReLU: zero where its output is (saved[2]), as threshold_backward does.
        const torch::Tensor g = saved.size() == 3 ? reluBackward(grads[0], saved[2]) : grads[0].contiguous();
        const std::int64_t m = x2.size(0), k = x2.size(1), n = g.size(1);
        torch::Tensor gx, gw, gb;
        if (ctx->needs_input_grad(0)) {
            gx = torch::empty({m, k}, torch::kFloat); // g W, or g W^T for [in, out] weights
            sgemm(false, inByOut, m, k, n, g, w, 0.0f, gx);
        }
        if (ctx->needs_input_grad(1)) {
            // g^T x2 [out, in], or x2^T g [in, out]: a sum over the M rows. Where the smaller of out and
            // in is at most 256, oneDNN's sgemm ran it 1.05-1.46 x faster with that one as its result's
            // rows (the demo models' 128 x 384 to 128 x 30,522 layers), so that one is computed and
            // transposed if the weight is laid out the other way; at bert-base's 768 x 3072 the
            // weight's own layout was as fast or up to 9% faster (docs/performance.md;
            // bench/sgemm_weight_gradient.cpp times both).
            const bool outputRows = std::min(n, k) <= 256 ? n <= k : !inByOut;
            const torch::Tensor& left = outputRows ? g : x2;
            const torch::Tensor& right = outputRows ? x2 : g;
            torch::Tensor r = torch::empty({left.size(1), right.size(1)}, torch::kFloat);
            sgemm(true, false, r.size(0), r.size(1), m, left, right, 0.0f, r);
            gw = outputRows != inByOut ? r : r.t().contiguous(); // [in, out] when inByOut, else [out, in]
        }
        if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)) gb = g.sum(0);
        return {gx, gw, gb, torch::Tensor(), torch::Tensor()};
    }
};

} // namespace

const char* linearRoute(const torch::Tensor& x, const torch::Tensor& weight)
{
    switch (routeFor(x, weight)) {
    case Route::Sgemm:
        return "onednn-sgemm";
    case Route::Bf16F32:
        return "onednn-bf16-f32";
    case Route::Torch:
        break;
    }
    return "torch";
}

namespace {

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     bool weightIsInByOut, bool relu)
{
    const Route route = routeFor(x, weight);
    if (route == Route::Torch || (bias.defined() && bias.scalar_type() != weight.scalar_type())) {
        torch::Tensor y;
        if (!weightIsInByOut) {
            y = torch::linear(x, weight, bias);
        } else {
            auto sizes = x.sizes().vec();
            sizes.back() = weight.size(1);
            const torch::Tensor flat = x.reshape({-1, x.size(-1)});
            y = (bias.defined() ? torch::addmm(bias, flat, weight) : torch::mm(flat, weight)).view(sizes);
        }
        return relu ? torch::relu(y) : y;
    }
    const std::int64_t in = weightIsInByOut ? weight.size(0) : weight.size(1);
    if (x.size(-1) != in)
        throw Error("linear layer: input of " + std::to_string(x.size(-1)) + " features for a weight of " +
                    std::to_string(in));
    auto sizes = x.sizes().vec();
    sizes.back() = weightIsInByOut ? weight.size(1) : weight.size(0);
    const torch::Tensor x2 = x.reshape({-1, in}).contiguous();
    const torch::Tensor w = weight.contiguous();
    const bool tracked = torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad() ||
                                                           (bias.defined() && bias.requires_grad()));
    if (route == Route::Sgemm && tracked)
        return SgemmLinear::apply(x2, w, bias.defined() ? bias : torch::empty({0}), weightIsInByOut, relu)
            .view(sizes);
    // One sample's tokens per block of rows where x is [B, T, in] (bf16 inference only).
    torch::Tensor y = product(x2, w, bias, weightIsInByOut, route, x.dim() == 3 ? x.size(0) : 0);
    if (relu) reluInPlace(y);
    return y.view(sizes);
}

} // namespace

torch::Tensor linearLayer(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                          bool weightIsInByOut)
{
    return linear(x, weight, bias, weightIsInByOut, false);
}

torch::Tensor linearRelu(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                         bool weightIsInByOut)
{
    return linear(x, weight, bias, weightIsInByOut, true);
}

torch::Tensor float32InInference(const std::function<torch::Tensor()>& fn)
{
    if (!float32ProductsInAutocast()) return fn();
    const c10::impl::ExcludeDispatchKeyGuard noAutocast(c10::DispatchKey::AutocastCPU);
    return fn();
}

torch::Tensor activationProduct(const torch::Tensor& a, const torch::Tensor& b, double divisor,
                                bool headsLast)
{
    auto withTorch = [&](const torch::Tensor& x, const torch::Tensor& y) {
        const torch::Tensor p = torch::matmul(x, y);
        return divisor == 1.0 ? p : p / divisor;
    };
    auto multiply = [&](const torch::Tensor& x, const torch::Tensor& y) {
        return onednn::canMultiply(x, y) ? onednn::batchedProduct(x, y, divisor, headsLast) : withTorch(x, y);
    };
    if (!at::autocast::is_cpu_enabled()) return multiply(a, b);
    if (!float32ProductsInAutocast()) return withTorch(a, b); // autocast training keeps autocast's policy
    const c10::impl::ExcludeDispatchKeyGuard noAutocast(c10::DispatchKey::AutocastCPU);
    return multiply(a.to(torch::kFloat), b.to(torch::kFloat));
}

torch::Tensor linearLayer(const torch::nn::Linear& layer, const torch::Tensor& x)
{
    return linearLayer(x, layer->weight, layer->bias);
}

} // namespace outlierlens
