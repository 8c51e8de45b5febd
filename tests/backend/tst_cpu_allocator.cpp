// The caching CPU allocator (common/caching_cpu_allocator.h): large blocks are reused, the cache never
// keeps more than its cap, small requests bypass it, blocks outlive their allocator, and LibTorch
// computes the same numbers with it installed.

#include "common/caching_cpu_allocator.h"

#include <c10/core/CPUAllocator.h>
#include <torch/torch.h>

#include <QtTest>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

using namespace outlierlens;

namespace {

constexpr std::size_t MB = std::size_t(1) << 20;

} // namespace

class TestCpuAllocator : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void sizeClasses_data()
    {
        QTest::addColumn<qulonglong>("bytes");
        QTest::addColumn<qulonglong>("expected");
        QTest::newRow("1 byte") << qulonglong(1) << qulonglong(2 * MB);
        QTest::newRow("16 MB") << qulonglong(16 * MB) << qulonglong(16 * MB);
        QTest::newRow("16 MB + 1") << qulonglong(16 * MB + 1) << qulonglong(18 * MB);
        QTest::newRow("MLM logits 600 x 30522 float")
            << qulonglong(600ull * 30522 * 4) << qulonglong(72 * MB);
        QTest::newRow("1 GB - 1") << qulonglong(1024 * MB - 1) << qulonglong(1024 * MB);
    }
    void sizeClasses()
    {
        QFETCH(qulonglong, bytes);
        QFETCH(qulonglong, expected);
        QCOMPARE(qulonglong(CachingCpuAllocator::sizeClass(bytes)), expected);
        QVERIFY(CachingCpuAllocator::sizeClass(bytes) >= bytes);
    }

    void largeBlocksAreReused()
    {
        CachingCpuAllocator allocator(16 * MB, 256 * MB);
        void* first = nullptr;
        {
            c10::DataPtr p = allocator.allocate(40 * MB);
            first = p.get();
            QVERIFY(first);
            std::memset(first, 1, 40 * MB);
            QCOMPARE(allocator.stats().liveBytes, std::size_t(40 * MB));
        }
        QCOMPARE(allocator.stats().cachedBytes, std::size_t(40 * MB));
        c10::DataPtr again = allocator.allocate(39 * MB); // same size class, as the MLM's logits vary
        QCOMPARE(again.get(), first);
        const CachingCpuAllocator::Stats s = allocator.stats();
        QCOMPARE(s.hits, std::int64_t(1));
        QCOMPARE(s.misses, std::int64_t(1));
        QCOMPARE(s.cachedBytes, std::size_t(0));
    }

    void smallerRequestsDoNotTakeMuchLargerBlocks()
    {
        CachingCpuAllocator allocator(16 * MB, 512 * MB);
        allocator.allocate(200 * MB); // freed at once: kept
        QCOMPARE(allocator.stats().cachedBlocks, std::size_t(1));
        c10::DataPtr p = allocator.allocate(20 * MB);
        QCOMPARE(allocator.stats().hits, std::int64_t(0));
        QCOMPARE(allocator.stats().liveBytes, std::size_t(20 * MB));
        QCOMPARE(allocator.stats().cachedBlocks, std::size_t(0)); // the miss gave the 208 MB back
    }

    void keptAndUsedNeverExceedThePeakInUse()
    {
        const std::size_t cap = 512 * MB;
        CachingCpuAllocator allocator(16 * MB, cap);
        std::mt19937 rng(1);
        std::vector<c10::DataPtr> live;
        std::size_t peakLive = 0;
        for (int i = 0; i < 400; ++i) {
            if (!live.empty() && (live.size() == 6 || rng() % 2))
                live.erase(live.begin() + std::ptrdiff_t(rng() % live.size()));
            else
                live.push_back(allocator.allocate(16 * MB + rng() % (100 * MB)));
            const CachingCpuAllocator::Stats s = allocator.stats();
            peakLive = std::max(peakLive, s.liveBytes);
            QVERIFY(s.liveBytes + s.cachedBytes <= peakLive);
            QVERIFY(s.cachedBytes <= cap);
        }
        QVERIFY(allocator.stats().hits > 100);
    }

    void aMissGivesBackSmallerBlocks()
    {
        CachingCpuAllocator allocator(16 * MB, 1024 * MB);
        {
            c10::DataPtr a = allocator.allocate(300 * MB), b = allocator.allocate(20 * MB),
                         c = allocator.allocate(300 * MB), d = allocator.allocate(48 * MB);
        }
        QCOMPARE(allocator.stats().cachedBytes, std::size_t((320 + 20 + 320 + 48) * MB));
        c10::DataPtr p = allocator.allocate(60 * MB); // fits none: the 20 and 48 MB make room for it
        QCOMPARE(allocator.stats().misses, std::int64_t(5));
        QCOMPARE(allocator.stats().cachedBytes, std::size_t(640 * MB));
        QCOMPARE(allocator.stats().liveBytes, std::size_t(60 * MB));
        c10::DataPtr q = allocator.allocate(100 * MB); // room from the oldest 320 MB
        QCOMPARE(allocator.stats().cachedBytes, std::size_t(320 * MB));
    }

    void capHolds()
    {
        const std::size_t cap = 64 * MB;
        CachingCpuAllocator allocator(16 * MB, cap);
        std::vector<c10::DataPtr> blocks;
        std::vector<void*> addresses;
        for (int i = 0; i < 5; ++i) {
            blocks.push_back(allocator.allocate(20 * MB));
            addresses.push_back(blocks.back().get());
        }
        QCOMPARE(allocator.stats().liveBytes, std::size_t(100 * MB));
        for (c10::DataPtr& p : blocks) {
            p.clear();
            QVERIFY(allocator.stats().cachedBytes <= cap);
        }
        QCOMPARE(allocator.stats().cachedBlocks, std::size_t(3)); // 3 x 20 MB fit under 64 MB
        QCOMPARE(allocator.stats().liveBytes, std::size_t(0));
        // The last ones freed are the ones kept.
        c10::DataPtr reused = allocator.allocate(20 * MB);
        QVERIFY(reused.get() == addresses[2] || reused.get() == addresses[3] || reused.get() == addresses[4]);

        allocator.allocate(100 * MB); // a miss (gives the 40 MB kept back), then larger than the cap
        QCOMPARE(allocator.stats().cachedBytes, std::size_t(0));
        QVERIFY(allocator.stats().cachedBytes <= cap);

        allocator.releaseCached();
        QCOMPARE(allocator.stats().cachedBytes, std::size_t(0));
        QCOMPARE(allocator.stats().cachedBlocks, std::size_t(0));
    }

    void zeroCapKeepsNothing()
    {
        CachingCpuAllocator allocator(16 * MB, 0);
        allocator.allocate(20 * MB);
        allocator.allocate(20 * MB);
        QCOMPARE(allocator.stats().cachedBytes, std::size_t(0));
        QCOMPARE(allocator.stats().misses, std::int64_t(2));
    }

    void smallRequestsBypassTheCache()
    {
        CachingCpuAllocator allocator(16 * MB, 256 * MB);
        for (std::size_t bytes : {std::size_t(1), std::size_t(1000), 16 * MB - 1}) {
            c10::DataPtr p = allocator.allocate(bytes);
            QVERIFY(p.get());
            QCOMPARE(std::uintptr_t(p.get()) % 64, std::uintptr_t(0));
            QVERIFY(p.get_deleter() == allocator.raw_deleter());
            std::memset(p.get(), 0, bytes);
        }
        QVERIFY(!allocator.allocate(0).get());
        const CachingCpuAllocator::Stats s = allocator.stats();
        QCOMPARE(s.hits + s.misses, std::int64_t(0));
        QCOMPARE(s.cachedBytes, std::size_t(0));
    }

    void rawInterfaceFreesEveryKind()
    {
        // oneDNN allocates and frees through raw_allocate/raw_deallocate: the one deleter must free
        // small, large and LibTorch-default blocks alike.
        CachingCpuAllocator allocator(16 * MB, 256 * MB);
        void* small = allocator.raw_allocate(100);
        void* large = allocator.raw_allocate(20 * MB);
        void* foreign = c10::GetDefaultCPUAllocator()->raw_allocate(100);
        allocator.raw_deallocate(small);
        allocator.raw_deallocate(large);
        allocator.raw_deallocate(foreign);
        QCOMPARE(allocator.stats().cachedBytes, std::size_t(20 * MB));
    }

    void blocksOutliveTheirAllocator()
    {
        c10::DataPtr survivor;
        {
            CachingCpuAllocator allocator(16 * MB, 256 * MB);
            survivor = allocator.allocate(20 * MB);
            allocator.allocate(20 * MB); // cached, unmapped with the allocator
        }
        std::memset(survivor.get(), 7, 20 * MB);
        survivor.clear(); // unmapped, not kept by an allocator that is gone
    }

    void torchComputesTheSameWithItInstalled()
    {
        torch::manual_seed(0);
        const torch::Tensor x = torch::randn({600, 30522}); // the MLM's logits: 73 MB
        auto compute = [&] { return (torch::log_softmax(x * 3.0 + 1.0, 1) - x).sum(1); };
        const torch::Tensor before = compute();

        CachingCpuAllocator& allocator = installCachingCpuAllocator();
        QCOMPARE(&installCachingCpuAllocator(), &allocator);
        QCOMPARE(c10::GetCPUAllocator(), static_cast<c10::Allocator*>(&allocator));
        const std::int64_t hits = allocator.stats().hits;
        for (int i = 0; i < 3; ++i)
            QVERIFY(torch::equal(compute(), before)); // reused blocks hold stale data: it must not matter
        QVERIFY(allocator.stats().hits > hits);
        QVERIFY(allocator.stats().cachedBytes <= allocator.capBytes());
        QVERIFY(allocator.capBytes() <= 1024 * MB);
        releaseCachedCpuMemory();
        QCOMPARE(allocator.stats().cachedBytes, std::size_t(0));
    }
};

QTEST_GUILESS_MAIN(TestCpuAllocator)
#include "tst_cpu_allocator.moc"
