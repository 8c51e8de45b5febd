#pragma once
// Any thread. oneDNN primitives for the attention's float32 work (model/attention.cpp and
// activationProduct in model/linear.h), forward and backward:
// - batched products that read the heads where they lie (the permuted views of Q, K and V, and K
//   transposed) and can write P V straight into the layout that merging the heads needs, so neither
//   direction copies a permuted tensor, and the scores' 1/sqrt(d_head) rides on the product;
// - the softmax over the last dimension (oneDNN's JIT kernel; LibTorch 1.13 runs its AVX2 one).
// docs/performance.md has what they gave the training step. Only the order of float32 sums differs
// from LibTorch's route; tst_linear checks both against float64.
// Called with the same caveat as model/linear.h: no signal handler may run on a thread inside them.

#include <torch/types.h>

namespace outlierlens::onednn {

/// OUTLIERLENS_TORCH_LINEAR=1 in the environment: LibTorch's own route for every product and softmax
/// of linear.h and these (for benchmarks).
bool torchRouteForced();

/// Whether batchedProduct takes these operands: float32 CPU tensors of 3 or 4 dimensions with the same
/// batch sizes and n x k by k x m matrices.
bool canMultiply(const torch::Tensor& a, const torch::Tensor& b);

/// a [..., n, k] b [..., k, m] / divisor, any strides. headsLast (4 dimensions): the result
/// [B, H, n, m] is a view of memory laid out [B, n, H, m], so that merging the heads
/// (permute(0, 2, 1, 3) and a view to [B, n, H * m]) copies nothing. Differentiable in a and b; their
/// gradients come in their own layouts.
torch::Tensor batchedProduct(const torch::Tensor& a, const torch::Tensor& b, double divisor, bool headsLast);

/// Whether softmax takes x: a float32 CPU tensor of at least one element.
bool canSoftmax(const torch::Tensor& x);

/// Softmax over the last dimension, differentiable.
torch::Tensor softmax(const torch::Tensor& x);

} // namespace outlierlens::onednn
