// Building blocks shared by the decoder layouts: dtype-keeping linear, norm and embedding modules, rotary
// tables, the attention from projections (attentionHalf) and from scores (attend) with every variant, and
// the FFN half: the order of capture points and quantizers, once.

#include "model/decoder_modules.h"
#include "model/linear.h"

#include "common/error.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

namespace outlierlens::decoder {

torch::Tensor weightAs(const torch::Tensor& w, torch::ScalarType dtype)
{
    return w.scalar_type() == dtype ? w : w.to(dtype);
}

LinearImpl::LinearImpl(int in, int out, bool withBias, bool conv1d_)
    : conv1d(conv1d_)
{
    // torch::empty touches no memory: a model that is about to load weights costs nothing here.
    weight = register_parameter("weight", conv1d ? torch::empty({in, out}) : torch::empty({out, in}));
    if (withBias) bias = register_parameter("bias", torch::empty({out}));
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) const
{
    const torch::Tensor w = weightAs(weight, x.scalar_type());
    const torch::Tensor b = bias.defined() ? weightAs(bias, x.scalar_type()) : torch::Tensor();
    return linearLayer(x, w, b, conv1d); // conv1d: HF Conv1D's [in, out] weight
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x, const std::string& activationName) const
{
    if (activationName != "relu") return activation(forward(x), activationName);
    const torch::Tensor b = bias.defined() ? weightAs(bias, x.scalar_type()) : torch::Tensor();
    return linearRelu(x, weightAs(weight, x.scalar_type()), b, conv1d);
}

torch::Tensor LinearImpl::ensureBias()
{
    if (!bias.defined())
        bias = register_parameter("bias", torch::zeros({weight.size(conv1d ? 1 : 0)}, weight.options()));
    return bias;
}

NormImpl::NormImpl(int size, double eps_, bool rms)
    : NormImpl(size, eps_, rms ? Kind::Rms : Kind::Layer)
{}

NormImpl::NormImpl(int size, double eps_, Kind kind_)
    : eps(eps_)
    , kind(kind_)
{
    weight = register_parameter("weight", torch::empty({size}));
    if (kind == Kind::Layer) bias = register_parameter("bias", torch::empty({size}));
}

torch::Tensor NormImpl::forward(const torch::Tensor& input) const
{
    const torch::Tensor x =
        inputRotation.defined() ? torch::matmul(input, weightAs(inputRotation, input.scalar_type())) : input;
    torch::Tensor out;
    if (kind == Kind::Layer && meanAxis.defined()) {
        // A LayerNorm in a rotated basis: the mean is the component along the rotated ones vector.
        const torch::Tensor u = weightAs(meanAxis, x.scalar_type());
        const torch::Tensor y = x - torch::matmul(x, u).unsqueeze(-1) * u;
        out =
            y * torch::rsqrt(y.pow(2).mean(-1, /*keepdim=*/true) + eps) * weightAs(weight, x.scalar_type()) +
            weightAs(bias, x.scalar_type());
    } else if (kind == Kind::Layer) {
        out = torch::layer_norm(x, {x.size(-1)}, weightAs(weight, x.scalar_type()),
                                weightAs(bias, x.scalar_type()), eps);
    } else {
        const torch::Tensor h = x.to(torch::kFloat);
        const torch::Tensor variance = h.pow(2).mean(-1, /*keepdim=*/true);
        if (kind == Kind::GemmaRms) // Gemma2RMSNorm: float32 throughout, times (1 + w), then the cast
            out = (h * torch::rsqrt(variance + eps) * (1.0 + weight.to(torch::kFloat))).to(x.scalar_type());
        else // HF LlamaRMSNorm: float32 statistics, back to the input dtype, then the weight.
            out = weightAs(weight, x.scalar_type()) * (h * torch::rsqrt(variance + eps)).to(x.scalar_type());
    }
    return outputRotation.defined() ? torch::matmul(out, weightAs(outputRotation, out.scalar_type())) : out;
}

EmbeddingImpl::EmbeddingImpl(int rows, int dim)
{
    weight = register_parameter("weight", torch::empty({rows, dim}));
}

torch::Tensor EmbeddingImpl::forward(const torch::Tensor& ids, torch::ScalarType dtype) const
{
    return weightAs(torch::embedding(weight, ids), dtype);
}

void SinkParams::create(torch::nn::Module& owner, const AttentionVariant& variant, int numHeads, int headDim)
{
    switch (variant.bias) {
    case BiasKind::None:
        break;
    case BiasKind::Fixed:
        vBias = owner.register_parameter("v_bias", torch::zeros({numHeads * headDim}));
        break;
    case BiasKind::Context:
    case BiasKind::Attention:
        kBias = owner.register_parameter("k_bias", torch::empty({1, numHeads, 1, headDim}));
        vBias = owner.register_parameter("v_bias", torch::empty({1, numHeads, 1, headDim}));
        break;
    }
    if (variant.contextScale) {
        auto seq = owner.register_module("context_scale", std::make_shared<torch::nn::Module>("Sequential"));
        contextScale =
            seq->register_module("0", std::make_shared<LinearImpl>(numHeads * headDim, numHeads, true));
    }
}

void put(const CaptureScope& capture, CapturePoint point, const torch::Tensor& t)
{
    if (!capture.wants(point)) return;
    capture.put(point, t.scalar_type() == torch::kFloat ? t : t.to(torch::kFloat));
}

torch::Tensor activation(const torch::Tensor& x, const std::string& name)
{
    if (name == "gelu_new") // HF NewGELUActivation, written out (torch's tanh GELU is not bit-equal)
        return 0.5 * x * (1.0 + torch::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * torch::pow(x, 3.0))));
    if (name == "gelu_pytorch_tanh") return torch::gelu(x, "tanh");
    if (name == "gelu") return torch::gelu(x);
    if (name == "relu") return torch::relu(x);
    if (name == "silu") return torch::silu(x);
    throw Error("unsupported activation '" + name + "'");
}

