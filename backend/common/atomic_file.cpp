#include "common/atomic_file.h"

#include "common/error.h"

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace outlierlens {
namespace {

// A fixed table of temp paths for the signal handler: it may only call async-signal-safe
// functions, so it walks plain char arrays.
constexpr int kMaxLive = 64;
struct Slot
{
    std::atomic<bool> used{false};
    char path[4096];
};
std::array<Slot, kMaxLive> g_slots;

int registerTemp(const std::string& path)
{
    if (path.size() >= sizeof(Slot::path)) return -1;
    for (int i = 0; i < kMaxLive; ++i) {
        bool expected = false;
        if (g_slots[i].used.load() == false) {
            std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
            if (g_slots[i].used.compare_exchange_strong(expected, true)) return i;
        }
    }
    return -1;
}

std::atomic<unsigned> g_counter{0};

} // namespace

AtomicFile::AtomicFile(std::string finalPath)
    : m_finalPath(std::move(finalPath))
{
    m_tempPath = m_finalPath + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(g_counter++);
    m_slot = registerTemp(m_tempPath);
}

AtomicFile::~AtomicFile()
{
    if (!m_committed) std::remove(m_tempPath.c_str());
    if (m_slot >= 0) g_slots[m_slot].used.store(false);
}

void AtomicFile::commit()
{
    const int fd = ::open(m_tempPath.c_str(), O_RDONLY);
    if (fd < 0)
        throw Error(m_finalPath + ": temporary file " + m_tempPath + " is missing: " + std::strerror(errno));
    const int synced = ::fsync(fd);
    const int syncError = errno;
    ::close(fd);
    if (synced != 0 && syncError != EINVAL) // EINVAL: a file system that cannot sync (nothing lost)
        throw Error(m_finalPath + ": cannot write: " + std::strerror(syncError));
    if (std::rename(m_tempPath.c_str(), m_finalPath.c_str()) != 0)
        throw Error(m_finalPath + ": cannot rename temporary file into place: " + std::strerror(errno));
    m_committed = true;
}

void writeFileBytes(const std::string& path, const void* data, std::size_t size, const std::string& shownName)
{
    const std::string& name = shownName.empty() ? path : shownName;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(name + ": cannot write: " + std::strerror(errno));
    const auto* bytes = static_cast<const char*>(data);
    std::size_t done = 0;
    while (done < size) {
        const ssize_t n = ::write(fd, bytes + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            // write() returning 0 for a non-empty request means no progress can be made: report ENOSPC.
            const int error = n < 0 ? errno : ENOSPC;
            ::close(fd);
            throw Error(name + ": cannot write: " + std::strerror(error));
        }
        done += std::size_t(n);
    }
    if (::close(fd) != 0) throw Error(name + ": cannot write: " + std::strerror(errno));
}

void writeTextFileAtomically(const std::string& path, const std::string& text)
{
    AtomicFile file(path);
    writeFileBytes(file.tempPath(), text.data(), text.size(), path);
    file.commit();
}

void checkCanWrite(const std::string& finalPath)
{
    struct stat st = {};
    // A folder there would only be found at the final rename, after all the work.
    if (::stat(finalPath.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        throw Error(finalPath + ": is a folder; give a file name");
    const AtomicFile probe(finalPath);
    const int fd = ::open(probe.tempPath().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(finalPath + ": cannot write here: " + std::strerror(errno));
    ::close(fd); // the probe's destructor removes the file
}

void removeUncommittedTempFiles()
{
    for (auto& slot : g_slots)
        if (slot.used.load()) ::unlink(slot.path);
}

} // namespace outlierlens
