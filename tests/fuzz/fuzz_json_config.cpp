// Fuzz target: every reader of a JSON file a user hands us, on the same bytes. The input is written as
// config.json (BERT, decoder and ViT/timm readers, image preprocessing), as a training config
// (`train --config`) and as an MNLI .jsonl file, after the bare depth-limited parser.

#include "fuzz_support.h"

#include "common/json_util.h"
#include "io/image.h"
#include "model/config.h"
#include "model/decoder_config.h"
#include "model/vit_config.h"
#include "tasks/config/train_config.h"
#include "text/mnli.h"
#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace outlierlens;
    using fuzzsupport::refusedOnlyWithError;
    const std::string text(reinterpret_cast<const char*>(data), size);
    const std::filesystem::path& dir = fuzzsupport::scratchDir();
    const std::string configPath = (dir / "config.json").string();
    fuzzsupport::writeFile(configPath, text);

    refusedOnlyWithError([&] { jsonutil::parseText(text, "fuzz input"); });
    refusedOnlyWithError([&] { BertConfig::fromFile(configPath); });
    refusedOnlyWithError([&] { DecoderConfig::fromFile(configPath); });
    refusedOnlyWithError([&] { VitConfig::fromModelDir(dir.string()); });
    refusedOnlyWithError([&] { ImagePreprocessing::fromModelDir(dir.string()); });
    refusedOnlyWithError([&] { parseTrainConfig(text, "fuzz --config"); });

    const std::string jsonlPath = (dir / "pairs.jsonl").string();
    fuzzsupport::writeFile(jsonlPath, text);
    refusedOnlyWithError([&] { readNliPairs(jsonlPath); });
    return 0;
}