torch::Tensor attend(torch::Tensor scores, const torch::Tensor& qh, const torch::Tensor& vh,
                     const torch::Tensor& gateInput, const AttentionVariant& variant, double scoreScale,
                     AttentionGates& gates, const SinkParams& sink, const PassContext& pass,
                     const CaptureScope& capture)
{
    const auto B = vh.size(0), H = vh.size(1), T = vh.size(2), dh = vh.size(3);
    const torch::ScalarType dtype = vh.scalar_type();
    put(capture, CapturePoint::AttnScores, scores);
    scores = capture.quant(QuantSite::AttnScores, scores);
    // Masked keys get the lowest float added (not -inf), so a padded query row whose keys are all
    // masked stays finite (uniform) instead of NaN; real rows give masked keys exactly 0.
    const torch::Tensor masked = scores + pass.additiveMask;
    const AttentionVariant softmaxVariant = variant.clipFadedIn(pass.clipStrength);

    torch::Tensor probs;     // [B, H, T, T] over the real keys
    torch::Tensor sinkProbs; // [B, H, T, 1] the prepended key slot of context/attention bias
    if (variant.softmax == SoftmaxKind::Sigmoid) {
        // sigmoid(s - log T) with T the keys of this pass; masked keys exactly 0.
        probs = torch::sigmoid(masked.to(torch::kFloat) - std::log(double(T)))
                    .masked_fill(pass.keyAllowed.logical_not(), 0.0);
    } else if (variant.bias == BiasKind::Context || variant.bias == BiasKind::Attention) {
        // A learnt key k' in a slot before the first key, visible to every query.
        const torch::Tensor kSink = weightAs(sink.kBias, dtype); // [1, H, 1, dh]
        const torch::Tensor sinkScores =
            torch::matmul(qh, kSink.transpose(-1, -2)) * scoreScale; // [B, H, T, 1]
        const torch::Tensor all = torch::softmax(torch::cat({sinkScores, masked}, -1).to(torch::kFloat), -1);
        sinkProbs = all.narrow(-1, 0, 1);
        // attention-bias: one softmax over [k'; K] (rows over the real keys sum to 1 - p_sink);
        // context-bias: P.V stays the plain softmax, the slot only weighs v'.
        probs = variant.bias == BiasKind::Attention
                    ? all.narrow(-1, 1, T)
                    : attentionSoftmax(masked.to(torch::kFloat), softmaxVariant, pass.keysSeen);
    } else {
        probs = attentionSoftmax(masked.to(torch::kFloat), softmaxVariant, pass.keysSeen);
    }
    probs = probs.to(dtype);
    if (sinkProbs.defined()) sinkProbs = sinkProbs.to(dtype);
    put(capture, CapturePoint::AttnProbs, probs);
    probs = capture.quant(QuantSite::AttnProbs, probs);
    put(capture, CapturePoint::AttnValues, vh);

    // [B, H, T, dh], laid out [B, T, H, dh] so that merging the heads at the end is a view.
    torch::Tensor context = activationProduct(probs, vh, 1.0, true);
    if (variant.bias == BiasKind::Attention) context = context + sinkProbs * weightAs(sink.vBias, dtype);
    put(capture, CapturePoint::AttnContext, context);
    context = capture.quant(QuantSite::AttnContext, context);
    if (variant.bias == BiasKind::Context) context = context + sinkProbs * weightAs(sink.vBias, dtype);
    if (variant.bias == BiasKind::Fixed) context = context + weightAs(sink.vBias, dtype).view({1, H, 1, dh});
    if (gates.enabled()) {
        // The gates are float32 (tiny), whatever the compute dtype.
        const torch::Tensor pi = gates.forward(gateInput.to(torch::kFloat)).to(dtype); // [B, H, T]
        put(capture, CapturePoint::AttnGate, pi);
        context = context * capture.quant(QuantSite::AttnGate, pi).unsqueeze(-1);
    }
    if (sink.contextScale) {
        const torch::Tensor scale =
            2.0 * torch::sigmoid(sink.contextScale->forward(gateInput)).permute({0, 2, 1});
        put(capture, CapturePoint::AttnGate, scale); // [B, H, T], in (0, 2)
        context = context * capture.quant(QuantSite::AttnGate, scale).unsqueeze(-1);
    }
    return context.permute({0, 2, 1, 3}).reshape({B, T, H * dh});
}

