// GPT2LMHeadModel as transformers v4.31 computes it (eager attention): Conv1D weights [in, out],
// scores divided by sqrt(d_head) after q.k, gelu_new, pre-LN blocks, ln_f, head tied to wte.

#include "model/decoder_modules.h"
#include "model/linear.h"

#include <torch/torch.h>

#include <cmath>

namespace outlierlens::decoder {
namespace {

class Gpt2AttentionImpl : public torch::nn::Module
{
public:
    Gpt2AttentionImpl(const DecoderConfig& c, int layer)
        : numHeads(c.numHeads)
        , headDim(c.headDim())
        , layerIndex(layer)
        , scaleWeights(c.scaleAttnWeights)
        , scaleByLayer(c.scaleAttnByInverseLayerIdx)
        , variant(c.variant)
    {
        c_attn = register_module("c_attn",
                                 std::make_shared<LinearImpl>(c.hiddenSize, 3 * c.hiddenSize, true, true));
        c_proj =
            register_module("c_proj", std::make_shared<LinearImpl>(c.hiddenSize, c.hiddenSize, true, true));
        gates.create(*this, c.variant, c.numHeads, c.headDim());
        sink.create(*this, c.variant, c.numHeads, c.headDim());
    }

    torch::Tensor forward(const torch::Tensor& x, const PassContext& pass, const CaptureScope& capture)
    {
        const auto B = x.size(0), T = x.size(1), d = x.size(2);
        const std::vector<torch::Tensor> qkv = c_attn->forward(x).split(d, -1);
        auto heads = [&](const torch::Tensor& t) {
            return t.view({B, T, numHeads, headDim}).permute({0, 2, 1, 3});
        };
        const torch::Tensor qh = heads(capture.quant(QuantSite::Query, qkv[0]));
        const torch::Tensor kh = heads(capture.quant(QuantSite::Key, qkv[1]));
        const torch::Tensor vh = heads(capture.quant(QuantSite::Value, qkv[2]));
        torch::Tensor scores = activationProduct(qh, kh.transpose(-1, -2));
        double scale = 1.0;
        if (scaleWeights) {
            // HF: w / torch.full([], v.size(-1) ** 0.5): a division by the float32 square root.
            const double root = double(float(std::sqrt(double(headDim))));
            scores = scores / root;
            scale /= root;
        }
        if (scaleByLayer) {
            scores = scores / double(layerIndex + 1);
            scale /= double(layerIndex + 1);
        }
        const torch::Tensor context = attend(scores, qh, vh, x, variant, scale, gates, sink, pass, capture);
        return c_proj->forward(context);
    }

    std::shared_ptr<LinearImpl> c_attn, c_proj;
    AttentionGates gates;
    SinkParams sink;
    int numHeads, headDim, layerIndex;
    bool scaleWeights, scaleByLayer;
    AttentionVariant variant;
};

class Gpt2MlpImpl : public torch::nn::Module
{
public:
    explicit Gpt2MlpImpl(const DecoderConfig& c)
        : act(c.activation)
    {
        c_fc = register_module("c_fc",
                               std::make_shared<LinearImpl>(c.hiddenSize, c.intermediateSize, true, true));
        c_proj = register_module("c_proj",
                                 std::make_shared<LinearImpl>(c.intermediateSize, c.hiddenSize, true, true));
    }
    std::shared_ptr<LinearImpl> c_fc, c_proj;
    std::string act;
};

class Gpt2BlockImpl : public torch::nn::Module
{
public:
    Gpt2BlockImpl(const DecoderConfig& c, int layer)
    {
        ln_1 = register_module("ln_1", std::make_shared<NormImpl>(c.hiddenSize, c.normEps, false));
        attn = register_module("attn", std::make_shared<Gpt2AttentionImpl>(c, layer));
        ln_2 = register_module("ln_2", std::make_shared<NormImpl>(c.hiddenSize, c.normEps, false));
        mlp = register_module("mlp", std::make_shared<Gpt2MlpImpl>(c));
    }

    torch::Tensor forward(torch::Tensor x, const PassContext& pass, const CaptureScope& capture)
    {
        const torch::Tensor a = capture.quant(QuantSite::AttnNorm, ln_1->forward(x));
        x = capture.quant(QuantSite::AttnResidual, x + attnOut(attn->forward(a, pass, capture), capture));
        const torch::Tensor m = capture.quant(QuantSite::FfnNorm, ln_2->forward(x));
        return blockOut(x + ffnHalf(m, nullptr, *mlp->c_fc, *mlp->c_proj, mlp->act, capture), capture);
    }

