#pragma once
// Any thread. For the family files' config readers (decoder_config.cpp), which have config.json parsed
// already: the registry's lookup on the parsed object. Kept out of model_family.h, which the GUI includes.

#include "model/model_family.h"

#include <nlohmann/json_fwd.hpp>

#include <string>

namespace outlierlens {

/// modelFamilyOfDir() for a parsed config.json (`path` for messages).
const ModelFamily& modelFamilyOfConfig(const nlohmann::json& config, const std::string& path);

} // namespace outlierlens
