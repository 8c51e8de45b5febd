#pragma once
// Any thread (reads the environment and the file system only).

#include <string>

namespace outlierlens {

/// The folder of data the app ships (sample_data/): $OUTLIERLENS_DATA_DIR if set, else
/// <prefix>/share/outlierlens/sample_data next to an installed binary, else, in a build tree, the
/// sample_data of the source tree it was built from. Empty if none exists (or, without
/// $OUTLIERLENS_DATA_DIR, before a QCoreApplication exists).
std::string sampleDataDir();

/// A file inside sampleDataDir(); throws Error naming what is missing.
std::string sampleDataFile(const std::string& relative);

} // namespace outlierlens
