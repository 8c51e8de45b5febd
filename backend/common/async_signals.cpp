#include "common/async_signals.h"

#include <initializer_list>
#include <pthread.h>

namespace outlierlens {

AsyncSignalsBlocked::AsyncSignalsBlocked()
{
    sigset_t set;
    sigfillset(&set);
    for (int synchronous : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS})
        sigdelset(&set, synchronous);
    pthread_sigmask(SIG_BLOCK, &set, &m_previous);
}

AsyncSignalsBlocked::~AsyncSignalsBlocked()
{
    pthread_sigmask(SIG_SETMASK, &m_previous, nullptr);
}

} // namespace outlierlens
