// OPTForCausalLM as transformers v4.31 computes it, with Qualcomm's OPTAttentionWithExtras (clipped
// softmax, gated attention reading the attention module's input). Learned positions with an offset
// of 2, q scaled by d_head^-0.5 before q.k, ReLU; pre-LN (final_layer_norm at the end) or post-LN
// (opt-350m: no final norm); project_in/project_out when word_embed_proj_dim differs from the width.

#include "model/decoder_modules.h"
#include "model/linear.h"

#include <torch/torch.h>

#include <cmath>

namespace outlierlens::decoder {
namespace {

class OptAttentionImpl : public torch::nn::Module
{
public:
    explicit OptAttentionImpl(const DecoderConfig& c)
        : numHeads(c.numHeads)
        , headDim(c.headDim())
        , variant(c.variant)
    {
        const int d = c.hiddenSize;
        k_proj = register_module("k_proj", std::make_shared<LinearImpl>(d, d, c.enableBias));
        v_proj = register_module("v_proj", std::make_shared<LinearImpl>(d, d, c.enableBias));
        q_proj = register_module("q_proj", std::make_shared<LinearImpl>(d, d, c.enableBias));
        out_proj = register_module("out_proj", std::make_shared<LinearImpl>(d, d, c.enableBias));
        gates.create(*this, c.variant, c.numHeads, c.headDim());
        sink.create(*this, c.variant, c.numHeads, c.headDim());
    }

    /// x: the module's input (pre-LN: self_attn_layer_norm's output), which the gates read too.
    torch::Tensor forward(const torch::Tensor& x, const PassContext& pass, const CaptureScope& capture)
    {
        const auto B = x.size(0), T = x.size(1);
        auto heads = [&](const torch::Tensor& t) {
            return t.view({B, T, numHeads, headDim}).permute({0, 2, 1, 3});
        };
        // HF: q_proj(x) * self.scaling (python float head_dim ** -0.5), before q.k.
        const double scaling = std::pow(double(headDim), -0.5);
        const torch::Tensor qh = heads(capture.quant(QuantSite::Query, q_proj->forward(x)) * scaling);
        const torch::Tensor kh = heads(capture.quant(QuantSite::Key, k_proj->forward(x)));
        const torch::Tensor vh = heads(capture.quant(QuantSite::Value, v_proj->forward(x)));
        const torch::Tensor scores = activationProduct(qh, kh.transpose(-1, -2));
        const torch::Tensor context = attend(scores, qh, vh, x, variant, 1.0, gates, sink, pass, capture);
        return out_proj->forward(context);
    }

    std::shared_ptr<LinearImpl> k_proj, v_proj, q_proj, out_proj;
    AttentionGates gates;
    SinkParams sink;
    int numHeads, headDim;
    AttentionVariant variant;
};

class OptLayerImpl : public torch::nn::Module
{
public:
    explicit OptLayerImpl(const DecoderConfig& c)
        : preLn(c.doLayerNormBefore)
        , act(c.activation)
    {
        self_attn = register_module("self_attn", std::make_shared<OptAttentionImpl>(c));
        self_attn_layer_norm = register_module("self_attn_layer_norm",
                                               std::make_shared<NormImpl>(c.hiddenSize, c.normEps, false));
        fc1 = register_module("fc1",
                              std::make_shared<LinearImpl>(c.hiddenSize, c.intermediateSize, c.enableBias));
        fc2 = register_module("fc2",
                              std::make_shared<LinearImpl>(c.intermediateSize, c.hiddenSize, c.enableBias));
        final_layer_norm =
            register_module("final_layer_norm", std::make_shared<NormImpl>(c.hiddenSize, c.normEps, false));
    }

    torch::Tensor forward(torch::Tensor x, const PassContext& pass, const CaptureScope& capture)
    {
        // Attention half: pre-LN x + attn(LN1(x)); post-LN LN1(x + attn(x)).
        const torch::Tensor attnIn =
            preLn ? capture.quant(QuantSite::AttnNorm, self_attn_layer_norm->forward(x)) : x;
        x = capture.quant(QuantSite::AttnResidual,
                          x + attnOut(self_attn->forward(attnIn, pass, capture), capture));
        if (!preLn) x = capture.quant(QuantSite::AttnNorm, self_attn_layer_norm->forward(x));

        // FFN half.
        const torch::Tensor mlpIn =
            preLn ? capture.quant(QuantSite::FfnNorm, final_layer_norm->forward(x)) : x;
        torch::Tensor out = x + ffnHalf(mlpIn, nullptr, *fc1, *fc2, act, capture);
        if (preLn) return blockOut(out, capture);
        put(capture, CapturePoint::Residual, out); // post-LN: the sum entering final_layer_norm
        out = capture.quant(QuantSite::FfnResidual, out);
        out = capture.quant(QuantSite::FfnNorm, final_layer_norm->forward(out));
        put(capture, CapturePoint::Out, out);
        return out;
    }

