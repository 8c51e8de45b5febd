#pragma once
// Any thread. Internal to outlierlens_train_core: "did you mean" suggestions.

#include <string>
#include <vector>

namespace outlierlens {

/// The candidate most like `word`: one that contains it or is contained in it (3 characters at
/// least; the closest in length), else the one at the smallest edit (Levenshtein) distance; the
/// first on ties, "" for no candidates.
std::string closestName(const std::string& word, const std::vector<std::string>& candidates);

} // namespace outlierlens
