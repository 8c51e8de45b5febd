#pragma once
// Any thread. Sequence truncation shared by the tokenizers.

#include <cstdint>
#include <vector>

namespace outlierlens {

/// Hugging Face's truncate_sequences with TruncationStrategy.LONGEST_FIRST: shortens the ids of a
/// text (and of its pair, if `second` is not null) so that they and `numSpecial` special tokens fit
/// in `maxLength` tokens. Tokens are removed from the end of the longer segment, the pair segment on
/// ties. maxLength 0 = no truncation. Throws Error if maxLength is negative or leaves no room for
/// the text (single text) or for the special tokens (pair).
void truncateLongestFirst(std::vector<std::int64_t>& first, std::vector<std::int64_t>* second,
                          std::size_t numSpecial, int maxLength);

} // namespace outlierlens