    std::shared_ptr<OptAttentionImpl> self_attn;
    std::shared_ptr<NormImpl> self_attn_layer_norm, final_layer_norm;
    std::shared_ptr<LinearImpl> fc1, fc2;
    bool preLn;
    std::string act;
};

class OptLmImpl : public DecoderLmImpl
{
public:
    explicit OptLmImpl(const DecoderConfig& c)
        : DecoderLmImpl("OPTForCausalLM")
    {
        const int E = c.embedDim(), d = c.hiddenSize;
        auto model = register_module("model", std::make_shared<torch::nn::Module>("OPTModel"));
        auto decoder = model->register_module("decoder", std::make_shared<torch::nn::Module>("OPTDecoder"));
        embed_tokens =
            decoder->register_module("embed_tokens", std::make_shared<EmbeddingImpl>(c.vocabSize, E));
        // OPTLearnedPositionalEmbedding: max_position_embeddings + 2 rows (offset 2).
        embed_positions = decoder->register_module("embed_positions",
                                                   std::make_shared<EmbeddingImpl>(c.maxPositions + 2, d));
        if (c.finalLayerNorm)
            final_layer_norm =
                decoder->register_module("final_layer_norm", std::make_shared<NormImpl>(d, c.normEps, false));
        if (E != d) {
            project_out = decoder->register_module("project_out", std::make_shared<LinearImpl>(d, E, false));
            project_in = decoder->register_module("project_in", std::make_shared<LinearImpl>(E, d, false));
        }
        layers = decoder->register_module("layers", torch::nn::ModuleList());
        for (int i = 0; i < c.numLayers; ++i) {
            auto layer = std::make_shared<OptLayerImpl>(c);
            layers->push_back(layer);
            blocks.push_back(layer);
        }
        if (!c.tieWordEmbeddings)
            lm_head = register_module("lm_head", std::make_shared<LinearImpl>(E, c.vocabSize, false));
    }

    torch::Tensor body(const torch::Tensor& ids, const torch::Tensor& positions, PassContext& pass) override
    {
        const CaptureScope top(pass.sink, -1);
        torch::Tensor tokens = embed_tokens->forward(ids, pass.dtype);
        if (project_in) tokens = project_in->forward(tokens);
        torch::Tensor x = tokens + embed_positions->forward(positions + 2, pass.dtype);
        put(top, CapturePoint::Embeddings, x);
        x = top.quant(QuantSite::EmbeddingSum, x);
        for (std::size_t i = 0; i < blocks.size(); ++i)
            x = blocks[i]->forward(x, pass, CaptureScope(pass.sink, int(i)));
        if (final_layer_norm) x = top.quant(QuantSite::FinalNorm, final_layer_norm->forward(x));
        if (project_out) x = project_out->forward(x);
        return x;
    }

    std::vector<NormReaders> preNorms() override
    {
        std::vector<NormReaders> out;
        for (int i = 0; i < int(blocks.size()); ++i) {
            OptLayerImpl& b = *blocks[std::size_t(i)];
            const std::string at = "layers." + std::to_string(i) + ".";
            if (!b.preLn) return {};
            OptAttentionImpl& a = *b.self_attn;
            out.push_back(
                preNormReaders(at + "self_attn_layer_norm", i, QuantSite::AttnNorm, *b.self_attn_layer_norm,
                               {a.q_proj.get(), a.k_proj.get(), a.v_proj.get()}, &a.gates, &a.sink));
            out.push_back(preNormReaders(at + "final_layer_norm", i, QuantSite::FfnNorm, *b.final_layer_norm,
                                         {b.fc1.get()}));
        }
        return out;
    }

    ResidualStream residualStream() override
    {
        ResidualStream s;
        if (project_in || !final_layer_norm || preNorms().empty())
            return ResidualStream::refused(
                "OPT with post-LN blocks or a projected embedding (project_in/out) "
                "cannot be rotated here");
        s.tables = {embed_tokens->weight, embed_positions->weight};
        for (auto& b : blocks) {
            s.writers.push_back(residualWriter(*b->self_attn->out_proj, false));
            s.writers.push_back(residualWriter(*b->fc2, true));
        }
        s.rotateFinalNorm = finalNormRotation(*final_layer_norm, !lm_head);
        s.norms = preNorms();
        return s;
    }

    torch::Tensor headWeight() const override { return lm_head ? lm_head->weight : embed_tokens->weight; }
    std::string tiedHeadName() const override { return lm_head ? std::string() : "lm_head.weight"; }
    std::string embeddingName() const override { return "model.decoder.embed_tokens.weight"; }
    Naming naming() const override
    {
        return {"model.decoder.", {"decoder.", ""}, {}}; // hub OPT: "decoder.layers..." (OPTModel's names)
    }
    bool learnedPositions() const override { return true; }
    std::int64_t paddingPosition() const override { return -1; }

    std::shared_ptr<EmbeddingImpl> embed_tokens, embed_positions;
    std::shared_ptr<NormImpl> final_layer_norm;
    std::shared_ptr<LinearImpl> project_in, project_out, lm_head;
    torch::nn::ModuleList layers{nullptr};
    std::vector<std::shared_ptr<OptLayerImpl>> blocks;
};

/// The checkpoint tensors whose shapes the config fixes (checked before the module is built).
std::vector<ImpliedShape> impliedShapes(const DecoderConfig& c)
{
    const std::int64_t d = c.hiddenSize, n = c.maxPositions;
    return {{"embed_tokens.weight", {c.vocabSize, c.embedDim()}, "vocab_size x word_embed_proj_dim"},
            {"embed_positions.weight", {n + 2, d}, "(max_position_embeddings + 2) x hidden_size"},
            {"layers.0.fc1.weight", {c.intermediateSize, d}, "ffn_dim x hidden_size"}};
}

} // namespace

std::shared_ptr<DecoderLmImpl> makeOpt(const DecoderConfig& config)
{
    return std::make_shared<OptLmImpl>(config);
}

const DecoderLayout kOptLayout = {makeOpt, impliedShapes};

} // namespace outlierlens::decoder
