#include "tasks/config/closest_name.h"

#include <algorithm>
#include <limits>

namespace outlierlens {
namespace {

std::size_t editDistance(const std::string& a, const std::string& b)
{
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j)
        row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

} // namespace

std::string closestName(const std::string& word, const std::vector<std::string>& candidates)
{
    // A name that contains the word or is contained in it ("warmup" -> "warmup_steps") beats edit
    // distance, which favours short unrelated names ("warmup" is closer to "lr" than to
    // "warmup_steps"); among those the one closest in length wins.
    std::string best;
    std::size_t bestScore = std::numeric_limits<std::size_t>::max();
    for (const std::string& c : candidates) {
        const bool contains = (word.size() >= 3 && c.find(word) != std::string::npos) ||
                              (c.size() >= 3 && word.find(c) != std::string::npos);
        if (!contains) continue;
        const std::size_t score = c.size() > word.size() ? c.size() - word.size() : word.size() - c.size();
        if (score < bestScore) {
            best = c;
            bestScore = score;
        }
    }
    if (!best.empty()) return best;
    for (const std::string& c : candidates) {
        const std::size_t d = editDistance(word, c);
        if (d < bestScore) {
            best = c;
            bestScore = d;
        }
    }
    return best;
}

} // namespace outlierlens
