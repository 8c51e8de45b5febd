#include "quant/transforms.h"

#include "common/error.h"
#include "common/text_format.h"

#include <torch/torch.h>

#include <cmath>
#include <optional>

namespace outlierlens {

std::string ModelTransform::describe() const
{
    std::vector<std::string> parts;
    if (smoothQuantAlpha) parts.push_back("smoothquant " + numberText(*smoothQuantAlpha));
    if (rotate) parts.push_back("hadamard rotation");
    return joinedText(parts, ", ");
}

at::Tensor ChannelMaxSink::transform(QuantSite site, int layer, const at::Tensor& batched)
{
    if (site != QuantSite::AttnNorm && site != QuantSite::FfnNorm) return batched;
    const torch::Tensor m = batched.detach().abs().to(torch::kFloat).reshape({-1, batched.size(-1)}).amax(0);
    torch::Tensor& slot = m_maxima[{layer, site}];
    slot = slot.defined() ? torch::maximum(slot, m) : m;
    return batched;
}

double ChannelMaxSink::overallMax() const
{
    double best = 0;
    for (const auto& entry : m_maxima)
        best = std::max(best, entry.second.max().item<double>());
    return best;
}

void smoothQuant(const std::vector<NormReaders>& norms,
                 const std::map<std::pair<int, QuantSite>, torch::Tensor>& maxima, double alpha)
{
    if (!(alpha >= 0 && alpha <= 1)) throw Error("the SmoothQuant alpha must be in [0, 1]");
    torch::NoGradGuard noGrad;
    for (const NormReaders& n : norms) {
        const auto found = maxima.find({n.layer, n.site});
        if (found == maxima.end())
            throw Error("SmoothQuant: the calibration batches never reached " + n.name);
        const std::int64_t d = n.weight.size(0);
        if (found->second.size(0) != d)
            throw Error("SmoothQuant: " + n.name + " has " + std::to_string(d) + " channels, its output " +
                        std::to_string(found->second.size(0)));
        // max |W_j| over every output of every reader of channel j.
        torch::Tensor weightMax = torch::zeros({d});
        for (const NormReader& r : n.readers) {
            const torch::Tensor columns = r.weight.abs().to(torch::kFloat).amax(r.inputOnRows ? 1 : 0);
            torch::Tensor slot = weightMax.narrow(0, r.first, columns.size(0));
            slot.copy_(torch::maximum(slot, columns));
        }
        const torch::Tensor s =
            (found->second.clamp_min(1e-5).pow(alpha) / weightMax.clamp_min(1e-5).pow(1.0 - alpha))
                .clamp_min(1e-5);
        const auto scaled = [](const torch::Tensor& t, const torch::Tensor& by) {
            t.copy_(t.to(torch::kFloat) * by);
        };
        if (n.onePlusWeight)
            n.weight.copy_((1.0 + n.weight.to(torch::kFloat)) / s - 1.0);
        else
            scaled(n.weight, 1.0 / s);
        if (n.bias.defined()) scaled(n.bias, 1.0 / s);
        for (const NormReader& r : n.readers) {
            const std::int64_t in = r.weight.size(r.inputOnRows ? 0 : 1);
            const torch::Tensor part = s.narrow(0, r.first, in);
            scaled(r.weight, r.inputOnRows ? part.unsqueeze(1) : part.unsqueeze(0));
        }
    }
}

torch::Tensor sylvesterHadamard(std::int64_t n)
{
    if (n < 1 || (n & (n - 1)) != 0) throw Error("a Sylvester Hadamard matrix needs a power of 2");
    torch::Tensor h = torch::ones({1, 1}, torch::kDouble);
    while (h.size(0) < n)
        h = torch::cat({torch::cat({h, h}, 1), torch::cat({h, -h}, 1)}, 0);
    return h;
}

torch::Tensor randomizedHadamard(std::int64_t d, std::uint64_t seed)
{
    if (d < 1) throw Error("a rotation needs at least one dimension");
    const std::int64_t pow2 = d & -d; // the largest power of 2 dividing d
    const std::int64_t rest = d / pow2;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    torch::Tensor q = sylvesterHadamard(pow2) / std::sqrt(double(pow2));
    if (rest > 1) {
        const auto [orthogonal, r] = torch::linalg_qr(torch::randn({rest, rest}, gen, torch::kDouble));
        // Fix QR's sign freedom so the factor is a draw from the uniform (Haar) distribution.
        const torch::Tensor haar = (orthogonal * torch::sign(torch::diagonal(r)).unsqueeze(0)).contiguous();
        // The Kronecker product q (x) haar.
        q = (q.unsqueeze(1).unsqueeze(3) * haar.unsqueeze(0).unsqueeze(2)).reshape({d, d});
    }
    const torch::Tensor signs = torch::randint(0, 2, {d}, gen, torch::kLong).to(torch::kDouble) * 2 - 1;
    return signs.unsqueeze(1) * q;
}

void rotateResidualStream(const ResidualStream& stream, std::uint64_t seed)
{
    if (!stream.refusal.empty()) throw Error("rotation: " + stream.refusal);
    if (stream.tables.empty()) throw Error("rotation: the model has no embedding table");
    const std::int64_t d = stream.tables.front().size(1);
    const torch::Tensor q = randomizedHadamard(d, seed);
    torch::NoGradGuard noGrad;
    if (stream.prepare) stream.prepare();
    // Weights as [out, in] float64, and back.
    const auto outIn = [](const torch::Tensor& w, bool rows) {
        return (rows ? w.t() : w).to(torch::kDouble);
    };
    const auto store = [](const torch::Tensor& w, const torch::Tensor& v, bool rows) {
        w.copy_(rows ? v.t() : v);
    };
    for (const NormReaders& n : stream.norms) {
        // Slice readers (per-head gates) read all channels from now on, through zeros outside their slice.
        for (const NormReader& r : n.readers) {
            const std::int64_t in = r.weight.size(r.inputOnRows ? 0 : 1);
            if (r.first == 0 && in == d) continue;
            if (r.inputOnRows) throw Error("rotation: a Conv1D reads a slice of " + n.name);
            torch::Tensor wide = torch::zeros({r.weight.size(0), d}, r.weight.options());
            wide.narrow(1, r.first, in).copy_(r.weight);
            torch::Tensor handle = r.weight; // the parameter itself: set_data changes it in the module
            handle.set_data(wide);
        }
        torch::Tensor gamma = n.weight.to(torch::kDouble);
        if (n.onePlusWeight) gamma = gamma + 1.0;
        const bool shifted = n.bias.defined() && n.bias.abs().max().item<double>() > 0;
        for (const NormReader& r : n.readers) {
            torch::Tensor w = outIn(r.weight, r.inputOnRows);
            if (shifted) {
                if (!r.ensureBias) throw Error("rotation: a layer reading " + n.name + " cannot take a bias");
                const torch::Tensor b = r.ensureBias();
                b.copy_(b.to(torch::kDouble) + w.matmul(n.bias.to(torch::kDouble)));
            }
            store(r.weight, (w * gamma.unsqueeze(0)).matmul(q), r.inputOnRows);
        }
        n.weight.fill_(n.onePlusWeight ? 0.0 : 1.0);
        if (n.bias.defined()) n.bias.zero_();
        n.rotateNorm(
            (q.t().matmul(torch::ones({d}, torch::kDouble)) / std::sqrt(double(d))).to(torch::kFloat));
    }
    std::optional<torch::Tensor> online;
    for (const ResidualWriter& w : stream.writers) {
        torch::Tensor m = q.t().matmul(outIn(w.weight, w.inputOnRows));
        if (w.rotateInput) {
            if (!online) online = randomizedHadamard(m.size(1), seed + 1);
            m = m.matmul(*online);
            w.rotateInput(online->to(torch::kFloat));
        }
        store(w.weight, m, w.inputOnRows);
        if (w.bias.defined()) w.bias.copy_(w.bias.to(torch::kDouble).matmul(q));
    }
    for (const torch::Tensor& table : stream.tables)
        table.copy_(table.to(torch::kDouble).matmul(q));
    stream.rotateFinalNorm(q.to(torch::kFloat));
}

void checkTransformApplies(torch::nn::Module& module, const ModelTransform& transform)
{
    if (!transform.any()) return;
    preNormsOf(module);
    if (transform.rotate)
        if (const ResidualStream stream = residualStreamOf(module); !stream.refusal.empty())
            throw Error("rotation: " + stream.refusal);
}

TransformReport applyTransform(torch::nn::Module& module, const ModelTransform& transform,
                               const std::function<void(ActivationSink&)>& calibrate)
{
    TransformReport report;
    if (!transform.any()) return report;
    checkTransformApplies(module, transform); // refused before anything changes
    // A 16-bit checkpoint's tensors become float32 first (set_data: the module keeps its tensors), so the
    // transform itself rounds nothing: in float16, s-scaled norm weights and biases alone moved the normed
    // activations by 2e-4 relative.
    {
        torch::NoGradGuard noGrad;
        const auto promote = [](torch::Tensor t) {
            if (t.scalar_type() == torch::kHalf || t.scalar_type() == torch::kBFloat16)
                t.set_data(t.to(torch::kFloat));
        };
        for (const torch::Tensor& p : module.parameters(true))
            promote(p);
        for (const torch::Tensor& b : module.buffers(true))
            promote(b);
    }
    const std::vector<NormReaders> norms = preNormsOf(module);
    const ResidualStream stream = transform.rotate ? residualStreamOf(module) : ResidualStream{};
    if (!stream.refusal.empty()) throw Error("rotation: " + stream.refusal);
    ChannelMaxSink before;
    calibrate(before);
    report.normedMaxBefore = before.overallMax();
    if (transform.smoothQuantAlpha) smoothQuant(norms, before.maxima(), *transform.smoothQuantAlpha);
    if (transform.rotate) rotateResidualStream(stream, transform.rotationSeed);
    ChannelMaxSink after;
    calibrate(after);
    report.normedMaxAfter = after.overallMax();
    return report;
}

} // namespace outlierlens
