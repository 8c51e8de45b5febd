#pragma once
// Private to analysis/ (metrics.cpp, dataset_statistics.cpp): reading a tensor's values where they lie,
// in any floating dtype and any strides, as double; for the one-pass statistics of a sample.

#include <torch/torch.h>

#include <cstdint>

namespace outlierlens::elements {

/// Calls f(const S* first, strides) with S the tensor's element type (float, double, bfloat16 or half;
/// any other type is converted to float first), so values are read where they are: a sample's slice of
/// a padded batch is not copied.
template<typename F>
void withElements(const torch::Tensor& tensor, F&& f)
{
    torch::Tensor t = tensor.device().is_cpu() ? tensor : tensor.to(torch::kCPU);
    if (!t.is_floating_point()) t = t.to(torch::kFloat);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, t.scalar_type(), "withElements",
                                    [&] { f(t.data_ptr<scalar_t>(), t.strides()); });
}

/// Calls f(index, value as double) for the `n` values row[0], row[stride], ...; the unit stride
/// (the common case) gets its own loop so that the compiler can vectorise it.
template<typename S, typename F>
inline void forRow(const S* row, std::int64_t n, std::int64_t stride, F&& f)
{
    if (stride == 1) {
        for (std::int64_t j = 0; j < n; ++j)
            f(j, double(row[j]));
    } else {
        for (std::int64_t j = 0; j < n; ++j)
            f(j, double(row[j * stride]));
    }
}

} // namespace outlierlens::elements
