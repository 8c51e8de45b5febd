#include "model/bert_network.h"

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/sha256.h"
#include "io/safetensors.h"
#include "model/runtime.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace outlierlens {
namespace fs = std::filesystem;

namespace {

bool startsWith(const std::string& s, const std::string& prefix)
{
    return s.rfind(prefix, 0) == 0;
}

bool hasKeyWithPrefix(const StateDict& tensors, const std::string& prefix)
{
    const auto it = tensors.lower_bound(prefix);
    return it != tensors.end() && startsWith(it->first, prefix);
}

BertHead headFromArchitectures(const std::vector<std::string>& architectures, bool& known)
{
    known = true;
    for (const auto& a : architectures) {
        if (a == "BertForSequenceClassification") return BertHead::SequenceClassification;
        if (a == "BertForMaskedLM" || a == "BertForPreTraining") return BertHead::MaskedLM;
        if (a == "BertModel") return BertHead::Encoder;
    }
    known = false;
    return BertHead::Encoder;
}

/// Checks that an ignored tied or buffer tensor holds what the model computes anyway, so that
/// leaving it out cannot change a single output.
void requireEqual(const torch::Tensor& stored, const torch::Tensor& expected, const std::string& file,
                  const std::string& name, const std::string& what)
{
    if (stored.sizes() != expected.sizes() || !torch::equal(stored.to(expected.scalar_type()), expected))
        throw Error(file + ": tensor '" + name + "' differs from " + what +
                    " (not supported: the model ties them)");
}

/// Maps a checkpoint's names onto the module names of `head`, leaving out, with a reason, the
/// tensors Hugging Face itself ignores for that class.
StateDict mapBertKeys(StateDict tensors, BertHead head, const BertConfig& config, const std::string& file,
                      LoadReport& report)
{
    tensors = renameLegacyLayerNorm(std::move(tensors), report);
    const bool prefixed = hasKeyWithPrefix(tensors, "bert.");
    StateDict out;
    for (auto& [name, tensor] : tensors) {
        std::string mapped = name;
        if (head == BertHead::Encoder && prefixed) {
            if (!startsWith(name, "bert."))
                throw Error(file + ": unexpected tensor '" + name + "' " + shapeString(tensor) +
                            " next to 'bert.'-prefixed encoder weights");
            mapped = name.substr(5);
        }
        const std::string base =
            head == BertHead::Encoder ? mapped : (startsWith(mapped, "bert.") ? mapped.substr(5) : "");
        if (base == "embeddings.position_ids") {
            // A buffer older transformers versions saved; it must be the plain 0..P-1 it stands for.
            const auto positions = torch::arange(config.maxPositions, torch::kLong).unsqueeze(0);
            requireEqual(tensor, positions, file, name, "0.." + std::to_string(config.maxPositions - 1));
            report.ignored.push_back(name + " (position ids buffer, equal to 0..P-1)");
            continue;
        }
        if (head == BertHead::MaskedLM) {
            if (startsWith(mapped, "cls.seq_relationship.")) {
                report.ignored.push_back(name + " (next-sentence head, not part of BertForMaskedLM)");
                continue;
            }
            if (startsWith(mapped, "bert.pooler.")) {
                report.ignored.push_back(name + " (pooler, not part of BertForMaskedLM)");
                continue;
            }
            if (mapped == "cls.predictions.decoder.weight" || mapped == "cls.predictions.decoder.bias")
                continue; // checked against the tensors they are tied to below
        }
        out.emplace(std::move(mapped), std::move(tensor));
    }
    if (head == BertHead::MaskedLM) {
        // The decoder entries were skipped above without being moved from.
        const auto find = [&](const std::string& key) -> const torch::Tensor* {
            const auto it = tensors.find(key);
            return it == tensors.end() ? nullptr : &it->second;
        };
        if (const torch::Tensor* decoder = find("cls.predictions.decoder.weight")) {
            if (out.count("bert.embeddings.word_embeddings.weight"))
                requireEqual(*decoder, out.at("bert.embeddings.word_embeddings.weight"), file,
                             "cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight");
            report.ignored.push_back("cls.predictions.decoder.weight (tied to the word embeddings)");
        }
        if (const torch::Tensor* decoderBias = find("cls.predictions.decoder.bias")) {
            if (out.count("cls.predictions.bias"))
                requireEqual(*decoderBias, out.at("cls.predictions.bias"), file,
                             "cls.predictions.decoder.bias", "cls.predictions.bias");
            report.ignored.push_back("cls.predictions.decoder.bias (tied to cls.predictions.bias)");
        }
    }
    return out;
}

void initializeLikeHuggingFace(torch::nn::Module& module, const BertConfig& config)
{
    torch::NoGradGuard noGrad;
    for (auto& item : module.named_parameters(true)) {
        const std::string& name = item.key();
        torch::Tensor& p = item.value();
        const bool isLayerNorm = name.find("LayerNorm") != std::string::npos;
        if (isLayerNorm)
            p.fill_(name.size() > 6 && name.compare(name.size() - 6, 6, "weight") == 0 ? 1.0 : 0.0);
        else if (name.find(".alpha") != std::string::npos || startsWith(name, "alpha"))
            continue; // gates keep their own init (bias logit(pi_init))
        else if (p.dim() >= 2)
            p.normal_(0.0, 0.02);
        else
            p.zero_();
    }
    (void)config;
}

} // namespace

std::string toString(BertHead head)
{
    switch (head) {
    case BertHead::Encoder:
        return "BertModel";
    case BertHead::SequenceClassification:
        return "BertForSequenceClassification";
    case BertHead::MaskedLM:
        return "BertForMaskedLM";
    }
    return "BertModel";
}

