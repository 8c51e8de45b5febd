// Gemma2ForCausalLM as transformers v4.47.1 computes it (eager attention): token embeddings times
// sqrt(hidden) rounded to the compute dtype, (1 + w) RMSNorm in float32, four norms per layer (the
// attention and FFN outputs are normalised before the residual adds them), scores times
// query_pre_attn_scalar^-1/2 and soft-capped (cap * tanh(s / cap)) before the mask, a sliding window on
// the even layers, GeGLU (gelu_pytorch_tanh) MLP, the head tied to the embeddings, soft-capped logits.

#include "model/decoder_modules.h"
#include "model/linear.h"

#include <torch/torch.h>

#include <cmath>

namespace outlierlens::decoder {
namespace {

constexpr NormImpl::Kind kGemmaNorm = NormImpl::Kind::GemmaRms;

class Gemma2AttentionImpl : public torch::nn::Module
{
public:
    explicit Gemma2AttentionImpl(const DecoderConfig& c)
        : variant(c.variant)
    {
        const int d = c.hiddenSize, q = c.numHeads * c.headDim(), kv = c.numKvHeads * c.headDim();
        q_proj = register_module("q_proj", std::make_shared<LinearImpl>(d, q, false));
        k_proj = register_module("k_proj", std::make_shared<LinearImpl>(d, kv, false));
        v_proj = register_module("v_proj", std::make_shared<LinearImpl>(d, kv, false));
        o_proj = register_module("o_proj", std::make_shared<LinearImpl>(q, d, false));
        spec = {c.numHeads, c.numKvHeads, c.headDim(), std::sqrt(c.queryPreAttnScalar), c.attnLogitSoftcap};
        gates.create(*this, c.variant, c.numHeads, c.headDim());
        sink.create(*this, c.variant, c.numHeads, c.headDim());
    }

    torch::Tensor forward(const torch::Tensor& x, const PassContext& pass, const CaptureScope& capture)
    {
        return o_proj->forward(attentionHalf(q_proj->forward(x), k_proj->forward(x), v_proj->forward(x), spec,
                                             x, variant, gates, sink, pass, capture));
    }

    std::shared_ptr<LinearImpl> q_proj, k_proj, v_proj, o_proj;
    HeadsSpec spec;
    AttentionGates gates;
    SinkParams sink;
    AttentionVariant variant;
};

class Gemma2MlpImpl : public torch::nn::Module
{
public:
    explicit Gemma2MlpImpl(const DecoderConfig& c)
        : act(c.activation)
    {
        const int d = c.hiddenSize, f = c.intermediateSize;
        gate_proj = register_module("gate_proj", std::make_shared<LinearImpl>(d, f, false));
        up_proj = register_module("up_proj", std::make_shared<LinearImpl>(d, f, false));
        down_proj = register_module("down_proj", std::make_shared<LinearImpl>(f, d, false));
    }
    std::shared_ptr<LinearImpl> gate_proj, up_proj, down_proj;
    std::string act;
};

class Gemma2LayerImpl : public torch::nn::Module
{
public:
    Gemma2LayerImpl(const DecoderConfig& c, int layer)
        : sliding(c.slidingWindow > 0 && layer % 2 == 0)
    {
        self_attn = register_module("self_attn", std::make_shared<Gemma2AttentionImpl>(c));
        mlp = register_module("mlp", std::make_shared<Gemma2MlpImpl>(c));
        auto norm = [&](const char* name) {
            return register_module(name, std::make_shared<NormImpl>(c.hiddenSize, c.normEps, kGemmaNorm));
        };
        input_layernorm = norm("input_layernorm");
        post_attention_layernorm = norm("post_attention_layernorm");
        pre_feedforward_layernorm = norm("pre_feedforward_layernorm");
        post_feedforward_layernorm = norm("post_feedforward_layernorm");
    }

    torch::Tensor forward(torch::Tensor x, const PassContext& pass, const CaptureScope& capture)
    {
        const PassContext& masks = sliding && pass.sliding ? *pass.sliding : pass;
        const torch::Tensor a = capture.quant(QuantSite::AttnNorm, input_layernorm->forward(x));
        const torch::Tensor attn = attnOut(self_attn->forward(a, masks, capture), capture);
        x = capture.quant(QuantSite::AttnResidual, x + post_attention_layernorm->forward(attn));
        const torch::Tensor m = capture.quant(QuantSite::FfnNorm, pre_feedforward_layernorm->forward(x));
        const torch::Tensor ffn =
            ffnHalf(m, mlp->gate_proj.get(), *mlp->up_proj, *mlp->down_proj, mlp->act, capture);
        return blockOut(x + post_feedforward_layernorm->forward(ffn), capture);
    }

