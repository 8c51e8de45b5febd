#pragma once
// Training thread only: the thread that runs backward() owns the optimizer and the gradients.

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}

namespace outlierlens {

/// Parameters (by their module names) that share one weight decay.
struct ParamGroup
{
    std::vector<std::pair<std::string, torch::Tensor>> params;
    double weightDecay = 0.0;
};

/// PyTorch's torch.optim.AdamW (amsgrad off, not maximizing), written out so that its whole state
/// is visible and can be saved and restored exactly. Each parameter keeps its own step count, as
/// PyTorch does: a parameter without a gradient in a step is skipped entirely (no weight decay, no
/// moment update, no step count), so one that joins later gets the bias correction of its first step.
class AdamW
{
public:
    /// Throws Error for an undefined tensor, a parameter name given twice, betas outside [0, 1),
    /// a negative eps or weight decay.
    explicit AdamW(std::vector<ParamGroup> groups, double beta1 = 0.9, double beta2 = 0.999,
                   double eps = 1e-8);

    /// One update with learning rate `lr` from the parameters' current gradients:
    /// p *= 1 - lr * wd; m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
    /// p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps), t = the parameter's step.
    void step(double lr);
    /// Drops every parameter's gradient (set to undefined, like zero_grad(set_to_none=True)).
    void zeroGrad();
    /// Number of step() calls, including restored ones.
    std::int64_t steps() const { return m_steps; }
    /// Parameter updates that took the one-pass route (contiguous float32 tensors on a CPU with AVX2 and
    /// FMA: one loop over the parameter, its gradient and moments) rather than LibTorch's per-tensor ops
    /// (for tests and benchmarks). Both give PyTorch's values.
    std::int64_t onePassUpdates() const { return m_onePassUpdates; }

    /// The state as named tensors for a checkpoint: "<param>.exp_avg" and "<param>.exp_avg_sq"
    /// (the parameter's shape and dtype), "<param>.step" (0-d int64: that parameter's update count)
    /// and "step" (0-d int64: steps()). Copies, so later steps do not change them.
    std::map<std::string, torch::Tensor> state() const;
    /// Restores a state() of an optimizer over the same parameters. Strict: a missing or unexpected
    /// name, a wrong shape or a negative step count is an Error naming the tensor; floating tensors
    /// are converted to the parameter's dtype (safetensors stores float32). Continuing after
    /// loadState(state()) gives bit-identical parameters.
    void loadState(const std::map<std::string, torch::Tensor>& state);

private:
    struct Slot
    {
        std::string name;
        torch::Tensor param;
        double weightDecay = 0.0;
        torch::Tensor expAvg;
        torch::Tensor expAvgSq;
        std::int64_t step = 0;
    };
    std::vector<Slot> m_slots;
    double m_beta1;
    double m_beta2;
    double m_eps;
    std::int64_t m_steps = 0;
    std::int64_t m_onePassUpdates = 0;
};

/// The usual BERT split (Hugging Face's no_decay = ["bias", "LayerNorm.weight"], made structural):
/// group 0 decays by `weightDecay`; group 1 (decay 0) holds every bias (a parameter named "bias",
/// which includes the gate biases) and every parameter of a torch::nn::LayerNorm module (BERT's
/// "LayerNorm", ViT's "norm1"/"norm2"/"norm"), unless `decayLayerNorm` (then only LayerNorm biases stay
/// undecayed: the paper's "weight decay on LayerNorm gamma" ablation). Parameters with
/// requires_grad off are left out; a tensor registered under two names appears once.
/// Names are the module's dotted parameter names.
std::vector<ParamGroup> decayGroups(const torch::nn::Module& module, double weightDecay,
                                    bool decayLayerNorm = false);

/// Scales all gradients of `module` together so that their total L2 norm is at most `maxNorm`,
/// exactly as torch.nn.utils.clip_grad_norm_ (coefficient maxNorm / (norm + 1e-6), clamped to 1,
/// applied to every gradient), and returns the total norm before clipping (0 when no parameter has
/// a gradient; NaN or infinity are returned as they are). Throws Error unless maxNorm > 0.
double clipGradNorm(const torch::nn::Module& module, double maxNorm);

} // namespace outlierlens
