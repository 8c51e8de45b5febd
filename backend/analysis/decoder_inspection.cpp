#include "analysis/decoder_inspection.h"

#include "analysis/metrics.h"
#include "common/error.h"

#include <torch/torch.h>

namespace outlierlens {

std::string decoderTokenLabel(const DecoderTokenizer& tokenizer, std::int64_t id)
{
    const std::string text = tokenizer.displayToken(id);
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == ' ')
            out += "\xc2\xb7"; // middle dot: a space the reader can see
        else if (c == '\n')
            out += "\\n";
        else if (c == '\t')
            out += "\\t";
        else if (c == '\r')
            out += "\\r";
        else
            out += c;
    }
    return out.empty() ? tokenizer.idToToken(id) : out;
}

DecoderInspection inspectDecoder(DecoderNetwork& network, const DecoderTokenizer& tokenizer,
                                 const std::string& text, int maxLength, bool addSpecialTokens,
                                 const std::set<std::string>& captureNames, int topNext,
                                 ActivationSink* through)
{
    const DecoderConfig& c = network.config();
    const int limit = maxLength > 0 ? maxLength : c.maxPositions;
    if (c.maxPositions > 0 && limit > c.maxPositions)
        throw Error("--max-length " + std::to_string(limit) + " exceeds the model's " +
                    std::to_string(c.maxPositions) + " positions");
    const Encoding encoding = tokenizer.encode(text, std::nullopt, limit, addSpecialTokens);
    if (encoding.inputIds.empty())
        throw Error("the text gives no tokens" +
                    std::string(addSpecialTokens ? "" : " (special tokens are off: nothing to run)"));
    for (std::int64_t id : encoding.inputIds)
        if (id < 0 || id >= c.vocabSize)
            throw Error("token id " + std::to_string(id) + " is outside the model's vocabulary of " +
                        std::to_string(c.vocabSize) + " (do the tokenizer files belong to this model?)");
    DecoderInspection result =
        inspectDecoderIds(network, encoding.inputIds, &tokenizer, captureNames, topNext, through);
    result.encoding = encoding;
    if (limit > 0 && result.fullLength == limit) // cut, or exactly full: count the whole text
        result.fullLength =
            std::int64_t(tokenizer.encode(text, std::nullopt, 0, addSpecialTokens).inputIds.size());
    return result;
}

std::vector<std::int64_t> parseTokenIds(const std::string& text)
{
    std::vector<std::int64_t> ids;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        std::string item = text.substr(start, comma - start);
        item.erase(0, std::min(item.size(), item.find_first_not_of(" \t\r\n")));
        item.erase(item.find_last_not_of(" \t\r\n") + 1);
        // White space separates ids too ("1 5 9"), but an empty entry between commas is an error.
        std::size_t pos = 0;
        do {
            const std::size_t end = std::min(item.find_first_of(" \t\r\n", pos), item.size());
            const std::string one = item.substr(pos, end - pos);
            std::size_t used = 0;
            long long value = -1;
            try {
                value = std::stoll(one, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (one.empty() || used != one.size() || value < 0)
                throw Error("'" + one + "' is not a token id (expected e.g. 1,5,9)");
            ids.push_back(value);
            pos = item.find_first_not_of(" \t\r\n", end);
        } while (pos != std::string::npos && pos < item.size());
        start = comma + 1;
    }
    return ids;
}

DecoderInspection inspectDecoderIds(DecoderNetwork& network, const std::vector<std::int64_t>& inputIds,
                                    const DecoderTokenizer* tokenizer,
                                    const std::set<std::string>& captureNames, int topNext,
                                    ActivationSink* through)
{
    const DecoderConfig& c = network.config();
    if (inputIds.empty()) throw Error("no token ids to run");
    for (std::int64_t id : inputIds)
        if (id < 0 || id >= c.vocabSize)
            throw Error("token id " + std::to_string(id) + " is outside the model's vocabulary of " +
                        std::to_string(c.vocabSize));
    if (c.maxPositions > 0 && std::int64_t(inputIds.size()) > c.maxPositions)
        throw Error(std::to_string(inputIds.size()) + " token ids exceed the model's " +
                    std::to_string(c.maxPositions) + " positions");
    DecoderInspection result{
        {}, captureNames.empty() ? RecordingSink() : RecordingSink(captureNames), {}, {}};
    result.encoding.inputIds = inputIds;
    result.encoding.attentionMask.assign(inputIds.size(), 1);
    result.encoding.tokenTypeIds.assign(inputIds.size(), 0);
    for (std::int64_t id : inputIds) {
        result.labels.push_back(tokenizer ? decoderTokenLabel(*tokenizer, id) : std::to_string(id));
        result.encoding.tokens.push_back(tokenizer ? tokenizer->idToToken(id) : std::to_string(id));
    }
    result.fullLength = std::int64_t(inputIds.size());

    const auto T = std::int64_t(result.encoding.inputIds.size());
    const torch::Tensor ids = torch::tensor(result.encoding.inputIds, torch::kLong).view({1, T});
    c10::InferenceMode guard;
    const ThroughScope scope(result.activations, through);
    const DecoderForward out =
        network.forward(ids, torch::ones({1, T}, torch::kLong), &result.activations, topNext > 0);
    if (out.logits.defined()) result.outputNotice = nonFiniteOutputNotice(out.logits[0][T - 1]);
    if (topNext > 0 && out.logits.defined() && result.outputNotice.empty()) {
        const torch::Tensor probs = torch::softmax(out.logits[0][T - 1].to(torch::kDouble), -1);
        const auto top = probs.topk(std::min<std::int64_t>(topNext, probs.size(0)));
        for (std::int64_t k = 0; k < std::get<0>(top).size(0); ++k)
            result.nextTokens.emplace_back(std::get<1>(top)[k].item<std::int64_t>(),
                                           std::get<0>(top)[k].item<double>());
    }
    return result;
}

} // namespace outlierlens
