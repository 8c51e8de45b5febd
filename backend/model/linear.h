#pragma once
// Any thread. The matrix product of every linear layer (BERT, ViT, the decoders, the attention gates).
// In bf16 autocast without gradients (inspect, stats, figures, the GUI's fast mode) it multiplies bf16
// operands with float32 sums into a float32 result (oneDNN's gemm_bf16bf16f32, from the oneDNN that
// LibTorch links) instead of autocast's result rounded to bf16: that rounding of every linear output
// moved values across the outlier threshold (docs/performance.md); the inputs are still rounded to
// bf16. Everything else (float32, autocast training, bf16 or float64 tensors) is torch::linear.
// OUTLIERLENS_TORCH_LINEAR=1 in the environment takes LibTorch's route everywhere (for benchmarks).

#include <torch/torch.h>

#include <functional>

namespace outlierlens {

/// x [..., in] times the weight, plus the bias (may be undefined): `weight` is [out, in] as in
/// torch::nn::Linear, or [in, out] when `weightIsInByOut` (Hugging Face's Conv1D, GPT-2). Where
/// gradients are recorded this is torch::linear (or addmm), so they flow as usual.
torch::Tensor linearLayer(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                          bool weightIsInByOut = false);

/// The same for a torch::nn::Linear module.
torch::Tensor linearLayer(const torch::nn::Linear& layer, const torch::Tensor& x);

/// Runs fn() in float32 when this thread is in bf16 autocast inference (no gradients), else as it is:
/// for the cheap products outside linear layers (attention's, ViT's patch projection) whose bf16
/// rounding would otherwise reach every later value.
torch::Tensor float32InInference(const std::function<torch::Tensor()>& fn);

/// a [..., n, k] times b [..., k, m] for the attention's products of activations (Q K^T, P V). In bf16
/// autocast without gradients they run in float32 instead of bf16: at BERT's and ViT's lengths they are
/// a few percent of the work, and rounding the scores to bf16 before the softmax moved attention
/// probabilities by a few percent. Elsewhere, torch::matmul (autocast training keeps its policy).
torch::Tensor activationProduct(const torch::Tensor& a, const torch::Tensor& b);

/// Which route linearLayer takes for these tensors in the current thread's mode: "onednn-bf16-f32"
/// or "torch" (for tests and benchmarks).
const char* linearRoute(const torch::Tensor& x, const torch::Tensor& weight);

} // namespace outlierlens
