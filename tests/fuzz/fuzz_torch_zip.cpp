// Fuzz target: a pytorch_model.bin as a whole file (zip signature, central directory, local headers,
// CRCs, then the pickle and the storages), in both of readTorchBin's modes.

#include "fuzz_support.h"

#include "io/torch_bin.h"

#include <torch/torch.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace outlierlens;
    const std::string path = (fuzzsupport::scratchDir() / "pytorch_model.bin").string();
    fuzzsupport::writeFile(path, data, size);
    for (const bool keepFloatDtype : {false, true})
        fuzzsupport::refusedOnlyWithError([&] {
            for (const auto& [name, tensor] : readTorchBin(path, keepFloatDtype))
                if (tensor.numel() > 0) (void)tensor.to(torch::kFloat64).sum().item<double>();
        });
    return 0;
}
