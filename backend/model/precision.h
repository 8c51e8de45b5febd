#pragma once
// The compute precision of a forward pass or a training step: float32 (the default, for numbers) or
// bfloat16 autocast (a fast mode on CPUs with bf16 instructions). Torch-free header.

#include <string>

namespace outlierlens {

enum class Precision { Fp32, Bf16 };

/// "fp32" or "bf16"; anything else throws Error naming the accepted values.
Precision parsePrecision(const std::string& text);
std::string toString(Precision precision);

/// True when the CPU has bfloat16 instructions (AVX-512 BF16 or AMX-BF16). Setting the environment
/// variable OUTLIERLENS_NO_BF16=1 makes it answer false (to try the fallback on any machine).
bool cpuSupportsBf16();

/// The precision to compute in: `requested`, except bf16 on a CPU without bf16 instructions, which
/// falls back to fp32. `notice` (if given) receives the one sentence to show the user about the
/// fallback, or is cleared when there is none.
Precision effectivePrecision(Precision requested, std::string* notice = nullptr);

/// Mixed precision for the current thread while it lives, as torch.autocast("cpu", torch.bfloat16)
/// does: matrix products and convolutions in bf16, the rest in the inputs' precision (the models cast
/// softmax inputs to float32 themselves; LayerNorm and the loss see float32). Does nothing for Fp32.
class AutocastScope
{
public:
    explicit AutocastScope(Precision precision);
    ~AutocastScope();
    AutocastScope(const AutocastScope&) = delete;
    AutocastScope& operator=(const AutocastScope&) = delete;

private:
    bool m_enabled = false;
    bool m_wasEnabled = false;
};

} // namespace outlierlens
