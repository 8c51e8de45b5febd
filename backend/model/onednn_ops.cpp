#include "model/onednn_ops.h"

#include "common/error.h"

#include <ATen/Parallel.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string>

namespace outlierlens::onednn {
namespace {

dnnl::engine& cpuEngine()
{
    static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    return engine;
}

/// One in-order stream per thread: the inspection thread and a command's main thread never share one.
dnnl::stream& threadStream()
{
    thread_local dnnl::stream stream(cpuEngine());
    return stream;
}

dnnl::memory::desc describe(const torch::Tensor& t)
{
    return {dnnl::memory::dims(t.sizes().begin(), t.sizes().end()), dnnl::memory::data_type::f32,
            dnnl::memory::dims(t.strides().begin(), t.strides().end())};
}

dnnl::memory memoryOf(const torch::Tensor& t)
{
    return {describe(t), cpuEngine(), t.data_ptr()};
}

/// A matrix oneDNN's matmul reads as it lies: a unit stride in one of its two dimensions and no
/// broadcast (stride 0) dimension. Anything else is copied first.
torch::Tensor readable(const torch::Tensor& t)
{
    const auto d = t.dim();
    bool ok = t.stride(d - 1) == 1 || t.stride(d - 2) == 1;
    for (std::int64_t i = 0; i < d && ok; ++i)
        ok = t.stride(i) > 0 || t.size(i) == 1;
    return ok ? t : t.contiguous();
}

/// An uninitialised tensor of t's sizes whose memory orders the dimensions as t's strides do (a
/// permuted view gets a gradient that is the same permutation of a contiguous tensor).
torch::Tensor emptyInStrideOrder(const torch::Tensor& t)
{
    std::vector<std::int64_t> order(std::size_t(t.dim()));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int64_t i, std::int64_t j) { return t.stride(i) > t.stride(j); });
    std::vector<std::int64_t> sizes, inverse(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        sizes.push_back(t.size(order[i]));
        inverse[std::size_t(order[i])] = std::int64_t(i);
    }
    return torch::empty(sizes, t.options()).permute(inverse);
}

/// c = a b / divisor into c's memory, with the calling thread's intra-op threads.
void multiplyInto(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c, double divisor)
{
    // A result whose rows are strided (the gradient of K^T) is computed as its transpose,
    // b^T a^T: oneDNN 2.6 has only a reference kernel for the other way round.
    if (c.stride(-1) != 1 && c.stride(-2) == 1)
        return multiplyInto(b.transpose(-1, -2), a.transpose(-1, -2), c.transpose(-1, -2), divisor);
    at::internal::lazy_init_num_threads(); // this thread's OpenMP thread count = LibTorch's
    try {
        dnnl::primitive_attr attr;
        if (divisor != 1.0) attr.set_output_scales(0, {float(1.0 / divisor)});
        const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(describe(a), describe(b), describe(c)), attr,
                                              cpuEngine());
        dnnl::matmul(pd).execute(
            threadStream(),
            {{DNNL_ARG_SRC, memoryOf(a)}, {DNNL_ARG_WEIGHTS, memoryOf(b)}, {DNNL_ARG_DST, memoryOf(c)}});
        threadStream().wait();
    } catch (const dnnl::error& e) {
        throw Error(std::string("oneDNN matmul failed: ") + e.what());
    }
}

torch::Tensor product(const torch::Tensor& a, const torch::Tensor& b, double divisor, bool headsLast)
{
    std::vector<std::int64_t> sizes = a.sizes().vec();
    sizes.back() = b.size(-1);
    const torch::Tensor c =
        headsLast && a.dim() == 4
            ? torch::empty({sizes[0], sizes[2], sizes[1], sizes[3]}, a.options()).permute({0, 2, 1, 3})
            : torch::empty(sizes, a.options());
    multiplyInto(a, b, c, divisor);
    return c;
}

class Product : public torch::autograd::Function<Product>
{
public:
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a,
                                 const torch::Tensor& b, double divisor, bool headsLast)
    {
        ctx->save_for_backward({a, b});
        ctx->saved_data["divisor"] = divisor;
        return product(a, b, divisor, headsLast);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads)
    {
        const auto saved = ctx->get_saved_variables();
        const torch::Tensor& a = saved[0];
        const torch::Tensor& b = saved[1];
        const double divisor = ctx->saved_data["divisor"].toDouble();
        const torch::Tensor g = readable(grads[0]);
        torch::Tensor ga, gb;
        if (ctx->needs_input_grad(0)) { // g b^T / divisor
            ga = emptyInStrideOrder(a);
            multiplyInto(g, b.transpose(-1, -2), ga, divisor);
        }
        if (ctx->needs_input_grad(1)) { // a^T g / divisor
            gb = emptyInStrideOrder(b);
            multiplyInto(a.transpose(-1, -2), g, gb, divisor);
        }
        return {ga, gb, torch::Tensor(), torch::Tensor()};
    }
};

