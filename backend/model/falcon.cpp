// FalconForCausalLM as transformers v4.47.1 computes it (eager attention, rotary positions): the fused
// query_key_value of Falcon-7B (multi-query: all query heads, then one key and one value head), of the
// new decoder architecture of Falcon-40B/180B (per key/value group: its query heads, then k, then v) or
// per head [q | k | v]; scores divided by sqrt(head_dim); attention and MLP in parallel on one LayerNorm
// (7B) or on ln_attn / ln_mlp (40B): out = x + (mlp + attn); erf GELU; the head tied to the embeddings.
// ALiBi checkpoints (Falcon-RW) are refused by the config reader.

#include "model/decoder_modules.h"
#include "model/linear.h"

#include <torch/torch.h>

#include <cmath>

namespace outlierlens::decoder {
namespace {

class FalconAttentionImpl : public torch::nn::Module
{
public:
    explicit FalconAttentionImpl(const DecoderConfig& c)
        : variant(c.variant)
        , numHeads(c.numHeads)
        , numKvHeads(c.numKvHeads)
        , headDim(c.headDim())
        , grouped(c.newDecoderArchitecture)
    {
        const int d = c.hiddenSize, fused = (c.numHeads + 2 * c.numKvHeads) * c.headDim();
        query_key_value =
            register_module("query_key_value", std::make_shared<LinearImpl>(d, fused, c.linearBias));
        dense = register_module("dense", std::make_shared<LinearImpl>(numHeads * headDim, d, c.linearBias));
        spec = {c.numHeads, c.numKvHeads, c.headDim(), std::sqrt(double(c.headDim()))};
        gates.create(*this, c.variant, c.numHeads, c.headDim());
        sink.create(*this, c.variant, c.numHeads, c.headDim());
    }

    torch::Tensor forward(const torch::Tensor& x, const PassContext& pass, const CaptureScope& capture)
    {
        const auto B = x.size(0), T = x.size(1);
        const torch::Tensor fused = query_key_value->forward(x);
        torch::Tensor q, k, v;
        if (grouped || numKvHeads == 1) {
            // [groups, queries per group + 2, d]: a group's query heads, then its k and v (multi-query: one
            // group of every query head).
            const int perGroup = numHeads / numKvHeads;
            const torch::Tensor g = fused.view({B, T, numKvHeads, perGroup + 2, headDim});
            q = g.narrow(3, 0, perGroup).reshape({B, T, numHeads * headDim});
            k = g.narrow(3, perGroup, 1).reshape({B, T, numKvHeads * headDim});
            v = g.narrow(3, perGroup + 1, 1).reshape({B, T, numKvHeads * headDim});
        } else { // [heads, 3, d]
            const torch::Tensor g = fused.view({B, T, numHeads, 3, headDim});
            q = g.select(3, 0).reshape({B, T, numHeads * headDim});
            k = g.select(3, 1).reshape({B, T, numHeads * headDim});
            v = g.select(3, 2).reshape({B, T, numHeads * headDim});
        }
        return dense->forward(attentionHalf(q, k, v, spec, x, variant, gates, sink, pass, capture));
    }

    std::shared_ptr<LinearImpl> query_key_value, dense;
    HeadsSpec spec;
    AttentionGates gates;
    SinkParams sink;
    AttentionVariant variant;
    int numHeads, numKvHeads, headDim;
    bool grouped;
};

class FalconLayerImpl : public torch::nn::Module
{
public:
    explicit FalconLayerImpl(const DecoderConfig& c)
        : act(c.activation)
    {
        auto norm = [&](const char* name) {
            return register_module(name, std::make_shared<NormImpl>(c.hiddenSize, c.normEps, false));
        };
        if (c.newDecoderArchitecture && c.mlpNorm) {
            ln_attn = norm("ln_attn");
            ln_mlp = norm("ln_mlp");
        } else {
            ln_attn = norm("input_layernorm");
        }
        self_attention = register_module("self_attention", std::make_shared<FalconAttentionImpl>(c));
        auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>("FalconMLP"));
        dense_h_to_4h = mlp->register_module(
            "dense_h_to_4h", std::make_shared<LinearImpl>(c.hiddenSize, c.intermediateSize, c.linearBias));
        dense_4h_to_h = mlp->register_module(
            "dense_4h_to_h", std::make_shared<LinearImpl>(c.intermediateSize, c.hiddenSize, c.linearBias));
    }

    torch::Tensor forward(const torch::Tensor& x, const PassContext& pass, const CaptureScope& capture)
    {
        const torch::Tensor a = capture.quant(QuantSite::AttnNorm, ln_attn->forward(x));
        const torch::Tensor m = ln_mlp ? capture.quant(QuantSite::FfnNorm, ln_mlp->forward(x)) : a;
        const torch::Tensor attn = attnOut(self_attention->forward(a, pass, capture), capture);
        const torch::Tensor ffn = ffnHalf(m, nullptr, *dense_h_to_4h, *dense_4h_to_h, act, capture);
        return blockOut(x + (ffn + attn), capture);
    }

