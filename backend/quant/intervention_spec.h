#pragma once
// Plain data (no torch): an intervention on activations, as `outlierlens intervene` and the app's
// right-click menus describe it (backend/quant/intervention.h applies it).

#include <cstdint>
#include <string>
#include <vector>

namespace outlierlens {

struct Intervention
{
    enum class Value { Zero, Mean, Constant };
    int layer = 0; ///< 0-based
    /// attn_out, ffn_out or out (DESIGN.md's capture names), attn_probs: keys removed from the attention,
    /// or attn_context: the output of the chosen heads (P V, times the gate where there is one) set to 0
    /// at the chosen queries (a head ablated; for a gated model, its gate shut), or attn_gate: the chosen
    /// heads' gate values (gated attention, An et al.'s context scale) set to 0 or to a constant (1: forced
    /// open) at the chosen queries
    std::string tensor = "out";
    std::vector<std::int64_t> dims;   ///< hidden dimensions, 0-based; empty: every dimension
    std::vector<std::int64_t> tokens; ///< token positions (attn_probs: queries), 0-based; empty: every one
    Value value = Value::Zero;
    double constant = 0; ///< Value::Constant
    /// Value::Mean: the means of the chosen dimensions when they were collected elsewhere (an `intervene`
    /// run's "means", the app's live rerun); empty: the sink collects them (InterventionSink::setCollecting).
    std::vector<double> means;
    // attn_probs: the keys whose probability becomes 0 for the chosen queries of the chosen heads.
    std::vector<std::int64_t> keys; ///< key positions, 0-based; at least one
    std::vector<std::int64_t>
        heads;               ///< attn_probs, attn_context, attn_gate: heads, 0-based; empty: every head
    bool renormalize = true; ///< the rest of each row rescaled to sum to 1 (as if masked)

    /// "layer 2 out, dims 17,42, token 0: set to their mean", "layer 1 attention, every head: key 0 removed
    /// from every query, renormalised" (layers and heads 1-based).
    std::string describe() const;
    /// Throws Error for a negative layer, dimension, position or head, an unknown tensor, attn_probs
    /// without keys, attn_probs or attn_context with a value other than zero or with dimensions, or means
    /// that do not fit (given for another value, or not one per chosen dimension).
    void validate() const;
};

} // namespace outlierlens