/// y = softmax(x) over the last dimension, float32.
torch::Tensor softmaxForward(const torch::Tensor& x)
{
    const torch::Tensor in = x.contiguous();
    torch::Tensor y = torch::empty_like(in);
    at::internal::lazy_init_num_threads();
    try {
        const dnnl::softmax_forward::primitive_desc pd(
            dnnl::softmax_forward::desc(dnnl::prop_kind::forward_training, describe(in), int(in.dim() - 1)),
            cpuEngine());
        dnnl::softmax_forward(pd).execute(threadStream(),
                                          {{DNNL_ARG_SRC, memoryOf(in)}, {DNNL_ARG_DST, memoryOf(y)}});
        threadStream().wait();
    } catch (const dnnl::error& e) {
        throw Error(std::string("oneDNN softmax failed: ") + e.what());
    }
    return y;
}

class Softmax : public torch::autograd::Function<Softmax>
{
public:
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x)
    {
        torch::Tensor y = softmaxForward(x);
        ctx->save_for_backward({y});
        return y;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads)
    {
        const torch::Tensor y = ctx->get_saved_variables()[0];
        const torch::Tensor g = grads[0].contiguous();
        torch::Tensor gx = torch::empty_like(y);
        at::internal::lazy_init_num_threads();
        try {
            const int axis = int(y.dim() - 1);
            const dnnl::softmax_forward::primitive_desc hint(
                dnnl::softmax_forward::desc(dnnl::prop_kind::forward_training, describe(y), axis),
                cpuEngine());
            const dnnl::softmax_backward::primitive_desc pd(
                dnnl::softmax_backward::desc(describe(g), describe(y), axis), cpuEngine(), hint);
            dnnl::softmax_backward(pd).execute(threadStream(), {{DNNL_ARG_DST, memoryOf(y)},
                                                                {DNNL_ARG_DIFF_DST, memoryOf(g)},
                                                                {DNNL_ARG_DIFF_SRC, memoryOf(gx)}});
            threadStream().wait();
        } catch (const dnnl::error& e) {
            throw Error(std::string("oneDNN softmax backward failed: ") + e.what());
        }
        return {gx};
    }
};

bool trackedGradient(const torch::Tensor& a, const torch::Tensor& b = {})
{
    return torch::GradMode::is_enabled() && (a.requires_grad() || (b.defined() && b.requires_grad()));
}

} // namespace

bool torchRouteForced()
{
    static const bool forced = [] {
        const char* v = std::getenv("OUTLIERLENS_TORCH_LINEAR");
        return v && *v && std::string(v) != "0";
    }();
    return forced;
}

bool canMultiply(const torch::Tensor& a, const torch::Tensor& b)
{
    if (torchRouteForced() || a.dim() != b.dim() || a.dim() < 3 || a.dim() > 4) return false;
    if (!a.device().is_cpu() || !b.device().is_cpu() || a.scalar_type() != torch::kFloat ||
        b.scalar_type() != torch::kFloat || a.numel() == 0 || b.numel() == 0)
        return false;
    for (std::int64_t i = 0; i + 2 < a.dim(); ++i)
        if (a.size(i) != b.size(i)) return false;
    return a.size(-1) == b.size(-2);
}

torch::Tensor batchedProduct(const torch::Tensor& a, const torch::Tensor& b, double divisor, bool headsLast)
{
    const torch::Tensor ra = readable(a), rb = readable(b);
    if (trackedGradient(a, b)) return Product::apply(ra, rb, divisor, headsLast);
    return product(ra, rb, divisor, headsLast);
}

bool canSoftmax(const torch::Tensor& x)
{
    return !torchRouteForced() && x.device().is_cpu() && x.scalar_type() == torch::kFloat && x.dim() >= 1 &&
           x.numel() > 0;
}

torch::Tensor softmax(const torch::Tensor& x)
{
    if (trackedGradient(x)) return Softmax::apply(x);
    return softmaxForward(x);
}

} // namespace outlierlens::onednn
