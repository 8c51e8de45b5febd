// LlamaForCausalLM as transformers v4.31 computes it: RMSNorm in float32, rotary embeddings in the
// rotate_half layout (tables in float32, cast to the activations' dtype), grouped-query attention
// (repeat_kv), scores divided by sqrt(d_head), softmax in float32, SwiGLU MLP, untied lm_head.
// The families of the same layout, as transformers 4.47.1 computes them: LLaMA 3's "llama3" rotary
// scaling, Qwen2's q/k/v biases, Mistral's head_dim and sliding window (the mask, decoder_network.cpp).

#include "model/decoder_modules.h"
#include "model/linear.h"

#include <torch/torch.h>

#include <cmath>

namespace outlierlens::decoder {
namespace {

torch::Tensor rotateHalf(const torch::Tensor& x)
{
    const auto half = x.size(-1) / 2;
    return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

class LlamaAttentionImpl : public torch::nn::Module
{
public:
    explicit LlamaAttentionImpl(const DecoderConfig& c)
        : numHeads(c.numHeads)
        , numKvHeads(c.numKvHeads)
        , headDim(c.headDim())
        , variant(c.variant)
    {
        const int d = c.hiddenSize, q = c.numHeads * c.headDim(), kv = c.numKvHeads * c.headDim();
        const bool bias = c.attentionBias;
        q_proj = register_module("q_proj", std::make_shared<LinearImpl>(d, q, bias));
        k_proj = register_module("k_proj", std::make_shared<LinearImpl>(d, kv, bias));
        v_proj = register_module("v_proj", std::make_shared<LinearImpl>(d, kv, bias));
        o_proj = register_module("o_proj", std::make_shared<LinearImpl>(q, d, false));
        gates.create(*this, c.variant, c.numHeads, c.headDim());
        sink.create(*this, c.variant, c.numHeads, c.headDim());
    }

    torch::Tensor forward(const torch::Tensor& x, const PassContext& pass, const CaptureScope& capture)
    {
        const auto B = x.size(0), T = x.size(1);
        auto heads = [&](const torch::Tensor& t, int n) {
            return t.view({B, T, n, headDim}).transpose(1, 2);
        };
        torch::Tensor qh = heads(capture.quant(QuantSite::Query, q_proj->forward(x)), numHeads);
        torch::Tensor kh = heads(capture.quant(QuantSite::Key, k_proj->forward(x)), numKvHeads);
        torch::Tensor vh = heads(capture.quant(QuantSite::Value, v_proj->forward(x)), numKvHeads);
        qh = qh * pass.cos + rotateHalf(qh) * pass.sin;
        kh = kh * pass.cos + rotateHalf(kh) * pass.sin;
        if (numKvHeads != numHeads) { // repeat_kv: query head h reads key/value head h / (H / H_kv)
            const int rep = numHeads / numKvHeads;
            auto repeat = [&](const torch::Tensor& t) {
                return t.unsqueeze(2)
                    .expand({B, numKvHeads, rep, T, headDim})
                    .reshape({B, numHeads, T, headDim});
            };
            kh = repeat(kh);
            vh = repeat(vh);
        }
        const double root = std::sqrt(double(headDim));
        const torch::Tensor scores = activationProduct(qh, kh.transpose(2, 3), root);
        const torch::Tensor context =
            attend(scores, qh, vh, x, variant, 1.0 / root, gates, sink, pass, capture);
        return o_proj->forward(context);
    }

    std::shared_ptr<LinearImpl> q_proj, k_proj, v_proj, o_proj;
    AttentionGates gates;
    SinkParams sink;
    int numHeads, numKvHeads, headDim;
    AttentionVariant variant;
};

class LlamaMlpImpl : public torch::nn::Module
{
public:
    explicit LlamaMlpImpl(const DecoderConfig& c)
        : act(c.activation)
    {
        gate_proj = register_module("gate_proj",
                                    std::make_shared<LinearImpl>(c.hiddenSize, c.intermediateSize, false));
        up_proj =
            register_module("up_proj", std::make_shared<LinearImpl>(c.hiddenSize, c.intermediateSize, false));
        down_proj = register_module("down_proj",
                                    std::make_shared<LinearImpl>(c.intermediateSize, c.hiddenSize, false));
    }
    std::shared_ptr<LinearImpl> gate_proj, up_proj, down_proj;
    std::string act;
};

class LlamaLayerImpl : public torch::nn::Module
{
public:
    explicit LlamaLayerImpl(const DecoderConfig& c)
    {
        self_attn = register_module("self_attn", std::make_shared<LlamaAttentionImpl>(c));
        mlp = register_module("mlp", std::make_shared<LlamaMlpImpl>(c));
        input_layernorm =
            register_module("input_layernorm", std::make_shared<NormImpl>(c.hiddenSize, c.normEps, true));
        post_attention_layernorm = register_module("post_attention_layernorm",
                                                   std::make_shared<NormImpl>(c.hiddenSize, c.normEps, true));
    }

    torch::Tensor forward(torch::Tensor x, const PassContext& pass, const CaptureScope& capture)
    {
        const torch::Tensor a = capture.quant(QuantSite::AttnNorm, input_layernorm->forward(x));
        torch::Tensor attnOut = self_attn->forward(a, pass, capture);
        put(capture, CapturePoint::AttnOut, attnOut);
        attnOut = capture.quant(QuantSite::AttnOut, attnOut);
        x = capture.quant(QuantSite::AttnResidual, x + attnOut);

        const torch::Tensor m = capture.quant(QuantSite::FfnNorm, post_attention_layernorm->forward(x));
        torch::Tensor inner = mlp->gate_proj->forward(m, mlp->act) * mlp->up_proj->forward(m);
        put(capture, CapturePoint::DownIn, inner);
        inner = capture.quant(QuantSite::FfnIntermediate, inner);
        torch::Tensor ffnOut = mlp->down_proj->forward(inner);
        put(capture, CapturePoint::FfnOut, ffnOut);
        ffnOut = capture.quant(QuantSite::FfnOut, ffnOut);
        const torch::Tensor out = x + ffnOut;
        put(capture, CapturePoint::Residual, out);
        put(capture, CapturePoint::Out, out);
        return capture.quant(QuantSite::FfnResidual, out);
    }

    std::shared_ptr<LlamaAttentionImpl> self_attn;
    std::shared_ptr<LlamaMlpImpl> mlp;
    std::shared_ptr<NormImpl> input_layernorm, post_attention_layernorm;
};

class LlamaLmImpl : public DecoderLmImpl
{
public:
    explicit LlamaLmImpl(const DecoderConfig& c)
        : DecoderLmImpl("LlamaForCausalLM")
        , config(c)
    {
        auto model = register_module("model", std::make_shared<torch::nn::Module>("LlamaModel"));
        embed_tokens = model->register_module("embed_tokens",
                                              std::make_shared<EmbeddingImpl>(c.vocabSize, c.hiddenSize));
        layers = model->register_module("layers", torch::nn::ModuleList());
        for (int i = 0; i < c.numLayers; ++i) {
            auto layer = std::make_shared<LlamaLayerImpl>(c);
            layers->push_back(layer);
            blocks.push_back(layer);
        }
        norm = model->register_module("norm", std::make_shared<NormImpl>(c.hiddenSize, c.normEps, true));
        if (!c.tieWordEmbeddings)
            lm_head =
                register_module("lm_head", std::make_shared<LinearImpl>(c.hiddenSize, c.vocabSize, false));
    }

    /// cos/sin [B, 1, T, d_head] at the positions, as LlamaRotaryEmbedding builds them (float32).
    void rotaryTables(const torch::Tensor& positions, PassContext& pass) const
    {
        const int dim = config.headDim();
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
    }

    torch::Tensor body(const torch::Tensor& ids, const torch::Tensor& positions, PassContext& pass) override
    {
        const CaptureScope top(pass.sink, -1);
        rotaryTables(positions, pass);
        torch::Tensor x = embed_tokens->forward(ids, pass.dtype);
        put(top, CapturePoint::Embeddings, x);
        x = top.quant(QuantSite::EmbeddingSum, x);
        for (std::size_t i = 0; i < blocks.size(); ++i)
            x = blocks[i]->forward(x, pass, CaptureScope(pass.sink, int(i)));
        return top.quant(QuantSite::FinalNorm, norm->forward(x));
    }

    torch::Tensor headWeight() const override { return lm_head ? lm_head->weight : embed_tokens->weight; }
    std::string tiedHeadName() const override { return lm_head ? std::string() : "lm_head.weight"; }
    std::string embeddingName() const override { return "model.embed_tokens.weight"; }

    DecoderConfig config;
    std::shared_ptr<EmbeddingImpl> embed_tokens;
    torch::nn::ModuleList layers{nullptr};
    std::vector<std::shared_ptr<LlamaLayerImpl>> blocks;
    std::shared_ptr<NormImpl> norm;
    std::shared_ptr<LinearImpl> lm_head;
};

} // namespace

std::shared_ptr<DecoderLmImpl> makeLlama(const DecoderConfig& config)
{
    return std::make_shared<LlamaLmImpl>(config);
}

} // namespace outlierlens::decoder
