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
    return b;
}

QString versionText()
{
    const BuildInfo b = buildInfo();
    return QStringLiteral("outlierlens %1\nLibTorch %2, Qt %3 (built with %4)\nsample data: %5\n")
        .arg(b.version, b.torch, b.qtRuntime, b.qtBuilt,
             b.dataDir.isEmpty() ? QStringLiteral("not found (set OUTLIERLENS_DATA_DIR)") : b.dataDir);
}

} // namespace outlierlens
