// Fuzz target: a model.safetensors file (length, JSON header, data layout), read whole and mapped.
// Every tensor read is summed, so a view that points outside the mapping faults here.

#include "fuzz_support.h"

#include "io/safetensors.h"

#include <torch/torch.h>

namespace {

void touchAll(const outlierlens::StateDict& tensors)
{
    for (const auto& [name, tensor] : tensors)
        if (tensor.numel() > 0) (void)tensor.to(torch::kFloat64).sum().item<double>();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace outlierlens;
    const std::string path = (fuzzsupport::scratchDir() / "model.safetensors").string();
    fuzzsupport::writeFile(path, data, size);
    std::map<std::string, std::string> metadata;
    fuzzsupport::refusedOnlyWithError([&] { touchAll(readSafetensors(path, &metadata)); });
    fuzzsupport::refusedOnlyWithError([&] { touchAll(mapSafetensors(path, &metadata)); });
    return 0;
}
