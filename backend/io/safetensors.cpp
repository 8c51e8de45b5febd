#include "io/safetensors.h"

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/json_util.h"
#include "common/text_format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this reader assumes a little-endian host"
#endif

namespace outlierlens {
namespace {

// Hugging Face's own reader refuses headers above 100 MB; a real one is a few hundred KB.
constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr std::size_t kMaxRank = 64;

struct DtypeInfo
{
    const char* name;
    torch::ScalarType stored; // how the bytes are read (BOOL as bytes, then normalised)
    std::uint64_t size;
    bool isBool;
};

const DtypeInfo kDtypes[] = {
    {"F64", torch::kDouble, 8, false},    {"F32", torch::kFloat, 4, false}, {"F16", torch::kHalf, 2, false},
    {"BF16", torch::kBFloat16, 2, false}, {"I64", torch::kLong, 8, false},  {"I32", torch::kInt, 4, false},
    {"I16", torch::kShort, 2, false},     {"I8", torch::kChar, 1, false},   {"U8", torch::kByte, 1, false},
    {"BOOL", torch::kByte, 1, true},
};

const DtypeInfo* findDtype(const std::string& name)
{
    for (const DtypeInfo& d : kDtypes)
        if (name == d.name) return &d;
    return nullptr;
}

// Read-only file with positioned reads, so tensors are read straight into their own memory.
class InputFile
{
public:
    explicit InputFile(const std::string& path)
        : m_path(path)
    {
        refuseSpecialFile(path); // names what the path is instead
        // O_NONBLOCK: opening a FIFO would otherwise wait for a writer; it changes nothing for a file.
        m_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (m_fd < 0) throw Error(path + ": cannot open file: " + std::strerror(errno));
        struct stat st = {};
        if (::fstat(m_fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            ::close(m_fd);
            throw Error(path + ": not a regular file");
        }
        m_size = std::uint64_t(st.st_size);
    }
    ~InputFile() { ::close(m_fd); }
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    std::uint64_t size() const { return m_size; }
    int fd() const { return m_fd; }

    void readAt(std::uint64_t offset, void* buffer, std::uint64_t n, const std::string& what) const
    {
        auto* out = static_cast<char*>(buffer);
        while (n > 0) {
            const std::size_t chunk = std::size_t(std::min<std::uint64_t>(n, 1ull << 30));
            const ssize_t got = ::pread(m_fd, out, chunk, off_t(offset));
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) throw Error(m_path + ": cannot read " + what + ": " + std::strerror(errno));
            if (got == 0) throw Error(m_path + ": file ends while reading " + what);
            out += got;
            offset += std::uint64_t(got);
            n -= std::uint64_t(got);
        }
    }

private:
    std::string m_path;
    int m_fd = -1;
    std::uint64_t m_size = 0;
};

struct Entry
{
    std::string name;
    const DtypeInfo* dtype = nullptr;
    std::vector<std::int64_t> shape;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
};

std::string describe(const nlohmann::json& v)
{
    std::string s = v.dump();
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return s;
}

// Whether a JSON value is a non-negative integer (not negative, fractional or a string); sets out.
bool asUInt(const nlohmann::json& v, std::uint64_t& out)
{
    if (v.is_number_unsigned()) {
        out = v.get<std::uint64_t>();
        return true;
    }
    if (v.is_number_integer() && v.get<std::int64_t>() >= 0) {
        out = std::uint64_t(v.get<std::int64_t>());
        return true;
    }
    return false;
}

Entry parseEntry(const std::string& path, const std::string& name, const nlohmann::json& info,
                 std::uint64_t dataSize)
{
    const std::string where = path + ": tensor '" + printableText(name) + "'";
    if (!info.is_object())
        throw Error(where + ": expected an object with dtype, shape and data_offsets, found " +
                    describe(info));
    Entry e;
    e.name = name;

    const auto dtype = info.find("dtype");
    if (dtype == info.end() || !dtype->is_string()) throw Error(where + ": missing or non-string 'dtype'");
    e.dtype = findDtype(dtype->get<std::string>());
    if (!e.dtype)
        throw Error(where + ": unsupported dtype '" + printableText(dtype->get<std::string>()) +
                    "' (expected F64, F32, F16, BF16, I64, I32, I16, I8, U8 or BOOL)");

    const auto shape = info.find("shape");
    if (shape == info.end() || !shape->is_array()) throw Error(where + ": missing or non-array 'shape'");
    if (shape->size() > kMaxRank)
        throw Error(where + ": shape has " + std::to_string(shape->size()) + " dimensions, more than " +
                    std::to_string(kMaxRank));
    std::uint64_t numel = 1;
    bool overflow = false;
    for (const auto& dim : *shape) {
        std::uint64_t d = 0;
        if (!asUInt(dim, d) || d > std::uint64_t(INT64_MAX))
            throw Error(where + ": shape entry " + describe(dim) + " is not a non-negative integer");
        e.shape.push_back(std::int64_t(d));
        overflow = overflow || __builtin_mul_overflow(numel, d, &numel);
    }
    std::uint64_t nbytes = 0;
    overflow = overflow || __builtin_mul_overflow(numel, e.dtype->size, &nbytes);

    const auto offsets = info.find("data_offsets");
    if (offsets == info.end() || !offsets->is_array() || offsets->size() != 2 ||
        !asUInt((*offsets)[0], e.begin) || !asUInt((*offsets)[1], e.end))
        throw Error(where + ": 'data_offsets' must be two non-negative integers [begin, end]");
    if (e.begin > e.end)
        throw Error(where + ": data_offsets begin " + std::to_string(e.begin) + " is after end " +
                    std::to_string(e.end));
    if (e.end > dataSize)
        throw Error(where + ": data_offsets end " + std::to_string(e.end) + " is beyond the " +
                    std::to_string(dataSize) + " data bytes of the file (truncated?)");
    if (overflow || nbytes != e.end - e.begin)
        throw Error(where + ": shape " + describe(*shape) + " of " + e.dtype->name + " needs " +
                    (overflow ? std::string("more than 2^64") : std::to_string(nbytes)) + " bytes, found " +
                    std::to_string(e.end - e.begin));
    return e;
}

torch::ScalarType targetType(const DtypeInfo& d)
{
    if (d.isBool) return torch::kBool;
    return c10::isFloatingType(d.stored) ? torch::kFloat : torch::kLong;
}

// Parses and checks the header: every entry in bounds, with a size that matches its shape and
// dtype, no two overlapping. Entries come back sorted by offset.
std::vector<Entry> parseHeader(const std::string& path, const InputFile& file,
                               std::map<std::string, std::string>* metadata, std::uint64_t& dataStart)
{
    if (file.size() < 8)
        throw Error(path + ": file of " + std::to_string(file.size()) +
                    " bytes is too short for a safetensors header (expected at least 8)");
    unsigned char lengthBytes[8];
    file.readAt(0, lengthBytes, 8, "the header length");
    std::uint64_t headerSize = 0;
    for (int i = 7; i >= 0; --i)
        headerSize = (headerSize << 8) | lengthBytes[i];
    if (headerSize > file.size() - 8)
        throw Error(path + ": safetensors header length " + std::to_string(headerSize) + " exceeds the " +
                    std::to_string(file.size() - 8) +
                    " bytes after it (truncated or not a safetensors file)");
    if (headerSize > kMaxHeaderBytes)
        throw Error(path + ": safetensors header length " + std::to_string(headerSize) +
                    " is larger than the limit of " + std::to_string(kMaxHeaderBytes));

    std::string headerText(std::size_t(headerSize), '\0');
    file.readAt(8, headerText.data(), headerSize, "the header");

    // Track top-level keys while parsing: nlohmann keeps only the last of duplicate keys.
    std::set<std::string> seen;
    std::string duplicate;
    const auto onKey = [&](const std::string& key) {
        if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    };
    nlohmann::json header;
    try {
        header = jsonutil::parseWithDepthLimit(headerText, path + ": safetensors header", onKey);
    } catch (const nlohmann::json::exception& e) {
        const auto* pe = dynamic_cast<const nlohmann::json::parse_error*>(&e);
        throw Error(path + ": malformed safetensors header JSON" +
                    (pe ? " at byte " + std::to_string(pe->byte) : std::string()));
    }
    if (!header.is_object()) throw Error(path + ": safetensors header is not a JSON object");
    if (!duplicate.empty())
        throw Error(path + ": tensor '" + printableText(duplicate) +
                    "' appears more than once in the header");

    dataStart = 8 + headerSize;
    const std::uint64_t dataSize = file.size() - dataStart;
    std::vector<Entry> entries;
    if (metadata) metadata->clear();
    for (const auto& [name, info] : header.items()) {
        if (name == "__metadata__") {
            if (!info.is_object()) throw Error(path + ": __metadata__ must be an object of strings");
            for (const auto& [key, value] : info.items()) {
                if (!value.is_string())
                    throw Error(path + ": __metadata__ '" + printableText(key) +
                                "' must be a string, found " + describe(value));
                if (metadata) (*metadata)[key] = value.get<std::string>();
            }
            continue;
        }
        entries.push_back(parseEntry(path, name, info, dataSize));
    }

    // The tensors must tile the data region exactly, as Hugging Face's reader requires: overlapping
    // ranges would let a small file claim many copies of its data, and a gap or a tail means bytes
    // were inserted or the offsets point at the wrong data.
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    std::uint64_t covered = 0;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        if (entries[i].begin < covered)
            throw Error(path + ": data of tensors '" + printableText(entries[i - 1].name) + "' and '" +
                        printableText(entries[i].name) + "' overlap");
        if (entries[i].begin > covered)
            throw Error(path + ": " + std::to_string(entries[i].begin - covered) +
                        " data bytes before tensor '" + printableText(entries[i].name) +
                        "' belong to no tensor (bytes inserted, or wrong offsets)");
        covered = entries[i].end;
    }
    if (covered != dataSize)
        throw Error(path + ": the tensors cover " + std::to_string(covered) + " of the " +
                    std::to_string(dataSize) +
                    " data bytes; the rest belongs to no tensor (bytes inserted?)");

