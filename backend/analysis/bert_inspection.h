#pragma once
// Runs on the thread that owns the network (a worker, or the command line's main thread).

#include "analysis/recording_sink.h"
#include "model/bert_network.h"
#include "text/wordpiece.h"

#include <optional>
#include <string>
#include <vector>

namespace outlierlens {

/// One BERT input run through a network with its activations recorded.
struct BertInspection
{
    Encoding encoding;                 ///< the tokenizer's output (no padding)
    RecordingSink activations;         ///< batched tensors, B = 1
    std::vector<double> probabilities; ///< softmax of the classifier logits (empty without a classifier)
    int predicted = -1;                ///< argmax class, -1 without a classifier or with outputNotice
    /// nonFiniteOutputNotice() of the logits: non-empty means no prediction was made.
    std::string outputNotice{};
    /// Tokens of the whole input before truncation (> encoding.inputIds.size() when it was cut).
    std::int64_t fullLength = 0;
};

/// Tokenizes `text` (+ `pair`) like BertTokenizer (truncation to maxLength, 0 = the model's
/// maximum positions), runs the network under InferenceMode and records the capture points in
/// `captureNames` (empty = all), its QuantSites passing through `through` when given
/// (RecordingSink::setThrough). Throws Error for an input longer than the model allows.
BertInspection inspectBert(BertNetwork& network, const BertTokenizer& tokenizer, const std::string& text,
                           const std::optional<std::string>& pair, int maxLength = 0,
                           const std::set<std::string>& captureNames = {}, ActivationSink* through = nullptr);

} // namespace outlierlens
