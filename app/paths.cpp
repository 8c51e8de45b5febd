#include "paths.h"

#include "common/error.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace outlierlens {

std::string sampleDataDir()
{
    if (const char* env = std::getenv("OUTLIERLENS_DATA_DIR"); env && *env) return env;
    if (!QCoreApplication::instance()) return {};
    const QDir exeDir(QCoreApplication::applicationDirPath());
    // Installed: <prefix>/bin/outlierlens and <prefix>/share/outlierlens/sample_data.
    std::vector<std::string> candidates{
        exeDir.absoluteFilePath(QStringLiteral("../share/outlierlens/sample_data")).toStdString()};
    // A build tree: CMake leaves the source folder's path in a file next to the executable (never
    // installed, so an installed binary cannot fall back on the tree it was built from).
    QFile marker(exeDir.absoluteFilePath(QStringLiteral("outlierlens-source-dir")));
    if (marker.open(QIODevice::ReadOnly))
        candidates.push_back(QString::fromUtf8(marker.readAll()).trimmed().toStdString() + "/sample_data");
    for (const auto& c : candidates)
        if (std::filesystem::is_directory(c)) return std::filesystem::weakly_canonical(c).string();
    return {};
}

std::string sampleDataFile(const std::string& relative)
{
    const std::string dir = sampleDataDir();
    if (dir.empty()) throw Error("cannot find the sample_data folder (set OUTLIERLENS_DATA_DIR)");
    const std::string path = (std::filesystem::path(dir) / relative).string();
    if (!std::filesystem::exists(path)) throw Error(path + ": missing from the sample data");
    return path;
}

} // namespace outlierlens
