#include "train/adamw.h"

#include "common/error.h"
#include "common/text_format.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>
#include <initializer_list>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace outlierlens {
namespace {

const torch::Tensor& stateTensor(const std::map<std::string, torch::Tensor>& state, const std::string& name)
{
    const auto it = state.find(name);
    if (it == state.end() || !it->second.defined())
        throw Error("optimizer state: missing tensor '" + name + "'");
    return it->second;
}

/// A saved moment tensor copied into a tensor laid out like the parameter.
torch::Tensor restoredMoment(const std::map<std::string, torch::Tensor>& state, const std::string& name,
                             const torch::Tensor& param)
{
    const torch::Tensor& saved = stateTensor(state, name);
    if (saved.sizes() != param.sizes())
        throw Error("optimizer state: tensor '" + name + "' has shape " + shapeText(saved.sizes().vec()) +
                    ", expected " + shapeText(param.sizes().vec()));
    if (!saved.is_floating_point())
        throw Error("optimizer state: tensor '" + name + "' must be floating point, found " +
                    std::string(c10::toString(saved.scalar_type())));
    torch::Tensor copy = torch::empty_like(param);
    copy.copy_(saved);
    return copy;
}

std::int64_t restoredCount(const std::map<std::string, torch::Tensor>& state, const std::string& name)
{
    const torch::Tensor& saved = stateTensor(state, name);
    if (saved.dim() != 0)
        throw Error("optimizer state: tensor '" + name + "' must be a scalar, found shape " +
                    shapeText(saved.sizes().vec()));
    double value = 0;
    if (saved.is_floating_point()) {
        value = saved.item<double>();
    } else if (saved.scalar_type() != torch::kBool && !saved.is_complex()) {
        value = double(saved.item<std::int64_t>());
    } else {
        throw Error("optimizer state: tensor '" + name + "' must be an integer");
    }
    if (!(value >= 0) || value != std::floor(value) || value > 9.0e15)
        throw Error("optimizer state: tensor '" + name + "' must be a step count >= 0, found " +
                    numberText(value));
    return std::int64_t(value);
}

/// The float32 scalars of one update, as LibTorch's CPU kernels round PyTorch's double scalars.
struct UpdateScalars
{
    float decay, beta1, oneMinusBeta1, beta2, oneMinusBeta2, biasCorrection2Sqrt, eps, negStepSize;
};

#if defined(__x86_64__)
/// Elements [begin, end) of one update, element by element the float32 arithmetic of the per-tensor ops
/// of AdamW::step's fallback in their order (mul_; mul_, add_; mul_, addcmul_; sqrt, div, add_;
/// addcdiv_) as LibTorch's AVX2 kernels compute them: add_ and addcmul_ end in a fused multiply-add, the
/// others round each operation (this file is compiled with -ffp-contract=off, so nothing else is fused).
__attribute__((target("avx2,fma"))) void updateRange(float* __restrict p, float* __restrict m,
                                                     float* __restrict v, const float* __restrict g,
                                                     std::int64_t begin, std::int64_t end, UpdateScalars c)
{
    for (std::int64_t i = begin; i < end; ++i) {
        const float gi = g[i];
        const float mi = __builtin_fmaf(gi, c.oneMinusBeta1, m[i] * c.beta1);
        const float vi = __builtin_fmaf(c.oneMinusBeta2 * gi, gi, v[i] * c.beta2);
        const float denom = __builtin_sqrtf(vi) / c.biasCorrection2Sqrt + c.eps;
        p[i] = p[i] * c.decay + c.negStepSize * mi / denom;
        m[i] = mi;
        v[i] = vi;
    }
}
#endif

/// One update in a single pass over the parameter, its gradient and its two moments, where they are
/// contiguous float32 and the CPU has AVX2 and FMA: the per-tensor ops read and write each array
/// several times and make nine LibTorch calls per parameter. Returns false where it does not apply.
bool fusedUpdate(torch::Tensor& param, const torch::Tensor& grad, torch::Tensor& expAvg,
                 torch::Tensor& expAvgSq, const UpdateScalars& c)
{
#if defined(__x86_64__)
    static const bool cpuHasIt = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (!cpuHasIt) return false;
    for (const torch::Tensor* t :
         std::initializer_list<const torch::Tensor*>{&param, &grad, &expAvg, &expAvgSq})
        if (t->scalar_type() != torch::kFloat || !t->is_contiguous() || !t->device().is_cpu() ||
            t->numel() != param.numel())
            return false;
    float* p = param.data_ptr<float>();
    float* m = expAvg.data_ptr<float>();
    float* v = expAvgSq.data_ptr<float>();
    const float* g = grad.data_ptr<float>();
    at::parallel_for(0, param.numel(), 1 << 14,
                     [=](std::int64_t begin, std::int64_t end) { updateRange(p, m, v, g, begin, end, c); });
    torch::autograd::impl::bump_version(param); // as the in-place ops would
    return true;
#else
    (void)param, (void)grad, (void)expAvg, (void)expAvgSq, (void)c;
    return false;
#endif
}

bool isLayerNorm(const torch::nn::Module& m)
{
    return dynamic_cast<const torch::nn::LayerNormImpl*>(&m) != nullptr;
}

} // namespace

