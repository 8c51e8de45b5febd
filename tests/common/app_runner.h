#pragma once
// Test helper (test thread only): runs the real `outlierlens` executable as a user would.

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

namespace outlierlens::test {

/// Exit code (-1 if it crashed or was killed) and everything it printed.
struct Run
{
    int exitCode = -1;
    QString out, err;
};

/// Runs the built executable with `args` (and `env`); kills it after `timeoutMs`.
inline Run runApp(const QStringList& args, int timeoutMs = 600000,
                  const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment())
{
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(OUTLIERLENS_BINARY_DIR "/app/outlierlens"), args);
    if (!p.waitForFinished(timeoutMs)) p.kill();
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
            QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}

/// A copy of the bundled synthetic-vanilla model in `dir` without its sample inputs (sample_inputs.txt,
/// showcase.json): a model of the task that has only generated examples. Returns the folder, or empty.
inline QString syntheticModelWithoutSamples(const QString& dir)
{
    const QString from = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/synthetic-vanilla/");
    if (!QDir().mkpath(dir)) return {};
    for (const QString& f : QDir(from).entryList(QDir::Files))
        if (f != QLatin1String("sample_inputs.txt") && f != QLatin1String("showcase.json") &&
            !QFile::copy(from + f, dir + QLatin1Char('/') + f))
            return {};
    return dir;
}

} // namespace outlierlens::test