    std::shared_ptr<NormImpl> ln_attn, ln_mlp;
    std::shared_ptr<FalconAttentionImpl> self_attention;
    std::shared_ptr<LinearImpl> dense_h_to_4h, dense_4h_to_h;
    std::string act;
};

class FalconLmImpl : public DecoderLmImpl
{
public:
    explicit FalconLmImpl(const DecoderConfig& c)
        : DecoderLmImpl("FalconForCausalLM")
        , config(c)
    {
        auto model = register_module("transformer", std::make_shared<torch::nn::Module>("FalconModel"));
        word_embeddings = model->register_module("word_embeddings",
                                                 std::make_shared<EmbeddingImpl>(c.vocabSize, c.hiddenSize));
        h = model->register_module("h", torch::nn::ModuleList());
        for (int i = 0; i < c.numLayers; ++i) {
            auto layer = std::make_shared<FalconLayerImpl>(c);
            h->push_back(layer);
            blocks.push_back(layer);
        }
        ln_f = model->register_module("ln_f", std::make_shared<NormImpl>(c.hiddenSize, c.normEps, false));
        if (!c.tieWordEmbeddings)
            lm_head =
                register_module("lm_head", std::make_shared<LinearImpl>(c.hiddenSize, c.vocabSize, false));
    }

    torch::Tensor body(const torch::Tensor& ids, const torch::Tensor& positions, PassContext& pass) override
    {
        return rotaryBody(config, ids, positions, pass, *word_embeddings, blocks, *ln_f);
    }

    std::vector<NormReaders> preNorms() override
    {
        std::vector<NormReaders> out;
        for (int i = 0; i < int(blocks.size()); ++i) {
            FalconLayerImpl& b = *blocks[std::size_t(i)];
            const std::string at = "h." + std::to_string(i) + ".";
            FalconAttentionImpl& a = *b.self_attention;
            std::vector<LinearImpl*> attnReaders = {a.query_key_value.get()};
            if (!b.ln_mlp) attnReaders.push_back(b.dense_h_to_4h.get()); // one norm feeds both halves
            out.push_back(preNormReaders(at + (b.ln_mlp ? "ln_attn" : "input_layernorm"), i,
                                         QuantSite::AttnNorm, *b.ln_attn, attnReaders, &a.gates, &a.sink));
            if (b.ln_mlp)
                out.push_back(
                    preNormReaders(at + "ln_mlp", i, QuantSite::FfnNorm, *b.ln_mlp, {b.dense_h_to_4h.get()}));
        }
        return out;
    }

    ResidualStream residualStream() override
    {
        ResidualStream s;
        s.tables = {word_embeddings->weight};
        for (auto& b : blocks) {
            s.writers.push_back(residualWriter(*b->self_attention->dense, false));
            s.writers.push_back(residualWriter(*b->dense_4h_to_h, true));
        }
        s.rotateFinalNorm = finalNormRotation(*ln_f, !lm_head);
        s.norms = preNorms();
        return s;
    }

    torch::Tensor headWeight() const override { return lm_head ? lm_head->weight : word_embeddings->weight; }
    std::string tiedHeadName() const override { return lm_head ? std::string() : "lm_head.weight"; }
    std::string embeddingName() const override { return "transformer.word_embeddings.weight"; }
    Naming naming() const override
    {
        return {"transformer.", {""}, {{".rotary_emb.inv_freq", "rotary inverse frequencies, recomputed"}}};
    }

    DecoderConfig config;
    std::shared_ptr<EmbeddingImpl> word_embeddings;
    torch::nn::ModuleList h{nullptr};
    std::vector<std::shared_ptr<FalconLayerImpl>> blocks;
    std::shared_ptr<NormImpl> ln_f;
    std::shared_ptr<LinearImpl> lm_head;
};

/// The checkpoint tensors whose shapes the config fixes (checked before the module is built).
std::vector<ImpliedShape> impliedShapes(const DecoderConfig& c)
{
    const std::int64_t d = c.hiddenSize, f = c.intermediateSize;
    return {{"word_embeddings.weight", {c.vocabSize, d}, "vocab_size x hidden_size"},
            {"h.0.mlp.dense_h_to_4h.weight", {f, d}, "ffn_hidden_size x hidden_size"}};
}

} // namespace

std::shared_ptr<DecoderLmImpl> makeFalcon(const DecoderConfig& config)
{
    return std::make_shared<FalconLmImpl>(config);
}

const DecoderLayout kFalconLayout = {makeFalcon, impliedShapes};

} // namespace outlierlens::decoder
