#include "common/atomic_folder.h"

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/input_file.h"

#include <cstdio>
#include <filesystem>

namespace outlierlens {
namespace fs = std::filesystem;

AtomicFolder::AtomicFolder(std::string finalPath)
    : m_finalPath(std::move(finalPath))
    , m_tempPath(m_finalPath + ".tmp")
{
    std::error_code ec;
    fs::remove_all(m_tempPath, ec);
    if (!fs::create_directories(m_tempPath, ec) || ec)
        throw Error(m_tempPath + ": cannot create the folder: " + (ec ? ec.message() : "it exists"));
}

AtomicFolder::~AtomicFolder()
{
    if (m_committed) return;
    std::error_code ignored;
    fs::remove_all(m_tempPath, ignored);
}

void AtomicFolder::commit()
{
    std::error_code ec;
    if (fs::is_directory(m_finalPath, ec) && fs::is_empty(m_finalPath, ec)) fs::remove(m_finalPath, ec);
    if (std::rename(m_tempPath.c_str(), m_finalPath.c_str()) != 0)
        throw Error(m_finalPath + ": cannot move the finished folder into place: " +
                    std::error_code(errno, std::generic_category()).message());
    m_committed = true;
}

void copyFileContents(const std::string& from, const std::string& to)
{
    const std::string bytes = readWholeFile(from, "file");
    try {
        writeFileBytes(to, bytes.data(), bytes.size());
    } catch (...) {
        std::remove(to.c_str());
        throw;
    }
}

} // namespace outlierlens
