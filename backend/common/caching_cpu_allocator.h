#pragma once
// Any thread: LibTorch calls its CPU allocator from every thread that makes or frees a tensor; the
// allocator's state is behind one mutex.

#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace outlierlens {

/// LibTorch's CPU allocator with a bounded cache of large blocks.
///
/// glibc maps every block from its mmap threshold up afresh and unmaps it when it is freed, so a
/// training step that makes the same large tensors every step (a BERT MLM's 600 x 30,522 float
/// logits, 73 MB, their log-softmax and gradients) has the kernel fault in and zero every page of
/// them again on every step. Here a request of `largeBytes` or more is rounded up to a size class
/// (steps of 1/8 of a power of two, at least 2 MB) and mapped; when freed it is kept, up to
/// `capBytes` of kept blocks in all (the longest-kept are unmapped first to make room; a block
/// larger than the cap is unmapped at once). A request takes the smallest kept block that holds it
/// with at most as much again to spare; a request that none fits first unmaps at least its own size
/// of kept blocks (those too small for it first, then the longest kept), so the large blocks mapped
/// at any time (in use plus kept) never exceed the most that were in use at once: the cache does not
/// raise the process's peak memory. Smaller requests are served exactly as LibTorch's default CPU allocator
/// serves them (c10::alloc_cpu: 64-byte aligned malloc).
class CachingCpuAllocator final : public c10::Allocator
{
public:
    struct Stats
    {
        std::size_t cachedBytes = 0; ///< kept for reuse, not in use (rounded sizes)
        std::size_t cachedBlocks = 0;
        std::size_t liveBytes = 0; ///< large blocks in use (rounded sizes)
        std::int64_t hits = 0;     ///< large requests served from the cache
        std::int64_t misses = 0;   ///< large requests that mapped fresh memory
    };

    /// `largeBytes` > 0: the smallest request that is mapped and cached; `capBytes`: the most
    /// memory kept for reuse (0 keeps nothing).
    CachingCpuAllocator(std::size_t largeBytes, std::size_t capBytes);
    /// Unmaps the kept blocks; blocks still in use stay valid and are unmapped when freed.
    ~CachingCpuAllocator() override;
    CachingCpuAllocator(const CachingCpuAllocator&) = delete;
    CachingCpuAllocator& operator=(const CachingCpuAllocator&) = delete;

    /// Throws c10::Error when the memory cannot be had, as LibTorch's own allocator does.
    c10::DataPtr allocate(std::size_t bytes) const override;
    /// One deleter for every block (oneDNN frees through it), whichever allocator made it: blocks
    /// of LibTorch's default allocator are freed as that allocator frees them.
    c10::DeleterFnPtr raw_deleter() const override;

    /// Unmaps every kept block (blocks in use are not affected).
    void releaseCached();
    Stats stats() const;
    std::size_t largeBytes() const { return m_largeBytes; }
    std::size_t capBytes() const { return m_capBytes; }

    /// The size a large request of `bytes` is rounded up to.
    static std::size_t sizeClass(std::size_t bytes);

private:
    struct Block
    {
        void* data = nullptr;
        std::size_t bytes = 0;
    };
    /// The deleter of every DataPtr this allocator makes.
    static void deleteData(void* data);
    /// Called with the registry's mutex held: keeps `block` for reuse if the cap allows, and returns
    /// the blocks the caller unmaps once the mutex is released.
    std::vector<Block> keepLocked(Block block);

    const std::size_t m_largeBytes;
    const std::size_t m_capBytes;
    // Guarded by the registry mutex in the .cpp (shared with the deleter, which has no `this`).
    std::vector<Block> m_cached; ///< oldest first
    std::size_t m_cachedBytes = 0;
    std::size_t m_liveBytes = 0;
    std::int64_t m_hits = 0;
    std::int64_t m_misses = 0;
};

/// Makes one process-wide CachingCpuAllocator LibTorch's CPU allocator: blocks from 16 MB up (glibc's
/// mmap threshold as configureAllocator() sets it) are cached, at most 1 GB or an eighth of the
/// machine's memory, whichever is less. Idempotent; call at start-up, before worker threads start.
/// Returns the allocator (it lives until the process ends).
CachingCpuAllocator& installCachingCpuAllocator();

/// Unmaps the blocks the installed allocator keeps (no-op when none is installed): after a model is
/// loaded, its initialisation buffers need not stay.
void releaseCachedCpuMemory();

} // namespace outlierlens
