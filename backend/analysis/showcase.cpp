#include "analysis/showcase.h"

#include "analysis/bert_inspection.h"
#include "analysis/decoder_inspection.h"
#include "analysis/metrics.h"
#include "analysis/systematic_statistics.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/json_util.h"
#include "model/capture.h"
#include "model/decoder_network.h"
#include "model/model_family.h"
#include "text/decoder_tokenizer.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <vector>

namespace outlierlens {
namespace fs = std::filesystem;

std::vector<std::string> readSampleInputs(const std::string& modelDir)
{
    const std::string path = (fs::path(modelDir) / "sample_inputs.txt").string();
    std::vector<std::string> inputs;
    if (!fs::exists(path)) return inputs;
    std::istringstream lines(readWholeFile(path, "sample inputs"));
    for (std::string line; std::getline(lines, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        inputs.push_back(line); // line i is input i, as the app counts them
    }
    return inputs;
}

const char* Showcase::measureName() const
{
    return measure == Measure::FirstToken ? "first-token attention" : "sink-token attention";
}

namespace {

/// The capture names of every layer's attention probabilities.
std::set<std::string> attentionProbsNames(int layers)
{
    std::set<std::string> names;
    for (int l = 0; l < layers; ++l)
        names.insert(captureName(CapturePoint::AttnProbs, l));
    return names;
}

/// Per head, the mean over the queries that are not sink tokens of their attention on sink tokens:
/// probs [1, H, T, T] -> [H] float64.
torch::Tensor sinkTokenAttention(const torch::Tensor& probs, const std::vector<bool>& sink)
{
    const torch::Tensor isSink =
        torch::tensor(std::vector<double>(sink.begin(), sink.end()), torch::kFloat64);
    const torch::Tensor p = probs.squeeze(0).to(torch::kFloat64); // [H, T, T]
    const torch::Tensor onSinks = p.matmul(isSink);               // [H, T]: per query
    const torch::Tensor queries = 1.0 - isSink;                   // the queries that are not sinks
    const double n = std::max(1.0, queries.sum().item<double>());
    return onSinks.matmul(queries) / n; // [H]
}

/// [layers, H] per sample input of a BERT folder whose sample inputs are sentence pairs.
std::vector<torch::Tensor> encoderSinkAttention(const std::string& modelDir,
                                                const std::vector<std::string>& inputs)
{
    BertNetwork network = BertNetwork::load(modelDir);
    const BertTokenizer tokenizer = BertTokenizer::fromModelDir(modelDir);
    const int L = network.config().numLayers;
    const std::set<std::string> names = attentionProbsNames(L);
    std::vector<torch::Tensor> perInput;
    for (const std::string& line : inputs) {
        const auto tab = line.find('\t');
        const std::optional<std::string> pair =
            tab == std::string::npos ? std::nullopt : std::optional<std::string>(line.substr(tab + 1));
        const BertInspection r = inspectBert(network, tokenizer, line.substr(0, tab), pair, 0, names);
        const std::vector<bool> sink = sinkTokens(wordPieceCategories(r.encoding.tokens));
        std::vector<torch::Tensor> layers;
        for (int l = 0; l < L; ++l)
            layers.push_back(
                sinkTokenAttention(r.activations.at(captureName(CapturePoint::AttnProbs, l)), sink));
        perInput.push_back(torch::stack(layers));
    }
    return perInput;
}

/// [layers, H] per sample input of a decoder folder.
std::vector<torch::Tensor> decoderFirstTokenAttention(const std::string& modelDir,
                                                      const std::vector<std::string>& inputs)
{
    DecoderNetwork network = DecoderNetwork::load(modelDir);
    const std::unique_ptr<DecoderTokenizer> tokenizer = DecoderTokenizer::fromModelDir(modelDir);
    const int L = network.config().numLayers;
    const std::set<std::string> names = attentionProbsNames(L);
    std::vector<torch::Tensor> perInput;
    for (const std::string& text : inputs) {
        const DecoderInspection r = inspectDecoder(network, *tokenizer, text, 0, true, names, 0);
        std::vector<torch::Tensor> layers;
        for (int l = 0; l < L; ++l)
            layers.push_back(firstTokenAttention(r.activations.at(captureName(CapturePoint::AttnProbs, l))));
        perInput.push_back(torch::stack(layers));
    }
    return perInput;
}

} // namespace

Showcase computeShowcase(const std::string& modelDir)
{
    const std::vector<std::string> inputs = readSampleInputs(modelDir);
    if (inputs.empty())
        throw Error(modelDir + ": no sample_inputs.txt (or an empty one) to choose a showcase from");
    const ModelFamily& family = modelFamilyOfDir(modelDir);
    Showcase s;
    std::vector<torch::Tensor> perInput; // [L, H] each
    if (family.engine == FamilyEngine::Decoder) {
        perInput = decoderFirstTokenAttention(modelDir, inputs);
    } else if (family.engine == FamilyEngine::Bert) {
        s.measure = Showcase::Measure::SinkTokens;
        perInput = encoderSinkAttention(modelDir, inputs);
    } else {
        throw Error(modelDir + ": a showcase is chosen for decoders and BERT encoders, not " + family.name);
    }
    const int L = int(perInput.front().size(0));
    // The last layer's heads are left out (unless there is only one): the residual stream entering
    // it grows large values in every variant, gated ones included (backcopy-gated: max |x| 633 there
    // against 8 entering layer 2), which is not the sink mechanism and would mislead a comparison.
    const int choosable = std::max(1, L - 1);
    const torch::Tensor all = torch::stack(perInput).slice(1, 0, choosable); // [N, layers, H]
    const torch::Tensor mean = all.mean(0);                                  // [layers, H]
    const std::int64_t best =
        mean.flatten().argmax().item<std::int64_t>(); // first maximum: lowest layer, head
    s.layer = int(best / mean.size(1));
    s.head = int(best % mean.size(1));
    const torch::Tensor head = all.index({torch::indexing::Slice(), s.layer, s.head});
    s.input = int(head.argmax().item<std::int64_t>());
    s.meanAttention = mean[s.layer][s.head].item<double>();
    s.inputAttention = head[s.input].item<double>();
    return s;
}

void writeShowcase(const std::string& modelDir, const Showcase& s)
{
    const bool first = s.measure == Showcase::Measure::FirstToken;
    const nlohmann::json j = {
        {"layer", s.layer},
        {"head", s.head},
        {"input", s.input},
        {first ? "mean_first_token_attention" : "mean_sink_token_attention", s.meanAttention},
        {first ? "input_first_token_attention" : "input_sink_token_attention", s.inputAttention},
        {"rule", first ? "largest mean over sample_inputs.txt of the attention that the second half of the "
                         "queries put on the first token (layer, head, input 0-based; docs/metrics.md)"
                       : "largest mean over sample_inputs.txt of the attention that the queries that are not "
                         "sink tokens put on sink tokens ([CLS], [SEP], punctuation; layer, head, input "
                         "0-based; docs/metrics.md)"}};
    writeTextFileAtomically((fs::path(modelDir) / "showcase.json").string(), j.dump(2) + "\n");
}

std::optional<Showcase> readShowcase(const std::string& modelDir)
{
    const std::string path = (fs::path(modelDir) / "showcase.json").string();
    if (!fs::exists(path)) return std::nullopt;
    const nlohmann::json j = jsonutil::parseFile(path);
    Showcase s;
    s.layer = jsonutil::getInt32(j, "layer", path);
    s.head = jsonutil::getInt32(j, "head", path);
    s.input = jsonutil::getInt32(j, "input", path);
    if (!j.contains("mean_first_token_attention") && j.contains("mean_sink_token_attention"))
        s.measure = Showcase::Measure::SinkTokens;
    const bool first = s.measure == Showcase::Measure::FirstToken;
    s.meanAttention =
        jsonutil::getNumber(j, first ? "mean_first_token_attention" : "mean_sink_token_attention", path);
    s.inputAttention =
        jsonutil::getNumber(j, first ? "input_first_token_attention" : "input_sink_token_attention", path);
    if (s.layer < 0 || s.head < 0 || s.input < 0) throw Error(path + ": layer, head and input must be >= 0");
    return s;
}

} // namespace outlierlens
