#pragma once
// The calling thread (and the threads it starts meanwhile, which inherit its signal mask).

#include <csignal>

namespace outlierlens {

/// While alive, the calling thread has every asynchronous signal blocked (SIGCHLD, SIGINT, SIGTERM,
/// SIGHUP, SIGALRM, ...; not the ones a thread raises itself: SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP,
/// SIGABRT, SIGSYS). Start the threads that compute inside one: no signal handler then ever runs on
/// them, and none may, since oneDNN's float32 GEMM kernels point the stack pointer into a heap
/// workspace while they run (model/linear.h). The process still gets its signals, on other threads.
class AsyncSignalsBlocked
{
public:
    AsyncSignalsBlocked();
    ~AsyncSignalsBlocked();
    AsyncSignalsBlocked(const AsyncSignalsBlocked&) = delete;
    AsyncSignalsBlocked& operator=(const AsyncSignalsBlocked&) = delete;

private:
    sigset_t m_previous;
};

} // namespace outlierlens
