#pragma once
// Shared by the fuzz targets in this folder (one translation unit each, so everything is inline).
//
// Each target defines LLVMFuzzerTestOneInput(). Built with clang and -DOUTLIERLENS_FUZZ=ON it links
// libFuzzer (scripts/fuzz); otherwise it links replay_main.cpp and CTest feeds it the seed corpus and
// the regression inputs in tests/fuzz/, so the ordinary suite (and the sanitizer build) runs them.
//
// The property checked: a reader of untrusted input either succeeds or throws outlierlens::Error.
// Anything else (a crash, a sanitizer report, another exception type, which would print a LibTorch
// backtrace or "std::out_of_range" to a user) ends the run.

#include "common/error.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace fuzzsupport {

/// The repository's tests/fixtures folder (the seed files some targets build their inputs around).
inline std::string fixture(const std::string& relative)
{
    return std::string(OUTLIERLENS_FUZZ_FIXTURES) + "/" + relative;
}

/// A private folder for this process, removed at exit: readers take paths, so inputs are written
/// here first. Several fuzzing processes (libFuzzer -jobs) each get their own.
inline const std::filesystem::path& scratchDir()
{
    static const std::filesystem::path dir = [] {
        std::string pattern = (std::filesystem::temp_directory_path() / "outlierlens-fuzz-XXXXXX").string();
        if (!::mkdtemp(pattern.data())) std::abort();
        std::atexit([] { std::filesystem::remove_all(scratchDir()); });
        return std::filesystem::path(pattern);
    }();
    return dir;
}

inline void writeFile(const std::filesystem::path& path, const std::uint8_t* data, std::size_t size)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
    if (!out) std::abort();
}

inline void writeFile(const std::filesystem::path& path, std::string_view text)
{
    writeFile(path, reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
}

/// Runs `read`; an outlierlens::Error is an accepted outcome (the input was refused with a message),
/// any other exception escapes and ends the run. The message must be one line, as users see it.
/// With OUTLIERLENS_FUZZ_VERBOSE set in the environment each refusal is printed (to see whether the
/// seeds get past the checks).
template<typename F>
void refusedOnlyWithError(F&& read)
{
    try {
        read();
    } catch (const outlierlens::Error& e) {
        const std::string_view message = e.what();
        if (message.empty() || message.find('\n') != std::string_view::npos) {
            std::fprintf(stderr, "fuzz: an Error message that is not one line:\n%s\n", e.what());
            std::abort();
        }
        static const bool verbose = std::getenv("OUTLIERLENS_FUZZ_VERBOSE") != nullptr;
        if (verbose) std::fprintf(stderr, "refused: %s\n", e.what());
    }
}

} // namespace fuzzsupport
