#include "common/input_file.h"

#include "common/error.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>

namespace outlierlens {

void refuseSpecialFile(const std::string& path)
{
    struct stat st = {};
    if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
    const char* kind = S_ISFIFO(st.st_mode)  ? "a FIFO"
                       : S_ISDIR(st.st_mode) ? "a directory"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                   : "a special file";
    throw Error(path + ": not a regular file (" + kind + ")");
}

std::ifstream openInputFile(const std::string& path)
{
    refuseSpecialFile(path);
    return std::ifstream(path, std::ios::binary);
}

std::string readWholeFile(const std::string& path, const std::string& what, std::uint64_t maxBytes)
{
    std::ifstream in = openInputFile(path);
    if (!in) throw Error(path + ": cannot open " + what + ": " + std::strerror(errno));
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    if (size < 0) throw Error(path + ": cannot read " + what);
    if (std::uint64_t(size) > maxBytes)
        throw Error(path + ": " + what + " of " + std::to_string(size) + " bytes is larger than the limit of " +
                    std::to_string(maxBytes) + " bytes");
    in.seekg(0);
    std::string data(std::size_t(size), '\0');
    in.read(data.data(), size);
    if (in.gcount() != size) throw Error(path + ": cannot read " + what);
    return data;
}

} // namespace outlierlens
