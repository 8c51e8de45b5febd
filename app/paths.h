#pragma once
// Any thread (reads the environment and the file system only).

#include <string>

namespace outlierlens {

/// The folder of data the app ships (sample_data/): $OUTLIERLENS_DATA_DIR if set, else the
/// source tree's sample_data next to the build, else <prefix>/share/outlierlens/sample_data.
/// Empty if none exists.
std::string sampleDataDir();

/// A file inside sampleDataDir(); throws Error naming what is missing.
std::string sampleDataFile(const std::string& relative);

} // namespace outlierlens
