#pragma once
// Internal to backend/model (decoder_network.cpp and the family files): the module trees of the
// decoder families, registered under Hugging Face's checkpoint names. Used by the thread that runs
// the model.
//
// Parameters keep whatever dtype the checkpoint stored (float32, float16, bfloat16); every
// operation converts the weights it needs to the activations' dtype when it runs, so no widened
// copy of the whole model ever exists.

#include "model/attention.h"
#include "model/capture.h"
#include "model/decoder_config.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>

#include <memory>
#include <string>
#include <vector>

namespace outlierlens::decoder {

/// nn.Linear ("weight" [out, in]) or GPT-2's Conv1D ("weight" [in, out], y = addmm(b, x, W)).
class LinearImpl : public torch::nn::Module
{
public:
    LinearImpl(int in, int out, bool bias, bool conv1d = false);
    /// x [..., in] -> [..., out] in x's dtype.
    torch::Tensor forward(const torch::Tensor& x) const;
    /// activation(forward(x), name), with a ReLU fused into the product (model/linear.h).
    torch::Tensor forward(const torch::Tensor& x, const std::string& activationName) const;
    torch::Tensor weight, bias;
    bool conv1d = false;
};

/// LayerNorm ("weight", "bias") or LLaMA's RMSNorm ("weight"; computed in float32 as HF does).
class NormImpl : public torch::nn::Module
{
public:
    NormImpl(int size, double eps, bool rms);
    torch::Tensor forward(const torch::Tensor& x) const;
    torch::Tensor weight, bias;
    double eps = 1e-5;
    bool rms = false;
};

/// "weight" [rows, dim]; looks rows up in their storage dtype and converts only those.
class EmbeddingImpl : public torch::nn::Module
{
public:
    EmbeddingImpl(int rows, int dim);
    torch::Tensor forward(const torch::Tensor& ids, torch::ScalarType dtype) const;
    torch::Tensor weight;
};

/// The weight in `dtype` (a no-op when it already is).
torch::Tensor weightAs(const torch::Tensor& w, torch::ScalarType dtype);

/// Extra per-head parameters of An et al.'s variants, registered on the attention module with their
/// nanoGPT names: k_bias, v_bias [1, H, 1, dh] (context-bias, attention-bias) or v_bias [d]
/// (fixed-bias); context_scale.0.weight [H, d], .bias [H] (context-scale).
struct SinkParams
{
    void create(torch::nn::Module& owner, const AttentionVariant& variant, int numHeads, int headDim);
    torch::Tensor kBias, vBias;
    std::shared_ptr<LinearImpl> contextScale;
};

/// What every layer of one forward pass shares.
struct PassContext
{
    torch::Tensor additiveMask; ///< [B, 1, T, T] compute dtype: 0 where a key may be seen, lowest float else
    torch::Tensor keyAllowed;   ///< [B, 1, T, T] bool: causal and not padding
    torch::Tensor keysSeen;     ///< [B, 1, T, 1] float32: the keys each query may see (clip_per_query)
    torch::Tensor cos, sin;     ///< LLaMA: [B, 1, T, d_head] rotary tables at the positions
    torch::ScalarType dtype = torch::kFloat;
    ActivationSink* sink = nullptr;
    double clipStrength = 1.0; ///< clipped softmax fade-in (AttentionVariant::clipFadedIn); 1 = as configured
};

/// Hands `t` to the sink as float32 if it wants `point` (a cheap no-op otherwise).
void put(const CaptureScope& capture, CapturePoint point, const torch::Tensor& t);

/// The attention after the scores: mask, (clipped / sigmoid / sink) softmax in float32, P.V, gate
/// and An et al.'s extras. scores [B, H, T, T] already scaled (captured here before the mask);
/// qh [B, H, T, dh] (scaled like the scores, for the sink slot), vh [B, H, T, dh]; gateInput
/// [B, T, d]: what the attention module received. Returns the merged context [B, T, H * dh].
torch::Tensor attend(torch::Tensor scores, const torch::Tensor& qh, const torch::Tensor& vh,
                     const torch::Tensor& gateInput, const AttentionVariant& variant, double scoreScale,
                     AttentionGates& gates, const SinkParams& sink, const PassContext& pass,
                     const CaptureScope& capture);

/// Activation by its Hugging Face name; gelu_new is HF's literal tanh formula.
torch::Tensor activation(const torch::Tensor& x, const std::string& name);

/// The three language models share this interface.
class DecoderLmImpl : public torch::nn::Module
{
public:
    explicit DecoderLmImpl(std::string name)
        : torch::nn::Module(std::move(name))
    {}
    /// ids, mask [B, T] int64 (mask defined); positions [B, T] int64 as HF uses them (OPT: row index
    /// before the offset of 2). Returns the last hidden state [B, T, E] in `pass.dtype`.
    virtual torch::Tensor body(const torch::Tensor& ids, const torch::Tensor& positions,
                               PassContext& pass) = 0;
    /// The LM head's weight [V, E] in its storage dtype (the tied token embeddings or lm_head.weight).
    virtual torch::Tensor headWeight() const = 0;
    /// Checkpoint names of the tied head that may appear in files but are not parameters here.
    virtual std::string tiedHeadName() const = 0;
    /// The token embedding parameter's name (what a tied head must equal).
    virtual std::string embeddingName() const = 0;
};

std::shared_ptr<DecoderLmImpl> makeGpt2(const DecoderConfig& config);
std::shared_ptr<DecoderLmImpl> makeOpt(const DecoderConfig& config);
std::shared_ptr<DecoderLmImpl> makeLlama(const DecoderConfig& config);

} // namespace outlierlens::decoder