    return entries;
}

} // namespace

StateDict readSafetensors(const std::string& path, std::map<std::string, std::string>* metadata)
{
    InputFile file(path);
    std::uint64_t dataStart = 0;
    const std::vector<Entry> entries = parseHeader(path, file, metadata, dataStart);
    StateDict result;
    for (const Entry& e : entries) {
        torch::Tensor raw = torch::empty(e.shape, torch::dtype(e.dtype->stored));
        file.readAt(dataStart + e.begin, raw.data_ptr(), e.end - e.begin,
                    "tensor '" + printableText(e.name) + "'");
        if (e.dtype->isBool)
            raw = raw.ne(0); // any non-zero byte is true; torch requires bools to be 0 or 1
        else if (raw.scalar_type() != targetType(*e.dtype))
            raw = raw.to(targetType(*e.dtype));
        result.emplace(e.name, std::move(raw));
    }
    return result;
}

namespace {

// A private mapping of a whole file. MAP_PRIVATE: a write through a tensor (which nothing should
// do) would touch a private copy of the page, never the file.
struct FileMapping
{
    void* address = nullptr;
    std::size_t length = 0;
    ~FileMapping()
    {
        if (address) ::munmap(address, length);
    }
};

} // namespace

StateDict mapSafetensors(const std::string& path, std::map<std::string, std::string>* metadata)
{
    InputFile file(path);
    std::uint64_t dataStart = 0;
    const std::vector<Entry> entries = parseHeader(path, file, metadata, dataStart);

    auto mapping = std::make_shared<FileMapping>();
    mapping->length = std::size_t(file.size());
    void* address = ::mmap(nullptr, mapping->length, PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd(), 0);
    if (address == MAP_FAILED)
        throw Error(path + ": cannot map the file into memory: " + std::strerror(errno));
    mapping->address = address;
    const auto* base = static_cast<unsigned char*>(address);

    StateDict result;
    for (const Entry& e : entries) {
        const torch::ScalarType stored = e.dtype->stored;
        const bool keep = !e.dtype->isBool &&
                          (stored == torch::kFloat || stored == torch::kHalf || stored == torch::kBFloat16);
        unsigned char* data = const_cast<unsigned char*>(base + dataStart + e.begin);
        const std::uint64_t nbytes = e.end - e.begin;
        torch::Tensor t;
        if (keep && nbytes > 0 && reinterpret_cast<std::uintptr_t>(data) % e.dtype->size == 0) {
            // The tensor keeps the mapping alive; nothing is read until it is used.
            t = torch::from_blob(
                data, e.shape, [mapping](void*) {}, torch::dtype(stored));
        } else {
            t = torch::empty(e.shape, torch::dtype(stored));
            if (nbytes > 0) std::memcpy(t.data_ptr(), data, std::size_t(nbytes)); // misaligned or small types
            if (e.dtype->isBool)
                t = t.ne(0);
            else if (!keep && t.scalar_type() != targetType(*e.dtype))
                t = t.to(targetType(*e.dtype));
        }
        result.emplace(e.name, std::move(t));
    }
    return result;
}

