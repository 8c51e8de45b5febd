#include "analysis/bert_inspection.h"

#include "analysis/bert_batch.h"
#include "analysis/metrics.h"
#include "common/error.h"

#include <torch/torch.h>

namespace outlierlens {

BertInspection inspectBert(BertNetwork& network, const BertTokenizer& tokenizer, const std::string& text,
                           const std::optional<std::string>& pair, int maxLength,
                           const std::set<std::string>& captureNames, ActivationSink* through)
{
    const int limit = maxLength > 0 ? maxLength : network.config().maxPositions;
    if (limit > network.config().maxPositions)
        throw Error("--max-length " + std::to_string(limit) + " exceeds the model's " +
                    std::to_string(network.config().maxPositions) + " positions");
    BertInspection result{tokenizer.encode(text, pair, limit),
                          captureNames.empty() ? RecordingSink() : RecordingSink(captureNames),
                          {},
                          -1};
    result.fullLength = std::int64_t(result.encoding.inputIds.size());
    if (result.fullLength == limit) // cut, or exactly full: count the whole input
        result.fullLength = std::int64_t(tokenizer.encode(text, pair, 0).inputIds.size());
    for (std::int64_t id : result.encoding.inputIds)
        if (id < 0 || id >= network.config().vocabSize)
            throw Error("token id " + std::to_string(id) + " is outside the model's vocabulary of " +
                        std::to_string(network.config().vocabSize) +
                        " (does vocab.txt belong to this model?)");

    const PaddedBertBatch input = padBertBatch({&result.encoding}, tokenizer.padId()); // B = 1: no padding

    c10::InferenceMode guard;
    const ThroughScope scope(result.activations, through);
    const BertForward out =
        network.forward(input.inputIds, input.tokenTypeIds, input.attentionMask, &result.activations);
    if (out.logits.defined()) result.outputNotice = nonFiniteOutputNotice(out.logits);
    if (network.head() == BertHead::SequenceClassification && result.outputNotice.empty()) {
        const torch::Tensor probs = torch::softmax(out.logits[0].to(torch::kDouble), -1).contiguous();
        result.probabilities.assign(probs.data_ptr<double>(), probs.data_ptr<double>() + probs.numel());
        result.predicted = int(probs.argmax().item<std::int64_t>());
    }
    return result;
}

} // namespace outlierlens
