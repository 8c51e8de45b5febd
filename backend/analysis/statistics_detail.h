#pragma once
// Private to the data-set statistics (dataset_statistics.cpp accumulates, statistics_writer.cpp writes
// the HDF5 file): which tensors a layer's statistics come from, and where each is kept.

#include "analysis/dataset_statistics.h"

#include <cstddef>
#include <string>
#include <vector>

namespace outlierlens::statistics_detail {

/// The tensor behind the model's "max inf norm" and the ones averaged into "avg kurtosis".
CapturePoint infNormPoint(const StatisticsOptions& o);
std::vector<CapturePoint> kurtosisPoints(const StatisticsOptions& o);
/// The index of `point` in statisticsTensorPoints().
std::size_t tensorSlot(CapturePoint point);
/// The capture a layer's attention reads: the embeddings for layer 0, else the previous block's output.
std::string previousOutputName(int layer);

template<typename T>
T valueAt(const std::vector<T>& values, std::size_t index)
{
    return index < values.size() ? values[index] : T(0);
}

} // namespace outlierlens::statistics_detail
