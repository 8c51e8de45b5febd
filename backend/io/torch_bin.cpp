#include "io/torch_bin.h"

#include "common/error.h"
#include "common/input_file.h"
#include "common/text_format.h"
#include "io/pickle.h"

#include <ATen/Parallel.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/types.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <vector>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "torch.save storages are little-endian; this reader assumes a little-endian host"
#endif

namespace outlierlens {
namespace {

constexpr std::uint64_t kMaxCentralDirectory = 64ull << 20;
constexpr std::uint64_t kMaxPickleBytes = 256ull << 20;
// torch.save stores records uncompressed. A deflated record may expand to at most this many times
// the file size: enough for real float data, too little for a zip bomb to exhaust memory.
constexpr std::uint64_t kMaxInflation = 4;
constexpr std::size_t kMaxRank = 64;
// Views can make a small file expand into huge tensors (stride 0, many views of one storage).
// Real checkpoints expand at most by the dtype conversion (int8 -> int64 is 8x) and tied weights.
constexpr std::uint64_t kMaxExpansion = 16;
constexpr std::uint64_t kExpansionAllowance = 64ull << 20;

// ---------------------------------------------------------------------------------------------
// Zip central directory: names and sizes only, read before LibTorch allocates memory for a record
// from the sizes the archive claims.

struct ZipEntry
{
    std::uint16_t method = 0;
    std::uint32_t crc32 = 0;
    std::uint64_t compressedSize = 0;
    std::uint64_t size = 0;
};

struct ZipDirectory
{
    std::string archiveName; // the folder all records live in, as PyTorchStreamReader sees it
    std::map<std::string, ZipEntry> entries;

    const ZipEntry* find(const std::string& record) const
    {
        const auto it = entries.find(archiveName + "/" + record);
        return it == entries.end() ? nullptr : &it->second;
    }
};

// LibTorch's zip reader is built without CRC checks, so an edited record would load as if intact.
// Large records are checked in 16 MB pieces on every core and the pieces' CRCs combined (zlib's
// CRC-32 runs at about 0.5 GB/s on one core of the development machine).
void checkCrc(const ZipEntry& entry, const void* data, std::size_t n, const std::string& path,
              const std::string& record)
{
    constexpr std::size_t kPiece = std::size_t(16) << 20;
    const auto* bytes = static_cast<const Bytef*>(data);
    const std::int64_t pieces = std::int64_t((n + kPiece - 1) / kPiece);
    std::vector<uLong> crcs(std::size_t(std::max<std::int64_t>(pieces, 1)), crc32(0L, Z_NULL, 0));
    at::parallel_for(0, pieces, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t p = begin; p < end; ++p) {
            const std::size_t at = std::size_t(p) * kPiece;
            crcs[std::size_t(p)] = crc32(crcs[std::size_t(p)], bytes + at, uInt(std::min(kPiece, n - at)));
        }
    });
    uLong crc = crcs[0];
    for (std::int64_t p = 1; p < pieces; ++p)
        crc =
            crc32_combine(crc, crcs[std::size_t(p)], z_off_t(std::min(kPiece, n - std::size_t(p) * kPiece)));
    if (std::uint32_t(crc) != entry.crc32)
        throw Error(path + ": zip record " + printableText(record) +
                    " fails its CRC-32 check (the file was altered or damaged)");
}

std::uint64_t le(const std::string& bytes, std::size_t pos, std::size_t n)
{
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i)
        v |= std::uint64_t(static_cast<unsigned char>(bytes[pos + i])) << (8 * i);
    return v;
}

std::string readAt(std::ifstream& in, std::uint64_t offset, std::uint64_t n, std::uint64_t fileSize,
                   const std::string& path, const char* what)
{
    if (offset > fileSize || n > fileSize - offset)
        throw Error(path + ": zip " + what + " lies outside the file (truncated?)");
    std::string bytes(std::size_t(n), '\0');
    in.clear();
    in.seekg(std::streamoff(offset));
    in.read(bytes.data(), std::streamsize(n));
    if (!in) throw Error(path + ": cannot read zip " + what);
    return bytes;
}

