// `outlierlens convert`: a model folder's weights rewritten as model.safetensors (float32 or
// float16), every other file copied. Turns a pytorch_model.bin checkpoint into safetensors, and
// halves a model for shipping.

#include "cli/command_line.h"

#include "common/atomic_file.h"
#include "common/atomic_folder.h"
#include "common/error.h"
#include "io/safetensors.h"
#include "io/state_dict.h"

#include <cstdio>
#include <filesystem>

namespace outlierlens::cli {

int runConvert(const QStringList& args)
{
    Command cmd("convert",
                "Rewrite a model folder's weights as model.safetensors (float32, or float16 with --fp16); "
                "config.json, vocab.txt and every other file are copied unchanged. Tensor names stay as they "
                "are, so the result loads wherever the original did.");
    cmd.parser().addOptions({
        {"model", "Model folder to convert.", "dir"},
        {"out", "New model folder (must not exist, or be empty).", "dir"},
        {"fp16", "Store floating tensors as float16 (loading converts back to float32)."},
    });
    if (auto code = cmd.parse(args)) return *code;
    return cmd.guarded([&]() -> int {
        namespace fs = std::filesystem;
        const fs::path in = cmd.required("model");
        const fs::path out = cmd.required("out");
        if (fs::exists(out) && !(fs::is_directory(out) && fs::is_empty(out)))
            throw Error(out.string() + ": already exists and is not an empty folder");
        const std::string weights = findWeightsFile(in.string());
        const StateDict tensors = readStateDict(weights);
        AtomicFolder folder(out.string()); // removed again if anything below fails (a full disk)
        const fs::path temp = folder.path();
        for (const auto& entry : fs::directory_iterator(in)) {
            const std::string name = entry.path().filename().string();
            if (!entry.is_regular_file() || name == "model.safetensors" || name == "pytorch_model.bin")
                continue;
            copyFileContents(entry.path().string(), (temp / name).string());
        }
        writeSafetensors((temp / "model.safetensors").string(), tensors,
                         cmd.isSet("fp16") ? SafetensorsDtype::Float16 : SafetensorsDtype::Float32,
                         {{"format", "pt"}, {"producer", "outlierlens convert"}});
        folder.commit();
        std::printf("wrote %s (%zu tensors, %s, %.1f MB)\n", out.string().c_str(), tensors.size(),
                    cmd.isSet("fp16") ? "float16" : "float32",
                    double(fs::file_size(out / "model.safetensors")) / 1e6);
        return Ok;
    });
}

} // namespace outlierlens::cli
