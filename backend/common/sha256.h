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
    Sha256();
    void update(const void* data, std::size_t size);
    /// Finishes the hash and returns it as 64 lower-case hex digits.
    std::string hexDigest();

private:
    void processBlock(const std::uint8_t* block);

    std::uint32_t m_state[8];
    std::uint8_t m_buffer[64];
    std::size_t m_bufferSize = 0;
    std::uint64_t m_totalBytes = 0;
};

/// SHA-256 of a whole file, as hex. Throws Error naming the file if it cannot be read.
std::string sha256File(const std::string& path);

} // namespace outlierlens