void rotaryTables(const DecoderConfig& config, const torch::Tensor& positions, PassContext& pass)
{
    const int dim = config.rotaryDim();
    const auto T = positions.size(1);
    double base = config.ropeTheta;
    if (config.ropeScalingType == "dynamic" && T > config.maxPositions) {
        const double f = config.ropeScalingFactor;
        base *= std::pow(f * double(T) / config.maxPositions - (f - 1.0), double(dim) / (dim - 2));
    }
    torch::Tensor invFreq =
        1.0 / torch::pow(base, torch::arange(0, dim, 2, torch::kLong).to(torch::kFloat) / double(dim));
    if (config.ropeScalingType == "llama3") {
        // transformers' _compute_llama3_parameters, in float32 as it runs.
        const double factor = config.ropeScalingFactor, low = config.ropeLowFreqFactor,
                     high = config.ropeHighFreqFactor, old = config.ropeOriginalMaxPositions;
        const double lowWavelen = old / low, highWavelen = old / high;
        const torch::Tensor wavelen = 2 * M_PI / invFreq;
        torch::Tensor scaled = torch::where(wavelen > lowWavelen, invFreq / factor, invFreq);
        const torch::Tensor smooth = (old / wavelen - low) / (high - low);
        const torch::Tensor smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
        const torch::Tensor medium =
            (wavelen < highWavelen).logical_not() & (wavelen > lowWavelen).logical_not();
        invFreq = torch::where(medium, smoothed, scaled);
    }
    torch::Tensor t = positions.to(torch::kFloat);
    if (config.ropeScalingType == "linear") t = t / config.ropeScalingFactor;
    const torch::Tensor freqs = t.unsqueeze(-1) * invFreq; // [B, T, dim / 2]
    const torch::Tensor emb = torch::cat({freqs, freqs}, -1);
    pass.cos = emb.cos().to(pass.dtype).unsqueeze(1);
    pass.sin = emb.sin().to(pass.dtype).unsqueeze(1);
    if (pass.sliding) {
        pass.sliding->cos = pass.cos;
        pass.sliding->sin = pass.sin;
    }
}

