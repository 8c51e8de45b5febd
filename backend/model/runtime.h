#pragma once
// Call configureTorchThreads() once at start-up and at the start of every worker thread that
// runs torch code (OpenMP thread settings are per thread).

namespace outlierlens {

/// Number of usable cores (at least 1).
int coreCount();

/// Sets LibTorch's intra-op threads to `threads`, or to coreCount() when threads <= 0 (Debian's
/// LibTorch defaults to 1 here). Returns the number set.
int configureTorchThreads(int threads = 0);

/// Returns memory freed by the allocator to the operating system (glibc keeps freed heap memory
/// otherwise). Called after a model is loaded, when the checkpoint's buffers have been dropped.
void releaseFreedMemory();

/// Process-wide allocator settings for large tensors: allocations from 4 MB up are mapped and
/// unmapped directly, so memory freed after a batch goes back to the system instead of
/// fragmenting the heap. Call once at start-up.
void configureAllocator();

} // namespace outlierlens
