#include "text/truncation.h"

#include "common/error.h"

#include <algorithm>
#include <string>

namespace outlierlens {

void truncateLongestFirst(std::vector<std::int64_t>& first, std::vector<std::int64_t>* second,
                          std::size_t numSpecial, int maxLength)
{
    if (maxLength < 0)
        throw Error("tokenizer: max length must be 0 (no truncation) or positive, got " +
                    std::to_string(maxLength));
    const std::size_t total = first.size() + (second ? second->size() : 0) + numSpecial;
    const auto max = static_cast<std::size_t>(maxLength);
    if (maxLength == 0 || total <= max) return;
    const std::size_t remove = total - max;
    if (!second) {
        if (first.size() <= remove)
            throw Error("tokenizer: max length " + std::to_string(maxLength) +
                        " leaves no room for text after the " + std::to_string(numSpecial) +
                        " special tokens");
        first.resize(first.size() - remove);
        return;
    }
    if (max < numSpecial)
        throw Error("tokenizer: max length " + std::to_string(maxLength) + " is shorter than the " +
                    std::to_string(numSpecial) + " special tokens of a pair");
    const std::size_t la = first.size(), lb = second->size();
    const std::size_t firstRemove = std::min(la > lb ? la - lb : lb - la, remove);
    const std::size_t secondRemove = remove - firstRemove;
    std::size_t removeA = 0, removeB = 0;
    if (la > lb) {
        removeA = firstRemove + secondRemove / 2;
        removeB = secondRemove - secondRemove / 2;
    } else {
        removeA = secondRemove / 2;
        removeB = firstRemove + secondRemove - secondRemove / 2;
    }
    first.resize(la - std::min(removeA, la));
    second->resize(lb - std::min(removeB, lb));
}

} // namespace outlierlens
