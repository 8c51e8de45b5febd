#pragma once
// Main thread of the command-line process, which must be a QApplication (figures paint with fonts).

#include <QStringList>

namespace outlierlens::cli {

/// `outlierlens figures`: the paper's figure set for one model (figure_set.h).
int runFigures(const QStringList& args);

} // namespace outlierlens::cli
