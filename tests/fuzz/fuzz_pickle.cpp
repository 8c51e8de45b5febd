// Fuzz target: the pickle program of a torch.save checkpoint (data.pkl). Mutating a whole zip rarely
// gets past the archive checks, so the input here is only data.pkl: it is packed, with the storage
// records of tests/fixtures/io/edge_cases.bin, into a valid archive by LibTorch's own zip writer, and
// read back through readTorchBin (the unpickler with the real, allow-listing hooks).

#include "fuzz_support.h"

#include "io/torch_bin.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/torch.h>

#include <utility>
#include <vector>

namespace {

// The data/* records (and byteorder if present) of the fixture archive, read once.
const std::vector<std::pair<std::string, std::string>>& storageRecords()
{
    static const auto records = [] {
        std::vector<std::pair<std::string, std::string>> out;
        caffe2::serialize::PyTorchStreamReader reader(fuzzsupport::fixture("io/edge_cases.bin"));
        for (const std::string& name : reader.getAllRecords()) {
            if (name.rfind("data/", 0) != 0 && name != "byteorder") continue;
            auto [bytes, size] = reader.getRecord(name);
            out.emplace_back(name, std::string(static_cast<const char*>(bytes.get()), size));
        }
        return out;
    }();
    return records;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace outlierlens;
    const std::string path = (fuzzsupport::scratchDir() / "pytorch_model.bin").string();
    {
        caffe2::serialize::PyTorchStreamWriter writer(path);
        writer.writeRecord("data.pkl", data, size);
        for (const auto& [name, bytes] : storageRecords())
            writer.writeRecord(name, bytes.data(), bytes.size());
        writer.writeEndOfFile();
    }
    fuzzsupport::refusedOnlyWithError([&] {
        for (const auto& [name, tensor] : readTorchBin(path))
            if (tensor.numel() > 0) (void)tensor.to(torch::kFloat64).sum().item<double>();
    });
    return 0;
}