namespace {

torch::Tensor rotateHalf(const torch::Tensor& x)
{
    const auto half = x.size(-1) / 2;
    return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

/// x [B, n, T, d] rotated on its first rd dims (rd = the tables' width), the rest passed through.
torch::Tensor applyRotary(const torch::Tensor& x, const PassContext& pass)
{
    const auto rd = pass.cos.size(-1), d = x.size(-1);
    if (rd == d) return x * pass.cos + rotateHalf(x) * pass.sin;
    const torch::Tensor r = x.narrow(-1, 0, rd);
    return torch::cat({r * pass.cos + rotateHalf(r) * pass.sin, x.narrow(-1, rd, d - rd)}, -1);
}

} // namespace

torch::Tensor attentionHalf(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const HeadsSpec& spec, const torch::Tensor& gateInput,
                            const AttentionVariant& variant, AttentionGates& gates, const SinkParams& sink,
                            const PassContext& pass, const CaptureScope& capture)
{
    const auto B = q.size(0), T = q.size(1);
    const int nh = spec.numHeads, nkv = spec.numKvHeads, d = spec.headDim;
    auto heads = [&](const torch::Tensor& t, int n) { return t.view({B, T, n, d}).transpose(1, 2); };
    torch::Tensor qh = heads(capture.quant(QuantSite::Query, q), nh);
    torch::Tensor kh = heads(capture.quant(QuantSite::Key, k), nkv);
    torch::Tensor vh = heads(capture.quant(QuantSite::Value, v), nkv);
    if (spec.qNorm) qh = spec.qNorm->forward(qh);
    if (spec.kNorm) kh = spec.kNorm->forward(kh);
    qh = applyRotary(qh, pass);
    kh = applyRotary(kh, pass);
    if (nkv != nh) { // repeat_kv: query head h reads key/value head h / (nh / nkv)
        const int rep = nh / nkv;
        auto repeat = [&](const torch::Tensor& t) {
            return t.unsqueeze(2).expand({B, nkv, rep, T, d}).reshape({B, nh, T, d});
        };
        kh = repeat(kh);
        vh = repeat(vh);
    }
    torch::Tensor scores = activationProduct(qh, kh.transpose(2, 3), spec.scoreDivisor);
    if (spec.softcap > 0) scores = torch::tanh(scores / spec.softcap) * spec.softcap;
    return attend(scores, qh, vh, gateInput, variant, 1.0 / spec.scoreDivisor, gates, sink, pass, capture);
}

torch::Tensor ffnHalf(const torch::Tensor& m, const LinearImpl* gate, const LinearImpl& up,
                      const LinearImpl& down, const std::string& act, const CaptureScope& capture)
{
    torch::Tensor inner;
    if (capture.transforms()) { // the FFN's parts as sites of their own (the same values, unfused)
        const torch::Tensor u = capture.quant(QuantSite::FfnUp, up.forward(m));
        inner = gate ? capture.quant(QuantSite::FfnAct,
                                     activation(capture.quant(QuantSite::FfnGate, gate->forward(m)), act)) *
                           u
                     : activation(u, act);
    } else {
        inner = gate ? gate->forward(m, act) * up.forward(m) : up.forward(m, act);
    }
    if (down.inputRotation.defined()) // the input the down projection reads, as in the ViT block
        inner = torch::matmul(inner, weightAs(down.inputRotation, inner.scalar_type()));
    put(capture, CapturePoint::DownIn, inner);
    inner = capture.quant(QuantSite::FfnIntermediate, inner);
    torch::Tensor out = down.forward(inner);
    put(capture, CapturePoint::FfnOut, out);
    return capture.quant(QuantSite::FfnOut, out);
}

NormReaders preNormReaders(std::string name, int layer, QuantSite site, NormImpl& norm,
                           const std::vector<LinearImpl*>& linears, const AttentionGates* gates,
                           const SinkParams* sink)
{
    NormReaders r;
    r.name = std::move(name);
    r.layer = layer;
    r.site = site;
    r.weight = norm.weight;
    if (norm.kind == NormImpl::Kind::Layer) r.bias = norm.bias;
    r.onePlusWeight = norm.kind == NormImpl::Kind::GemmaRms;
    for (LinearImpl* l : linears)
        r.readers.push_back({l->weight, l->conv1d, 0, [l] { return l->ensureBias(); }});
    if (gates) gates->appendReaders(r.readers);
    if (sink && sink->contextScale) {
        LinearImpl* scale = sink->contextScale.get();
        r.readers.push_back({scale->weight, false, 0, [scale] { return scale->ensureBias(); }});
    }
    r.rotateNorm = [&norm](const torch::Tensor& meanAxis) { norm.meanAxis = meanAxis; };
    return r;
}

ResidualWriter residualWriter(LinearImpl& linear, bool down)
{
    ResidualWriter w{linear.weight, linear.conv1d, linear.bias, {}};
    if (down) w.rotateInput = [&linear](const torch::Tensor& rotation) { linear.inputRotation = rotation; };
    return w;
}

std::function<void(const torch::Tensor&)> finalNormRotation(NormImpl& norm, bool tiedHead)
{
    return [&norm, tiedHead](const torch::Tensor& q) {
        norm.inputRotation = q.t().contiguous();
        if (tiedHead) norm.outputRotation = q;
    };
}

ResidualStream DecoderLmImpl::residualStream()
{
    return ResidualStream::refused("rotating this layout's residual stream is not implemented");
}

torch::Tensor attnOut(const torch::Tensor& projected, const CaptureScope& capture)
{
    put(capture, CapturePoint::AttnOut, projected);
    return capture.quant(QuantSite::AttnOut, projected);
}

torch::Tensor blockOut(const torch::Tensor& out, const CaptureScope& capture)
{
    put(capture, CapturePoint::Residual, out);
    put(capture, CapturePoint::Out, out);
    return capture.quant(QuantSite::FfnResidual, out);
}

torch::Tensor DecoderLmImpl::logits(const torch::Tensor& lastHidden, const torch::Tensor& head) const
{
    return linearLayer(lastHidden, weightAs(head.defined() ? head : headWeight(), lastHidden.scalar_type()),
                       {});
}

} // namespace outlierlens::decoder
