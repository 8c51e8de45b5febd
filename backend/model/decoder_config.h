#pragma once
// Any thread: plain values.
//
// The config.json of the causal decoder families (GPT-2, OPT, LLaMA). No torch here, so that the
// GUI side and the tokenizers can read a decoder's config cheaply.

#include "model/config.h"

#include <string>
#include <vector>

namespace outlierlens {

enum class DecoderArch { Gpt2, Opt, Llama };
/// "gpt2", "opt", "llama" (config.json's model_type).
std::string toString(DecoderArch arch);

/// The config.json fields of the three families that change the computation.
struct DecoderConfig
{
    DecoderArch arch = DecoderArch::Gpt2;
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
    // LLaMA
    double ropeTheta = 10000.0;  ///< rope_theta when present (4.31 fixes 10000)
    std::string ropeScalingType; ///< "", "linear" or "dynamic"
    double ropeScalingFactor = 1.0;
    bool tieWordEmbeddings = true;
    int bosTokenId = -1, eosTokenId = -1, padTokenId = -1; ///< -1 = none
    std::string torchDtype;                                ///< config.json "torch_dtype" or ""
    AttentionVariant variant;

    int headDim() const { return hiddenSize / numHeads; }
    /// OPT: the width of the token embeddings and of the LM head (E); hiddenSize elsewhere.
    int embedDim() const
    {
        return arch == DecoderArch::Opt && wordEmbedProjDim > 0 ? wordEmbedProjDim : hiddenSize;
    }
    /// Reads and validates a Hugging Face config.json. Errors name the file and the field.
    static DecoderConfig fromFile(const std::string& path);
    /// Named shapes for benchmarks and new models: "gpt2-tiny", "opt-tiny", "llama-tiny", "gpt2"
    /// (124M), "opt-125m", "opt-350m", "tinyllama-1.1b", "llama-7b". Throws Error for unknown names.
    static DecoderConfig preset(const std::string& name);
    static std::vector<std::string> presetNames();
    /// A config.json that Hugging Face reads back (with the "outlierlens" block when not vanilla).
    std::string toJson() const;
    void validate(const std::string& where) const;
};

/// True if <dir>/config.json describes a GPT-2, OPT or LLaMA decoder (model_type / architectures).
bool isDecoderModelDir(const std::string& modelDir);

} // namespace outlierlens
