#pragma once
// Any thread. The matrix product of every linear layer (BERT, ViT, the decoders), with oneDNN's GEMMs
// where they do better than LibTorch's default route on a CPU:
// - float32 (no autocast): oneDNN's sgemm, forward and backward, instead of OpenBLAS. On the AVX-512
//   machine of docs/performance.md it ran these layers' shapes 1.05-1.3 x faster than OpenBLAS's own
//   SkylakeX kernels, with the same float32 arithmetic (only the order of the sums differs). With more
//   than one thread, the output's larger dimension is split in one block per thread, each a one-thread
//   product (oneDNN's own split of BERT's shapes was slower than OpenBLAS on two cores). The bias rows
//   are written block by block just before each block's product, which reads them from the cache.
// - bf16 autocast without gradients (inspect, stats, the GUI's fast mode): the products in bf16 with
//   float32 accumulation and a float32 result (oneDNN's gemm_bf16bf16f32), instead of autocast's
//   result rounded to bf16: that rounding of every linear output moved values across the outlier
//   threshold (docs/performance.md). The inputs and weights are still rounded to bf16, but where x is
//   [B, T, in] (one sample's T tokens per slice) each sample's rows also get the float32 product of
//   their mean row minus the bf16 product of it: the error both roundings make alike on every token of
//   a sample, most of it where the tokens share a large common part, is gone, and a sample's mean output
//   is the float32 one. That costs one float32 product of B rows (a read of the float32 weights). A
//   sample's values then depend, within the bf16 error, on the padding rows of its batch. (Decoders
//   compute in bf16 tensors and do not take this route; a causal model's tokens would see later ones.)
// - anything else (bf16 autocast training, bf16 or float64 tensors): torch::linear as before.
// oneDNN's float32 GEMM kernels point the stack pointer into a heap workspace while they run: a signal
// handler must never run on a thread inside them (oneDNN issue #4845). Commands take their signals on
// a thread of their own (cli::installInterruptHandlers); threads that compute in the GUI start with the
// asynchronous signals blocked (common/async_signals.h).
// OUTLIERLENS_TORCH_LINEAR=1 in the environment takes LibTorch's route everywhere (for benchmarks),
// for these and for model/onednn_ops.h.

#include <torch/torch.h>

#include <functional>

namespace outlierlens {

/// x [..., in] times the weight, plus the bias (may be undefined): `weight` is [out, in] as in
/// torch::nn::Linear, or [in, out] when `weightIsInByOut` (Hugging Face's Conv1D, GPT-2). Gradients
/// flow to x, weight and bias as through torch::linear.
torch::Tensor linearLayer(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                          bool weightIsInByOut = false);

/// relu(linearLayer(x, weight, bias)) with the same values and gradients; on the float32 sgemm route the
/// ReLU is applied in place to the product, and its backward folded into the layer's.
torch::Tensor linearRelu(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                         bool weightIsInByOut = false);

/// The same for a torch::nn::Linear module.
torch::Tensor linearLayer(const torch::nn::Linear& layer, const torch::Tensor& x);

/// Runs fn() in float32 when this thread is in bf16 autocast inference (no gradients), else as it is:
/// for the cheap products outside linear layers (attention's, ViT's patch projection) whose bf16
/// rounding would otherwise reach every later value.
torch::Tensor float32InInference(const std::function<torch::Tensor()>& fn);

/// a [..., n, k] times b [..., k, m], divided by `divisor`, for the attention's products of activations
/// (Q K^T / sqrt(d_head), P V). In float32 (3 or 4 dimensions) on oneDNN's matmul, which reads
/// permuted heads in place (model/onednn_ops.h; headsLast: a 4-D result [B, H, n, m] laid out
/// [B, n, H, m] in memory). In bf16 autocast without gradients they run in float32 instead of bf16: at
/// BERT's and ViT's lengths they are a few percent of the work, and rounding the scores to bf16 before
/// the softmax moved attention probabilities by a few percent. Elsewhere, torch::matmul (autocast
/// training keeps its policy) and then the division.
torch::Tensor activationProduct(const torch::Tensor& a, const torch::Tensor& b, double divisor = 1.0,
                                bool headsLast = false);

/// Which route linearLayer takes for these tensors in the current thread's mode: "onednn-sgemm",
/// "onednn-bf16-f32" or "torch" (for tests and benchmarks).
const char* linearRoute(const torch::Tensor& x, const torch::Tensor& weight);

} // namespace outlierlens
