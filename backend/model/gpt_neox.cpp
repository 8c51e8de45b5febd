// GPTNeoXForCausalLM (Pythia, GPT-NeoX-20B) as transformers v4.47.1 computes it (eager attention): the
// fused query_key_value interleaved per head ([q | k | v] of head 0, then head 1, ...), partial rotary on
// the first int(head_dim * rotary_pct) dims, scores scaled by head_dim^-1/2, two LayerNorms of the same x
// and the parallel residual out = mlp(ln2 x) + attn(ln1 x) + x (or sequential when
// use_parallel_residual is false), erf GELU, untied embed_out without bias.

#include "model/decoder_modules.h"
#include "model/linear.h"

#include <torch/torch.h>

#include <cmath>

namespace outlierlens::decoder {
namespace {

class NeoxAttentionImpl : public torch::nn::Module
{
public:
    explicit NeoxAttentionImpl(const DecoderConfig& c)
        : variant(c.variant)
        , numHeads(c.numHeads)
        , headDim(c.headDim())
    {
        const int d = c.hiddenSize;
        query_key_value =
            register_module("query_key_value", std::make_shared<LinearImpl>(d, 3 * d, c.linearBias));
        dense = register_module("dense", std::make_shared<LinearImpl>(d, d, c.linearBias));
        spec = {c.numHeads, c.numHeads, c.headDim(), std::sqrt(double(c.headDim()))};
        gates.create(*this, c.variant, c.numHeads, c.headDim());
        sink.create(*this, c.variant, c.numHeads, c.headDim());
    }

    torch::Tensor forward(const torch::Tensor& x, const PassContext& pass, const CaptureScope& capture)
    {
        const auto B = x.size(0), T = x.size(1);
        const torch::Tensor qkv = query_key_value->forward(x).view({B, T, numHeads, 3 * headDim});
        auto part = [&](int i) {
            return qkv.narrow(-1, i * headDim, headDim).reshape({B, T, numHeads * headDim});
        };
        return dense->forward(
            attentionHalf(part(0), part(1), part(2), spec, x, variant, gates, sink, pass, capture));
    }

    std::shared_ptr<LinearImpl> query_key_value, dense;
    HeadsSpec spec;
    AttentionGates gates;
    SinkParams sink;
    AttentionVariant variant;
    int numHeads, headDim;
};

class NeoxLayerImpl : public torch::nn::Module
{
public:
    explicit NeoxLayerImpl(const DecoderConfig& c)
        : act(c.activation)
        , parallel(c.parallelResidual)
    {
        input_layernorm =
            register_module("input_layernorm", std::make_shared<NormImpl>(c.hiddenSize, c.normEps, false));
        post_attention_layernorm = register_module(
            "post_attention_layernorm", std::make_shared<NormImpl>(c.hiddenSize, c.normEps, false));
        attention = register_module("attention", std::make_shared<NeoxAttentionImpl>(c));
        auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>("GPTNeoXMLP"));
        dense_h_to_4h = mlp->register_module(
            "dense_h_to_4h", std::make_shared<LinearImpl>(c.hiddenSize, c.intermediateSize, c.linearBias));
        dense_4h_to_h = mlp->register_module(
            "dense_4h_to_h", std::make_shared<LinearImpl>(c.intermediateSize, c.hiddenSize, c.linearBias));
    }

    torch::Tensor forward(torch::Tensor x, const PassContext& pass, const CaptureScope& capture)
    {
        const torch::Tensor a = capture.quant(QuantSite::AttnNorm, input_layernorm->forward(x));
        const torch::Tensor attn = attnOut(attention->forward(a, pass, capture), capture);
        if (!parallel) x = capture.quant(QuantSite::AttnResidual, attn + x);
        const torch::Tensor m = capture.quant(QuantSite::FfnNorm, post_attention_layernorm->forward(x));
        const torch::Tensor ffn = ffnHalf(m, nullptr, *dense_h_to_4h, *dense_4h_to_h, act, capture);
        return blockOut(parallel ? ffn + attn + x : ffn + x, capture);
    }

