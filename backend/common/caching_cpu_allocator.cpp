#include "common/caching_cpu_allocator.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <sys/mman.h>
#include <unistd.h>
#include <unordered_map>

namespace outlierlens {
namespace {

constexpr std::size_t kHugePage = std::size_t(2) << 20;

struct LiveBlock
{
    CachingCpuAllocator* owner = nullptr; ///< null once the allocator is gone: unmap when freed
    std::size_t bytes = 0;                ///< the mapped (rounded) size
};

// One registry for every instance: a tensor's deleter is a plain function and finds its block's
// size and allocator here. Never destroyed, since tensors may be freed during static destruction.
std::mutex& registryMutex()
{
    static auto* mutex = new std::mutex;
    return *mutex;
}

std::unordered_map<void*, LiveBlock>& liveBlocks()
{
    static auto* blocks = new std::unordered_map<void*, LiveBlock>;
    return *blocks;
}

std::atomic<CachingCpuAllocator*> g_installed{nullptr};

void* mapBlock(std::size_t bytes)
{
    void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) return nullptr;
    // Transparent huge pages where the system gives them on request ("madvise" mode, Debian's
    // default): one fault per 2 MB instead of per 4 KB the first time a block is touched.
    ::madvise(data, bytes, MADV_HUGEPAGE);
    return data;
}

std::size_t defaultCap()
{
    const std::size_t gigabyte = std::size_t(1) << 30;
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long pageSize = ::sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || pageSize <= 0) return gigabyte;
    return std::min(gigabyte, std::size_t(pages) * std::size_t(pageSize) / 8);
}

} // namespace

CachingCpuAllocator::CachingCpuAllocator(std::size_t largeBytes, std::size_t capBytes)
    : m_largeBytes(std::max<std::size_t>(largeBytes, 1))
    , m_capBytes(capBytes)
{}

CachingCpuAllocator::~CachingCpuAllocator()
{
    std::vector<Block> cached;
    {
        const std::lock_guard<std::mutex> lock(registryMutex());
        for (auto& item : liveBlocks())
            if (item.second.owner == this) item.second.owner = nullptr;
        cached.swap(m_cached);
        m_cachedBytes = 0;
    }
    for (const Block& b : cached)
        ::munmap(b.data, b.bytes);
}

std::size_t CachingCpuAllocator::sizeClass(std::size_t bytes)
{
    std::size_t top = kHugePage;
    while (top <= bytes / 2)
        top *= 2; // the largest power of two <= bytes (at least 2 MB)
    const std::size_t step = std::max(kHugePage, top / 8);
    return (bytes + step - 1) / step * step;
}

c10::DataPtr CachingCpuAllocator::allocate(std::size_t bytes) const
{
    if (bytes < m_largeBytes) {
        void* data = c10::alloc_cpu(bytes); // what LibTorch's default CPU allocator does
        c10::profiledCPUMemoryReporter().New(data, bytes);
        return {data, data, &deleteData, c10::Device(c10::DeviceType::CPU)};
    }
    // c10::Allocator::allocate is const; the cache is this allocator's state all the same.
    auto* self = const_cast<CachingCpuAllocator*>(this);
    const std::size_t wanted = sizeClass(bytes);
    Block block;
    std::vector<Block> unmap;
    {
        const std::lock_guard<std::mutex> lock(registryMutex());
        auto best = self->m_cached.end();
        for (auto it = self->m_cached.begin(); it != self->m_cached.end(); ++it)
            if (it->bytes >= wanted && it->bytes <= 2 * wanted &&
                (best == self->m_cached.end() || it->bytes < best->bytes))
                best = it;
        if (best != self->m_cached.end()) {
            block = *best;
            self->m_cached.erase(best);
            self->m_cachedBytes -= block.bytes;
            ++self->m_hits;
        } else {
            // A miss gives back at least as much kept memory as it maps, smaller blocks (which do
            // not fit it) first, then the longest kept: the large blocks mapped at any time (in use
            // plus kept) then never exceed the most that were in use at once, so the cache does not
            // raise the process's peak memory (a decoder's float32 copies of its layers' weights
            // would otherwise sit idle next to its vocabulary projection's).
            ++self->m_misses;
            std::stable_partition(self->m_cached.begin(), self->m_cached.end(),
                                  [&](const Block& b) { return b.bytes < wanted; });
            std::size_t given = 0;
            std::size_t count = 0;
            while (given < wanted && count < self->m_cached.size())
                given += self->m_cached[count++].bytes;
            unmap.assign(self->m_cached.begin(), self->m_cached.begin() + std::ptrdiff_t(count));
            self->m_cached.erase(self->m_cached.begin(), self->m_cached.begin() + std::ptrdiff_t(count));
            self->m_cachedBytes -= given;
        }
    }
    for (const Block& b : unmap)
        ::munmap(b.data, b.bytes);
    if (!block.data) {
        block = {mapBlock(wanted), wanted};
        if (!block.data) {
            self->releaseCached(); // the kept blocks are the first thing to give up
            block.data = mapBlock(wanted);
        }
        if (!block.data) {
            const int error = errno;
            c10::profiledCPUMemoryReporter().OutOfMemory(bytes);
            TORCH_CHECK(false, "CPU allocator: cannot allocate ", bytes, " bytes (", std::strerror(error),
                        ")");
        }
    }
    {
        const std::lock_guard<std::mutex> lock(registryMutex());
        liveBlocks()[block.data] = {self, block.bytes};
        self->m_liveBytes += block.bytes;
    }
    c10::profiledCPUMemoryReporter().New(block.data, bytes);
    return {block.data, block.data, &deleteData, c10::Device(c10::DeviceType::CPU)};
}

