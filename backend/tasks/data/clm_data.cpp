#include "tasks/data/clm_data.h"

#include "common/error.h"
#include "tasks/data/text_lines.h"
#include "text/decoder_tokenizer.h"

#include <torch/torch.h>

#include <algorithm>

namespace outlierlens {

TokenBlocks TokenBlocks::build(const std::string& textFile, const DecoderTokenizer& tokenizer,
                               int blockLength, std::size_t maxBlocks)
{
    if (blockLength < 2)
        throw Error(textFile + ": a block needs at least 2 tokens (one input, one next token), got " +
                    std::to_string(blockLength));
    const std::string text = readTextFile(textFile);

    // Does the tokenizer mark where a text starts (BOS)? If not, lines are separated by its EOS.
    std::int64_t separator = -1;
    {
        const std::string probe = "a";
        if (tokenizer.encode(probe).inputIds.size() ==
            tokenizer.encode(probe, std::nullopt, 0, false).inputIds.size())
            separator = tokenizer.eosId();
    }
    const std::int64_t wanted = maxBlocks > 0 ? std::int64_t(maxBlocks) * blockLength : -1;
    std::vector<std::int64_t> stream = tokenizeLines(
        text, textFile,
        [&](const std::string& line, std::vector<std::int64_t>& ids) {
            const std::vector<std::int64_t> encoded = tokenizer.encode(line).inputIds;
            ids.insert(ids.end(), encoded.begin(), encoded.end());
            if (separator >= 0) ids.push_back(separator);
        },
        wanted);

    TokenBlocks out;
    out.m_file = textFile;
    out.m_blockLength = blockLength;
    out.m_tokenCount = std::int64_t(stream.size());
    std::int64_t n = out.m_tokenCount / blockLength;
    if (maxBlocks > 0) n = std::min<std::int64_t>(n, std::int64_t(maxBlocks));
    if (n == 0)
        throw Error(textFile + ": the text has " + std::to_string(out.m_tokenCount) +
                    " tokens; one block needs " + std::to_string(blockLength) + " (seq_length)");
    out.m_blocks = torch::from_blob(stream.data(), {n, blockLength}, torch::kInt64).clone();
    return out;
}

torch::Tensor TokenBlocks::blocks(const std::vector<std::int64_t>& indices) const
{
    return gatherRows(m_blocks, indices, m_file, "block");
}

torch::Tensor TokenBlocks::range(std::int64_t start, std::int64_t count) const
{
    std::vector<std::int64_t> indices;
    for (std::int64_t i = 0; i < count; ++i)
        indices.push_back(start + i);
    return blocks(indices);
}

torch::Tensor nextTokenCrossEntropy(const torch::Tensor& logits, const torch::Tensor& ids)
{
    using torch::indexing::None;
    using torch::indexing::Slice;
    const std::int64_t vocab = logits.size(-1);
    const torch::Tensor predicted = logits.index({Slice(), Slice(None, -1)}).reshape({-1, vocab});
    const torch::Tensor targets = ids.index({Slice(), Slice(1, None)}).reshape({-1});
    return torch::nn::functional::cross_entropy(predicted.to(torch::kFloat), targets);
}

} // namespace outlierlens
