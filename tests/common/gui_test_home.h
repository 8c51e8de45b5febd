#pragma once
// For GUI tests that open the app's windows: a private home for settings and data, and the job manager
// the window needs, so that no test sees another's (or a user's) settings.

#include "job_manager.h"

#include <QCoreApplication>
#include <QFile>
#include <QSettings>
#include <QStandardPaths>
#include <QString>

#include <memory>

namespace outlierlens::test {

/// Settings and data under `home`, named after the test; sample data from the source tree; settings
/// cleared (Qt's test mode keeps them under ~/.qttest across runs). Returns the job manager for `home`.
inline std::unique_ptr<JobManager> startGuiTest(const QString& home, const QString& testName)
{
    QStandardPaths::setTestModeEnabled(true);
    qputenv("XDG_DATA_HOME", QFile::encodeName(home));
    qputenv("XDG_CONFIG_HOME", QFile::encodeName(home));
    qputenv("OUTLIERLENS_DATA_DIR", OUTLIERLENS_SOURCE_DIR "/sample_data");
    QCoreApplication::setOrganizationName(QStringLiteral("OutlierLensTest"));
    QCoreApplication::setApplicationName(testName);
    QSettings().clear();
    return std::make_unique<JobManager>(QStringLiteral(OUTLIERLENS_BINARY_DIR "/app/outlierlens"),
                                        home + QStringLiteral("/jobs"));
}

} // namespace outlierlens::test
