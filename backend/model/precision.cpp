#include "model/precision.h"

#include "common/error.h"

#include <ATen/autocast_mode.h>

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace outlierlens {

Precision parsePrecision(const std::string& text)
{
    if (text == "fp32" || text == "float32") return Precision::Fp32;
    if (text == "bf16" || text == "bfloat16") return Precision::Bf16;
    throw Error("unknown precision '" + text + "' (expected fp32 or bf16)");
}

std::string toString(Precision precision)
{
    return precision == Precision::Bf16 ? "bf16" : "fp32";
}

bool cpuSupportsBf16()
{
    if (const char* off = std::getenv("OUTLIERLENS_NO_BF16"); off && *off && std::strcmp(off, "0") != 0)
        return false;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
    const bool amxBf16 = (d >> 22) & 1u;
    const unsigned maxSubleaf = a;
    bool avx512Bf16 = false;
    if (maxSubleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d) != 0) avx512Bf16 = (a >> 5) & 1u;
    return avx512Bf16 || amxBf16;
#else
    return false; // other architectures: not detected, so bf16 falls back to fp32
#endif
}

Precision effectivePrecision(Precision requested, std::string* notice)
{
    if (notice) notice->clear();
    if (requested != Precision::Bf16 || cpuSupportsBf16()) return requested;
    if (notice)
        *notice = "this CPU has no bfloat16 instructions (AVX-512 BF16 or AMX), where bf16 would be "
                  "slower than float32: computing in fp32 instead";
    return Precision::Fp32;
}

AutocastScope::AutocastScope(Precision precision)
    : m_enabled(precision == Precision::Bf16)
{
    if (!m_enabled) return;
    m_wasEnabled = at::autocast::is_cpu_enabled();
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(true);
    at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope()
{
    if (!m_enabled) return;
    at::autocast::set_cpu_enabled(m_wasEnabled);
    // The bf16 copies of the weights are cached for the scope's lifetime; drop them when the
    // outermost scope ends (weights change after every optimizer step).
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
}

} // namespace outlierlens
