#pragma once
// Any thread.

#include <cstddef>
#include <cstdint>
#include <string>

namespace outlierlens {

/// Incremental SHA-256 (FIPS 180-4). Used for the checkpoint hash recorded in every output file.
class Sha256
{
public:
    /// With `useShaExtensions` (the default) the x86 SHA instructions are used where the CPU has them
    /// (760-780 MB/s against 130 for the portable code on the development machine: a checkpoint is
    /// hashed every time it is opened); false forces the portable code (tests compare the two).
    explicit Sha256(bool useShaExtensions = true);
    void update(const void* data, std::size_t size);
    /// Finishes the hash and returns it as 64 lower-case hex digits.
    std::string hexDigest();

    /// Whether this CPU has the SHA extensions (and this build can use them).
    static bool shaExtensionsAvailable();

private:
    void processBlocks(const std::uint8_t* blocks, std::size_t count);

    bool m_useShaExtensions;
    std::uint32_t m_state[8];
    std::uint8_t m_buffer[64];
    std::size_t m_bufferSize = 0;
    std::uint64_t m_totalBytes = 0;
};

/// SHA-256 of a whole file, as hex. Throws Error naming the file if it cannot be read.
std::string sha256File(const std::string& path);

} // namespace outlierlens
