#include "model/runtime.h"

#include <ATen/Parallel.h>

#include <malloc.h>
#include <sched.h>
#include <thread>

namespace outlierlens {

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
    malloc_trim(0);
}

void configureAllocator()
{
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
}

} // namespace outlierlens