    std::shared_ptr<NormImpl> input_layernorm, post_attention_layernorm;
    std::shared_ptr<NeoxAttentionImpl> attention;
    std::shared_ptr<LinearImpl> dense_h_to_4h, dense_4h_to_h;
    std::string act;
    bool parallel;
};

class NeoxLmImpl : public DecoderLmImpl
{
public:
    explicit NeoxLmImpl(const DecoderConfig& c)
        : DecoderLmImpl("GPTNeoXForCausalLM")
        , config(c)
    {
        auto model = register_module("gpt_neox", std::make_shared<torch::nn::Module>("GPTNeoXModel"));
        embed_in =
            model->register_module("embed_in", std::make_shared<EmbeddingImpl>(c.vocabSize, c.hiddenSize));
        layers = model->register_module("layers", torch::nn::ModuleList());
        for (int i = 0; i < c.numLayers; ++i) {
            auto layer = std::make_shared<NeoxLayerImpl>(c);
            layers->push_back(layer);
            blocks.push_back(layer);
        }
        final_layer_norm = model->register_module("final_layer_norm",
                                                  std::make_shared<NormImpl>(c.hiddenSize, c.normEps, false));
        if (!c.tieWordEmbeddings)
            embed_out =
                register_module("embed_out", std::make_shared<LinearImpl>(c.hiddenSize, c.vocabSize, false));
    }

    torch::Tensor body(const torch::Tensor& ids, const torch::Tensor& positions, PassContext& pass) override
    {
        return rotaryBody(config, ids, positions, pass, *embed_in, blocks, *final_layer_norm);
    }

    std::vector<NormReaders> preNorms() override
    {
        std::vector<NormReaders> out;
        for (int i = 0; i < int(blocks.size()); ++i) {
            NeoxLayerImpl& b = *blocks[std::size_t(i)];
            const std::string at = "layers." + std::to_string(i) + ".";
            NeoxAttentionImpl& a = *b.attention;
            out.push_back(preNormReaders(at + "input_layernorm", i, QuantSite::AttnNorm, *b.input_layernorm,
                                         {a.query_key_value.get()}, &a.gates, &a.sink));
            out.push_back(preNormReaders(at + "post_attention_layernorm", i, QuantSite::FfnNorm,
                                         *b.post_attention_layernorm, {b.dense_h_to_4h.get()}));
        }
        return out;
    }

    ResidualStream residualStream() override
    {
        ResidualStream s;
        s.tables = {embed_in->weight};
        for (auto& b : blocks) {
            s.writers.push_back(residualWriter(*b->attention->dense, false));
            s.writers.push_back(residualWriter(*b->dense_4h_to_h, true));
        }
        s.rotateFinalNorm = finalNormRotation(*final_layer_norm, !embed_out);
        s.norms = preNorms();
        return s;
    }

    torch::Tensor headWeight() const override { return embed_out ? embed_out->weight : embed_in->weight; }
    std::string tiedHeadName() const override { return embed_out ? std::string() : "embed_out.weight"; }
    std::string embeddingName() const override { return "gpt_neox.embed_in.weight"; }
    Naming naming() const override
    {
        // Older Pythia checkpoints also hold the causal-mask buffers and the rotary frequencies.
        return {"gpt_neox.",
                {""},
                {{".rotary_emb.inv_freq", "rotary inverse frequencies, recomputed"},
                 {".attention.bias", "GPT-NeoX causal mask buffer"},
                 {".attention.masked_bias", "GPT-NeoX causal mask buffer"}},
                {"embed_out."}};
    }

    DecoderConfig config;
    std::shared_ptr<EmbeddingImpl> embed_in;
    torch::nn::ModuleList layers{nullptr};
    std::vector<std::shared_ptr<NeoxLayerImpl>> blocks;
    std::shared_ptr<NormImpl> final_layer_norm;
    std::shared_ptr<LinearImpl> embed_out;
};

/// The checkpoint tensors whose shapes the config fixes (checked before the module is built).
std::vector<ImpliedShape> impliedShapes(const DecoderConfig& c)
{
    const std::int64_t d = c.hiddenSize, f = c.intermediateSize;
    return {{"embed_in.weight", {c.vocabSize, d}, "vocab_size x hidden_size"},
            {"layers.0.mlp.dense_h_to_4h.weight", {f, d}, "intermediate_size x hidden_size"}};
}

} // namespace

std::shared_ptr<DecoderLmImpl> makeGptNeox(const DecoderConfig& config)
{
    return std::make_shared<NeoxLmImpl>(config);
}

const DecoderLayout kGptNeoxLayout = {makeGptNeox, impliedShapes};

} // namespace outlierlens::decoder
