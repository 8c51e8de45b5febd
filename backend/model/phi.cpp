// PhiForCausalLM (phi-1, phi-1.5, phi-2) as transformers v4.47.1 computes it (eager attention): one
// LayerNorm per layer feeding attention and MLP in parallel (out = attn + mlp + x), partial rotary on the
// first int(head_dim * partial_rotary_factor) dims of each head (inv_freq over those dims), q.k in float32
// divided by sqrt(head_dim), gelu_new MLP, biases on every linear and on the LM head, untied.
// Capture points: no mid-block residual exists; residual and out are both the block's output.

#include "model/decoder_modules.h"
#include "model/linear.h"

#include <torch/torch.h>

#include <cmath>

namespace outlierlens::decoder {
namespace {

class PhiAttentionImpl : public torch::nn::Module
{
public:
    explicit PhiAttentionImpl(const DecoderConfig& c)
        : variant(c.variant)
    {
        const int d = c.hiddenSize, q = c.numHeads * c.headDim(), kv = c.numKvHeads * c.headDim();
        q_proj = register_module("q_proj", std::make_shared<LinearImpl>(d, q, true));
        k_proj = register_module("k_proj", std::make_shared<LinearImpl>(d, kv, true));
        v_proj = register_module("v_proj", std::make_shared<LinearImpl>(d, kv, true));
        dense = register_module("dense", std::make_shared<LinearImpl>(q, d, true));
        spec = {c.numHeads, c.numKvHeads, c.headDim(), std::sqrt(double(c.headDim()))};
        gates.create(*this, c.variant, c.numHeads, c.headDim());
        sink.create(*this, c.variant, c.numHeads, c.headDim());
    }

    torch::Tensor forward(const torch::Tensor& x, const PassContext& pass, const CaptureScope& capture)
    {
        return dense->forward(attentionHalf(q_proj->forward(x), k_proj->forward(x), v_proj->forward(x), spec,
                                            x, variant, gates, sink, pass, capture));
    }

    std::shared_ptr<LinearImpl> q_proj, k_proj, v_proj, dense;
    HeadsSpec spec;
    AttentionGates gates;
    SinkParams sink;
    AttentionVariant variant;
};

class PhiLayerImpl : public torch::nn::Module
{
public:
    explicit PhiLayerImpl(const DecoderConfig& c)
        : act(c.activation)
    {
        self_attn = register_module("self_attn", std::make_shared<PhiAttentionImpl>(c));
        auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>("PhiMLP"));
        fc1 =
            mlp->register_module("fc1", std::make_shared<LinearImpl>(c.hiddenSize, c.intermediateSize, true));
        fc2 =
            mlp->register_module("fc2", std::make_shared<LinearImpl>(c.intermediateSize, c.hiddenSize, true));
        input_layernorm =
            register_module("input_layernorm", std::make_shared<NormImpl>(c.hiddenSize, c.normEps, false));
    }

    torch::Tensor forward(const torch::Tensor& x, const PassContext& pass, const CaptureScope& capture)
    {
        const torch::Tensor h = capture.quant(QuantSite::AttnNorm, input_layernorm->forward(x));
        const torch::Tensor attn = attnOut(self_attn->forward(h, pass, capture), capture);
        const torch::Tensor ffn = ffnHalf(h, nullptr, *fc1, *fc2, act, capture);
        return blockOut(attn + ffn + x, capture);
    }

    std::shared_ptr<PhiAttentionImpl> self_attn;
    std::shared_ptr<LinearImpl> fc1, fc2;
    std::shared_ptr<NormImpl> input_layernorm;
    std::string act;
};

class PhiLmImpl : public DecoderLmImpl
{
public:
    explicit PhiLmImpl(const DecoderConfig& c)
        : DecoderLmImpl("PhiForCausalLM")
        , config(c)
    {
        auto model = register_module("model", std::make_shared<torch::nn::Module>("PhiModel"));
        embed_tokens = model->register_module("embed_tokens",
                                              std::make_shared<EmbeddingImpl>(c.vocabSize, c.hiddenSize));
        layers = model->register_module("layers", torch::nn::ModuleList());
        for (int i = 0; i < c.numLayers; ++i) {
            auto layer = std::make_shared<PhiLayerImpl>(c);
            layers->push_back(layer);
            blocks.push_back(layer);
        }
        final_layernorm = model->register_module("final_layernorm",
                                                 std::make_shared<NormImpl>(c.hiddenSize, c.normEps, false));
        if (!c.tieWordEmbeddings)
            lm_head =
                register_module("lm_head", std::make_shared<LinearImpl>(c.hiddenSize, c.vocabSize, true));
    }

    torch::Tensor body(const torch::Tensor& ids, const torch::Tensor& positions, PassContext& pass) override
    {
        return rotaryBody(config, ids, positions, pass, *embed_tokens, blocks, *final_layernorm);
    }

    torch::Tensor logits(const torch::Tensor& lastHidden, const torch::Tensor& head) const override
    {
        if (!lm_head) return DecoderLmImpl::logits(lastHidden, head);
        if (!head.defined()) return lm_head->forward(lastHidden); // with its bias
        const auto dtype = lastHidden.scalar_type();
        return linearLayer(lastHidden, weightAs(head, dtype), weightAs(lm_head->bias, dtype));
    }
    std::vector<NormReaders> preNorms() override
    {
        std::vector<NormReaders> out;
        for (int i = 0; i < int(blocks.size()); ++i) {
            PhiLayerImpl& b = *blocks[std::size_t(i)];
            const std::string at = "layers." + std::to_string(i) + ".";
            PhiAttentionImpl& a = *b.self_attn;
            out.push_back(preNormReaders(at + "input_layernorm", i, QuantSite::AttnNorm, *b.input_layernorm,
                                         {a.q_proj.get(), a.k_proj.get(), a.v_proj.get(), b.fc1.get()},
                                         &a.gates, &a.sink));
        }
        return out;
    }

    ResidualStream residualStream() override
    {
        ResidualStream s;
        s.tables = {embed_tokens->weight};
        for (auto& b : blocks) {
            s.writers.push_back(residualWriter(*b->self_attn->dense, false));
            s.writers.push_back(residualWriter(*b->fc2, true));
        }
        s.rotateFinalNorm = finalNormRotation(*final_layernorm, !lm_head);
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
    std::vector<std::shared_ptr<PhiLayerImpl>> blocks;
    std::shared_ptr<NormImpl> final_layernorm;
    std::shared_ptr<LinearImpl> lm_head;
};

/// The checkpoint tensors whose shapes the config fixes (checked before the module is built).
std::vector<ImpliedShape> impliedShapes(const DecoderConfig& c)
{
    const std::int64_t d = c.hiddenSize, f = c.intermediateSize;
    return {{"embed_tokens.weight", {c.vocabSize, d}, "vocab_size x hidden_size"},
            {"layers.0.mlp.fc1.weight", {f, d}, "intermediate_size x hidden_size"}};
}

} // namespace

std::shared_ptr<DecoderLmImpl> makePhi(const DecoderConfig& config)
{
    return std::make_shared<PhiLmImpl>(config);
}

const DecoderLayout kPhiLayout = {makePhi, impliedShapes};

} // namespace outlierlens::decoder
