#pragma once
// Any thread once a QCoreApplication exists (sampleDataDir() needs the executable's path).

#include <QString>

namespace outlierlens {

/// What a bug report needs: versions of the app and of the libraries it was built with, and where
/// its data was found.
struct BuildInfo
{
    QString version;    ///< the app's
    QString torch;      ///< LibTorch, as built against
    QString qtBuilt;    ///< Qt, as built against
    QString qtRuntime;  ///< Qt, as loaded
    QString dataDir;    ///< sampleDataDir(), or empty
    QString blas;       ///< OpenBLAS's kernel set (blasKernels()), or empty for another BLAS
    QString betterBlas; ///< the set the app switches to when it runs models (betterBlasKernels()), or empty
};

BuildInfo buildInfo();

/// `outlierlens --version`: one fact per line.
QString versionText();

} // namespace outlierlens