AdamW::AdamW(std::vector<ParamGroup> groups, double beta1, double beta2, double eps)
    : m_beta1(beta1)
    , m_beta2(beta2)
    , m_eps(eps)
{
    if (!(beta1 >= 0 && beta1 < 1)) throw Error("AdamW: beta1 must be in [0, 1), found " + numberText(beta1));
    if (!(beta2 >= 0 && beta2 < 1)) throw Error("AdamW: beta2 must be in [0, 1), found " + numberText(beta2));
    if (!(eps >= 0) || !std::isfinite(eps)) throw Error("AdamW: eps must be >= 0, found " + numberText(eps));
    std::unordered_map<const void*, std::string> tensors;
    std::set<std::string> names;
    torch::NoGradGuard noGrad;
    for (ParamGroup& group : groups) {
        if (!(group.weightDecay >= 0) || !std::isfinite(group.weightDecay))
            throw Error("AdamW: weight decay must be >= 0, found " + numberText(group.weightDecay));
        for (auto& [name, param] : group.params) {
            if (!param.defined()) throw Error("AdamW: parameter '" + name + "' is an undefined tensor");
            if (!param.is_floating_point())
                throw Error("AdamW: parameter '" + name + "' is not a floating-point tensor");
            if (!names.insert(name).second) throw Error("AdamW: parameter '" + name + "' is given twice");
            const auto [it, fresh] = tensors.emplace(param.unsafeGetTensorImpl(), name);
            if (!fresh)
                throw Error("AdamW: parameters '" + it->second + "' and '" + name + "' are the same tensor");
            Slot slot;
            slot.name = name;
            slot.param = param;
            slot.weightDecay = group.weightDecay;
            slot.expAvg = torch::zeros_like(param);
            slot.expAvgSq = torch::zeros_like(param);
            m_slots.push_back(std::move(slot));
        }
    }
}

void AdamW::step(double lr)
{
    torch::NoGradGuard noGrad;
    for (Slot& s : m_slots) {
        const torch::Tensor grad = s.param.grad();
        if (!grad.defined()) continue;
        if (grad.is_sparse()) throw Error("AdamW: parameter '" + s.name + "' has a sparse gradient");
        ++s.step;
        // The order of operations and the double scalars are those of PyTorch's _single_tensor_adamw.
        const double t = double(s.step);
        const double biasCorrection1 = 1 - std::pow(m_beta1, t);
        const double biasCorrection2 = 1 - std::pow(m_beta2, t);
        const double stepSize = lr / biasCorrection1;
        const double biasCorrection2Sqrt = std::sqrt(biasCorrection2);
        if (fusedUpdate(s.param, grad, s.expAvg, s.expAvgSq,
                        {float(1 - lr * s.weightDecay), float(m_beta1), float(1 - m_beta1), float(m_beta2),
                         float(1 - m_beta2), float(biasCorrection2Sqrt), float(m_eps), float(-stepSize)})) {
            ++m_onePassUpdates;
            continue;
        }
        s.param.mul_(1 - lr * s.weightDecay);
        s.expAvg.mul_(m_beta1).add_(grad, 1 - m_beta1);
        s.expAvgSq.mul_(m_beta2).addcmul_(grad, grad, 1 - m_beta2);
        const torch::Tensor denom = (s.expAvgSq.sqrt() / biasCorrection2Sqrt).add_(m_eps);
        s.param.addcdiv_(s.expAvg, denom, -stepSize);
    }
    ++m_steps;
}

void AdamW::zeroGrad()
{
    for (Slot& s : m_slots)
        s.param.mutable_grad() = torch::Tensor();
}

