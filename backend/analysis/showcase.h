#pragma once
// Any thread (loads its own copy of the model). Torch-free header: the GUI reads showcase.json too.

#include <optional>
#include <string>
#include <vector>

namespace outlierlens {

/// Where a demo model shows its no-op head best, chosen from numbers, stored with the model as
/// showcase.json when it is trained and opened there by the app (docs/metrics.md, "First-token
/// attention" for decoders, "Sink tokens" for BERT encoders).
struct Showcase
{
    int layer = 0; ///< 0-based
    int head = 0;  ///< 0-based
    int input = 0; ///< 0-based line of the model folder's sample_inputs.txt
    /// What the attention below measures: the first-token attention of a decoder head, or (BERT) the
    /// share of the attention of the queries that are not sink tokens that falls on sink tokens.
    enum class Measure { FirstToken, SinkTokens };
    Measure measure = Measure::FirstToken;
    /// That attention of the chosen head: the mean over the sample inputs, and on the chosen input.
    double meanAttention = 0;
    double inputAttention = 0;
    /// "first-token attention" or "sink-token attention", for messages.
    const char* measureName() const;
};

/// The lines of a model folder's sample_inputs.txt (line break and a CR before it removed, spaces
/// kept: they are part of a sequence); empty when the file is missing. The one reader of that file.
std::vector<std::string> readSampleInputs(const std::string& modelDir);

/// Runs a model folder on every line of its sample_inputs.txt (a decoder: one text per line; BERT:
/// "premise<TAB>hypothesis" pairs) and chooses the (layer, head) with the largest mean attention of the
/// folder's measure over them (ties: the lower layer, then head), and the input on which that head's is
/// largest. Heads of the last layer are not chosen when there are others: the residual entering it grows
/// large in every variant, which is not the sink mechanism. Throws Error for a folder without sample
/// inputs or a model that is neither a decoder nor BERT.
Showcase computeShowcase(const std::string& modelDir);

/// Writes showcase.json into the model folder (atomically).
void writeShowcase(const std::string& modelDir, const Showcase& showcase);
/// The folder's showcase.json; nullopt when there is none. Throws Error for a malformed one.
std::optional<Showcase> readShowcase(const std::string& modelDir);

} // namespace outlierlens
