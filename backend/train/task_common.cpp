#include "train/task_common.h"

#include "io/state_dict.h"
#include "model/loading.h"
#include "train/run_folder.h"

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

at::Generator evaluationGenerator(const TrainConfig& config)
{
    return at::make_generator<at::CPUGeneratorImpl>(config.seed * 7919u + 12345u);
}

void writeModelCard(const std::string& dir, const std::string& card)
{
    writeTextFileAtomically((std::filesystem::path(dir) / "README.md").string(), card);
}

} // namespace outlierlens
