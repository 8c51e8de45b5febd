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
    b.betterBlas = QString::fromStdString(betterBlasKernels());
    return b;
}

QString versionText()
{
    const BuildInfo b = buildInfo();
    QString blas = QStringLiteral("not OpenBLAS");
    if (!b.betterBlas.isEmpty())
        blas = QStringLiteral("OpenBLAS, %1 kernels when running models (the library's own choice here: %2)")
                   .arg(b.betterBlas, b.blas);
    else if (!b.blas.isEmpty())
        blas = QStringLiteral("OpenBLAS, %1 kernels").arg(b.blas);
    return QStringLiteral("outlierlens %1\nLibTorch %2, Qt %3 (built with %4)\nBLAS: %5\nsample data: %6\n")
        .arg(b.version, b.torch, b.qtRuntime, b.qtBuilt, blas,
             b.dataDir.isEmpty() ? QStringLiteral("not found (set OUTLIERLENS_DATA_DIR)") : b.dataDir);
}

} // namespace outlierlens
