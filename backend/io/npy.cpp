#include "io/npy.h"

#include "common/error.h"

#include <torch/torch.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

namespace outlierlens {
namespace {

constexpr std::size_t kMaxHeader = 1 << 20; // numpy itself writes a few hundred bytes at most

/// The text after `'key':` in the header's Python dict literal; an Error when the key is absent.
std::string valueOf(const std::string& header, const std::string& key, const std::string& path)
{
    for (const char quote : {'\'', '"'}) {
        const std::string pattern = quote + key + quote;
        const std::size_t at = header.find(pattern);
        if (at == std::string::npos) continue;
        std::size_t colon = header.find_first_not_of(" \t", at + pattern.size());
        if (colon == std::string::npos || header[colon] != ':') break;
        const std::size_t start = header.find_first_not_of(" \t", colon + 1);
        if (start == std::string::npos) break;
        return header.substr(start);
    }
    throw Error(path + ": the .npy header has no '" + key + "' (header: " + header + ")");
}

std::string dtypeName(const std::string& descr)
{
    if (descr == "<f8" || descr == "=f8") return "float64";
    if (descr == "<f2") return "float16";
    if (descr == ">f4") return "big-endian float32";
    if (descr == "|u1") return "uint8";
    if (descr == "<i8") return "int64";
    if (descr == "<i4") return "int32";
    return "dtype '" + descr + "'";
}

} // namespace

torch::Tensor readNpyFloat32(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open");
    std::error_code ec;
    const std::uintmax_t fileSize = std::filesystem::file_size(path, ec);
    if (ec) throw Error(path + ": cannot read its size");

    char magic[8] = {};
    in.read(magic, 8);
    if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0)
        throw Error(path + ": not a NumPy .npy file (no \\x93NUMPY magic)");
    const int major = static_cast<unsigned char>(magic[6]);
    std::size_t headerLength = 0;
    std::size_t prefix = 0;
    if (major == 1) {
        unsigned char b[2] = {};
        in.read(reinterpret_cast<char*>(b), 2);
        headerLength = std::size_t(b[0]) | (std::size_t(b[1]) << 8);
        prefix = 10;
    } else if (major == 2 || major == 3) {
        unsigned char b[4] = {};
        in.read(reinterpret_cast<char*>(b), 4);
        headerLength = std::size_t(b[0]) | (std::size_t(b[1]) << 8) | (std::size_t(b[2]) << 16) |
                       (std::size_t(b[3]) << 24);
        prefix = 12;
    } else {
        throw Error(path + ": .npy format version " + std::to_string(major) + " is not known (1, 2 or 3)");
    }
    if (!in || headerLength > kMaxHeader || prefix + headerLength > fileSize)
        throw Error(path + ": the .npy header length " + std::to_string(headerLength) +
                    " does not fit the file (" + std::to_string(fileSize) + " bytes)");
    std::string header(headerLength, '\0');
    in.read(header.data(), std::streamsize(headerLength));
    if (!in) throw Error(path + ": the .npy header is cut short");
    while (!header.empty() && (header.back() == '\n' || header.back() == ' ' || header.back() == '\0'))
        header.pop_back();

    const std::string descrText = valueOf(header, "descr", path);
    if (descrText.empty() || (descrText[0] != '\'' && descrText[0] != '"'))
        throw Error(
            path +
            ": the .npy header's descr is not a simple dtype (structured arrays are not read): " + header);
    const std::size_t close = descrText.find(descrText[0], 1);
    if (close == std::string::npos) throw Error(path + ": malformed .npy header: " + header);
    const std::string descr = descrText.substr(1, close - 1);
    if (descr != "<f4")
        throw Error(path + ": holds " + dtypeName(descr) +
                    "; expected little-endian float32 ('<f4'): save it with array.astype('<f4')");

    const std::string fortran = valueOf(header, "fortran_order", path);
    if (fortran.rfind("True", 0) == 0)
        throw Error(path + ": the array is in Fortran (column-major) order; expected C order: save it with "
                           "numpy.ascontiguousarray(array)");
    if (fortran.rfind("False", 0) != 0)
        throw Error(path + ": malformed fortran_order in the .npy header: " + header);

    const std::string shapeText = valueOf(header, "shape", path);
    if (shapeText.empty() || shapeText[0] != '(')
        throw Error(path + ": malformed shape in the .npy header: " + header);
    const std::size_t end = shapeText.find(')');
    if (end == std::string::npos) throw Error(path + ": malformed shape in the .npy header: " + header);
    std::vector<std::int64_t> shape;
    std::int64_t count = 1;
    std::size_t pos = 1;
    while (pos < end) {
        pos = shapeText.find_first_not_of(" ,", pos);
        if (pos >= end) break;
        std::size_t used = 0;
        long long dim = -1;
        try {
            dim = std::stoll(shapeText.substr(pos, end - pos), &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || dim < 0) throw Error(path + ": malformed shape in the .npy header: " + header);
        if (shape.size() >= 16) throw Error(path + ": more than 16 dimensions");
        if (dim > 0 && count > std::numeric_limits<std::int64_t>::max() / 4 / dim)
            throw Error(path + ": the shape in the .npy header is implausibly large: " + header);
        count *= dim;
        shape.push_back(dim);
        pos += used;
    }
    const std::uintmax_t expected = prefix + headerLength + std::uintmax_t(count) * 4;
    if (fileSize != expected)
        throw Error(path + ": the header's shape needs " + std::to_string(count * 4) +
                    " bytes of float32 but " + std::to_string(fileSize - prefix - headerLength) +
                    " follow the header");
    static_assert(sizeof(float) == 4, "float32");
    torch::Tensor out = torch::empty(shape, torch::kFloat);
    in.read(reinterpret_cast<char*>(out.data_ptr<float>()), std::streamsize(count * 4));
    if (!in) throw Error(path + ": cannot read the data");
    return out;
}

} // namespace outlierlens
