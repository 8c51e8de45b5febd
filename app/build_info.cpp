#include "build_info.h"

#include "model/runtime.h"
#include "paths.h"

#include <QtGlobal>

namespace outlierlens {

BuildInfo buildInfo()
{
    BuildInfo b;
    b.version = QStringLiteral(OUTLIERLENS_VERSION);
    b.torch = QString::fromStdString(torchVersion());
    b.qtBuilt = QStringLiteral(QT_VERSION_STR);
    b.qtRuntime = QString::fromLatin1(qVersion());
    b.dataDir = QString::fromStdString(sampleDataDir());
    b.blas = QString::fromStdString(blasKernels());
    return b;
}

QString versionText()
{
    const BuildInfo b = buildInfo();
    return QStringLiteral("outlierlens %1\nLibTorch %2, Qt %3 (built with %4)\nBLAS: %5\nsample data: %6\n")
        .arg(b.version, b.torch, b.qtRuntime, b.qtBuilt,
             b.blas.isEmpty() ? QStringLiteral("not OpenBLAS")
                              : QStringLiteral("OpenBLAS, %1 kernels").arg(b.blas),
             b.dataDir.isEmpty() ? QStringLiteral("not found (set OUTLIERLENS_DATA_DIR)") : b.dataDir);
}

} // namespace outlierlens
