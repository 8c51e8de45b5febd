#pragma once
// Any thread: the attention variant's fields, one row each. The row's key is the field's name in
// config.json's "outlierlens" block, in run.json and as `train --KEY`; inspect, stats and create-model
// take it as --key-with-dashes. config.json reading and writing, the training fields and the
// command-line overrides are all derived from this table.

#include "model/config.h"

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace outlierlens {

using VariantRef =
    std::variant<double*, int*, std::optional<double>*, bool*, SoftmaxKind*, GateKind*, BiasKind*>;

struct VariantField
{
    const char* key;
    const char* help;
    VariantRef (*ref)(AttentionVariant&);
    /// Whether config.json records the field for this variant (gamma only for clipped softmax, ...).
    bool (*recorded)(const AttentionVariant&);
};

/// THE table, in help order.
const std::vector<VariantField>& variantFields();

/// An et al.'s names of their Table-2 variants: softmax (the default), fixed-bias, context-bias,
/// attention-bias, context-scale and sigmoid, as config.json's "variant" and `train --attention`.
const std::vector<std::string>& namedVariants();

/// Switches on the variant An et al. call `name` (also "default" for softmax): sets bias,
/// context_scale or softmax and leaves the rest. Throws Error naming the known names otherwise.
void applyNamedVariant(AttentionVariant& v, const std::string& name);

/// The row named `key` ("gamma", "n_hid", ...), or null.
const VariantField* findVariantField(const std::string& key);

/// Sets the row's field of `v` from command-line text ("-0.025", "clipped", "none" for alpha); throws
/// Error saying what it expects. The variant is not validated.
void setVariantField(AttentionVariant& v, const VariantField& field, const std::string& text);

} // namespace outlierlens
