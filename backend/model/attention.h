#pragma once
// Called on the thread that runs the model.

#include "model/capture.h"
#include "model/config.h"
#include "model/norm_readers.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

namespace outlierlens {

/// The gates of gated attention, registered into the owning self-attention module under "alpha"
/// with the parameter names of Qualcomm's outlier-free-transformers code:
/// linear: alpha.{h}.weight [1, d_head], alpha.{h}.bias [1];
/// mlp: alpha.{h}.0.weight [n_hid, d_head], alpha.{h}.0.bias, alpha.{h}.2.weight [1, n_hid],
/// alpha.{h}.2.bias; all_heads_linear: alpha.weight [H, d_model], alpha.bias [H].
class AttentionGates
{
public:
    /// Creates and registers the gate modules (nothing for GateKind::None). New gates get
    /// bias logit(pi_init) on their last layer, so training starts at pi = pi_init.
    void create(torch::nn::Module& owner, const AttentionVariant& variant, int numHeads, int headDim);
    bool enabled() const { return m_kind != GateKind::None; }
    /// x: the block's input hidden states [B, T, d_model] -> pi [B, H, T] in (0, 1).
    torch::Tensor forward(const torch::Tensor& x);
    /// The gate weights that read x (model/norm_readers.h): all heads' [H, d], or each head's first layer
    /// reading its d_head slice.
    void appendReaders(std::vector<NormReader>& readers) const;

private:
    /// Per-head gates: head h's first linear layer (the one reading x).
    const torch::nn::LinearImpl* firstLayer(int h) const;

    GateKind m_kind = GateKind::None;
    int m_numHeads = 0;
    int m_headDim = 0;
    torch::nn::ModuleList m_perHead{nullptr};
    torch::nn::Linear m_allHeads{nullptr};
};

/// Geometry and variant of one multi-head attention.
struct AttentionSpec
{
    int numHeads = 0;
    int headDim = 0;
    AttentionVariant variant;
};

/// Scaled dot-product attention with the variants of DESIGN.md and every attention capture point.
/// q, k, v, x: [B, T, d_model] (x is the block input, used by the gates); additiveMask: [B, 1, 1, T]
/// with 0 for real keys and the most negative float for padding, or an undefined tensor.
/// probsDropout is applied after the probabilities are captured (identity in eval mode).
/// Returns the heads' context after gating, merged back to [B, T, d_model].
torch::Tensor multiHeadAttention(const AttentionSpec& spec, const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, const torch::Tensor& x,
                                 const torch::Tensor& additiveMask, AttentionGates& gates,
                                 torch::nn::Dropout& probsDropout, const CaptureScope& capture);

/// The (clipped) softmax over the last dimension: vanilla softmax, or
/// clamp((zeta - gamma) * softmax(x) + gamma, 0, 1) for clipped softmax. With clip_per_query,
/// `keysSeen` ([..., T, 1], broadcasting against the scores) counts each query's visible keys and its
/// gamma is the configured gamma * T / keysSeen (= -alpha / keysSeen).
torch::Tensor attentionSoftmax(const torch::Tensor& scores, const AttentionVariant& variant,
                               const torch::Tensor& keysSeen = {});

/// [B, T] 0/1 attention mask -> additive [B, 1, 1, T] mask (0 or the most negative float), as
/// Hugging Face builds it. Undefined in, undefined out.
torch::Tensor additiveAttentionMask(const torch::Tensor& attentionMask, torch::ScalarType dtype);

} // namespace outlierlens
