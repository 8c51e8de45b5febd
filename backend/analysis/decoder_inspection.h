#pragma once
// Runs on the thread that owns the network (a worker, or the command line's main thread).

#include "analysis/recording_sink.h"
#include "model/decoder_network.h"
#include "text/decoder_tokenizer.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace outlierlens {

/// One text run through a decoder with its activations recorded.
struct DecoderInspection
{
    Encoding encoding;               ///< the tokenizer's output (no padding)
    RecordingSink activations;       ///< batched tensors, B = 1
    std::vector<std::string> labels; ///< one readable label per token (bytes decoded, spaces shown)
    /// The most likely next tokens after the last position: (token id, probability), best first.
    std::vector<std::pair<std::int64_t, double>> nextTokens;
    /// Tokens of the whole text before truncation (> encoding.inputIds.size() when it was cut).
    std::int64_t fullLength = 0;
    /// nonFiniteOutputNotice() of the last position's logits: non-empty means no next tokens.
    std::string outputNotice{};
};

/// Tokenizes `text` as the model's tokenizer does (`addSpecialTokens`: OPT/LLaMA's BOS; GPT-2 adds
/// none), truncated to maxLength tokens (0 = the model's maximum positions), runs the network under
/// InferenceMode and records the capture points in `captureNames` (empty = all), its QuantSites passing
/// through `through` (RecordingSink::setThrough) when given. Throws Error for
/// an empty encoding, an input longer than the model allows or ids outside its vocabulary.
DecoderInspection inspectDecoder(DecoderNetwork& network, const DecoderTokenizer& tokenizer,
                                 const std::string& text, int maxLength = 0, bool addSpecialTokens = true,
                                 const std::set<std::string>& captureNames = {}, int topNext = 5,
                                 ActivationSink* through = nullptr);

/// The same for token ids given as they are (no tokenizer needed: `inspect --input-ids`); labels are the
/// tokenizer's when one is given, else the ids. Throws Error for no ids, an id outside the vocabulary or
/// more ids than the model's positions.
DecoderInspection inspectDecoderIds(DecoderNetwork& network, const std::vector<std::int64_t>& inputIds,
                                    const DecoderTokenizer* tokenizer,
                                    const std::set<std::string>& captureNames = {}, int topNext = 5,
                                    ActivationSink* through = nullptr);

/// "1,5,9" or "1 5 9" (commas and/or white space) -> {1, 5, 9}. Throws Error naming an entry that is not a
/// non-negative integer, and for no ids at all.
std::vector<std::int64_t> parseTokenIds(const std::string& text);

/// A readable label for a decoder token: the tokenizer's display string with spaces made visible
/// ("\u00b7" for a leading space, "\\n" for a newline), never empty.
std::string decoderTokenLabel(const DecoderTokenizer& tokenizer, std::int64_t id);

} // namespace outlierlens
