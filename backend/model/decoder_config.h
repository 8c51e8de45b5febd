#pragma once
// Any thread: plain values.
//
// The config.json of the causal decoder families: GPT-2, OPT, the LLaMA layout (LLaMA 2/3, Qwen2, Qwen3,
// Mistral), Gemma 2, and the parallel-block layouts of Phi, GPT-NeoX (Pythia) and Falcon. No torch here,
// so that the GUI side and the tokenizers can read a decoder's config cheaply.

#include "model/config.h"

#include <string>
#include <vector>

namespace outlierlens {

/// The module layout (its own file in backend/model): GPT-2's, OPT's, LLaMA's (which Qwen2, Qwen3 and
/// Mistral share, with the differences below as config fields), Gemma 2's, Phi's, GPT-NeoX's, Falcon's.
enum class DecoderArch { Gpt2, Opt, Llama, Gemma2, Phi, GptNeox, Falcon };
/// The layout's first family's model_type: "gpt2", "opt", "llama", "gemma2", "phi", "gpt_neox", "falcon".
std::string toString(DecoderArch arch);

/// The config.json fields of the decoder families that change the computation.
struct DecoderConfig
{
    DecoderArch arch = DecoderArch::Gpt2;
    /// config.json's model_type, the family's registry id (model/model_family.h): "llama", "qwen2", ...
    std::string modelType;
    std::vector<std::string> architectures; ///< config.json "architectures" as written
    int vocabSize = 0;
    int hiddenSize = 0; ///< d_model
    int numLayers = 0;
    int numHeads = 0;
    int numKvHeads = 0;       ///< LLaMA grouped-query attention; = numHeads elsewhere
    int intermediateSize = 0; ///< d_ff (GPT-2 n_inner, null = 4 d)
    int maxPositions = 0;     ///< n_positions / max_position_embeddings
    std::string activation;   ///< "gelu_new", "relu", "silu", ...
    double normEps = 1e-5;    ///< layer_norm_epsilon / rms_norm_eps (OPT: 1e-5, not in config)
    // GPT-2
    bool scaleAttnWeights = true;
    bool scaleAttnByInverseLayerIdx = false;
    // OPT
    bool doLayerNormBefore = true; ///< pre-LN (false: opt-350m's post-LN)
    bool finalLayerNorm = true;    ///< pre-LN and not _remove_final_layer_norm
    int wordEmbedProjDim = 0;      ///< E; project_in/out exist when E != hiddenSize
    bool enableBias = true;
    // LLaMA layout
    double ropeTheta = 10000.0;  ///< rope_theta when present (4.31 fixes 10000)
    std::string ropeScalingType; ///< "", "linear", "dynamic" or "llama3"
    double ropeScalingFactor = 1.0;
    /// rope_scaling "llama3" (LLaMA 3.1/3.2): wavelengths between original_max_position_embeddings /
    /// high_freq_factor and / low_freq_factor are interpolated, longer ones divided by the factor.
    double ropeLowFreqFactor = 1.0, ropeHighFreqFactor = 4.0;
    int ropeOriginalMaxPositions = 8192;
    int headDimension = 0;      ///< head_dim when the config gives it (Mistral); 0: hidden_size / heads
    bool attentionBias = false; ///< q, k and v projections have biases, o_proj none (Qwen2)
    int slidingWindow = 0;      ///< a query sees the W most recent key slots, itself included (Mistral)
    bool qkNorm = false;        ///< per-head RMSNorm of q and k before rotary (Qwen3's q_norm/k_norm)
    // Gemma 2
    bool slidingWindowAlternates = false; ///< the window applies to even layers only (Gemma 2)
    double queryPreAttnScalar = 0;        ///< scores scaled by its -1/2 power instead of head_dim's
    double attnLogitSoftcap = 0;          ///< cap * tanh(score / cap) before the mask; 0: none
    double finalLogitSoftcap = 0;         ///< the same on the logits
    // Parallel blocks (Phi, GPT-NeoX, Falcon)
    double partialRotaryFactor = 1.0; ///< rotary on the first int(head_dim * factor) dims of each head
    bool parallelResidual = false;    ///< x + attn(ln1 x) + mlp(ln2 x) (or one norm for both)
    bool mlpNorm = false;             ///< the MLP reads its own LayerNorm of x (NeoX, Falcon-40B)
    bool linearBias = true;           ///< q/k/v/dense and MLP linears have biases (Phi, NeoX; Falcon: "bias")
    bool headBias = false;            ///< the LM head has a bias (Phi)
    bool newDecoderArchitecture = false; ///< Falcon-40B's grouped fused QKV
    bool tieWordEmbeddings = true;
    int bosTokenId = -1, eosTokenId = -1, padTokenId = -1; ///< -1 = none
    std::string torchDtype;                                ///< config.json "torch_dtype" or ""
    AttentionVariant variant;

    int headDim() const { return headDimension > 0 ? headDimension : hiddenSize / numHeads; }
    /// The rotated dims of each head: int(head_dim * partial_rotary_factor) (all of them by default).
    int rotaryDim() const { return int(headDim() * partialRotaryFactor); }
    /// The layout uses rotary positions (everything but GPT-2 and OPT).
    bool rotary() const { return arch != DecoderArch::Gpt2 && arch != DecoderArch::Opt; }
    /// The family's registry id: model_type, or the layout's first family's.
    std::string familyId() const { return modelType.empty() ? toString(arch) : modelType; }
    /// Blocks normalise their input (GPT-2, LLaMA, pre-LN OPT); opt-350m normalises after the residual.
    bool preLayerNorm() const { return arch != DecoderArch::Opt || doLayerNormBefore; }
    /// OPT: the width of the token embeddings and of the LM head (E); hiddenSize elsewhere.
    int embedDim() const
    {
        return arch == DecoderArch::Opt && wordEmbedProjDim > 0 ? wordEmbedProjDim : hiddenSize;
    }
    /// Reads and validates a Hugging Face config.json. Errors name the file and the field.
    static DecoderConfig fromFile(const std::string& path);
    /// Named shapes for benchmarks and new models: "gpt2-tiny", "opt-tiny", "llama-tiny", "gpt2"
    /// (124M), "opt-125m", "opt-350m", "tinyllama-1.1b", "llama-7b", "llama3-8b", "qwen2.5-7b",
    /// "mistral-7b". Throws Error for unknown names.
    static DecoderConfig preset(const std::string& name);
    static std::vector<std::string> presetNames();
    /// A config.json that Hugging Face reads back (with the "outlierlens" block when not vanilla).
    std::string toJson() const;
    void validate(const std::string& where) const;
};

} // namespace outlierlens
