#pragma once
// Private to tasks/config: the table of TrainConfig's fields (name, group, help text, member), from
// which train_config.cpp derives JSON keys, flags, --help, run.json and the field list.

#include "tasks/config/train_config.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace outlierlens::train_fields {

using FieldRef =
    std::variant<std::string*, int*, std::int64_t*, std::uint64_t*, double*, bool*, std::optional<double>*,
                 TrainTask*, ClmData*, InitScheme*, DecayKind*, SoftmaxKind*, GateKind*, BiasKind*, Precision*>;

struct FieldDef
{
    const char* name;
    const char* group;
    const char* help;
    std::function<FieldRef(TrainConfig&)> ref;
};

/// THE table: one row per TrainConfig field, in --help order; defaults come from TrainConfig's
/// initialisers (train_fields.cpp).
const std::vector<FieldDef>& fieldTable();

} // namespace outlierlens::train_fields
