#include "io/state_dict.h"

#include "common/error.h"
#include "common/input_file.h"
#include "common/text_format.h"
#include "io/safetensors.h"
#include "io/torch_bin.h"

#include <filesystem>
#include <fstream>

namespace outlierlens {
namespace fs = std::filesystem;

std::string findWeightsFile(const std::string& modelDir)
{
    if (!fs::is_directory(modelDir))
        throw Error(modelDir + ": not a folder (expected a model folder with config.json and weights)");
    for (const char* name : {"model.safetensors", "pytorch_model.bin"}) {
        const fs::path p = fs::path(modelDir) / name;
        if (fs::exists(p)) return p.string();
    }
    for (const char* index : {"model.safetensors.index.json", "pytorch_model.bin.index.json"})
        if (fs::exists(fs::path(modelDir) / index))
            throw Error(modelDir + ": sharded checkpoints (" + index + ") are not supported yet");
    throw Error(modelDir + ": no model.safetensors or pytorch_model.bin in this folder");
}

StateDict readStateDict(const std::string& path)
{
    std::ifstream in = openInputFile(path);
    if (!in) throw Error(path + ": cannot open file");
    unsigned char head[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    in.read(reinterpret_cast<char*>(head), sizeof(head));
    const auto got = in.gcount();
    in.close();
    if (got >= 4 && head[0] == 'P' && head[1] == 'K')
        return readTorchBin(path); // zip container of torch.save
    // safetensors: an 8-byte little-endian header length, then the JSON header's '{'. A legacy
    // torch.save file starts with a pickle (0x80 protocol byte); readTorchBin explains it.
    if (got == 9 && head[8] != '{' && head[0] == 0x80) return readTorchBin(path);
    // By name: an empty or text "pytorch_model.bin" is told it is no torch.save archive, not that it
    // is too short for a safetensors header.
    const std::string ext = fs::path(path).extension().string();
    if (ext == ".bin" || ext == ".pt" || ext == ".pth") return readTorchBin(path);
    return readSafetensors(path);
}

std::string shapeString(c10::IntArrayRef sizes)
{
    return shapeText(sizes.vec());
}

std::string shapeString(const torch::Tensor& t)
{
    return shapeString(t.sizes());
}

} // namespace outlierlens
