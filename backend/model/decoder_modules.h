#pragma once
// Internal to backend/model (decoder_network.cpp and the layout files gpt2.cpp, opt.cpp, llama.cpp,
// gemma2.cpp, phi.cpp, gpt_neox.cpp, falcon.cpp): the module trees of the decoder families, registered
// under Hugging Face's checkpoint names, and the halves of a block they share (attentionHalf, ffnHalf,
// blockOut), which hold the order of capture points and quantizers once. Used by the thread that runs
// the model.
//
// Parameters keep whatever dtype the checkpoint stored (float32, float16, bfloat16); every
// operation converts the weights it needs to the activations' dtype when it runs, so no widened
// copy of the whole model ever exists.

#include "model/attention.h"
#include "model/capture.h"
#include "model/decoder_config.h"
#include "model/loading.h"
#include "model/norm_readers.h"

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
    /// The bias, registered as zeros first if the layer has none.
    torch::Tensor ensureBias();
    torch::Tensor weight, bias;
    bool conv1d = false;
    /// FFN down projections after a rotation (model/norm_readers.h): ffnHalf() multiplies the input by it
    /// before the quantizer; undefined otherwise.
    torch::Tensor inputRotation;
};

/// LayerNorm ("weight", "bias"), LLaMA's RMSNorm ("weight"; statistics in float32, cast, then times the
/// weight, as HF does) or Gemma's (float32 throughout, times 1 + weight, then cast).
class NormImpl : public torch::nn::Module
{
public:
    enum class Kind { Layer, Rms, GemmaRms };
    NormImpl(int size, double eps, bool rms);
    NormImpl(int size, double eps, Kind kind);
    torch::Tensor forward(const torch::Tensor& x) const;
    torch::Tensor weight, bias;
    double eps = 1e-5;
    Kind kind = Kind::Layer;
    /// After a rotation of the stream (model/norm_readers.h): a LayerNorm's mean is the component along this
    /// unit vector [d]; x is multiplied by inputRotation [d, d] first and the result by outputRotation
    /// (the final norm). Undefined otherwise.
    torch::Tensor meanAxis, inputRotation, outputRotation;
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

/// A pre-norm and the weights that read its output (model/norm_readers.h): `linears`, plus the attention's
/// gates and context scale when `gates` / `sink` are given (they read the attention's input).
NormReaders preNormReaders(std::string name, int layer, QuantSite site, NormImpl& norm,
                           const std::vector<LinearImpl*>& linears, const AttentionGates* gates = nullptr,
                           const SinkParams* sink = nullptr);

/// A residual writer (model/norm_readers.h); `down`: an FFN down projection, which takes an online rotation.
ResidualWriter residualWriter(LinearImpl& linear, bool down);

/// ResidualStream::rotateFinalNorm for this final norm; `tiedHead`: the head reads the token embeddings.
std::function<void(const torch::Tensor&)> finalNormRotation(NormImpl& norm, bool tiedHead);

/// What every layer of one forward pass shares.
struct PassContext
{
    torch::Tensor additiveMask; ///< [B, 1, T, T] compute dtype: 0 where a key may be seen, lowest float else
    torch::Tensor keyAllowed;   ///< [B, 1, T, T] bool: causal and not padding
    torch::Tensor keysSeen;     ///< [B, 1, T, 1] float32: the keys each query may see (clip_per_query)
    torch::Tensor cos, sin;     ///< rotary layouts: [B, 1, T, rotated dims] tables at the positions
    /// The same pass with the sliding window's masks, for the layers that have one (Gemma 2's even
    /// layers); null where every layer has the same masks (Mistral's window is in the masks above).
    PassContext* sliding = nullptr;
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

/// cos/sin [B, 1, T, rd] in the rotate_half layout at the positions, as Hugging Face's rotary embeddings
/// build them in float32 (then cast to the compute dtype): inv_freq over the rotated dims rd (partial
/// rotary: Phi, GPT-NeoX), rope_scaling linear, dynamic or llama3; the sliding pass gets the same tables.
void rotaryTables(const DecoderConfig& c, const torch::Tensor& positions, PassContext& pass);

/// How projected q, k, v become scores in a rotary layout.
struct HeadsSpec
{
    int numHeads = 0, numKvHeads = 0, headDim = 0;
    double scoreDivisor =
        1.0;            ///< scores = q.k / divisor (sqrt(head_dim); Gemma 2: sqrt(query_pre_attn_scalar))
    double softcap = 0; ///< cap * tanh(scores / cap) before the mask (Gemma 2); 0: none
    const NormImpl* qNorm = nullptr; ///< per-head norms before rotary (Qwen3)
    const NormImpl* kNorm = nullptr;
};

/// The attention of a rotary layout from its projections q [B, T, nh d], k, v [B, T, nkv d]: quantizes
/// them (query, key, value), splits the heads, applies the per-head norms and rotary (the first rd dims
/// of each head), repeats key/value heads for grouped queries (query head h reads h / (nh / nkv)),
/// computes the scores and attend(). Returns the merged context [B, T, nh d].
torch::Tensor attentionHalf(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const HeadsSpec& spec, const torch::Tensor& gateInput,
                            const AttentionVariant& variant, AttentionGates& gates, const SinkParams& sink,
                            const PassContext& pass, const CaptureScope& capture);

/// The FFN from its input: act(gate(m)) * up(m) when there is a gate, act(up(m)) otherwise; captured as
/// down_in and quantized, then down; captured as ffn_out and quantized. Returns the FFN's output.
torch::Tensor ffnHalf(const torch::Tensor& m, const LinearImpl* gate, const LinearImpl& up,
                      const LinearImpl& down, const std::string& act, const CaptureScope& capture);

/// The attention's output projection: captured as attn_out and quantized.
torch::Tensor attnOut(const torch::Tensor& projected, const CaptureScope& capture);

/// A pre-norm block's output: captured as residual and out, quantized.
torch::Tensor blockOut(const torch::Tensor& out, const CaptureScope& capture);

/// The body of a rotary layout (LLaMA's, Gemma 2's, Phi's, GPT-NeoX's, Falcon's): the rotary tables, the
/// token embeddings (times `embeddingScale` when defined: Gemma's sqrt(hidden) in the compute dtype),
/// captured as embeddings and quantized, every block in order, the final norm, quantized. Returns the
/// last hidden state.
template<class Block>
torch::Tensor rotaryBody(const DecoderConfig& config, const torch::Tensor& ids,
                         const torch::Tensor& positions, PassContext& pass, const EmbeddingImpl& embedding,
                         const std::vector<std::shared_ptr<Block>>& blocks, const NormImpl& finalNorm,
                         const torch::Tensor& embeddingScale = {})
{
    const CaptureScope top(pass.sink, -1);
    rotaryTables(config, positions, pass);
    torch::Tensor x = embedding.forward(ids, pass.dtype);
    if (embeddingScale.defined()) x = x * embeddingScale;
    put(top, CapturePoint::Embeddings, x);
    x = top.quant(QuantSite::EmbeddingSum, x);
    for (std::size_t i = 0; i < blocks.size(); ++i)
        x = blocks[i]->forward(x, pass, CaptureScope(pass.sink, int(i)));
    return top.quant(QuantSite::FinalNorm, finalNorm.forward(x));
}

/// The prefix a layout's module names carry ("transformer.", "model.decoder.", "model.", "gpt_neox.") and
/// the shorter prefixes checkpoints of other provenance use for the same tensors.
struct Naming
{
    std::string canonical;
    std::vector<std::string> alternatives; ///< replaced by `canonical` when a key starts with one
    /// Names that are not parameters here although checkpoints hold them, the first matching suffix
    /// with its reason (e.g. GPT-2's causal-mask buffers, rotary inverse frequencies).
    std::vector<std::pair<std::string, std::string>> ignoredSuffixes;
    /// Prefixes of names outside the body (the LM head), never given the canonical prefix.
    std::vector<std::string> topLevel = {"lm_head."};
};

/// Every layout's language model has this interface; DecoderNetwork asks it and never the layout.
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
    virtual Naming naming() const = 0;
    /// Logits [B, T, V] in the compute dtype from the last hidden state: the head without bias by
    /// default (Phi: with its bias; Gemma 2: soft-capped).
    /// `head` [V, E], when defined, replaces the head's weight (a floating-point copy kept while the model's
    /// own is quantized); a bias and a soft cap still apply.
    virtual torch::Tensor logits(const torch::Tensor& lastHidden, const torch::Tensor& head = {}) const;
    /// Every block's pre-norms with the weights that read them, in order (SmoothQuant's migration); empty
    /// where blocks normalise after the residual sum (post-LN OPT): no norm there feeds only linears.
    virtual std::vector<NormReaders> preNorms() { return {}; }
    /// What a rotation of the residual stream touches; a refusal where the layout cannot be rotated.
    virtual ResidualStream residualStream();
    /// Learned position tables (GPT-2, OPT) bound the input's length; rotary layouts have none.
    virtual bool learnedPositions() const { return false; }
    /// The position of padding slots: 1 as generate() passes (OPT: -1, its own rule).
    virtual std::int64_t paddingPosition() const { return 1; }
    /// Hugging Face's _init_weights exceptions beyond normal(0, 0.02): a parameter's own std, or < 0.
    virtual double initStd(const std::string& /*name*/) const { return -1.0; }
    /// The initial weight of norms: 1 (Gemma's (1 + w) norms: 0).
    virtual double normWeightInit() const { return 1.0; }
    /// nn.Embedding(padding_idx = pad_token_id): the pad row starts at zero (not GPT-2's wte).
    virtual bool embeddingHasPaddingRow() const { return true; }
};

/// A layout (its own file): how its module is built, and the checkpoint tensors whose shapes a config
/// fixes, checked against a checkpoint before anything is built (a config asking for 10^5 layers or a
/// 2^20-row table fails before it allocates).
struct DecoderLayout
{
    std::shared_ptr<DecoderLmImpl> (*make)(const DecoderConfig& config);
    std::vector<ImpliedShape> (*impliedShapes)(const DecoderConfig& config);
};
extern const DecoderLayout kGpt2Layout, kOptLayout, kLlamaLayout, kGemma2Layout, kPhiLayout, kGptNeoxLayout,
    kFalconLayout;

} // namespace outlierlens::decoder
