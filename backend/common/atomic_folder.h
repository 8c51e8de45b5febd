#pragma once
// One object per output folder, used by one thread.

#include <string>

namespace outlierlens {

/// Writes an output folder (a model, a converted checkpoint) without ever leaving a half-made one: the
/// files go into `<final>.tmp/` (path()), which commit() renames into place; without commit() (an error,
/// a full disk, a cancel) the destructor removes it. A stale `<final>.tmp/` of an earlier crash is
/// removed first.
class AtomicFolder
{
public:
    /// Creates the temporary folder. Throws Error naming it and the system's reason.
    explicit AtomicFolder(std::string finalPath);
    ~AtomicFolder();
    AtomicFolder(const AtomicFolder&) = delete;
    AtomicFolder& operator=(const AtomicFolder&) = delete;

    /// The temporary folder to write into.
    const std::string& path() const { return m_tempPath; }
    /// Renames the temporary folder to the final path (an empty folder there is replaced). Throws Error.
    void commit();

private:
    std::string m_finalPath;
    std::string m_tempPath;
    bool m_committed = false;
};

/// Copies a regular file; a failure (a full disk included) is an Error naming `to` and the system's reason,
/// and leaves no partial copy.
void copyFileContents(const std::string& from, const std::string& to);

} // namespace outlierlens
