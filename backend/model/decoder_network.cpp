#include "model/decoder_network.h"

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/json_util.h"
#include "common/sha256.h"
#include "io/safetensors.h"
#include "model/decoder_modules.h"
#include "model/linear.h"
#include "model/loading.h"
#include "model/runtime.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

namespace outlierlens {
namespace fs = std::filesystem;

namespace {

bool startsWith(const std::string& s, const std::string& prefix)
{
    return s.rfind(prefix, 0) == 0;
}

bool endsWith(const std::string& s, const std::string& suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The config's layout. A new layout: its file (defining its DecoderLayout, decoder_modules.h) and one
/// row here.
const decoder::DecoderLayout& layoutOf(const DecoderConfig& config)
{
    static const std::pair<DecoderArch, const decoder::DecoderLayout*> kModules[] = {
        {DecoderArch::Gpt2, &decoder::kGpt2Layout},    {DecoderArch::Opt, &decoder::kOptLayout},
        {DecoderArch::Llama, &decoder::kLlamaLayout},  {DecoderArch::Gemma2, &decoder::kGemma2Layout},
        {DecoderArch::Phi, &decoder::kPhiLayout},      {DecoderArch::GptNeox, &decoder::kGptNeoxLayout},
        {DecoderArch::Falcon, &decoder::kFalconLayout}};
    for (const auto& [arch, layout] : kModules)
        if (arch == config.arch) return *layout;
    throw Error("no module for the decoder layout '" + toString(config.arch) + "'");
}

std::shared_ptr<decoder::DecoderLmImpl> makeModule(const DecoderConfig& config)
{
    return layoutOf(config).make(config);
}

/// The reason a checkpoint tensor is not a parameter here (a buffer Hugging Face itself never loads), or
/// nullptr.
const std::string* ignoredBufferReason(const std::string& name, const decoder::Naming& naming)
{
    for (const auto& [suffix, reason] : naming.ignoredSuffixes)
        if (endsWith(name, suffix)) return &reason;
    return nullptr;
}

/// Maps a checkpoint's names onto the module's: adds the canonical prefix where a file leaves it out,
/// leaves out ignored buffers and the tied head (after checking it equals the embeddings).
StateDict mapDecoderKeys(StateDict tensors, const decoder::DecoderLmImpl& module, const std::string& file,
                         LoadReport& report)
{
    const decoder::Naming naming = module.naming();
    const std::string tiedHead = module.tiedHeadName();
    StateDict out;
    torch::Tensor storedHead;
    std::set<std::string> renamedPrefixes;
    for (auto& [name, tensor] : tensors) {
        if (const std::string* reason = ignoredBufferReason(name, naming)) {
            report.ignored.push_back(name + " (" + *reason + ")");
            continue;
        }
        if (!tiedHead.empty() && name == tiedHead) {
            storedHead = tensor;
            continue;
        }
        std::string mapped = name;
        const std::string& key = name; // a structured binding cannot be captured in C++17 (clang)
        const bool topLevel = std::any_of(naming.topLevel.begin(), naming.topLevel.end(),
                                          [&](const std::string& p) { return startsWith(key, p); });
        if (!topLevel && !startsWith(name, naming.canonical)) {
            for (const std::string& alt : naming.alternatives)
                if (startsWith(name, alt)) {
                    mapped = naming.canonical + name.substr(alt.size());
                    renamedPrefixes.insert(alt.empty() ? "(none)" : alt);
                    break;
                }
        }
        if (out.count(mapped))
            throw Error(file + ": tensors '" + mapped + "' and '" + name + "' name the same parameter");
        out.emplace(std::move(mapped), std::move(tensor));
    }
    for (const std::string& p : renamedPrefixes)
        report.renamed.push_back("prefix " + p + " -> " + naming.canonical);
    if (storedHead.defined()) {
        const std::string embeddingName = module.embeddingName();
        const auto it = out.find(embeddingName);
        if (it != out.end()) {
            const torch::Tensor& embedding = it->second;
            const bool same = storedHead.sizes() == embedding.sizes() &&
                              (storedHead.data_ptr() == embedding.data_ptr() ||
                               torch::equal(storedHead.to(torch::kFloat), embedding.to(torch::kFloat)));
            if (!same)
                throw Error(file + ": tensor '" + tiedHead + "' " + shapeString(storedHead) +
                            " differs from '" + embeddingName +
                            "' although config.json ties them (tie_word_embeddings)");
        }
        report.ignored.push_back(tiedHead + " (tied to " + embeddingName + ")");
    }
    return out;
}

/// Hugging Face's _init_weights for the family, for one parameter: normal(0, 0.02) weights, zero biases,
/// unit norms (Gemma's (1 + w) norms: zero); the layout's own exceptions (GPT-2's c_proj scaled by
/// 1/sqrt(2 n_layer)); the padding row of the token embeddings zero; An et al.'s variant parameters as
/// their nanoGPT code (fixed v' zero, k' and v' slots N(0, 0.02)). Gates keep their constructor's init
/// (bias logit(pi_init)). Called in named_parameters order, the random draws are create()'s.
void initParameter(const std::string& name, torch::Tensor& p, const decoder::DecoderLmImpl& module,
                   const DecoderConfig& c)
{
    torch::NoGradGuard noGrad;
    const double std = 0.02;
    if (name.find(".alpha") != std::string::npos) return;
    const bool norm = name.find("ln_") != std::string::npos || name.find("layer_norm") != std::string::npos ||
                      name.find("layernorm") != std::string::npos || endsWith(name, "norm.weight") ||
                      endsWith(name, "norm.bias");
    if (norm)
        p.fill_(endsWith(name, "weight") ? module.normWeightInit() : 0.0);
    else if (endsWith(name, "v_bias") && p.dim() == 1) // fixed-bias: v' starts at zero, as An et al.'s
        p.zero_();
    else if (endsWith(name, "k_bias") || endsWith(name, "v_bias")) // context-/attention-bias: N(0, 0.02)
        p.normal_(0.0, std);
    else if (p.dim() >= 2 && module.initStd(name) > 0)
        p.normal_(0.0, module.initStd(name));
    else if (p.dim() >= 2)
        p.normal_(0.0, std);
    else
        p.zero_();
    if (c.padTokenId >= 0 && c.padTokenId < c.vocabSize && module.embeddingHasPaddingRow() &&
        endsWith(name, "embed_tokens.weight"))
        p[c.padTokenId].zero_();
}

/// "float32", "float16" or "bfloat16" and the file's storage type; Error for anything else.
std::pair<std::string, SafetensorsDtype> storageOf(torch::ScalarType dtype, const std::string& dir)
{
    if (dtype == torch::kFloat) return {"float32", SafetensorsDtype::Float32};
    if (dtype == torch::kHalf) return {"float16", SafetensorsDtype::Float16};
    if (dtype == torch::kBFloat16) return {"bfloat16", SafetensorsDtype::BFloat16};
    throw Error(dir + ": cannot save weights as " + std::string(c10::toString(dtype)) +
                " (expected float32, float16 or bfloat16)");
}

const std::map<std::string, std::string> kFileMetadata = {{"format", "pt"},
                                                          {"producer", "outlierlens " OUTLIERLENS_VERSION}};

void writeConfig(const std::string& dir, DecoderConfig config, const std::string& dtypeName)
{
    config.torchDtype = dtypeName;
    AtomicFile configFile((fs::path(dir) / "config.json").string());
    {
        std::ofstream out(configFile.tempPath(), std::ios::binary);
        out << config.toJson();
        if (!out) throw Error(configFile.finalPath() + ": cannot write");
    }
    configFile.commit();
}

} // namespace

struct DecoderNetwork::Impl
{
    DecoderConfig config;
    std::shared_ptr<decoder::DecoderLmImpl> module;
    std::string weightsFile;
    mutable std::string sha256; ///< computed on first request: hashing 2 GB takes seconds
    LoadReport report;
    torch::ScalarType computeDtype = torch::kFloat;
    double clipStrength = 1.0;
};

DecoderNetwork::DecoderNetwork(std::unique_ptr<Impl> impl)
    : m_impl(std::move(impl))
{}
DecoderNetwork::~DecoderNetwork() = default;
DecoderNetwork::DecoderNetwork(DecoderNetwork&&) noexcept = default;
DecoderNetwork& DecoderNetwork::operator=(DecoderNetwork&&) noexcept = default;

namespace {} // namespace

DecoderNetwork DecoderNetwork::load(const std::string& modelDir, const VariantOverride& override)
{
    if (!fs::is_directory(modelDir))
        throw Error(modelDir + ": not a folder (expected a model folder with config.json)");
    const std::string configPath = (fs::path(modelDir) / "config.json").string();
    if (!fs::exists(configPath))
        throw Error(modelDir + ": no config.json (expected a Hugging Face model folder)");
    auto impl = std::make_unique<Impl>();
    impl->config = DecoderConfig::fromFile(configPath);
    if (!override.empty()) impl->config.variant = override.applyTo(impl->config.variant);
    impl->weightsFile = findWeightsFile(modelDir);
    // Read (safetensors: memory-mapped, nothing resident yet) before the module is built, so that a
    // config that does not fit the weights fails before it allocates.
    StateDict tensors = mapStateDict(impl->weightsFile);
    checkConfigAgainstCheckpoint(tensors, layoutOf(impl->config).impliedShapes(impl->config),
                                 impl->config.numLayers, configPath, impl->weightsFile);
    impl->module = makeModule(impl->config);
    impl->module->eval();

    const ExpectedTensors expected = releaseModuleTensors(*impl->module);
    tensors = mapDecoderKeys(std::move(tensors), *impl->module, impl->weightsFile, impl->report);
    adoptStrict(*impl->module, expected, std::move(tensors), impl->weightsFile, /*keepFloatDtype=*/true);
    {
        // Gates are tiny and run in float32 whatever the checkpoint stored.
        torch::NoGradGuard noGrad;
        for (auto& item : impl->module->named_parameters(true))
            if (item.key().find(".alpha") != std::string::npos && item.value().scalar_type() != torch::kFloat)
                item.value().set_data(item.value().to(torch::kFloat));
    }
    releaseFreedMemory();
    return DecoderNetwork(std::move(impl));
}

DecoderNetwork DecoderNetwork::create(const DecoderConfig& config, std::uint64_t seed)
{
    config.validate("decoder config");
    torch::manual_seed(seed);
    auto impl = std::make_unique<Impl>();
    impl->config = config;
    impl->module = makeModule(config);
    impl->module->eval();
    for (auto& item : impl->module->named_parameters(true))
        initParameter(item.key(), item.value(), *impl->module, config);
    return DecoderNetwork(std::move(impl));
}

void DecoderNetwork::writeRandom(const DecoderConfig& config, std::uint64_t seed, const std::string& dir,
                                 torch::ScalarType dtype)
{
    config.validate("decoder config");
    const auto [dtypeName, stored] = storageOf(dtype, dir);
    torch::manual_seed(seed);
    // The module only names the parameters and their shapes: its torch::empty storage is never written,
    // so it takes address space, not memory. One parameter at a time is drawn in float32 (in create()'s
    // order, so the numbers are create()'s), converted and written.
    const auto module = makeModule(config);
    std::vector<std::pair<std::string, torch::Tensor>> params;
    std::vector<TensorSpec> specs;
    for (const auto& item : module->named_parameters(true)) {
        params.emplace_back(item.key(), item.value());
        specs.push_back({item.key(), item.value().sizes().vec(), torch::kFloat});
    }
    fs::create_directories(dir);
    writeSafetensorsStreamed((fs::path(dir) / "model.safetensors").string(), specs,
                             [&](std::size_t i) {
                                 const auto& [name, p] = params[i];
                                 torch::Tensor t = name.find(".alpha") != std::string::npos
                                                       ? p.detach().clone()
                                                       : torch::empty(p.sizes(), torch::kFloat);
                                 initParameter(name, t, *module, config);
                                 return t;
                             },
                             stored, kFileMetadata);
    writeConfig(dir, config, dtypeName);
}

void DecoderNetwork::save(const std::string& dir, torch::ScalarType dtype) const
{
    const auto [dtypeName, stored] = storageOf(dtype, dir);
    fs::create_directories(dir);
    writeSafetensors((fs::path(dir) / "model.safetensors").string(), moduleStateDict(*m_impl->module), stored,
                     kFileMetadata);
    writeConfig(dir, m_impl->config, dtypeName);
}

namespace {

/// The masks of a pass over rows whose real slots are `real` [B, T]: causal, padding, and a window of
/// the `window` most recent key slots when > 0.
void setMasks(decoder::PassContext& pass, const torch::Tensor& real, int window, bool keysSeen)
{
    const auto B = real.size(0), T = real.size(1);
    torch::Tensor causal = torch::ones({T, T}, torch::kBool).tril();
    if (window > 0) causal = causal.triu(-(window - 1));
    pass.keyAllowed = causal.view({1, 1, T, T}) & real.view({B, 1, 1, T});
    pass.keysSeen = keysSeen ? pass.keyAllowed.sum(-1, true).to(torch::kFloat) : torch::Tensor();
    const double lowest = pass.dtype == torch::kBFloat16
                              ? double(c10::BFloat16(std::numeric_limits<c10::BFloat16>::lowest()))
                              : double(std::numeric_limits<float>::lowest());
    pass.additiveMask = torch::zeros({B, 1, T, T}, torch::dtype(pass.dtype))
                            .masked_fill(pass.keyAllowed.logical_not(), lowest);
}

} // namespace

DecoderForward DecoderNetwork::forward(const torch::Tensor& inputIds, const torch::Tensor& attentionMask,
                                       ActivationSink* sink, bool computeLogits)
{
    const DecoderConfig& c = m_impl->config;
    if (inputIds.dim() != 2 || inputIds.size(1) == 0)
        throw Error("decoder input ids must be [batch, tokens] with at least one token, found " +
                    shapeString(inputIds));
    const torch::Tensor ids = inputIds.to(torch::kLong);
    if (ids.numel() > 0) {
        const auto lo = ids.min().item<std::int64_t>(), hi = ids.max().item<std::int64_t>();
        if (lo < 0 || hi >= c.vocabSize)
            throw Error("token id " + std::to_string(lo < 0 ? lo : hi) + " is outside the vocabulary of " +
                        std::to_string(c.vocabSize));
    }
    torch::Tensor mask = attentionMask.defined() ? attentionMask.to(torch::kLong) : torch::ones_like(ids);
    if (mask.sizes() != ids.sizes())
        throw Error("attention mask " + shapeString(mask) + " does not match the input ids " +
                    shapeString(ids));

    // Positions count real tokens: cumsum(mask) - 1 (what generate() passes), so left padding
    // does not shift them. Padding slots: the layout's (1 as generate() passes; OPT -1, its own rule).
    const decoder::DecoderLmImpl& module = *m_impl->module;
    const torch::Tensor real = mask.ne(0);
    torch::Tensor positions = mask.ne(0).to(torch::kLong).cumsum(1) - 1;
    positions = positions.masked_fill(real.logical_not(), module.paddingPosition());
    if (module.learnedPositions() && positions.max().item<std::int64_t>() >= c.maxPositions)
        throw Error("input of " + std::to_string(positions.max().item<std::int64_t>() + 1) +
                    " tokens is longer than the model's " + std::to_string(c.maxPositions) + " positions");

    decoder::PassContext pass, slidingPass;
    pass.dtype = m_impl->computeDtype;
    pass.sink = sink;
    pass.clipStrength = m_impl->clipStrength;
    // Causal; with a sliding window only the W most recent key slots, the query's included: on every
    // layer (Mistral) or on the layers that ask for pass.sliding (Gemma 2's even layers).
    const bool everyLayerSlides = c.slidingWindow > 0 && !c.slidingWindowAlternates;
    setMasks(pass, real, everyLayerSlides ? c.slidingWindow : 0, c.variant.clipPerQuery);
    if (c.slidingWindow > 0 && c.slidingWindowAlternates) {
        slidingPass = pass;
        setMasks(slidingPass, real, c.slidingWindow, c.variant.clipPerQuery);
        pass.sliding = &slidingPass;
    }

    DecoderForward out;
    out.lastHidden = m_impl->module->body(ids, positions, pass);
    if (computeLogits) {
        const CaptureScope top(sink, -1);
        torch::Tensor logits = module.logits(out.lastHidden);
        if (logits.scalar_type() != torch::kFloat) logits = logits.to(torch::kFloat);
        top.put(CapturePoint::Logits, logits);
        out.logits = top.quant(QuantSite::Logits, logits);
    }
    return out;
}

void DecoderNetwork::setClipStrength(double strength)
{
    m_impl->clipStrength = std::clamp(strength, 0.0, 1.0);
}

void DecoderNetwork::setComputeDtype(torch::ScalarType dtype)
{
    if (dtype != torch::kFloat && dtype != torch::kBFloat16)
        throw Error("decoder compute dtype must be float32 or bfloat16, found " +
                    std::string(c10::toString(dtype)));
    m_impl->computeDtype = dtype;
}

torch::ScalarType DecoderNetwork::computeDtype() const
{
    return m_impl->computeDtype;
}

const DecoderConfig& DecoderNetwork::config() const
{
    return m_impl->config;
}

torch::nn::Module& DecoderNetwork::module()
{
    return *m_impl->module;
}

const std::string& DecoderNetwork::weightsFile() const
{
    return m_impl->weightsFile;
}

const std::string& DecoderNetwork::checkpointSha256() const
{
    if (m_impl->sha256.empty() && !m_impl->weightsFile.empty())
        m_impl->sha256 = sha256File(m_impl->weightsFile);
    return m_impl->sha256;
}

const LoadReport& DecoderNetwork::loadReport() const
{
    return m_impl->report;
}

std::int64_t DecoderNetwork::parameterBytes() const
{
    std::int64_t bytes = 0;
    for (const auto& p : m_impl->module->parameters(true))
        bytes += std::int64_t(p.nbytes());
    return bytes;
}

void DecoderNetwork::setTraining(bool on)
{
    m_impl->module->train(on);
}

} // namespace outlierlens