ZipDirectory readZipDirectory(std::ifstream& in, std::uint64_t fileSize, const std::string& path)
{
    // The end-of-central-directory record is 22 bytes plus a comment of at most 65535 bytes.
    const std::uint64_t tailSize = std::min<std::uint64_t>(fileSize, 22 + 65535);
    const std::string tail = readAt(in, fileSize - tailSize, tailSize, fileSize, path, "end record");
    std::size_t eocd = std::string::npos;
    for (std::size_t i = tail.size() >= 22 ? tail.size() - 22 + 1 : 0; i-- > 0;) {
        if (tail.compare(i, 4, "PK\x05\x06") == 0) {
            eocd = i;
            break;
        }
    }
    if (eocd == std::string::npos)
        throw Error(path + ": no zip end-of-central-directory record (truncated or not a zip archive)");
    std::uint64_t count = le(tail, eocd + 10, 2);
    std::uint64_t cdSize = le(tail, eocd + 12, 4);
    std::uint64_t cdOffset = le(tail, eocd + 16, 4);
    if (count == 0xFFFF || cdSize == 0xFFFFFFFF || cdOffset == 0xFFFFFFFF) {
        const std::uint64_t eocdPos = fileSize - tailSize + eocd;
        if (eocdPos < 20) throw Error(path + ": zip64 end-of-central-directory locator is missing");
        const std::string locator = readAt(in, eocdPos - 20, 20, fileSize, path, "zip64 locator");
        if (locator.compare(0, 4, "PK\x06\x07") != 0)
            throw Error(path + ": zip64 end-of-central-directory locator is missing");
        const std::string zip64 = readAt(in, le(locator, 8, 8), 56, fileSize, path, "zip64 end record");
        if (zip64.compare(0, 4, "PK\x06\x06") != 0)
            throw Error(path + ": bad zip64 end-of-central-directory record");
        count = le(zip64, 32, 8);
        cdSize = le(zip64, 40, 8);
        cdOffset = le(zip64, 48, 8);
    }
    if (cdSize > kMaxCentralDirectory)
        throw Error(path + ": zip central directory of " + std::to_string(cdSize) + " bytes is too large");
    const std::string cd = readAt(in, cdOffset, cdSize, fileSize, path, "central directory");

    ZipDirectory dir;
    std::size_t pos = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
        if (cd.size() - pos < 46 || cd.compare(pos, 4, "PK\x01\x02") != 0)
            throw Error(path + ": zip central directory entry " + std::to_string(i) + " is malformed");
        ZipEntry e;
        e.method = std::uint16_t(le(cd, pos + 10, 2));
        e.crc32 = std::uint32_t(le(cd, pos + 16, 4));
        e.compressedSize = le(cd, pos + 20, 4);
        e.size = le(cd, pos + 24, 4);
        const std::size_t nameLen = std::size_t(le(cd, pos + 28, 2));
        const std::size_t extraLen = std::size_t(le(cd, pos + 30, 2));
        const std::size_t commentLen = std::size_t(le(cd, pos + 32, 2));
        std::uint64_t localOffset = le(cd, pos + 42, 4);
        if (cd.size() - pos - 46 < nameLen + extraLen + commentLen)
            throw Error(path + ": zip central directory entry " + std::to_string(i) + " is malformed");
        const std::string name = cd.substr(pos + 46, nameLen);
        // Zip64 extended information: 64-bit values for the fields that hold 0xFFFFFFFF.
        for (std::size_t x = pos + 46 + nameLen, end = x + extraLen; x + 4 <= end;) {
            const std::uint64_t id = le(cd, x, 2);
            const std::size_t len = std::size_t(le(cd, x + 2, 2));
            if (x + 4 + len > end) break;
            if (id == 0x0001) {
                std::size_t f = x + 4;
                for (std::uint64_t* field : {&e.size, &e.compressedSize, &localOffset}) {
                    if (*field != 0xFFFFFFFF) continue;
                    if (f + 8 > x + 4 + len)
                        throw Error(path + ": zip64 sizes of record " + printableText(name) + " are missing");
                    *field = le(cd, f, 8);
                    f += 8;
                }
            }
            x += 4 + len;
        }
        pos += 46 + nameLen + extraLen + commentLen;

        if (e.method != 0 && e.method != 8)
            throw Error(path + ": zip record " + printableText(name) +
                        " uses unsupported compression method " + std::to_string(e.method));
        if (localOffset > fileSize || e.compressedSize > fileSize - localOffset)
            throw Error(path + ": zip record " + printableText(name) + " lies outside the file (truncated?)");
        if ((e.method == 0 && e.size != e.compressedSize) ||
            (e.method == 8 && e.size / kMaxInflation > fileSize))
            throw Error(path + ": zip record " + printableText(name) + " claims an implausible size of " +
                        std::to_string(e.size) + " bytes");
        // The local header before the data must name the same record: a central directory that
        // points one name at another record's data would otherwise load the wrong tensor.
        const std::string local = readAt(in, localOffset, 30, fileSize, path, "local header");
        const std::size_t localNameLen = std::size_t(le(local, 26, 2));
        const std::uint64_t dataOffset = localOffset + 30 + localNameLen + le(local, 28, 2);
        if (local.compare(0, 4, "PK\x03\x04") != 0 || localNameLen != nameLen ||
            readAt(in, localOffset + 30, localNameLen, fileSize, path, "local header") != name)
            throw Error(path + ": zip record " + printableText(name) +
                        ": the central directory points at data of another record or at no record");
        if (dataOffset > fileSize || e.compressedSize > fileSize - dataOffset)
            throw Error(path + ": zip record " + printableText(name) + " lies outside the file (truncated?)");
        if (i == 0) dir.archiveName = name.substr(0, name.find('/'));
        if (!dir.entries.emplace(name, e).second)
            throw Error(path + ": zip record " + printableText(name) + " appears twice");
    }
    return dir;
}

