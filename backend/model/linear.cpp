#include "model/linear.h"

#include "common/error.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdint>
#include <cstdlib>
#include <string>

// Exported by libdnnl 2.x (oneDNN's bf16 GEMM: bf16 operands, float32 accumulation and result; row-major
// like dnnl_sgemm) but not declared in its public header. tst_linear checks it against the exact product.
extern "C" dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N,
                                               dnnl_dim_t K, float alpha, const std::uint16_t* A,
                                               dnnl_dim_t lda, const std::uint16_t* B, dnnl_dim_t ldb,
                                               float beta, float* C, dnnl_dim_t ldc);

namespace outlierlens {
namespace {

enum class Route { Bf16F32, Torch };

/// OUTLIERLENS_TORCH_LINEAR=1: LibTorch's own route everywhere, to compare the two in one benchmark.
bool torchRouteForced()
{
    static const bool forced = [] {
        const char* v = std::getenv("OUTLIERLENS_TORCH_LINEAR");
        return v && *v && std::string(v) != "0";
    }();
    return forced;
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
    return Route::Torch;
}

void check(dnnl_status_t status, const char* what)
{
    if (status != dnnl_success)
        throw Error(std::string("oneDNN ") + what + " failed (status " + std::to_string(int(status)) + ")");
}

/// y [M, out] = x2 [M, in] W^T (+ b) from bf16 operands, with float32 sums and result.
torch::Tensor bf16Product(const torch::Tensor& x2, const torch::Tensor& w, const torch::Tensor& b,
                          bool inByOut)
{
    const std::int64_t m = x2.size(0), k = x2.size(1), n = inByOut ? w.size(1) : w.size(0);
    torch::Tensor y =
        b.defined() ? b.to(torch::kFloat).expand({m, n}).contiguous() : torch::empty({m, n}, torch::kFloat);
    const float beta = b.defined() ? 1.0f : 0.0f;
    // The weights' bf16 copies are kept for the autocast region, as autocast itself keeps them.
    const torch::Tensor wb = at::autocast::cached_cast(at::kBFloat16, w, c10::DeviceType::CPU).contiguous();
    const torch::Tensor xb = x2.to(torch::kBFloat16).contiguous();
    at::internal::lazy_init_num_threads();
    check(dnnl_gemm_bf16bf16f32('N', inByOut ? 'N' : 'T', m, n, k, 1.0f,
                                reinterpret_cast<const std::uint16_t*>(xb.data_ptr<at::BFloat16>()), k,
                                reinterpret_cast<const std::uint16_t*>(wb.data_ptr<at::BFloat16>()),
                                wb.size(1), beta, y.data_ptr<float>(), n),
          "gemm_bf16bf16f32");
    return y;
}

} // namespace

const char* linearRoute(const torch::Tensor& x, const torch::Tensor& weight)
{
    switch (routeFor(x, weight)) {
    case Route::Bf16F32:
        return "onednn-bf16-f32";
    case Route::Torch:
        break;
    }
    return "torch";
}

torch::Tensor linearLayer(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                          bool weightIsInByOut)
{
    const Route route = routeFor(x, weight);
    if (route == Route::Torch || (bias.defined() && bias.scalar_type() != weight.scalar_type())) {
        if (!weightIsInByOut) return torch::linear(x, weight, bias);
        auto sizes = x.sizes().vec();
        sizes.back() = weight.size(1);
        const torch::Tensor flat = x.reshape({-1, x.size(-1)});
        return (bias.defined() ? torch::addmm(bias, flat, weight) : torch::mm(flat, weight)).view(sizes);
    }
    const std::int64_t in = weightIsInByOut ? weight.size(0) : weight.size(1);
    if (x.size(-1) != in)
        throw Error("linear layer: input of " + std::to_string(x.size(-1)) + " features for a weight of " +
                    std::to_string(in));
    auto sizes = x.sizes().vec();
    sizes.back() = weightIsInByOut ? weight.size(1) : weight.size(0);
    const torch::Tensor x2 = x.reshape({-1, in}).contiguous();
    const torch::Tensor w = weight.contiguous();
    const torch::Tensor y = bf16Product(x2, w, bias, weightIsInByOut);
    return y.view(sizes);
}

torch::Tensor float32InInference(const std::function<torch::Tensor()>& fn)
{
    if (torchRouteForced() || !at::autocast::is_cpu_enabled() || torch::GradMode::is_enabled()) return fn();
    const c10::impl::ExcludeDispatchKeyGuard noAutocast(c10::DispatchKey::AutocastCPU);
    return fn();
}

torch::Tensor activationProduct(const torch::Tensor& a, const torch::Tensor& b)
{
    return float32InInference([&] {
        const bool cast =
            at::autocast::is_cpu_enabled() && !torch::GradMode::is_enabled() && !torchRouteForced();
        return cast ? torch::matmul(a.to(torch::kFloat), b.to(torch::kFloat)) : torch::matmul(a, b);
    });
}

torch::Tensor linearLayer(const torch::nn::Linear& layer, const torch::Tensor& x)
{
    return linearLayer(x, layer->weight, layer->bias);
}

} // namespace outlierlens
