#pragma once
// Call configureTorchThreads() once at start-up and at the start of every worker thread that
// runs torch code (OpenMP thread settings are per thread).

#include <string>

namespace outlierlens {

/// LibTorch's version as its headers give it (Debian 12's 1.13.1 package says "1.13.0"), for About
/// boxes and --version.
std::string torchVersion();

/// Number of usable cores (at least 1).
int coreCount();

/// Sets LibTorch's intra-op threads to `threads`, or to coreCount() when threads <= 0 (Debian's
/// LibTorch defaults to 1 here). Returns the number set.
int configureTorchThreads(int threads = 0);

/// Returns memory freed by the allocators to the operating system (glibc keeps freed heap memory,
/// the CPU allocator large freed tensors, otherwise). Called after a model is loaded, when the
/// checkpoint's buffers have been dropped.
void releaseFreedMemory();

/// Process-wide allocator settings: freed memory up to 256 MB stays in the heap for the next forward
/// pass or training step instead of being returned and faulted in again; blocks from 16 MB up are
/// mapped directly and returned when freed, except tensors: LibTorch's CPU allocator becomes a
/// CachingCpuAllocator that keeps up to 1 GB of them for reuse. Call once at start-up.
void configureAllocator();

/// The kernel set OpenBLAS uses ("SkylakeX", "Prescott", ...), or "" when the BLAS is not OpenBLAS.
std::string blasKernels();

/// OpenBLAS (Debian's build, which LibTorch uses for float32 matrix products) picks its kernels from
/// the CPU's model number and falls back to its generic "Prescott" ones for a CPU it does not know;
/// 0.3.21 does so on some AVX-512 Xeons, where its float32 products then run 3-4x slower. In that
/// case, unless the user has set OPENBLAS_CORETYPE, this returns the kernel set the CPU's instruction
/// sets allow ("SkylakeX" for AVX-512, "Haswell" for AVX2 and FMA); otherwise "".
std::string betterBlasKernels();

/// When betterBlasKernels() names a set, sets OPENBLAS_CORETYPE to it and re-executes the program with
/// the same arguments (the variable is read when the library loads, before main), once: the new
/// process finds the variable set. Otherwise, or if the re-execution fails, returns and nothing
/// changes. Call first thing in main(); it costs one more start-up of the program.
void selectBlasKernels(char* argv[]);

} // namespace outlierlens
