#pragma once
// Call configureTorchThreads() once at start-up and at the start of every worker thread that
// runs torch code (OpenMP thread settings are per thread).

namespace outlierlens {

/// Number of usable cores (at least 1).
int coreCount();

/// Sets LibTorch's intra-op threads to `threads`, or to coreCount() when threads <= 0 (Debian's
/// LibTorch defaults to 1 here). Returns the number set.
int configureTorchThreads(int threads = 0);

} // namespace outlierlens
