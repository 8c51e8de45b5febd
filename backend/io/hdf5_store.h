#pragma once
// One object per file, used from one thread at a time. The HDF5 library on Debian is built without
// thread safety, so every reader and writer holds one process-wide lock from construction to
// destruction: objects on other threads wait for it (a thread may hold several at once).

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace outlierlens {

class AtomicFile;

/// Writes an HDF5 file atomically: the file is built in memory (HDF5's core driver) and commit() writes it
/// to a temporary file with our own writes and renames it into place, so a full disk is an Error naming
/// the file and HDF5 never meets it; without commit() (error, cancel) no file is left behind. Memory: the
/// file's size, twice during commit() (a bert-base dump of every capture is tens of MB). Dataset paths such
/// as "layer0/attn_probs" create their groups as needed.
class Hdf5Writer
{
public:
    explicit Hdf5Writer(const std::string& path);
    ~Hdf5Writer();
    Hdf5Writer(const Hdf5Writer&) = delete;
    Hdf5Writer& operator=(const Hdf5Writer&) = delete;

    /// Row-major float32 data of the given shape.
    void writeFloat32(const std::string& dataset, const float* data, const std::vector<std::int64_t>& shape);
    void writeInt64(const std::string& dataset, const std::int64_t* data,
                    const std::vector<std::int64_t>& shape);
    void writeFloat64(const std::string& dataset, const double* data, const std::vector<std::int64_t>& shape);
    /// Writes a tensor as float32 (floating types) or int64 (integer types); made contiguous first.
    void writeTensor(const std::string& dataset, const torch::Tensor& tensor);
    /// A 1-D dataset of variable-length UTF-8 strings (h5py reads them as str).
    void writeStrings(const std::string& dataset, const std::vector<std::string>& values);
    void createGroup(const std::string& group);

    /// Attributes on a group or dataset ("/" for the root).
    void setAttribute(const std::string& object, const std::string& name, const std::string& value);
    void setAttribute(const std::string& object, const std::string& name, double value);
    void setAttribute(const std::string& object, const std::string& name, std::int64_t value);
    void setAttribute(const std::string& object, const std::string& name,
                      const std::vector<std::int64_t>& values);

    /// Closes the file and moves it to its final path.
    void commit();

private:
    std::int64_t openObject(const std::string& object);
    void ensureParentGroups(const std::string& path);

    std::unique_lock<std::recursive_mutex> m_lock; ///< first: taken before the file opens, freed last
    std::unique_ptr<AtomicFile> m_file;
    std::int64_t m_handle = -1;
};

/// Reads HDF5 files (inspection dumps, statistics files, the golden reference.h5 fixtures). A dataset
/// or attribute that declares more data than the file could hold (16 x its size + 64 MB, as for
/// unallocated or compressed storage) is an Error before anything is allocated.
class Hdf5Reader
{
public:
    explicit Hdf5Reader(const std::string& path);
    ~Hdf5Reader();
    Hdf5Reader(const Hdf5Reader&) = delete;
    Hdf5Reader& operator=(const Hdf5Reader&) = delete;

    bool exists(const std::string& path) const;
    std::vector<std::int64_t> shape(const std::string& dataset) const;
    /// Floating datasets come back as float32 tensors, integer ones as int64.
    torch::Tensor readTensor(const std::string& dataset) const;
    std::vector<std::string> readStrings(const std::string& dataset) const;
    /// Names of the members of a group, sorted.
    std::vector<std::string> members(const std::string& group) const;
    std::string stringAttribute(const std::string& object, const std::string& name) const;
    double numberAttribute(const std::string& object, const std::string& name) const;
    std::vector<std::int64_t> intArrayAttribute(const std::string& object, const std::string& name) const;
    bool hasAttribute(const std::string& object, const std::string& name) const;
    const std::string& path() const { return m_path; }

private:
    std::unique_lock<std::recursive_mutex> m_lock; ///< first: taken before the file opens, freed last
    std::string m_path;
    std::uint64_t m_fileSize = 0;
    std::int64_t m_handle = -1;
};

} // namespace outlierlens