void writeSafetensors(const std::string& path, const StateDict& tensors, SafetensorsDtype dtype,
                      const std::map<std::string, std::string>& metadata)
{
    std::vector<TensorSpec> specs;
    std::vector<const torch::Tensor*> order;
    for (const auto& [name, t] : tensors) {
        if (!t.defined()) throw Error(path + ": tensor '" + printableText(name) + "': tensor is undefined");
        specs.push_back({name, t.sizes().vec(), t.scalar_type()});
        order.push_back(&t);
    }
    writeSafetensorsStreamed(
        path, specs, [&](std::size_t i) { return *order[i]; }, dtype, metadata);
}

void writeSafetensorsStreamed(const std::string& path, const std::vector<TensorSpec>& specs,
                              const std::function<torch::Tensor(std::size_t)>& produce,
                              SafetensorsDtype dtype, const std::map<std::string, std::string>& metadata)
{
    // The file lists tensors in name order (as a StateDict iterates); they are produced in `specs` order
    // and each written at its offset.
    std::vector<std::size_t> byName(specs.size());
    for (std::size_t i = 0; i < specs.size(); ++i)
        byName[i] = i;
    std::sort(byName.begin(), byName.end(),
              [&](std::size_t a, std::size_t b) { return specs[a].name < specs[b].name; });
    std::vector<torch::ScalarType> stored(specs.size());
    std::vector<std::uint64_t> offsets(specs.size());
    nlohmann::json header = nlohmann::json::object();
    std::uint64_t offset = 0;
    for (std::size_t k = 0; k < byName.size(); ++k) {
        const std::size_t i = byName[k];
        const TensorSpec& spec = specs[i];
        const std::string where = path + ": tensor '" + printableText(spec.name) + "'";
        if (spec.name == "__metadata__") throw Error(where + ": the name is reserved for metadata");
        if (k > 0 && specs[byName[k - 1]].name == spec.name) throw Error(where + ": the name appears twice");
        const char* dtypeName;
        if (c10::isFloatingType(spec.type)) {
            stored[i] = dtype == SafetensorsDtype::Float16    ? torch::kHalf
                        : dtype == SafetensorsDtype::BFloat16 ? torch::kBFloat16
                                                              : torch::kFloat;
            dtypeName = dtype == SafetensorsDtype::Float16    ? "F16"
                        : dtype == SafetensorsDtype::BFloat16 ? "BF16"
                                                              : "F32";
        } else if (spec.type == torch::kBool) {
            stored[i] = torch::kBool;
            dtypeName = "BOOL";
        } else if (c10::isIntegralType(spec.type, /*includeBool=*/false)) {
            stored[i] = torch::kLong;
            dtypeName = "I64";
        } else {
            throw Error(where + ": unsupported dtype " + std::string(c10::toString(spec.type)) +
                        " (expected a floating, integer or bool tensor)");
        }
        std::uint64_t numel = 1;
        for (const std::int64_t n : spec.sizes)
            numel *= std::uint64_t(n);
        const std::uint64_t nbytes = numel * c10::elementSize(stored[i]);
        header[spec.name] = {{"dtype", dtypeName},
                             {"shape", spec.sizes},
                             {"data_offsets", nlohmann::json::array({offset, offset + nbytes})}};
        offsets[i] = offset;
        offset += nbytes;
    }
    if (!metadata.empty()) header["__metadata__"] = metadata;

    std::string headerText;
    try {
        headerText = header.dump();
    } catch (const nlohmann::json::exception&) {
        throw Error(path + ": a tensor name or metadata string is not valid UTF-8");
    }
    // Pad so the data starts 8-byte aligned, as Hugging Face's writer does.
    headerText.append((8 - headerText.size() % 8) % 8, ' ');

    AtomicFile file(path);
    std::ofstream out(file.tempPath(), std::ios::binary | std::ios::trunc);
    if (!out)
        throw Error(path + ": cannot create temporary file " + file.tempPath() + ": " + std::strerror(errno));
    unsigned char lengthBytes[8];
    for (int i = 0; i < 8; ++i)
        lengthBytes[i] = static_cast<unsigned char>(std::uint64_t(headerText.size()) >> (8 * i));
    out.write(reinterpret_cast<const char*>(lengthBytes), 8);
    out.write(headerText.data(), std::streamsize(headerText.size()));
    const std::uint64_t dataStart = 8 + headerText.size();
    errno = 0;
    for (std::size_t i = 0; i < specs.size() && out; ++i) {
        const torch::Tensor t = produce(i);
        if (!t.defined() || t.sizes().vec() != specs[i].sizes)
            throw Error(path + ": tensor '" + printableText(specs[i].name) + "' was produced with shape " +
                        (t.defined() ? shapeString(t) : std::string("(undefined)")) + ", expected " +
                        shapeString(c10::IntArrayRef(specs[i].sizes)));
        const torch::Tensor data = t.detach().to(torch::kCPU, stored[i]).contiguous();
        out.seekp(std::streamoff(dataStart + offsets[i]));
        out.write(static_cast<const char*>(data.data_ptr()), std::streamsize(data.nbytes()));
    }
    out.close();
    // The stream keeps the failing write's errno (ENOSPC, EFBIG): say it, as every writer does.
    if (!out) throw Error(path + ": cannot write: " + std::strerror(errno != 0 ? errno : EIO));
    file.commit();
}

} // namespace outlierlens
