#include "io/hdf5_store.h"

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/input_file.h"

#include <hdf5.h>

#include <algorithm>
#include <filesystem>

static_assert(sizeof(hid_t) == sizeof(std::int64_t), "hid_t is stored as int64");

namespace outlierlens {
namespace {

/// Serialises all use of the HDF5 library in this process (it is not thread-safe).
std::recursive_mutex& hdf5Mutex()
{
    static std::recursive_mutex mutex;
    return mutex;
}

/// Owns one HDF5 identifier and closes it with the matching function.
class Handle
{
public:
    using Closer = herr_t (*)(hid_t);
    Handle(hid_t id, Closer closer)
        : m_id(id)
        , m_closer(closer)
    {}
    ~Handle()
    {
        if (m_id >= 0) m_closer(m_id);
    }
    Handle(Handle&& other) noexcept
        : m_id(other.m_id)
        , m_closer(other.m_closer)
    {
        other.m_id = -1;
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    Handle& operator=(Handle&&) = delete;
    hid_t get() const { return m_id; }
    bool valid() const { return m_id >= 0; }

private:
    hid_t m_id;
    Closer m_closer;
};

void silenceHdf5Errors()
{
    static const bool done = [] {
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
        return true;
    }();
    (void)done;
}

hid_t check(hid_t id, const std::string& file, const std::string& what)
{
    if (id < 0) throw Error(file + ": HDF5 error: " + what);
    return id;
}

void check(herr_t status, const std::string& file, const std::string& what, int)
{
    if (status < 0) throw Error(file + ": HDF5 error: " + what);
}

std::vector<hsize_t> toDims(const std::vector<std::int64_t>& shape, const std::string& file,
                            const std::string& name)
{
    std::vector<hsize_t> dims;
    for (auto d : shape) {
        if (d < 0) throw Error(file + ": negative dimension for dataset '" + name + "'");
        dims.push_back(hsize_t(d));
    }
    return dims;
}

Handle utf8StringType()
{
    Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type.get(), H5T_VARIABLE);
    H5Tset_cset(type.get(), H5T_CSET_UTF8);
    return type;
}

// A file can declare a dataset far larger than itself (storage never allocated, or compressed):
// a read must fit in what the file could hold, checked before anything is allocated. Our own files
// are uncompressed, so their reads stay within a small multiple of the file size.
constexpr std::uint64_t kMaxReadExpansion = 16;
constexpr std::uint64_t kReadAllowance = std::uint64_t(64) << 20;

void checkReadSize(std::int64_t elements, std::uint64_t bytesPerElement, std::uint64_t fileSize,
                   const std::string& file, const std::string& name)
{
    std::uint64_t bytes = 0;
    if (elements < 0 || __builtin_mul_overflow(std::uint64_t(elements), bytesPerElement, &bytes) ||
        bytes > kMaxReadExpansion * fileSize + kReadAllowance)
        throw Error(file + ": '" + name + "' declares " + std::to_string(elements) +
                    " elements, more than a file of " + std::to_string(fileSize) + " bytes can hold");
}

std::vector<std::string> readStringData(hid_t object, hid_t space, bool isAttribute, const std::string& file,
                                        const std::string& name, std::uint64_t fileSize)
{
    Handle fileType(isAttribute ? H5Aget_type(object) : H5Dget_type(object), H5Tclose);
    if (H5Tget_class(fileType.get()) != H5T_STRING)
        throw Error(file + ": '" + name + "' is not a string dataset or attribute");
    const hssize_t count = H5Sget_simple_extent_npoints(space);
    if (count < 0) throw Error(file + ": cannot read the size of '" + name + "'");
    const bool variable = H5Tis_variable_str(fileType.get()) > 0;
    checkReadSize(count, variable ? sizeof(char*) + sizeof(std::string) : H5Tget_size(fileType.get()),
                  fileSize, file, name);
    std::vector<std::string> out;
    if (variable) {
        Handle memType = utf8StringType();
        std::vector<char*> ptrs(std::size_t(count), nullptr);
        const herr_t status =
            isAttribute ? H5Aread(object, memType.get(), ptrs.data())
                        : H5Dread(object, memType.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data());
        if (status < 0) throw Error(file + ": cannot read strings of '" + name + "'");
        for (char* p : ptrs)
            out.emplace_back(p ? p : "");
        H5Dvlen_reclaim(memType.get(), space, H5P_DEFAULT, ptrs.data());
    } else {
        const std::size_t size = H5Tget_size(fileType.get());
        std::vector<char> buffer(std::size_t(count) * size + 1, '\0');
        Handle memType(H5Tcopy(fileType.get()), H5Tclose);
        const herr_t status =
            isAttribute ? H5Aread(object, memType.get(), buffer.data())
                        : H5Dread(object, memType.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data());
        if (status < 0) throw Error(file + ": cannot read strings of '" + name + "'");
        for (hssize_t i = 0; i < count; ++i) {
            const char* begin = buffer.data() + std::size_t(i) * size;
            out.emplace_back(begin, strnlen(begin, size));
        }
    }
    return out;
}

} // namespace

// ---------------------------------------------------------------------------------------------
Hdf5Writer::Hdf5Writer(const std::string& path)
    : m_lock(hdf5Mutex())
    , m_file(std::make_unique<AtomicFile>(path))
{
    silenceHdf5Errors();
    checkCanWrite(path); // a missing or read-only folder is said now, not at commit()
    // The file is built in memory (the core driver, no backing store) and written by commit() with our
    // own writes: HDF5 never meets a full disk, whose failed close left the file in HDF5's ID table to be
    // closed again, fatally, when the library shut down at exit.
    Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    if (!access.valid() || H5Pset_fapl_core(access.get(), std::size_t(4) << 20, /*backing_store=*/0) < 0)
        throw Error(path + ": cannot set up an HDF5 file in memory");
    m_handle = H5Fcreate(m_file->tempPath().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get());
    if (m_handle < 0) throw Error(path + ": cannot create HDF5 file");
}

Hdf5Writer::~Hdf5Writer()
{
    if (m_handle >= 0) H5Fclose(hid_t(m_handle));
}

void Hdf5Writer::ensureParentGroups(const std::string& path)
{
    std::size_t pos = 0;
    while ((pos = path.find('/', pos + 1)) != std::string::npos) {
        const std::string group = path.substr(0, pos);
        if (group.empty() || group == "/") continue;
        if (H5Lexists(hid_t(m_handle), group.c_str(), H5P_DEFAULT) <= 0) {
            Handle g(H5Gcreate2(hid_t(m_handle), group.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                     H5Gclose);
            check(g.get(), m_file->finalPath(), "cannot create group '" + group + "'");
        }
    }
}

void Hdf5Writer::createGroup(const std::string& group)
{
    ensureParentGroups(group + "/");
}

namespace {

void writeNumeric(hid_t file, const std::string& fileName, const std::string& dataset, hid_t fileType,
                  hid_t memType, const void* data, const std::vector<std::int64_t>& shape)
{
    const std::vector<hsize_t> dims = toDims(shape, fileName, dataset);
    Handle space(dims.empty() ? H5Screate(H5S_SCALAR)
                              : H5Screate_simple(int(dims.size()), dims.data(), nullptr),
                 H5Sclose);
    check(space.get(), fileName, "cannot create dataspace for '" + dataset + "'");
    Handle set(
        H5Dcreate2(file, dataset.c_str(), fileType, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
        H5Dclose);
    check(set.get(), fileName, "cannot create dataset '" + dataset + "' (does it exist already?)");
    check(H5Dwrite(set.get(), memType, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), fileName,
          "cannot write dataset '" + dataset + "'", 0);
}

} // namespace

void Hdf5Writer::writeFloat32(const std::string& dataset, const float* data,
                              const std::vector<std::int64_t>& shape)
{
    ensureParentGroups(dataset);
    writeNumeric(hid_t(m_handle), m_file->finalPath(), dataset, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, data,
                 shape);
}

void Hdf5Writer::writeFloat64(const std::string& dataset, const double* data,
                              const std::vector<std::int64_t>& shape)
{
    ensureParentGroups(dataset);
    writeNumeric(hid_t(m_handle), m_file->finalPath(), dataset, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, data,
                 shape);
}

void Hdf5Writer::writeInt64(const std::string& dataset, const std::int64_t* data,
                            const std::vector<std::int64_t>& shape)
{
    ensureParentGroups(dataset);
    writeNumeric(hid_t(m_handle), m_file->finalPath(), dataset, H5T_STD_I64LE, H5T_NATIVE_INT64, data, shape);
}

void Hdf5Writer::writeTensor(const std::string& dataset, const torch::Tensor& tensor)
{
    const std::vector<std::int64_t> shape(tensor.sizes().begin(), tensor.sizes().end());
    if (tensor.is_floating_point()) {
        const torch::Tensor t = tensor.detach().to(torch::kCPU, torch::kFloat).contiguous();
        writeFloat32(dataset, t.data_ptr<float>(), shape);
    } else {
        const torch::Tensor t = tensor.detach().to(torch::kCPU, torch::kLong).contiguous();
        writeInt64(dataset, t.data_ptr<std::int64_t>(), shape);
    }
}

void Hdf5Writer::writeStrings(const std::string& dataset, const std::vector<std::string>& values)
{
    ensureParentGroups(dataset);
    const hsize_t dims[1] = {hsize_t(values.size())};
    Handle space(H5Screate_simple(1, dims, nullptr), H5Sclose);
    Handle type = utf8StringType();
    Handle set(H5Dcreate2(hid_t(m_handle), dataset.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT,
                          H5P_DEFAULT),
               H5Dclose);
    check(set.get(), m_file->finalPath(), "cannot create dataset '" + dataset + "'");
    std::vector<const char*> ptrs;
    ptrs.reserve(values.size());
    for (const auto& v : values)
        ptrs.push_back(v.c_str());
    if (!values.empty())
        check(H5Dwrite(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()),
              m_file->finalPath(), "cannot write dataset '" + dataset + "'", 0);
}

std::int64_t Hdf5Writer::openObject(const std::string& object)
{
    const hid_t id = H5Oopen(hid_t(m_handle), object.c_str(), H5P_DEFAULT);
    return check(id, m_file->finalPath(), "no object '" + object + "' to attach an attribute to");
}

namespace {

void writeAttribute(hid_t object, const std::string& file, const std::string& name, hid_t fileType,
                    hid_t memType, hid_t space, const void* data)
{
    if (H5Aexists(object, name.c_str()) > 0) H5Adelete(object, name.c_str());
    Handle attr(H5Acreate2(object, name.c_str(), fileType, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    check(attr.get(), file, "cannot create attribute '" + name + "'");
    check(H5Awrite(attr.get(), memType, data), file, "cannot write attribute '" + name + "'", 0);
}

} // namespace

void Hdf5Writer::setAttribute(const std::string& object, const std::string& name, const std::string& value)
{
    Handle obj(hid_t(openObject(object)), H5Oclose);
    Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    Handle type = utf8StringType();
    const char* ptr = value.c_str();
    writeAttribute(obj.get(), m_file->finalPath(), name, type.get(), type.get(), space.get(), &ptr);
}

void Hdf5Writer::setAttribute(const std::string& object, const std::string& name, double value)
{
    Handle obj(hid_t(openObject(object)), H5Oclose);
    Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    writeAttribute(obj.get(), m_file->finalPath(), name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, space.get(),
                   &value);
}

void Hdf5Writer::setAttribute(const std::string& object, const std::string& name, std::int64_t value)
{
    Handle obj(hid_t(openObject(object)), H5Oclose);
    Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    writeAttribute(obj.get(), m_file->finalPath(), name, H5T_STD_I64LE, H5T_NATIVE_INT64, space.get(),
                   &value);
}

void Hdf5Writer::setAttribute(const std::string& object, const std::string& name,
                              const std::vector<std::int64_t>& values)
{
    Handle obj(hid_t(openObject(object)), H5Oclose);
    const hsize_t dims[1] = {hsize_t(values.size())};
    Handle space(H5Screate_simple(1, dims, nullptr), H5Sclose);
    writeAttribute(obj.get(), m_file->finalPath(), name, H5T_STD_I64LE, H5T_NATIVE_INT64, space.get(),
                   values.data());
}

void Hdf5Writer::commit()
{
    if (m_handle < 0) throw Error(m_file->finalPath() + ": HDF5 file committed twice");
    const std::string& path = m_file->finalPath();
    const hid_t file = hid_t(m_handle);
    check(H5Fflush(file, H5F_SCOPE_GLOBAL), path, "cannot flush the file", 0);
    const ssize_t size = H5Fget_file_image(file, nullptr, 0);
    if (size < 0) throw Error(path + ": HDF5 error: cannot read the file image");
    std::vector<char> image(static_cast<std::size_t>(size));
    if (H5Fget_file_image(file, image.data(), image.size()) != size)
        throw Error(path + ": HDF5 error: cannot read the file image");
    m_handle = -1; // closed exactly once, whatever H5Fclose says
    check(H5Fclose(file), path, "cannot close file", 0);
    writeFileBytes(m_file->tempPath(), image.data(), image.size(), path);
    m_file->commit();
}

// ---------------------------------------------------------------------------------------------
Hdf5Reader::Hdf5Reader(const std::string& path)
    : m_lock(hdf5Mutex())
    , m_path(path)
{
    silenceHdf5Errors();
    if (!std::filesystem::exists(path)) throw Error(path + ": no such file");
    refuseSpecialFile(path);
    std::error_code ec;
    m_fileSize = std::filesystem::file_size(path, ec);
    if (ec) throw Error(path + ": cannot read the file size: " + ec.message());
    if (H5Fis_hdf5(path.c_str()) <= 0) throw Error(path + ": not an HDF5 file");
    m_handle = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (m_handle < 0) throw Error(path + ": cannot open HDF5 file");
}

Hdf5Reader::~Hdf5Reader()
{
    if (m_handle >= 0) H5Fclose(hid_t(m_handle));
}

bool Hdf5Reader::exists(const std::string& path) const
{
    // H5Lexists needs every intermediate group to exist: walk down.
    std::size_t pos = 0;
    while (true) {
        pos = path.find('/', pos + 1);
        const std::string prefix = path.substr(0, pos);
        if (!prefix.empty() && prefix != "/" && H5Lexists(hid_t(m_handle), prefix.c_str(), H5P_DEFAULT) <= 0)
            return false;
        if (pos == std::string::npos) return true;
    }
}

std::vector<std::int64_t> Hdf5Reader::shape(const std::string& dataset) const
{
    if (!exists(dataset)) throw Error(m_path + ": no dataset '" + dataset + "'");
    Handle set(H5Dopen2(hid_t(m_handle), dataset.c_str(), H5P_DEFAULT), H5Dclose);
    check(set.get(), m_path, "cannot open dataset '" + dataset + "'");
    Handle space(H5Dget_space(set.get()), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 0) throw Error(m_path + ": cannot read the shape of '" + dataset + "'");
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    return std::vector<std::int64_t>(dims.begin(), dims.end());
}

torch::Tensor Hdf5Reader::readTensor(const std::string& dataset) const
{
    const std::vector<std::int64_t> dims = shape(dataset);
    Handle set(H5Dopen2(hid_t(m_handle), dataset.c_str(), H5P_DEFAULT), H5Dclose);
    Handle type(H5Dget_type(set.get()), H5Tclose);
    const H5T_class_t cls = H5Tget_class(type.get());
    std::int64_t elements = 1;
    for (const std::int64_t d : dims)
        if (__builtin_mul_overflow(elements, d, &elements)) {
            elements = -1; // refused below
            break;
        }
    checkReadSize(elements, 8, m_fileSize, m_path, dataset);
    torch::Tensor out;
    hid_t memType;
    if (cls == H5T_FLOAT) {
        out = torch::empty(dims, torch::kFloat);
        memType = H5T_NATIVE_FLOAT;
    } else if (cls == H5T_INTEGER || cls == H5T_ENUM) {
        out = torch::empty(dims, torch::kLong);
        memType = H5T_NATIVE_INT64;
    } else {
        throw Error(m_path + ": dataset '" + dataset + "' is not numeric");
    }
    if (out.numel() > 0)
        check(H5Dread(set.get(), memType, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data_ptr()), m_path,
              "cannot read dataset '" + dataset + "'", 0);
    return out;
}

std::vector<std::string> Hdf5Reader::readStrings(const std::string& dataset) const
{
    if (!exists(dataset)) throw Error(m_path + ": no dataset '" + dataset + "'");
    Handle set(H5Dopen2(hid_t(m_handle), dataset.c_str(), H5P_DEFAULT), H5Dclose);
    check(set.get(), m_path, "cannot open dataset '" + dataset + "'");
    Handle space(H5Dget_space(set.get()), H5Sclose);
    return readStringData(set.get(), space.get(), false, m_path, dataset, m_fileSize);
}

std::vector<std::string> Hdf5Reader::members(const std::string& group) const
{
    if (!exists(group)) throw Error(m_path + ": no group '" + group + "'");
    Handle g(H5Gopen2(hid_t(m_handle), group.c_str(), H5P_DEFAULT), H5Gclose);
    check(g.get(), m_path, "'" + group + "' is not a group");
    H5G_info_t info;
    check(H5Gget_info(g.get(), &info), m_path, "cannot list group '" + group + "'", 0);
    std::vector<std::string> names;
    for (hsize_t i = 0; i < info.nlinks; ++i) {
        const ssize_t size =
            H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
        if (size < 0) continue;
        std::string name(std::size_t(size), '\0');
        H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), std::size_t(size) + 1,
                           H5P_DEFAULT);
        names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
}

bool Hdf5Reader::hasAttribute(const std::string& object, const std::string& name) const
{
    if (!exists(object)) return false;
    return H5Aexists_by_name(hid_t(m_handle), object.c_str(), name.c_str(), H5P_DEFAULT) > 0;
}

std::string Hdf5Reader::stringAttribute(const std::string& object, const std::string& name) const
{
    if (!hasAttribute(object, name))
        throw Error(m_path + ": no attribute '" + name + "' on '" + object + "'");
    Handle attr(H5Aopen_by_name(hid_t(m_handle), object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT),
                H5Aclose);
    Handle space(H5Aget_space(attr.get()), H5Sclose);
    const auto values =
        readStringData(attr.get(), space.get(), true, m_path, object + "@" + name, m_fileSize);
    return values.empty() ? std::string() : values.front();
}

double Hdf5Reader::numberAttribute(const std::string& object, const std::string& name) const
{
    if (!hasAttribute(object, name))
        throw Error(m_path + ": no attribute '" + name + "' on '" + object + "'");
    Handle attr(H5Aopen_by_name(hid_t(m_handle), object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT),
                H5Aclose);
    Handle space(H5Aget_space(attr.get()), H5Sclose);
    if (H5Sget_simple_extent_npoints(space.get()) != 1)
        throw Error(m_path + ": attribute '" + name + "' on '" + object + "' is not a single number");
    double value = 0;
    check(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &value), m_path, "cannot read attribute '" + name + "'", 0);
    return value;
}

std::vector<std::int64_t> Hdf5Reader::intArrayAttribute(const std::string& object,
                                                        const std::string& name) const
{
    if (!hasAttribute(object, name))
        throw Error(m_path + ": no attribute '" + name + "' on '" + object + "'");
    Handle attr(H5Aopen_by_name(hid_t(m_handle), object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT),
                H5Aclose);
    Handle space(H5Aget_space(attr.get()), H5Sclose);
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    checkReadSize(std::max<hssize_t>(n, 0), sizeof(std::int64_t), m_fileSize, m_path, object + "@" + name);
    std::vector<std::int64_t> values(std::size_t(std::max<hssize_t>(n, 0)));
    if (n > 0)
        check(H5Aread(attr.get(), H5T_NATIVE_INT64, values.data()), m_path,
              "cannot read attribute '" + name + "'", 0);
    return values;
}

} // namespace outlierlens