// ---------------------------------------------------------------------------------------------
// Pickle hooks: the only globals a state dict needs, and the storages behind its tensors.

struct StorageType
{
    const char* global;
    torch::ScalarType dtype;
};

const StorageType kStorageTypes[] = {
    {"torch.FloatStorage", torch::kFloat},       {"torch.HalfStorage", torch::kHalf},
    {"torch.BFloat16Storage", torch::kBFloat16}, {"torch.DoubleStorage", torch::kDouble},
    {"torch.LongStorage", torch::kLong},         {"torch.IntStorage", torch::kInt},
    {"torch.ShortStorage", torch::kShort},       {"torch.CharStorage", torch::kChar},
    {"torch.ByteStorage", torch::kByte},         {"torch.BoolStorage", torch::kBool},
};

const StorageType* findStorageType(const std::string& global)
{
    for (const StorageType& s : kStorageTypes)
        if (global == s.global) return &s;
    return nullptr;
}

const char* const kOrderedDict = "collections.OrderedDict";
const char* const kRebuildTensor = "torch._utils._rebuild_tensor_v2";
const char* const kRebuildParameter = "torch._utils._rebuild_parameter";

bool isIntTuple(const PickleValue& v)
{
    if (v.kind != PickleValue::Kind::Tuple || v.items.size() > kMaxRank) return false;
    for (const PickleValue* item : v.items)
        if (item->kind != PickleValue::Kind::Int || item->intValue < 0) return false;
    return true;
}

class StateDictBuilder final : public PickleHooks
{
public:
    StateDictBuilder(const std::string& path, caffe2::serialize::PyTorchStreamReader& reader,
                     const ZipDirectory& zip, std::uint64_t fileSize, bool keepFloatDtype)
        : m_path(path)
        , m_reader(reader)
        , m_zip(zip)
        , m_budget(kMaxExpansion * fileSize + kExpansionAllowance)
        , m_keepFloatDtype(keepFloatDtype)
    {}

    bool isAllowedGlobal(const std::string& name) const override
    {
        return name == kOrderedDict || name == kRebuildTensor || name == kRebuildParameter ||
               findStorageType(name) != nullptr;
    }

