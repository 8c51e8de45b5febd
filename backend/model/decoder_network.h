#pragma once
// A network is used by one thread at a time (the worker that owns it).
//
// Causal decoder LLMs of three Hugging Face families (transformers v4.31 numerics): GPT2LMHeadModel,
// OPTForCausalLM (pre-LN and post-LN, project_in/out) and LlamaForCausalLM (RMSNorm, rotary, SwiGLU,
// grouped-query attention), with the attention variants of DESIGN.md. The architecture comes from
// config.json, never from the folder's name.

#include "model/capture.h"
#include "model/config.h"
#include "model/decoder_config.h"
#include "model/loading.h"

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace outlierlens {

/// What forward() returns.
struct DecoderForward
{
    torch::Tensor logits;     ///< [B, T, V] float32; undefined if not asked for
    torch::Tensor lastHidden; ///< [B, T, E] what the LM head multiplies (after the final norm/project_out)
};

/// One decoder checkpoint. Weights keep their storage dtype in memory (float32, float16 or bfloat16;
/// safetensors memory-mapped), and each layer computes in the compute dtype (float32 by default).
class DecoderNetwork
{
public:
    /// Loads <dir>/config.json and its weights strictly: model.safetensors, pytorch_model.bin or a
    /// sharded checkpoint (model.safetensors.index.json / pytorch_model.bin.index.json); keys with or
    /// without the "model."/"transformer." prefix; tied or separate lm_head. `override` replaces the
    /// config's attention variant. Throws Error naming the file and tensor.
    static DecoderNetwork load(const std::string& modelDir, const VariantOverride& override = {});
    /// A new model with Hugging Face's initialisation for the family, seeded; parameters float32.
    static DecoderNetwork create(const DecoderConfig& config, std::uint64_t seed);
    ~DecoderNetwork();
    DecoderNetwork(DecoderNetwork&&) noexcept;
    DecoderNetwork& operator=(DecoderNetwork&&) noexcept;

    /// Writes config.json and model.safetensors (Hugging Face key names) into `dir`, atomically;
    /// `dtype` kFloat, kHalf or kBFloat16.
    void save(const std::string& dir, torch::ScalarType dtype = torch::kFloat) const;
    /// What create(config, seed) followed by save(dir, dtype) writes, bit for bit, with one parameter in
    /// memory at a time (in float32, then stored as `dtype`): a 7B model in bfloat16 is written within a
    /// few GB. Throws Error as save() does.
    static void writeRandom(const DecoderConfig& config, std::uint64_t seed, const std::string& dir,
                            torch::ScalarType dtype = torch::kFloat);

    /// inputIds, attentionMask: [B, T] int64 (mask 1 = real token; undefined = all real). Positions
    /// are cumsum(mask) - 1 per row, as Hugging Face's generate() passes them, so left- and right-
    /// padded rows give the same activations on their real tokens. Masked (future or padded) keys get
    /// probability exactly 0. Runs under the caller's grad mode. The sink gets DESIGN.md's capture
    /// points (embeddings = the input of layer 0; logits [B, T, V]).
    DecoderForward forward(const torch::Tensor& inputIds, const torch::Tensor& attentionMask = {},
                           ActivationSink* sink = nullptr, bool computeLogits = true);

    /// kFloat (default) or kBFloat16: the dtype activations are computed in.
    void setComputeDtype(torch::ScalarType dtype);
    torch::ScalarType computeDtype() const;
    /// Clipped softmax at `strength` in [0, 1] of its configured gamma and zeta (training's
    /// clip_warmup_steps); 1 by default. No effect on other variants.
    void setClipStrength(double strength);

    const DecoderConfig& config() const;
    torch::nn::Module& module();
    const std::string& weightsFile() const;
    /// SHA-256 of the weights file(s) ("" for a model created in memory; shards: of the index file).
    /// Computed on the first call (seconds for a multi-GB file), then cached.
    const std::string& checkpointSha256() const;
    const LoadReport& loadReport() const;
    /// Bytes of all parameters as stored in memory.
    std::int64_t parameterBytes() const;
    void setTraining(bool on);

private:
    struct Impl;
    explicit DecoderNetwork(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

} // namespace outlierlens
