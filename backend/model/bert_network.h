#pragma once
// A network is used by one thread at a time (the worker that owns it).

#include "model/bert.h"
#include "model/loading.h"

#include <cstdint>
#include <string>

namespace outlierlens {

enum class BertHead { Encoder, SequenceClassification, MaskedLM };
std::string toString(BertHead head);

/// A BERT checkpoint of any of Hugging Face's three shapes: BertModel (keys with or without the
/// "bert." prefix), BertForSequenceClassification, BertForMaskedLM (also bert-base-uncased's
/// pre-training checkpoint, whose NSP head is left out and reported).
class BertNetwork
{
public:
    /// Loads <dir>/config.json and its weights strictly; the head is chosen from the tensors
    /// present and checked against config.json's "architectures". `override` replaces the
    /// config's attention variant (for checkpoints trained elsewhere). Throws Error.
    static BertNetwork load(const std::string& modelDir, const VariantOverride& override = {});
    /// A new model with Hugging Face's initialisation (normal(0, 0.02) weights, zero biases,
    /// LayerNorm 1/0, gate biases logit(pi_init)), seeded.
    static BertNetwork create(const BertConfig& config, BertHead head, std::uint64_t seed);

    /// Writes config.json and model.safetensors into `dir` (created if needed), each atomically.
    /// fp16 storage halves the size; loading converts back to float32.
    void save(const std::string& dir, bool float16 = false) const;

    /// inputIds, tokenTypeIds, attentionMask: [B, T] int64. Runs under the caller's grad mode.
    BertForward forward(const torch::Tensor& inputIds, const torch::Tensor& tokenTypeIds,
                        const torch::Tensor& attentionMask, ActivationSink* sink = nullptr);

    const BertConfig& config() const { return m_config; }
    BertHead head() const { return m_head; }
    torch::nn::Module& module();
    const torch::nn::Module& module() const { return const_cast<BertNetwork*>(this)->module(); }
    BertModel encoder() const;
    /// The masked-LM module (null unless head() is MaskedLM).
    BertForMaskedLM maskedLm() const { return m_maskedLm; }
    const std::string& weightsFile() const { return m_weightsFile; }
    /// SHA-256 of the weights file ("" for a model created in memory).
    const std::string& checkpointSha256() const { return m_sha256; }
    const LoadReport& loadReport() const { return m_report; }
    void setTraining(bool on);
    /// Clipped softmax faded in (training's clip_warmup_steps): every layer computes with the config's
    /// variant at `strength` in [0, 1] (AttentionVariant::clipFadedIn); 1, the default, is the config's.
    void setClipStrength(double strength);

private:
    BertNetwork(const BertConfig& config, BertHead head);

    BertConfig m_config;
    BertHead m_head = BertHead::Encoder;
    BertModel m_encoder{nullptr};
    BertForSequenceClassification m_classifier{nullptr};
    BertForMaskedLM m_maskedLm{nullptr};
    std::string m_weightsFile;
    std::string m_sha256;
    LoadReport m_report;
};

} // namespace outlierlens
