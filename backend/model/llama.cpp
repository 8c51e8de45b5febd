// LlamaForCausalLM as transformers v4.31 computes it: RMSNorm in float32, rotary embeddings in the
// rotate_half layout (tables in float32, cast to the activations' dtype), grouped-query attention
// (repeat_kv), scores divided by sqrt(d_head), softmax in float32, SwiGLU MLP, untied lm_head.
// The families of the same layout, as transformers 4.47.1 (Qwen3: 4.51.3) computes them: LLaMA 3's
// "llama3" rotary scaling, Qwen2's q/k/v biases, Qwen3's per-head q/k RMSNorm before rotary and head_dim,
// Mistral's head_dim and sliding window (the mask, decoder_network.cpp).

#include "model/decoder_modules.h"

#include <torch/torch.h>

#include <cmath>

namespace outlierlens::decoder {
namespace {

class LlamaAttentionImpl : public torch::nn::Module
{
public:
    explicit LlamaAttentionImpl(const DecoderConfig& c)
        : variant(c.variant)
    {
        const int d = c.hiddenSize, q = c.numHeads * c.headDim(), kv = c.numKvHeads * c.headDim();
        const bool bias = c.attentionBias;
        q_proj = register_module("q_proj", std::make_shared<LinearImpl>(d, q, bias));
        k_proj = register_module("k_proj", std::make_shared<LinearImpl>(d, kv, bias));
        v_proj = register_module("v_proj", std::make_shared<LinearImpl>(d, kv, bias));
        o_proj = register_module("o_proj", std::make_shared<LinearImpl>(q, d, false));
        spec = {c.numHeads, c.numKvHeads, c.headDim(), std::sqrt(double(c.headDim()))};
        if (c.qkNorm) {
            q_norm = register_module("q_norm", std::make_shared<NormImpl>(c.headDim(), c.normEps, true));
            k_norm = register_module("k_norm", std::make_shared<NormImpl>(c.headDim(), c.normEps, true));
            spec.qNorm = q_norm.get();
            spec.kNorm = k_norm.get();
        }
        gates.create(*this, c.variant, c.numHeads, c.headDim());
        sink.create(*this, c.variant, c.numHeads, c.headDim());
    }

    torch::Tensor forward(const torch::Tensor& x, const PassContext& pass, const CaptureScope& capture)
    {
        const torch::Tensor context =
            attentionHalf(q_proj->forward(x), k_proj->forward(x), v_proj->forward(x), spec, x, variant, gates,
                          sink, pass, capture);
        return o_proj->forward(context);
    }

    std::shared_ptr<LinearImpl> q_proj, k_proj, v_proj, o_proj;
    std::shared_ptr<NormImpl> q_norm, k_norm;
    HeadsSpec spec;
    AttentionGates gates;
    SinkParams sink;
    AttentionVariant variant;
};

class LlamaMlpImpl : public torch::nn::Module
{
public:
    explicit LlamaMlpImpl(const DecoderConfig& c)
        : act(c.activation)
    {
        const int d = c.hiddenSize, f = c.intermediateSize;
        gate_proj = register_module("gate_proj", std::make_shared<LinearImpl>(d, f, false));
        up_proj = register_module("up_proj", std::make_shared<LinearImpl>(d, f, false));
        down_proj = register_module("down_proj", std::make_shared<LinearImpl>(f, d, false));
    }
    torch::Tensor forward(const torch::Tensor& m, const CaptureScope& capture) const
    {
        return ffnHalf(m, gate_proj.get(), *up_proj, *down_proj, act, capture);
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
        x = capture.quant(QuantSite::AttnResidual,
                          x + attnOut(self_attn->forward(a, pass, capture), capture));
        const torch::Tensor m = capture.quant(QuantSite::FfnNorm, post_attention_layernorm->forward(x));
        return blockOut(x + mlp->forward(m, capture), capture);
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

    torch::Tensor body(const torch::Tensor& ids, const torch::Tensor& positions, PassContext& pass) override
    {
        return rotaryBody(config, ids, positions, pass, *embed_tokens, blocks, *norm);
    }

    std::vector<NormReaders> preNorms() override
    {
        std::vector<NormReaders> out;
        for (int i = 0; i < int(blocks.size()); ++i) {
            LlamaLayerImpl& b = *blocks[std::size_t(i)];
            LlamaAttentionImpl& a = *b.self_attn;
            const std::string at = "layers." + std::to_string(i) + ".";
            out.push_back(preNormReaders(at + "input_layernorm", i, QuantSite::AttnNorm, *b.input_layernorm,
                                         {a.q_proj.get(), a.k_proj.get(), a.v_proj.get()}, &a.gates,
                                         &a.sink));
            out.push_back(preNormReaders(at + "post_attention_layernorm", i, QuantSite::FfnNorm,
                                         *b.post_attention_layernorm,
                                         {b.mlp->gate_proj.get(), b.mlp->up_proj.get()}));
        }
        return out;
    }

    ResidualStream residualStream() override
    {
        ResidualStream s;
        s.tables = {embed_tokens->weight};
        for (auto& b : blocks) {
            s.writers.push_back(residualWriter(*b->self_attn->o_proj, false));
            s.writers.push_back(residualWriter(*b->mlp->down_proj, true));
        }
        s.rotateFinalNorm = finalNormRotation(*norm, !lm_head);
        s.norms = preNorms();
        return s;
    }

    torch::Tensor headWeight() const override { return lm_head ? lm_head->weight : embed_tokens->weight; }
    std::string tiedHeadName() const override { return lm_head ? std::string() : "lm_head.weight"; }
    std::string embeddingName() const override { return "model.embed_tokens.weight"; }
    Naming naming() const override
    {
        return {"model.", {""}, {{".rotary_emb.inv_freq", "rotary inverse frequencies, recomputed"}}};
    }

    DecoderConfig config;
    std::shared_ptr<EmbeddingImpl> embed_tokens;
    torch::nn::ModuleList layers{nullptr};
    std::vector<std::shared_ptr<LlamaLayerImpl>> blocks;
    std::shared_ptr<NormImpl> norm;
    std::shared_ptr<LinearImpl> lm_head;
};

/// The checkpoint tensors whose shapes the config fixes (checked before the module is built).
std::vector<ImpliedShape> impliedShapes(const DecoderConfig& c)
{
    const std::int64_t d = c.hiddenSize, f = c.intermediateSize;
    return {{"embed_tokens.weight", {c.vocabSize, d}, "vocab_size x hidden_size"},
            {"layers.0.mlp.up_proj.weight", {f, d}, "intermediate_size x hidden_size"}};
}

} // namespace

std::shared_ptr<DecoderLmImpl> makeLlama(const DecoderConfig& config)
{
    return std::make_shared<LlamaLmImpl>(config);
}

const DecoderLayout kLlamaLayout = {makeLlama, impliedShapes};

} // namespace outlierlens::decoder
