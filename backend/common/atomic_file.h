#pragma once
// Any thread; one object per output file.

#include <cstddef>
#include <string>

namespace outlierlens {

/// Writes an output file without ever leaving a partial one behind: write to tempPath(), then
/// commit() renames it over the final path. If commit() is not reached (error, cancel, Ctrl-C
/// handled by unwinding) the destructor removes the temporary file.
class AtomicFile
{
public:
    explicit AtomicFile(std::string finalPath);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    const std::string& tempPath() const { return m_tempPath; }
    const std::string& finalPath() const { return m_finalPath; }
    /// fsyncs and renames the temporary file to the final path. Throws Error on failure.
    void commit();

private:
    std::string m_finalPath;
    std::string m_tempPath;
    bool m_committed = false;
    int m_slot = -1;
};

/// Writes `text` to `path` atomically (temporary file + rename). Throws Error naming the path and the
/// system's reason ("No space left on device"); then nothing is left behind.
void writeTextFileAtomically(const std::string& path, const std::string& text);

/// Writes `size` bytes to a new file `path` (created or truncated), then closes it; every failure,
/// a full disk or a file-size limit included, is an Error naming `shownName` (default: `path`) and the
/// system's reason. Not atomic by itself: write to an AtomicFile's tempPath() and commit() it.
void writeFileBytes(const std::string& path, const void* data, std::size_t size,
                    const std::string& shownName = {});

/// Before long work whose result goes to `finalPath`: creates and removes the temporary file an
/// AtomicFile would write, so that a missing or read-only folder is an Error ("<path>: cannot write
/// here: <reason>") at the start, not after an hour of computing. An existing finalPath is untouched.
void checkCanWrite(const std::string& finalPath);

/// Removes temporary files registered by live AtomicFile objects; safe to call from a signal
/// handler (only unlink). Used by the command line's SIGINT handler.
void removeUncommittedTempFiles();

} // namespace outlierlens