BertNetwork::BertNetwork(const BertConfig& config, BertHead head)
    : m_config(config)
    , m_head(head)
{
    switch (head) {
    case BertHead::Encoder:
        m_encoder = BertModel(config, true);
        break;
    case BertHead::SequenceClassification:
        m_classifier = BertForSequenceClassification(config);
        m_encoder = m_classifier->bert;
        break;
    case BertHead::MaskedLM:
        m_maskedLm = BertForMaskedLM(config);
        m_encoder = m_maskedLm->bert;
        break;
    }
    setTraining(false);
}

torch::nn::Module& BertNetwork::module()
{
    switch (m_head) {
    case BertHead::SequenceClassification:
        return *m_classifier;
    case BertHead::MaskedLM:
        return *m_maskedLm;
    case BertHead::Encoder:
        break;
    }
    return *m_encoder;
}

BertModel BertNetwork::encoder() const
{
    return m_encoder;
}

void BertNetwork::setTraining(bool on)
{
    module().train(on);
}

void BertNetwork::setClipStrength(double strength)
{
    const AttentionVariant faded = m_config.variant.clipFadedIn(std::clamp(strength, 0.0, 1.0));
    for (const auto& layer : *m_encoder->layers)
        layer->as<BertLayerImpl>()->selfAttention->spec.variant = faded;
}

BertNetwork BertNetwork::load(const std::string& modelDir, const VariantOverride& override)
{
    const std::string configPath = (fs::path(modelDir) / "config.json").string();
    if (!fs::exists(configPath))
        throw Error(modelDir + ": no config.json (expected a Hugging Face model folder)");
    BertConfig config = BertConfig::fromFile(configPath);
    if (!override.empty()) config.variant = override.applyTo(config.variant);

    const std::string weights = findWeightsFile(modelDir);
    StateDict tensors = readStateDict(weights);

    BertHead head = BertHead::Encoder;
    const bool prefixed = hasKeyWithPrefix(tensors, "bert.");
    if (tensors.count("classifier.weight"))
        head = BertHead::SequenceClassification;
    else if (hasKeyWithPrefix(tensors, "cls.predictions."))
        head = BertHead::MaskedLM;
    bool known = false;
    const BertHead declared = headFromArchitectures(config.architectures, known);
    if (known && declared != head && !(declared == BertHead::Encoder && !prefixed))
        throw Error(weights + ": config.json declares " + toString(declared) + " but the weights hold a " +
                    toString(head) +
                    (head == BertHead::Encoder ? " (no classifier or MLM head tensors)" : ""));
    if (head == BertHead::SequenceClassification && config.id2label.empty()) {
        const auto classes = tensors.at("classifier.weight").size(0);
        for (int i = 0; i < classes; ++i)
            config.id2label.push_back("LABEL_" + std::to_string(i));
    }

    const std::int64_t d = config.hiddenSize;
    checkConfigAgainstCheckpoint(
        tensors,
        {{"embeddings.word_embeddings.weight", {config.vocabSize, d}, "vocab_size x hidden_size"},
         {"embeddings.position_embeddings.weight",
          {config.maxPositions, d},
          "max_position_embeddings x hidden_size"},
         {"embeddings.token_type_embeddings.weight",
          {config.typeVocabSize, d},
          "type_vocab_size x hidden_size"},
         {"layer.0.intermediate.dense.weight",
          {config.intermediateSize, d},
          "intermediate_size x hidden_size"}},
        config.numLayers, configPath, weights);
    BertNetwork net(config, head);
    net.m_weightsFile = weights;
    const ExpectedTensors expected = releaseModuleTensors(net.module());
    adoptStrict(net.module(), expected, mapBertKeys(std::move(tensors), head, config, weights, net.m_report),
                weights);
    net.m_sha256 = sha256File(weights);
    releaseFreedMemory(); // the module's initial random weights are gone now
    return net;
}

BertNetwork BertNetwork::create(const BertConfig& config, BertHead head, std::uint64_t seed)
{
    torch::manual_seed(seed);
    BertNetwork net(config, head);
    initializeLikeHuggingFace(net.module(), config);
    return net;
}

void BertNetwork::save(const std::string& dir, bool float16) const
{
    fs::create_directories(dir);
    writeSafetensors((fs::path(dir) / "model.safetensors").string(), moduleStateDict(module()),
                     float16 ? SafetensorsDtype::Float16 : SafetensorsDtype::Float32,
                     {{"format", "pt"}, {"producer", "outlierlens " OUTLIERLENS_VERSION}});
    AtomicFile configFile((fs::path(dir) / "config.json").string());
    {
        std::ofstream out(configFile.tempPath(), std::ios::binary);
        out << m_config.toJson(toString(m_head));
        if (!out) throw Error(configFile.finalPath() + ": cannot write");
    }
    configFile.commit();
}

BertForward BertNetwork::forward(const torch::Tensor& inputIds, const torch::Tensor& tokenTypeIds,
                                 const torch::Tensor& attentionMask, ActivationSink* sink)
{
    switch (m_head) {
    case BertHead::SequenceClassification:
        return m_classifier->forward(inputIds, tokenTypeIds, attentionMask, sink);
    case BertHead::MaskedLM:
        return m_maskedLm->forward(inputIds, tokenTypeIds, attentionMask, sink);
    case BertHead::Encoder:
        break;
    }
    BertForward out;
    out.sequence = m_encoder->forward(inputIds, tokenTypeIds, attentionMask, sink).sequence;
    return out;
}

} // namespace outlierlens
