#pragma once
// Test thread only.

#include "common/error.h"

#include <QStringList>
#include <QtTest>

#include <functional>

namespace outlierlens::test {

/// Runs `f`, which must throw Error with a message containing every one of `parts`.
inline void expectError(const std::function<void()>& f, const QStringList& parts)
{
    try {
        f();
    } catch (const Error& e) {
        const QString message = QString::fromStdString(e.what());
        for (const QString& part : parts)
            if (!message.contains(part))
                QFAIL(qPrintable(QStringLiteral("message '%1' lacks '%2'").arg(message, part)));
        return;
    }
    QFAIL(qPrintable(
        QStringLiteral("no Error; expected one with '%1'").arg(parts.join(QStringLiteral("', '")))));
}

} // namespace outlierlens::test
