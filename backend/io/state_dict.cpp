#include "io/state_dict.h"

#include "common/error.h"
#include "common/input_file.h"
#include "common/json_util.h"
#include "common/text_format.h"
#include "io/safetensors.h"
#include "io/torch_bin.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>

namespace outlierlens {
namespace fs = std::filesystem;

namespace {

bool endsWith(const std::string& text, const std::string& tail)
{
    return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

/// One weight file; `mapped`: as mapStateDict() reads it.
StateDict readOneFile(const std::string& path, bool mapped)
{
    std::ifstream in = openInputFile(path);
    if (!in) throw Error(path + ": cannot open file");
    unsigned char head[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    in.read(reinterpret_cast<char*>(head), sizeof(head));
    const auto got = in.gcount();
    in.close();
    if (got >= 4 && head[0] == 'P' && head[1] == 'K')
        return readTorchBin(path, mapped); // zip container of torch.save
    // safetensors: an 8-byte little-endian header length, then the JSON header's '{'. A legacy
    // torch.save file starts with a pickle (0x80 protocol byte); readTorchBin explains it.
    if (got == 9 && head[8] != '{' && head[0] == 0x80) return readTorchBin(path, mapped);
    // By name: an empty or text "pytorch_model.bin" is told it is no torch.save archive, not that it
    // is too short for a safetensors header.
    const std::string ext = fs::path(path).extension().string();
    if (ext == ".bin" || ext == ".pt" || ext == ".pth") return readTorchBin(path, mapped);
    return mapped ? mapSafetensors(path) : readSafetensors(path);
}

/// A shard name from an index must name a file inside the model folder.
fs::path shardPath(const fs::path& dir, const std::string& name, const std::string& index)
{
    const fs::path rel = fs::path(name).lexically_normal();
    if (name.empty() || rel.is_absolute() || rel.has_root_name() || rel.empty() || *rel.begin() == "..")
        throw Error(index + ": weight_map names shard '" + name + "', which is outside the model folder");
    const fs::path full = dir / rel;
    std::error_code ec;
    if (!fs::is_regular_file(full, ec))
        throw Error(index + ": shard '" + name + "' named by weight_map does not exist in " + dir.string());
    const fs::path real = fs::canonical(full, ec), realDir = fs::canonical(dir, ec);
    const std::string r = real.string(), d = realDir.string() + "/";
    if (ec || r.compare(0, d.size(), d) != 0)
        throw Error(index + ": shard '" + name + "' resolves to " + r + ", outside the model folder");
    return full;
}

/// A sharded checkpoint by its index's weight_map: each shard once, every tensor from the shard the
/// map names, nothing a shard holds beyond what the map gives it.
StateDict readSharded(const std::string& indexPath, bool mapped)
{
    const nlohmann::json index = jsonutil::parseFile(indexPath);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
        throw Error(indexPath +
                    ": expected an object with a 'weight_map' object (tensor name -> shard file)");
    const fs::path dir = fs::path(indexPath).parent_path();
    std::map<std::string, std::set<std::string>> byShard;
    for (const auto& [name, shard] : index["weight_map"].items()) {
        if (!shard.is_string())
            throw Error(indexPath + ": weight_map entry '" + name + "' must be a file name");
        byShard[shard.get<std::string>()].insert(name);
    }
    if (byShard.empty()) throw Error(indexPath + ": weight_map is empty");
    for (const auto& [shard, names] : byShard)
        shardPath(dir, shard, indexPath); // every shard checked before any is read
    StateDict out;
    for (const auto& [shard, names] : byShard) {
        const std::string path = shardPath(dir, shard, indexPath).string();
        StateDict tensors = readOneFile(path, mapped);
        for (auto& [name, tensor] : tensors) {
            if (!names.count(name))
                throw Error(path + ": tensor '" + name + "' is not assigned to this shard by " +
                            fs::path(indexPath).filename().string());
            out.emplace(name, std::move(tensor));
        }
        for (const std::string& name : names)
            if (!out.count(name))
                throw Error(path + ": tensor '" + name + "' is missing (" +
                            fs::path(indexPath).filename().string() + " says this shard holds it)");
    }
    return out;
}

StateDict readCheckpoint(const std::string& path, bool mapped)
{
    return endsWith(path, ".index.json") ? readSharded(path, mapped) : readOneFile(path, mapped);
}

} // namespace

std::string findWeightsFile(const std::string& modelDir)
{
    if (!fs::is_directory(modelDir))
        throw Error(modelDir + ": not a folder (expected a model folder with config.json and weights)");
    for (const char* name : {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                             "pytorch_model.bin.index.json"}) {
        const fs::path p = fs::path(modelDir) / name;
        if (fs::exists(p)) return p.string();
    }
    throw Error(modelDir +
                ": no model.safetensors, pytorch_model.bin or sharded index (*.index.json) in this folder");
}

StateDict readStateDict(const std::string& path)
{
    return readCheckpoint(path, false);
}

StateDict mapStateDict(const std::string& path)
{
    return readCheckpoint(path, true);
}

bool isSafetensorsCheckpoint(const std::string& path)
{
    return endsWith(path, ".safetensors") || endsWith(path, ".safetensors.index.json");
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