    std::shared_ptr<NormImpl> ln_1, ln_2;
    std::shared_ptr<Gpt2AttentionImpl> attn;
    std::shared_ptr<Gpt2MlpImpl> mlp;
};

class Gpt2LmImpl : public DecoderLmImpl
{
public:
    explicit Gpt2LmImpl(const DecoderConfig& c)
        : DecoderLmImpl("GPT2LMHeadModel")
        , config(c)
    {
        auto transformer = register_module("transformer", std::make_shared<torch::nn::Module>("GPT2Model"));
        wte = transformer->register_module("wte", std::make_shared<EmbeddingImpl>(c.vocabSize, c.hiddenSize));
        wpe = transformer->register_module("wpe",
                                           std::make_shared<EmbeddingImpl>(c.maxPositions, c.hiddenSize));
        h = transformer->register_module("h", torch::nn::ModuleList());
        for (int i = 0; i < c.numLayers; ++i) {
            auto block = std::make_shared<Gpt2BlockImpl>(c, i);
            h->push_back(block);
            blocks.push_back(block);
        }
        ln_f =
            transformer->register_module("ln_f", std::make_shared<NormImpl>(c.hiddenSize, c.normEps, false));
        if (!c.tieWordEmbeddings)
            lm_head =
                register_module("lm_head", std::make_shared<LinearImpl>(c.hiddenSize, c.vocabSize, false));
    }

    torch::Tensor body(const torch::Tensor& ids, const torch::Tensor& positions, PassContext& pass) override
    {
        const CaptureScope top(pass.sink, -1);
        torch::Tensor x = wte->forward(ids, pass.dtype) + wpe->forward(positions, pass.dtype);
        put(top, CapturePoint::Embeddings, x);
        x = top.quant(QuantSite::EmbeddingSum, x);
        for (std::size_t i = 0; i < blocks.size(); ++i)
            x = blocks[i]->forward(x, pass, CaptureScope(pass.sink, int(i)));
        return top.quant(QuantSite::FinalNorm, ln_f->forward(x));
    }

    std::vector<NormReaders> preNorms() override
    {
        std::vector<NormReaders> out;
        for (int i = 0; i < int(blocks.size()); ++i) {
            Gpt2BlockImpl& b = *blocks[std::size_t(i)];
            const std::string at = "h." + std::to_string(i) + ".";
            out.push_back(preNormReaders(at + "ln_1", i, QuantSite::AttnNorm, *b.ln_1, {b.attn->c_attn.get()},
                                         &b.attn->gates, &b.attn->sink));
            out.push_back(preNormReaders(at + "ln_2", i, QuantSite::FfnNorm, *b.ln_2, {b.mlp->c_fc.get()}));
        }
        return out;
    }

    ResidualStream residualStream() override
    {
        ResidualStream s;
        s.tables = {wte->weight, wpe->weight};
        for (auto& b : blocks) {
            s.writers.push_back(residualWriter(*b->attn->c_proj, false));
            s.writers.push_back(residualWriter(*b->mlp->c_proj, true));
        }
        s.rotateFinalNorm = finalNormRotation(*ln_f, !lm_head);
        s.norms = preNorms();
        return s;
    }

    torch::Tensor headWeight() const override { return lm_head ? lm_head->weight : wte->weight; }
    std::string tiedHeadName() const override { return lm_head ? std::string() : "lm_head.weight"; }
    std::string embeddingName() const override { return "transformer.wte.weight"; }
    Naming naming() const override
    {
        // hub gpt2: "h.0.attn..." (GPT2Model's names)
        return {
            "transformer.",
            {""},
            {{".attn.bias", "GPT-2 causal mask buffer"}, {".attn.masked_bias", "GPT-2 causal mask buffer"}}};
    }
    bool learnedPositions() const override { return true; }
    bool embeddingHasPaddingRow() const override { return false; }
    double initStd(const std::string& name) const override
    {
        // GPT2PreTrainedModel._init_weights: c_proj scaled by 1 / sqrt(2 n_layer).
        const std::string suffix = "c_proj.weight";
        const bool cProj = name.size() >= suffix.size() &&
                           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
        return cProj ? 0.02 / std::sqrt(2.0 * config.numLayers) : -1.0;
    }

    DecoderConfig config;

    std::shared_ptr<EmbeddingImpl> wte, wpe;
    torch::nn::ModuleList h{nullptr};
    std::vector<std::shared_ptr<Gpt2BlockImpl>> blocks;
    std::shared_ptr<NormImpl> ln_f;
    std::shared_ptr<LinearImpl> lm_head;
};

/// The checkpoint tensors whose shapes the config fixes (checked before the module is built).
std::vector<ImpliedShape> impliedShapes(const DecoderConfig& c)
{
    const std::int64_t d = c.hiddenSize;
    return {{"wte.weight", {c.vocabSize, d}, "vocab_size x n_embd"},
            {"wpe.weight", {c.maxPositions, d}, "n_positions x n_embd"},
            {"h.0.mlp.c_fc.weight", {d, c.intermediateSize}, "n_embd x n_inner"}};
}

} // namespace

std::shared_ptr<DecoderLmImpl> makeGpt2(const DecoderConfig& config)
{
    return std::make_shared<Gpt2LmImpl>(config);
}

const DecoderLayout kGpt2Layout = {makeGpt2, impliedShapes};

} // namespace outlierlens::decoder