std::map<std::string, torch::Tensor> AdamW::state() const
{
    std::map<std::string, torch::Tensor> out;
    for (const Slot& s : m_slots) {
        out[s.name + ".exp_avg"] = s.expAvg.clone();
        out[s.name + ".exp_avg_sq"] = s.expAvgSq.clone();
        out[s.name + ".step"] = torch::scalar_tensor(s.step, torch::kLong);
    }
    out["step"] = torch::scalar_tensor(m_steps, torch::kLong);
    return out;
}

void AdamW::loadState(const std::map<std::string, torch::Tensor>& state)
{
    std::set<std::string> expected{"step"};
    for (const Slot& s : m_slots)
        expected.insert({s.name + ".exp_avg", s.name + ".exp_avg_sq", s.name + ".step"});
    for (const auto& item : state)
        if (!expected.count(item.first))
            throw Error("optimizer state: unexpected tensor '" + item.first +
                        "' (no such parameter in this model's optimizer)");

    // Everything is checked and copied before anything is replaced: a bad state changes nothing.
    torch::NoGradGuard noGrad;
    const std::int64_t steps = restoredCount(state, "step");
    std::vector<Slot> restored = m_slots;
    for (Slot& s : restored) {
        s.expAvg = restoredMoment(state, s.name + ".exp_avg", s.param);
        s.expAvgSq = restoredMoment(state, s.name + ".exp_avg_sq", s.param);
        s.step = restoredCount(state, s.name + ".step");
        if (s.step > steps)
            throw Error("optimizer state: tensor '" + s.name + ".step' (" + std::to_string(s.step) +
                        ") exceeds 'step' (" + std::to_string(steps) + ")");
    }
    m_slots = std::move(restored);
    m_steps = steps;
}

std::vector<ParamGroup> decayGroups(const torch::nn::Module& module, double weightDecay, bool decayLayerNorm)
{
    std::unordered_set<const void*> layerNormTensors;
    auto collect = [&](const torch::nn::Module& m) {
        if (isLayerNorm(m))
            for (const torch::Tensor& p : m.parameters(/*recurse=*/false))
                layerNormTensors.insert(p.unsafeGetTensorImpl());
    };
    collect(module);
    for (const auto& item : module.named_modules(std::string(), /*include_self=*/false))
        collect(*item.value());

    std::vector<ParamGroup> groups(2);
    groups[0].weightDecay = weightDecay;
    groups[1].weightDecay = 0.0;
    std::unordered_set<const void*> seen;
    for (const auto& item : module.named_parameters(/*recurse=*/true)) {
        const torch::Tensor& p = item.value();
        if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
        const std::string& name = item.key();
        const std::size_t dot = name.rfind('.');
        const bool isBias =
            name.compare(dot == std::string::npos ? 0 : dot + 1, std::string::npos, "bias") == 0;
        const bool inLayerNorm = layerNormTensors.count(p.unsafeGetTensorImpl()) > 0;
        const bool decays = !isBias && !(inLayerNorm && !decayLayerNorm);
        groups[decays ? 0 : 1].params.emplace_back(name, p);
    }
    return groups;
}

double clipGradNorm(const torch::nn::Module& module, double maxNorm)
{
    if (!(maxNorm > 0) || !std::isfinite(maxNorm))
        throw Error("gradient clipping: the maximum norm must be positive, found " + numberText(maxNorm));
    torch::NoGradGuard noGrad;
    std::vector<torch::Tensor> grads;
    std::unordered_set<const void*> seen;
    for (const torch::Tensor& p : module.parameters(/*recurse=*/true)) {
        if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
        const torch::Tensor g = p.grad();
        if (g.defined()) grads.push_back(g);
    }
    if (grads.empty()) return 0.0;

    // As torch.nn.utils.clip_grad_norm_ in torch 1.13: per-tensor norms over all dimensions, the
    // norm of those, and `max_norm / (total + 1e-6)` evaluated as Tensor.__rtruediv__ does.
    std::vector<torch::Tensor> norms;
    norms.reserve(grads.size());
    for (const torch::Tensor& g : grads) {
        std::vector<std::int64_t> dims(std::size_t(g.dim()));
        for (std::int64_t d = 0; d < g.dim(); ++d)
            dims[std::size_t(d)] = d;
        norms.push_back(torch::norm(g.detach(), 2, dims, false));
    }
    const torch::Tensor total = torch::norm(torch::stack(norms), 2, {0}, false);
    const torch::Tensor coefficient = torch::clamp_max((total + 1e-6).reciprocal() * maxNorm, 1.0);
    for (torch::Tensor& g : grads)
        g.detach().mul_(coefficient);
    return total.item<double>();
}

} // namespace outlierlens