    PickleValue persistentLoad(const PickleValue& pid) override
    {
        using Kind = PickleValue::Kind;
        const auto& f = pid.items;
        if (pid.kind != Kind::Tuple || f.size() != 5 || f[0]->kind != Kind::String ||
            f[0]->text != "storage" || f[1]->kind != Kind::Global || f[2]->kind != Kind::String ||
            f[3]->kind != Kind::String || f[4]->kind != Kind::Int || f[4]->intValue < 0)
            throw Error(m_path + ": persistent id is not ('storage', type, key, location, numel)");
        const StorageType* type = findStorageType(f[1]->text);
        if (!type)
            throw Error(m_path + ": persistent id names " + printableText(f[1]->text) +
                        ", expected a storage type");
        PickleValue value;
        value.kind = Kind::Object;
        value.text = "storage";
        value.intValue = std::int64_t(storage(f[2]->text, type->dtype, f[4]->intValue));
        return value;
    }

    PickleValue call(const std::string& name, const PickleValue& args) override
    {
        if (name == kOrderedDict) {
            if (!args.items.empty())
                throw Error(m_path + ": OrderedDict called with arguments (expected an empty one)");
            PickleValue dict;
            dict.kind = PickleValue::Kind::Dict;
            return dict;
        }
        if (name == kRebuildTensor) return rebuildTensor(args);
        if (name == kRebuildParameter) {
            if (args.items.size() != 3 || !isTensor(*args.items[0]))
                throw Error(m_path + ": " + name + " expects (tensor, requires_grad, hooks)");
            return *args.items[0];
        }
        throw Error(m_path + ": pickle global " + name + " cannot be called");
    }

    bool isTensor(const PickleValue& v) const
    {
        return v.kind == PickleValue::Kind::Object && v.text == "tensor";
    }
    const torch::Tensor& tensor(const PickleValue& v) const { return m_tensors.at(std::size_t(v.intValue)); }

private:
    struct Storage
    {
        std::string key;
        torch::ScalarType dtype;
        std::int64_t numel;
        torch::Tensor data; // 1-D over the whole record; bools as bytes
    };

    // Loads record data/<key> the first time a key is seen; later references share it.
    std::size_t storage(const std::string& key, torch::ScalarType dtype, std::int64_t numel)
    {
        const auto it = m_storageIndex.find(key);
        if (it != m_storageIndex.end()) {
            const Storage& s = m_storages[it->second];
            if (s.dtype != dtype || s.numel != numel)
                throw Error(m_path + ": storage data/" + printableText(key) +
                            " is referenced with different types or sizes");
            return it->second;
        }
        const std::string record = "data/" + key;
        const ZipEntry* entry = m_zip.find(record);
        if (!entry)
            throw Error(m_path + ": storage record " + printableText(record) +
                        " is missing from the archive");
        std::uint64_t expected = 0;
        const bool overflow =
            __builtin_mul_overflow(std::uint64_t(numel), std::uint64_t(c10::elementSize(dtype)), &expected);
        if (overflow || entry->size != expected)
            throw Error(m_path + ": storage record " + printableText(record) + " holds " +
                        std::to_string(entry->size) + " bytes, expected " + std::to_string(numel) + " " +
                        c10::toString(dtype) + " elements (" +
                        (overflow ? std::string("more than 2^64") : std::to_string(expected)) + " bytes)");
        auto data = m_reader.getRecord(record);
        const std::size_t nbytes = std::get<1>(data);
        if (nbytes != expected)
            throw Error(m_path + ": storage record " + printableText(record) + " has an inconsistent size");
        checkCrc(*entry, std::get<0>(data).get(), nbytes, m_path, record);
        const torch::ScalarType rawType = dtype == torch::kBool ? torch::kByte : dtype;
        c10::Storage raw(c10::Storage::use_byte_size_t(), nbytes, std::move(std::get<0>(data)), nullptr,
                         false);
        m_storages.push_back(
            {key, dtype, numel, torch::empty({0}, torch::dtype(rawType)).set_(raw, 0, {numel}, {1})});
        m_storageIndex.emplace(key, m_storages.size() - 1);
        return m_storages.size() - 1;
    }

    // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
    PickleValue rebuildTensor(const PickleValue& args)
    {
        using Kind = PickleValue::Kind;
        const auto& a = args.items;
        if ((a.size() != 6 && a.size() != 7) || a[0]->kind != Kind::Object || a[0]->text != "storage" ||
            a[1]->kind != Kind::Int || a[1]->intValue < 0 || !isIntTuple(*a[2]) || !isIntTuple(*a[3]) ||
            a[2]->items.size() != a[3]->items.size())
            throw Error(m_path + ": " + kRebuildTensor +
                        " arguments are not (storage, offset, size, stride, requires_grad, hooks)");
        const Storage& s = m_storages.at(std::size_t(a[0]->intValue));
        const std::int64_t offset = a[1]->intValue;
        std::vector<std::int64_t> size, stride;
        for (std::size_t d = 0; d < a[2]->items.size(); ++d) {
            size.push_back(a[2]->items[d]->intValue);
            stride.push_back(a[3]->items[d]->intValue);
        }
        const bool keep = m_keepFloatDtype && (s.dtype == torch::kFloat || s.dtype == torch::kHalf ||
                                               s.dtype == torch::kBFloat16);
        const torch::ScalarType target = keep                           ? s.dtype
                                         : c10::isFloatingType(s.dtype) ? torch::kFloat
                                         : s.dtype == torch::kBool      ? torch::kBool
                                                                        : torch::kLong;
        // Largest element the view reaches must lie inside the storage (unless the view is empty).
        bool empty = false;
        std::uint64_t last = std::uint64_t(offset);
        bool overflow = false;
        std::uint64_t bytes = c10::elementSize(target);
        bool tooLarge = false;
        for (std::size_t d = 0; d < size.size(); ++d) {
            tooLarge = tooLarge || __builtin_mul_overflow(bytes, std::uint64_t(size[d]), &bytes);
            if (size[d] == 0)
                empty = true;
            else {
                std::uint64_t step = 0;
                overflow =
                    overflow ||
                    __builtin_mul_overflow(std::uint64_t(size[d] - 1), std::uint64_t(stride[d]), &step) ||
                    __builtin_add_overflow(last, step, &last);
            }
        }
        if (!empty && (tooLarge || bytes > m_budget - m_used))
            throw Error(m_path + ": tensor of size " + shapeText(size) + " on storage data/" +
                        printableText(s.key) + " would take the checkpoint's tensors beyond " +
                        std::to_string(kMaxExpansion) + " times the file size");
        m_used += empty ? 0 : bytes;
        torch::Tensor out;
        if (empty) {
            out = torch::empty(size, torch::dtype(target));
        } else {
            if (overflow || last >= std::uint64_t(s.numel))
                throw Error(m_path + ": tensor of size " + shapeText(size) + ", stride " + shapeText(stride) +
                            " at offset " + std::to_string(offset) + " reaches beyond the " +
                            std::to_string(s.numel) + " elements of storage data/" + printableText(s.key));
            const torch::Tensor view = s.data.as_strided(size, stride, offset);
            if (s.dtype == torch::kBool)
                out = view.ne(0).contiguous(); // any non-zero byte is true
            else
                out = torch::empty(size, torch::dtype(target)).copy_(view);
        }
        m_tensors.push_back(std::move(out));
        PickleValue value;
        value.kind = Kind::Object;
        value.text = "tensor";
        value.intValue = std::int64_t(m_tensors.size() - 1);
        return value;
    }

    const std::string& m_path;
    caffe2::serialize::PyTorchStreamReader& m_reader;
    const ZipDirectory& m_zip;
    std::vector<Storage> m_storages;
    std::map<std::string, std::size_t> m_storageIndex;
    std::vector<torch::Tensor> m_tensors;
    std::uint64_t m_budget; // bytes all output tensors may take together
    std::uint64_t m_used = 0;
    bool m_keepFloatDtype = false; // float16/bfloat16 stay as stored instead of becoming float32
};

std::string firstLine(const std::string& s)
{
    return s.substr(0, s.find('\n'));
}

