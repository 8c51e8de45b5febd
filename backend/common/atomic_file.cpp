#include "common/atomic_file.h"

#include "common/error.h"

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
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
    ::fsync(fd);
    ::close(fd);
    if (std::rename(m_tempPath.c_str(), m_finalPath.c_str()) != 0)
        throw Error(m_finalPath + ": cannot rename temporary file into place: " + std::strerror(errno));
    m_committed = true;
}

void writeTextFileAtomically(const std::string& path, const std::string& text)
{
    AtomicFile file(path);
    {
        std::ofstream out(file.tempPath(), std::ios::binary);
        out << text;
        out.flush();
        if (!out) throw Error(path + ": cannot write");
    }
    file.commit();
}

void checkCanWrite(const std::string& finalPath)
{
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
