#include "model/runtime.h"

#include "common/caching_cpu_allocator.h"

#include <ATen/Parallel.h>
#include <torch/version.h>

#include <cstdlib>
#include <dlfcn.h>
#include <malloc.h>
#include <sched.h>
#include <strings.h>
#include <thread>
#include <unistd.h>

namespace outlierlens {

std::string torchVersion()
{
    return TORCH_VERSION;
}

int coreCount()
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    const unsigned hw = std::thread::hardware_concurrency();
    return hw > 0 ? int(hw) : 1;
}

int configureTorchThreads(int threads)
{
    const int n = threads > 0 ? threads : coreCount();
    at::init_num_threads();
    at::set_num_threads(n);
    return n;
}

void releaseFreedMemory()
{
    releaseCachedCpuMemory();
    malloc_trim(0);
}

void configureAllocator()
{
    // glibc's defaults give every forward pass back to the kernel: freeing the top of the heap trims
    // it (128 KB threshold) and blocks from 128 KB up are mmap-ed and unmapped each time, so the next
    // pass faults the same pages in again (bert-base, T = 128: 2.5x the page faults and 3x the system
    // time of the same forward in Python). Keep up to 256 MB of freed heap for reuse and pad heap
    // growth a little; blocks from 16 MB up (a big model's float32 copy of one weight matrix, large
    // captures) are mapped directly and return to the system when freed, so a decoder's memory stays
    // near its weights' size. docs/performance.md has the figures.
    mallopt(M_MMAP_THRESHOLD, 16 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_TOP_PAD, 16 << 20);
    // Tensors from 16 MB up would still be mapped and faulted in afresh every step (a BERT MLM's
    // logits over a 30,522-word vocabulary: a quarter of its bf16 training step was page faults).
    // LibTorch's CPU allocator keeps those for reuse instead, up to a cap.
    installCachingCpuAllocator();
}

std::string blasKernels()
{
    using CoreName = char* (*)();
    const auto coreName = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
    const char* name = coreName ? coreName() : nullptr;
    return name ? std::string(name) : std::string();
}

std::string betterBlasKernels()
{
    if (std::getenv("OPENBLAS_CORETYPE")) return {}; // the user's choice, or selectBlasKernels' own
    if (strcasecmp(blasKernels().c_str(), "Prescott") != 0) return {}; // not OpenBLAS, or it knew the CPU
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    return {};
}

void selectBlasKernels(char* argv[])
{
    const std::string better = betterBlasKernels();
    if (better.empty()) return;
    setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
    execv("/proc/self/exe", argv);
    // Not re-executed (no /proc): carry on with the generic kernels; children get the variable.
}

} // namespace outlierlens
