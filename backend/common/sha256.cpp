#include "common/sha256.h"

#include "common/error.h"
#include "common/input_file.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define OUTLIERLENS_SHA_NI 1
#endif

namespace outlierlens {
namespace {

constexpr std::uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline std::uint32_t rotr(std::uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

void compressPortable(std::uint32_t state[8], const std::uint8_t* block)
{
    std::uint32_t w[64];
    for (int i = 0; i < 16; ++i)
        w[i] = (std::uint32_t(block[4 * i]) << 24) | (std::uint32_t(block[4 * i + 1]) << 16) |
               (std::uint32_t(block[4 * i + 2]) << 8) | std::uint32_t(block[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
        const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    std::uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; ++i) {
        const std::uint32_t s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
        const std::uint32_t ch = (e & f) ^ (~e & g);
        const std::uint32_t t1 = h + s1 + ch + kRoundConstants[i] + w[i];
        const std::uint32_t s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
        const std::uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        const std::uint32_t t2 = s0 + maj;
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
}

#ifdef OUTLIERLENS_SHA_NI
// The same compression with the SHA extensions. SHA256RNDS2 runs two rounds on the state held as
// {A, B, E, F} and {C, D, G, H} (highest word first), taking W[i] + K[i] for the two rounds in the low
// half of its third operand; SHA256MSG1 and SHA256MSG2 compute the message schedule four words at a
// time: W[t..t+3] = MSG2(MSG1(W[t-16..], W[t-12..]) + W[t-7..t-4], W[t-4..t-1]).
__attribute__((target("sha,sse4.1,ssse3"))) void
compressShaExtensions(std::uint32_t state[8], const std::uint8_t* blocks, std::size_t count)
{
    const __m128i byteSwap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    // state[0..3] = A B C D, state[4..7] = E F G H; in a register the first word is the lowest.
    const __m128i dcba = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state));
    const __m128i hgfe = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4));
    const __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    const __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);

    for (; count > 0; --count, blocks += 64) {
        const __m128i abefStart = abef, cdghStart = cdgh;
        __m128i w[4];
        for (int i = 0; i < 4; ++i)
            w[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks + 16 * i)),
                                    byteSwap);
        for (int group = 0; group < 16; ++group) { // four rounds each
            __m128i& current = w[group % 4];
            if (group >= 4) {
                // current holds W[t-16..t-13]; the others W[t-12..], W[t-8..], W[t-4..].
                const __m128i& w12 = w[(group + 1) % 4];
                const __m128i& w8 = w[(group + 2) % 4];
                const __m128i& w4 = w[(group + 3) % 4];
                const __m128i partial = _mm_add_epi32(_mm_sha256msg1_epu32(current, w12),
                                                      _mm_alignr_epi8(w4, w8, 4)); // + W[t-7..t-4]
                current = _mm_sha256msg2_epu32(partial, w4);
            }
            __m128i wk = _mm_add_epi32(
                current, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kRoundConstants + 4 * group)));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
            wk = _mm_shuffle_epi32(wk, 0x0E);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, wk);
        }
        abef = _mm_add_epi32(abef, abefStart);
        cdgh = _mm_add_epi32(cdgh, cdghStart);
    }

    const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(state), _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), _mm_alignr_epi8(dchg, feba, 8));
}
#endif

} // namespace

bool Sha256::shaExtensionsAvailable()
{
#ifdef OUTLIERLENS_SHA_NI
    static const bool available = [] {
        // CPUID directly: clang's __builtin_cpu_supports does not know "sha".
        unsigned a = 0, b = 0, c = 0, d = 0;
        if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
        const bool ssse3 = c & (1u << 9), sse41 = c & (1u << 19);
        if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
        const bool sha = b & (1u << 29);
        return sha && sse41 && ssse3;
    }();
    return available;
#else
    return false;
#endif
}

Sha256::Sha256(bool useShaExtensions)
    : m_useShaExtensions(useShaExtensions && shaExtensionsAvailable())
    , m_state{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}
{}

void Sha256::processBlocks(const std::uint8_t* blocks, std::size_t count)
{
#ifdef OUTLIERLENS_SHA_NI
    if (m_useShaExtensions) {
        compressShaExtensions(m_state, blocks, count);
        return;
    }
#endif
    for (std::size_t i = 0; i < count; ++i)
        compressPortable(m_state, blocks + 64 * i);
}

void Sha256::update(const void* data, std::size_t size)
{
    const auto* bytes = static_cast<const std::uint8_t*>(data);
    m_totalBytes += size;
    if (size == 0) return;
    if (m_bufferSize > 0) {
        const std::size_t take = std::min<std::size_t>(64 - m_bufferSize, size);
        std::memcpy(m_buffer + m_bufferSize, bytes, take);
        m_bufferSize += take;
        bytes += take;
        size -= take;
        if (m_bufferSize < 64) return;
        processBlocks(m_buffer, 1);
        m_bufferSize = 0;
    }
    const std::size_t whole = size / 64;
    if (whole > 0) processBlocks(bytes, whole); // straight from the caller's memory
    bytes += 64 * whole;
    size -= 64 * whole;
    std::memcpy(m_buffer, bytes, size);
    m_bufferSize = size;
}

std::string Sha256::hexDigest()
{
    const std::uint64_t bitLength = m_totalBytes * 8;
    const std::uint8_t pad = 0x80;
    update(&pad, 1);
    const std::uint8_t zero = 0;
    while (m_bufferSize != 56)
        update(&zero, 1);
    std::uint8_t lengthBytes[8];
    for (int i = 0; i < 8; ++i)
        lengthBytes[i] = std::uint8_t(bitLength >> (56 - 8 * i));
    update(lengthBytes, 8);

    static const char* hex = "0123456789abcdef";
    std::string out;
    out.reserve(64);
    for (std::uint32_t word : m_state)
        for (int shift = 28; shift >= 0; shift -= 4)
            out.push_back(hex[(word >> shift) & 0xf]);
    return out;
}

std::string sha256File(const std::string& path)
{
    std::ifstream in = openInputFile(path);
    if (!in) throw Error(path + ": cannot open file for hashing");
    Sha256 hash;
    std::vector<char> buffer(1 << 20);
    while (in) {
        in.read(buffer.data(), std::streamsize(buffer.size()));
        hash.update(buffer.data(), std::size_t(in.gcount()));
    }
    if (in.bad()) throw Error(path + ": read error while hashing");
    return hash.hexDigest();
}

} // namespace outlierlens
