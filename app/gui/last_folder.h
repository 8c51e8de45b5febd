#pragma once
// GUI thread. Where each kind of file dialog starts: the folder of its last choice (remembered across
// runs), as desktop programs do.

#include <QFileInfo>
#include <QSettings>
#include <QString>

namespace outlierlens {

/// The folder a file dialog of `kind` ("model", "statistics", "input", "sweep") starts in: the folder of its
/// last choice, if it still exists; else empty (the dialog's own default).
inline QString lastFolder(const QString& kind)
{
    const QString folder = QSettings().value(QStringLiteral("folders/") + kind).toString();
    return !folder.isEmpty() && QFileInfo(folder).isDir() ? folder : QString();
}

/// Remembers the folder of `chosen` (a file: the folder it is in; a folder: its parent, where the next
/// folder is likely chosen too) for dialogs of `kind`. Nothing for an empty choice (a cancelled dialog).
inline void rememberFolder(const QString& kind, const QString& chosen)
{
    if (chosen.isEmpty()) return;
    QSettings().setValue(QStringLiteral("folders/") + kind, QFileInfo(chosen).absolutePath());
}

} // namespace outlierlens
