#include "tasks/task_common.h"

#include "common/atomic_file.h"
#include "io/state_dict.h"
#include "model/loading.h"

#include "common/json_util.h"

#include <nlohmann/json.hpp>

#include <torch/torch.h>

#include <filesystem>

namespace outlierlens {

void loadWeightsInto(torch::nn::Module& module, const std::string& dir)
{
    const std::string file = (std::filesystem::path(dir) / "model.safetensors").string();
    const ExpectedTensors expected = releaseModuleTensors(module);
    adoptStrict(module, expected, readStateDict(file), file);
}

torch::Tensor maskedCrossEntropy(const torch::Tensor& logits, const torch::Tensor& labels)
{
    return torch::nn::functional::cross_entropy(
        logits, labels, torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
}

torch::Tensor shardRows(const torch::Tensor& batch, const BatchShard& shard)
{
    if (shard.whole()) return batch;
    const std::int64_t rows = batch.size(0) / shard.count;
    return batch.narrow(0, rows * shard.rank, rows);
}

std::int64_t scoredCount(const torch::Tensor& labels)
{
    return (labels != -100).sum().item<std::int64_t>();
}

torch::Tensor crossEntropyShare(const torch::Tensor& logits, const torch::Tensor& labels,
                                std::int64_t batchScored)
{
    const torch::Tensor sum = torch::nn::functional::cross_entropy(
        logits, labels,
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100).reduction(torch::kSum));
    return sum / double(std::max<std::int64_t>(batchScored, 1));
}

at::Generator evaluationGenerator(const TrainConfig& config)
{
    return at::make_generator<at::CPUGeneratorImpl>(config.seed * 7919u + 12345u);
}

void writeModelCard(const std::string& dir, const std::string& card)
{
    writeTextFileAtomically((std::filesystem::path(dir) / "README.md").string(), card);
}

std::optional<SyntheticTaskOptions> readSyntheticOptions(const std::string& modelDir)
{
    const nlohmann::json j = jsonutil::parseFile((std::filesystem::path(modelDir) / "config.json").string());
    if (!j.contains("outlierlens_synthetic")) return std::nullopt;
    const auto& s = j["outlierlens_synthetic"];
    SyntheticTaskOptions o;
    o.vocabSize = s.value("vocab_size", o.vocabSize);
    o.seqLength = s.value("seq_length", o.seqLength);
    o.minLength = s.value("min_length", o.minLength);
    o.numDelimiters = s.value("delimiters", o.numDelimiters);
    o.delimiterRate = s.value("delimiter_rate", o.delimiterRate);
    o.operatorRate = s.value("operator_rate", o.operatorRate);
    o.topicSize = s.value("topic_size", o.topicSize);
    o.sentencePairs = s.value("sentence_pairs", o.sentencePairs);
    o.wordTokens = s.value("word_tokens", o.wordTokens);
    o.successorLabels = s.value("successor_labels", o.successorLabels);
    if (s.contains("copy_offsets")) o.copyOffsets = s["copy_offsets"].get<std::vector<int>>();
    o.validate();
    return o;
}

} // namespace outlierlens
