#include "analysis/stats_runner.h"

// What `stats --data` names: the data-set spec (mnli:FILE[:N], images:DIR[:N], text:FILE[:N]) and the
// listing of an image folder. The runs themselves are in stats_runner.cpp.

#include "common/error.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace outlierlens {
namespace fs = std::filesystem;

DataSpec DataSpec::parse(const std::string& text)
{
    const auto colon = text.find(':');
    if (colon == std::string::npos)
        throw Error("--data '" + text + "': expected mnli:FILE[:N], images:DIR[:N] or text:FILE[:N]");
    DataSpec spec;
    const std::string kind = text.substr(0, colon);
    if (kind == "mnli")
        spec.kind = Kind::Mnli;
    else if (kind == "images")
        spec.kind = Kind::Images;
    else if (kind == "text")
        spec.kind = Kind::Text;
    else
        throw Error("--data '" + text + "': unknown kind '" + kind + "' (expected mnli, images or text)");
    std::string rest = text.substr(colon + 1);
    const auto last = rest.rfind(':');
    if (last != std::string::npos && last + 1 < rest.size() &&
        std::all_of(rest.begin() + long(last) + 1, rest.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        const std::string digits = rest.substr(last + 1);
        if (digits.size() > 12)
            throw Error("--data '" + text + "': N = " + digits +
                        " is larger than any data set (at most 12 digits)");
        spec.limit = std::stoull(digits);
        if (spec.limit == 0) throw Error("--data '" + text + "': N must be at least 1");
        rest = rest.substr(0, last);
    }
    if (rest.empty()) throw Error("--data '" + text + "': no path");
    spec.path = rest;
    return spec;
}

std::string DataSpec::describe() const
{
    const char* prefix = kind == Kind::Mnli ? "mnli:" : kind == Kind::Images ? "images:" : "text:";
    return prefix + path + (limit ? ":" + std::to_string(limit) : "");
}

DataSpec::Kind DataSpec::kindFor(const ModelFamily& family)
{
    if (family.takesImages()) return Kind::Images;
    return family.sentencePairs ? Kind::Mnli : Kind::Text;
}

std::string DataSpec::describe(Kind kind)
{
    return kind == Kind::Mnli ? "sentence pairs" : kind == Kind::Images ? "images" : "text";
}

std::string DataSpec::usage(Kind kind)
{
    return kind == Kind::Mnli ? "mnli:FILE[:N]" : kind == Kind::Images ? "images:DIR[:N]" : "text:FILE[:N]";
}

std::vector<LabelledImage> listImageDataset(const std::string& dir, std::size_t limit,
                                            const std::function<int(const std::string&)>& wnidToIndex)
{
    if (!fs::is_directory(dir)) throw Error(dir + ": not a folder of images");
    static const std::vector<std::string> extensions = {".jpg", ".jpeg", ".png", ".bmp",
                                                        ".tif", ".tiff", ".webp"};
    auto isImage = [](const fs::path& p) {
        std::string ext = p.extension().string();
        std::transform(ext.begin(), ext.end(), ext.begin(),
                       [](unsigned char c) { return char(std::tolower(c)); });
        return std::find(extensions.begin(), extensions.end(), ext) != extensions.end();
    };
    std::vector<LabelledImage> images;
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.is_regular_file() && isImage(entry.path())) {
            images.push_back({entry.path().string(), -1});
        } else if (entry.is_directory()) {
            const std::string wnid = entry.path().filename().string();
            const int label = wnidToIndex ? wnidToIndex(wnid) : -1;
            for (const auto& inner : fs::directory_iterator(entry.path()))
                if (inner.is_regular_file() && isImage(inner.path()))
                    images.push_back({inner.path().string(), label});
        }
    }
    std::sort(images.begin(), images.end(), [](const LabelledImage& a, const LabelledImage& b) {
        const std::string fa = fs::path(a.path).filename().string(),
                          fb = fs::path(b.path).filename().string();
        return fa != fb ? fa < fb : a.path < b.path;
    });
    if (images.empty())
        throw Error(dir + ": no image files (.jpg, .png, ...) in this folder or its sub-folders");
    if (limit > 0 && images.size() > limit) images.resize(limit);
    return images;
}

} // namespace outlierlens