    bool sliding;
    std::shared_ptr<Gemma2AttentionImpl> self_attn;
    std::shared_ptr<Gemma2MlpImpl> mlp;
    std::shared_ptr<NormImpl> input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
        post_feedforward_layernorm;
};

class Gemma2LmImpl : public DecoderLmImpl
{
public:
    explicit Gemma2LmImpl(const DecoderConfig& c)
        : DecoderLmImpl("Gemma2ForCausalLM")
        , config(c)
    {
        auto model = register_module("model", std::make_shared<torch::nn::Module>("Gemma2Model"));
        embed_tokens = model->register_module("embed_tokens",
                                              std::make_shared<EmbeddingImpl>(c.vocabSize, c.hiddenSize));
        layers = model->register_module("layers", torch::nn::ModuleList());
        for (int i = 0; i < c.numLayers; ++i) {
            auto layer = std::make_shared<Gemma2LayerImpl>(c, i);
            layers->push_back(layer);
            blocks.push_back(layer);
        }
        norm =
            model->register_module("norm", std::make_shared<NormImpl>(c.hiddenSize, c.normEps, kGemmaNorm));
    }

    torch::Tensor body(const torch::Tensor& ids, const torch::Tensor& positions, PassContext& pass) override
    {
        // normalizer = torch.tensor(hidden_size ** 0.5, dtype=hidden_states.dtype): rounded to the dtype.
        const torch::Tensor normalizer =
            torch::tensor(std::sqrt(double(config.hiddenSize)), torch::dtype(torch::kDouble)).to(pass.dtype);
        return rotaryBody(config, ids, positions, pass, *embed_tokens, blocks, *norm, normalizer);
    }

    torch::Tensor logits(const torch::Tensor& lastHidden, const torch::Tensor& head) const override
    {
        const torch::Tensor raw = DecoderLmImpl::logits(lastHidden, head);
        const double cap = config.finalLogitSoftcap;
        return cap > 0 ? torch::tanh(raw / cap) * cap : raw;
    }

    std::vector<NormReaders> preNorms() override
    {
        std::vector<NormReaders> out;
        for (int i = 0; i < int(blocks.size()); ++i) {
            Gemma2LayerImpl& b = *blocks[std::size_t(i)];
            const std::string at = "layers." + std::to_string(i) + ".";
            Gemma2AttentionImpl& a = *b.self_attn;
            out.push_back(preNormReaders(at + "input_layernorm", i, QuantSite::AttnNorm, *b.input_layernorm,
                                         {a.q_proj.get(), a.k_proj.get(), a.v_proj.get()}, &a.gates,
                                         &a.sink));
            out.push_back(preNormReaders(at + "pre_feedforward_layernorm", i, QuantSite::FfnNorm,
                                         *b.pre_feedforward_layernorm,
                                         {b.mlp->gate_proj.get(), b.mlp->up_proj.get()}));
        }
        return out;
    }

    ResidualStream residualStream() override
    {
        return ResidualStream::refused(
            "Gemma 2 normalises each half's output before adding it (post-attention and "
            "post-feedforward norms), so a rotation cannot pass into the stream there");
    }

    torch::Tensor headWeight() const override { return embed_tokens->weight; }
    std::string tiedHeadName() const override { return "lm_head.weight"; }
    std::string embeddingName() const override { return "model.embed_tokens.weight"; }
    Naming naming() const override
    {
        return {"model.", {""}, {{".rotary_emb.inv_freq", "rotary inverse frequencies, recomputed"}}};
    }
    double normWeightInit() const override { return 0.0; } // Gemma2RMSNorm: zeros, scaled by 1 + w

    DecoderConfig config;
    std::shared_ptr<EmbeddingImpl> embed_tokens;
    torch::nn::ModuleList layers{nullptr};
    std::vector<std::shared_ptr<Gemma2LayerImpl>> blocks;
    std::shared_ptr<NormImpl> norm;
};

/// The checkpoint tensors whose shapes the config fixes (checked before the module is built).
std::vector<ImpliedShape> impliedShapes(const DecoderConfig& c)
{
    const std::int64_t d = c.hiddenSize, f = c.intermediateSize;
    return {{"embed_tokens.weight", {c.vocabSize, d}, "vocab_size x hidden_size"},
            {"layers.0.mlp.up_proj.weight", {f, d}, "intermediate_size x hidden_size"}};
}

} // namespace

std::shared_ptr<DecoderLmImpl> makeGemma2(const DecoderConfig& config)
{
    return std::make_shared<Gemma2LmImpl>(config);
}

const DecoderLayout kGemma2Layout = {makeGemma2, impliedShapes};

} // namespace outlierlens::decoder