c10::DeleterFnPtr CachingCpuAllocator::raw_deleter() const
{
    return &deleteData;
}

void CachingCpuAllocator::deleteData(void* data)
{
    if (!data) return;
    c10::profiledCPUMemoryReporter().Delete(data);
    std::vector<Block> unmap;
    {
        const std::lock_guard<std::mutex> lock(registryMutex());
        const auto it = liveBlocks().find(data);
        if (it != liveBlocks().end()) {
            const LiveBlock live = it->second;
            liveBlocks().erase(it);
            if (live.owner) {
                live.owner->m_liveBytes -= live.bytes;
                unmap = live.owner->keepLocked({data, live.bytes});
            } else {
                unmap.push_back({data, live.bytes});
            }
            data = nullptr;
        }
    }
    if (data) c10::free_cpu(data); // a small block, or one of the default allocator's
    for (const Block& b : unmap)
        ::munmap(b.data, b.bytes);
}

std::vector<CachingCpuAllocator::Block> CachingCpuAllocator::keepLocked(Block block)
{
    std::vector<Block> unmap;
    if (block.bytes > m_capBytes) {
        unmap.push_back(block);
        return unmap;
    }
    std::size_t evicted = 0;
    while (m_cachedBytes + block.bytes > m_capBytes) {
        unmap.push_back(m_cached[evicted]);
        m_cachedBytes -= m_cached[evicted].bytes;
        ++evicted;
    }
    m_cached.erase(m_cached.begin(), m_cached.begin() + std::ptrdiff_t(evicted));
    m_cached.push_back(block);
    m_cachedBytes += block.bytes;
    return unmap;
}

void CachingCpuAllocator::releaseCached()
{
    std::vector<Block> cached;
    {
        const std::lock_guard<std::mutex> lock(registryMutex());
        cached.swap(m_cached);
        m_cachedBytes = 0;
    }
    for (const Block& b : cached)
        ::munmap(b.data, b.bytes);
}

CachingCpuAllocator::Stats CachingCpuAllocator::stats() const
{
    const std::lock_guard<std::mutex> lock(registryMutex());
    Stats s;
    s.cachedBytes = m_cachedBytes;
    s.cachedBlocks = m_cached.size();
    s.liveBytes = m_liveBytes;
    s.hits = m_hits;
    s.misses = m_misses;
    return s;
}

CachingCpuAllocator& installCachingCpuAllocator()
{
    static CachingCpuAllocator* const installed = [] {
        auto* allocator = new CachingCpuAllocator(std::size_t(16) << 20, defaultCap()); // never deleted
        c10::SetCPUAllocator(allocator);
        g_installed.store(allocator);
        return allocator;
    }();
    return *installed;
}

void releaseCachedCpuMemory()
{
    if (CachingCpuAllocator* allocator = g_installed.load()) allocator->releaseCached();
}

} // namespace outlierlens
