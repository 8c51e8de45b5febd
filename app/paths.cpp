#include "paths.h"

#include "common/error.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>

#include <cstdlib>
#include <filesystem>

namespace outlierlens {

std::string sampleDataDir()
{
    if (const char* env = std::getenv("OUTLIERLENS_DATA_DIR"); env && *env) return env;
    std::vector<std::string> candidates;
    if (QCoreApplication::instance()) {
        const QString exeDir = QCoreApplication::applicationDirPath();
        candidates.push_back(
            QDir(exeDir).absoluteFilePath(QStringLiteral("../../sample_data")).toStdString());
        candidates.push_back(
            QDir(exeDir).absoluteFilePath(QStringLiteral("../share/outlierlens/sample_data")).toStdString());
    }
    candidates.push_back(OUTLIERLENS_SOURCE_SAMPLE_DATA);
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
