#include "analysis/showcase.h"

#include "analysis/decoder_inspection.h"
#include "analysis/metrics.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/json_util.h"
#include "model/capture.h"
#include "model/decoder_network.h"
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

Showcase computeShowcase(const std::string& modelDir)
{
    const std::vector<std::string> inputs = readSampleInputs(modelDir);
    if (inputs.empty())
        throw Error(modelDir + ": no sample_inputs.txt (or an empty one) to choose a showcase from");
    DecoderNetwork network = DecoderNetwork::load(modelDir);
    const std::unique_ptr<DecoderTokenizer> tokenizer = DecoderTokenizer::fromModelDir(modelDir);
    const int L = network.config().numLayers;
    std::set<std::string> names;
    for (int l = 0; l < L; ++l)
        names.insert(captureName(CapturePoint::AttnProbs, l));
    std::vector<torch::Tensor> perInput; // [L, H] each
    for (const std::string& text : inputs) {
        const DecoderInspection r = inspectDecoder(network, *tokenizer, text, 0, true, names, 0);
        std::vector<torch::Tensor> layers;
        for (int l = 0; l < L; ++l)
            layers.push_back(firstTokenAttention(r.activations.at(captureName(CapturePoint::AttnProbs, l))));
        perInput.push_back(torch::stack(layers));
    }
    // The last layer's heads are left out (unless there is only one): the residual stream entering
    // it grows large values in every variant, gated ones included (backcopy-gated: max |x| 633 there
    // against 8 entering layer 2), which is not the sink mechanism and would mislead a comparison.
    const int choosable = std::max(1, L - 1);
    const torch::Tensor all = torch::stack(perInput).slice(1, 0, choosable); // [N, layers, H]
    const torch::Tensor mean = all.mean(0);                                  // [layers, H]
    const std::int64_t best =
        mean.flatten().argmax().item<std::int64_t>(); // first maximum: lowest layer, head
    Showcase s;
    s.layer = int(best / mean.size(1));
    s.head = int(best % mean.size(1));
    const torch::Tensor head = all.index({torch::indexing::Slice(), s.layer, s.head});
    s.input = int(head.argmax().item<std::int64_t>());
    s.meanFirstTokenAttention = mean[s.layer][s.head].item<double>();
    s.inputFirstTokenAttention = head[s.input].item<double>();
    return s;
}

void writeShowcase(const std::string& modelDir, const Showcase& s)
{
    const nlohmann::json j = {
        {"layer", s.layer},
        {"head", s.head},
        {"input", s.input},
        {"mean_first_token_attention", s.meanFirstTokenAttention},
        {"input_first_token_attention", s.inputFirstTokenAttention},
        {"rule", "largest mean over sample_inputs.txt of the attention that the second half of the queries "
                 "put on the first token (layer, head, input 0-based; docs/metrics.md)"}};
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
    s.meanFirstTokenAttention = jsonutil::getNumber(j, "mean_first_token_attention", path);
    s.inputFirstTokenAttention = jsonutil::getNumber(j, "input_first_token_attention", path);
    if (s.layer < 0 || s.head < 0 || s.input < 0) throw Error(path + ": layer, head and input must be >= 0");
    return s;
}

} // namespace outlierlens
