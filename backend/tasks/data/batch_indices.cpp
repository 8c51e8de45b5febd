#include "tasks/data/batch_indices.h"

#include "common/error.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <string>

namespace outlierlens {
namespace {

// SplitMix64's finaliser: decorrelates nearby seeds (seed, seed + 1) and epochs.
std::uint64_t mix(std::uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

} // namespace

std::int64_t stepsPerEpoch(std::int64_t n, int batchSize)
{
    if (batchSize < 1) throw Error("batch size must be at least 1, got " + std::to_string(batchSize));
    if (n < batchSize)
        throw Error("data set has " + std::to_string(n) + " examples, fewer than one batch of " +
                    std::to_string(batchSize));
    return n / batchSize;
}

std::vector<std::int64_t> epochPermutation(std::int64_t n, std::int64_t epoch, std::uint64_t seed)
{
    if (n < 0) throw Error("data set size must not be negative, got " + std::to_string(n));
    if (epoch < 0) throw Error("epoch must not be negative, got " + std::to_string(epoch));
    at::Generator gen =
        at::make_generator<at::CPUGeneratorImpl>(mix(mix(seed) ^ static_cast<std::uint64_t>(epoch)));
    const torch::Tensor perm = torch::randperm(n, gen, torch::TensorOptions().dtype(torch::kInt64));
    const auto* p = perm.data_ptr<std::int64_t>();
    return std::vector<std::int64_t>(p, p + n);
}

std::vector<std::int64_t> batchIndices(std::int64_t n, int batchSize, std::int64_t step, std::uint64_t seed)
{
    if (step < 0) throw Error("training step must not be negative, got " + std::to_string(step));
    const std::int64_t perEpoch = stepsPerEpoch(n, batchSize);
    const std::vector<std::int64_t> perm = epochPermutation(n, step / perEpoch, seed);
    const auto begin = perm.begin() + (step % perEpoch) * batchSize;
    return std::vector<std::int64_t>(begin, begin + batchSize);
}

} // namespace outlierlens
