#pragma once
// Any thread (pure functions of their arguments).
//
// Which examples a training step sees. Runs must be resumable after a kill: step s of a run draws
// exactly the examples it would have drawn without the interruption, so the batch of a step is a
// pure function of (n, batch size, step, seed) and never depends on earlier draws.

#include <cstdint>
#include <vector>

namespace outlierlens {

/// Steps per epoch: n / batchSize whole batches (an incomplete last batch is dropped, like
/// drop_last=True). Throws Error if batchSize < 1 or n < batchSize (fewer examples than one batch).
std::int64_t stepsPerEpoch(std::int64_t n, int batchSize);

/// The 0-based dataset indices of step `step` (0-based): epoch e = step / stepsPerEpoch(n, batchSize)
/// shuffles [0, n) with a permutation drawn from a generator seeded by mixing (seed, e), and the step
/// takes slice step % stepsPerEpoch of it. Within an epoch no index repeats; every epoch visits
/// stepsPerEpoch * batchSize distinct examples. Returns batchSize indices. Throws Error for step < 0
/// or the cases of stepsPerEpoch().
std::vector<std::int64_t> batchIndices(std::int64_t n, int batchSize, std::int64_t step, std::uint64_t seed);

/// The permutation of [0, n) that epoch `epoch` of a run with this seed uses (for tests and tools).
std::vector<std::int64_t> epochPermutation(std::int64_t n, std::int64_t epoch, std::uint64_t seed);

} // namespace outlierlens