// Rejects what is not a zip archive with a message that says what the file is instead.
void checkSignature(std::ifstream& in, std::uint64_t fileSize, const std::string& path)
{
    if (fileSize == 0) throw Error(path + ": file is empty (expected a PyTorch zip checkpoint)");
    char head[14] = {};
    in.read(head, std::streamsize(std::min<std::uint64_t>(fileSize, sizeof(head))));
    // Legacy torch.save: a pickle (protocol 2) whose first object is the magic number 0x1950a86a20f9469cfc6c.
    static const char kLegacy[14] = {'\x80', '\x02', '\x8a', '\x0a', '\x6c', '\xfc', '\x9c',
                                     '\x46', '\xf9', '\x20', '\x6a', '\xa8', '\x50', '\x19'};
    if (fileSize >= sizeof(kLegacy) && std::memcmp(head, kLegacy, sizeof(kLegacy)) == 0)
        throw Error(path + ": legacy PyTorch format (torch.save before 1.6 or _use_new_zipfile_serialization="
                           "False) is not supported; use the model's model.safetensors or re-save it with a "
                           "current torch");
    if (head[0] == '\x80')
        throw Error(path + ": a raw pickle, not a torch.save zip archive; use model.safetensors instead");
    if (fileSize < 4 || std::memcmp(head, "PK\x03\x04", 4) != 0)
        throw Error(path +
                    ": not a PyTorch checkpoint (expected a zip archive written by torch.save >= 1.6)");
}

} // namespace

StateDict readTorchBin(const std::string& path, bool keepFloatDtype)
{
    std::ifstream in = openInputFile(path);
    if (!in) throw Error(path + ": cannot open file: " + std::strerror(errno));
    in.seekg(0, std::ios::end);
    const std::streamoff end = in.tellg();
    if (end < 0) throw Error(path + ": cannot determine the file size");
    const std::uint64_t fileSize = std::uint64_t(end);
    in.seekg(0);
    checkSignature(in, fileSize, path);
    const ZipDirectory zip = readZipDirectory(in, fileSize, path);
    in.close();

    try {
        caffe2::serialize::PyTorchStreamReader reader(path);
        if (const ZipEntry* order = zip.find("byteorder")) {
            if (order->size > 16) throw Error(path + ": byteorder record is too large");
            auto record = reader.getRecord("byteorder");
            checkCrc(*order, std::get<0>(record).get(), std::get<1>(record), path, "byteorder");
            const std::string value(static_cast<const char*>(std::get<0>(record).get()), std::get<1>(record));
            if (value != "little")
                throw Error(path + ": byte order '" + value + "' is not supported (expected little)");
        }
        const ZipEntry* pickleEntry = zip.find("data.pkl");
        if (!pickleEntry || !reader.hasRecord("data.pkl"))
            throw Error(path + ": zip archive has no data.pkl record (not a torch.save checkpoint)");
        if (pickleEntry->size > kMaxPickleBytes)
            throw Error(path + ": data.pkl of " + std::to_string(pickleEntry->size) + " bytes is too large");
        auto pickle = reader.getRecord("data.pkl");
        checkCrc(*pickleEntry, std::get<0>(pickle).get(), std::get<1>(pickle), path, "data.pkl");

        StateDictBuilder builder(path, reader, zip, fileSize, keepFloatDtype);
        Unpickler unpickler(static_cast<const char*>(std::get<0>(pickle).get()), std::get<1>(pickle),
                            path + ": data.pkl", builder);
        const PickleValue& root = unpickler.load();
        if (root.kind != PickleValue::Kind::Dict)
            throw Error(path + ": data.pkl holds a value of type " + pickleTypeName(root) +
                        ", expected a state dict (dict of name -> tensor)");
        StateDict result;
        for (const auto& [key, value] : root.entries) {
            if (key->kind != PickleValue::Kind::String)
                throw Error(path + ": a state dict key has type " + pickleTypeName(*key) +
                            ", expected a string");
            if (!builder.isTensor(*value))
                throw Error(path + ": entry '" + printableText(key->text) + "' holds a value of type " +
                            pickleTypeName(*value) + ", expected a tensor" +
                            (value->kind == PickleValue::Kind::Dict
                                 ? " (nested dicts such as full training checkpoints are not supported)"
                                 : ""));
            if (!result.emplace(key->text, builder.tensor(*value)).second)
                throw Error(path + ": tensor '" + printableText(key->text) + "' appears twice");
        }
        return result;
    } catch (const c10::Error& e) {
        throw Error(path + ": cannot read PyTorch archive: " + firstLine(e.what_without_backtrace()));
    }
}

} // namespace outlierlens
