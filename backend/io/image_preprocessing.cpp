// ImagePreprocessing: reading the eval transform from timm and Hugging Face configuration files.
#include "io/image.h"

#include "common/error.h"
#include "common/json_util.h"
#include "common/text_format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

namespace outlierlens {
namespace {

// timm 0.9 data/config.py defaults (IMAGENET_DEFAULT_MEAN/STD, DEFAULT_CROP_PCT).
constexpr std::array<double, 3> kTimmDefaultMean{0.485, 0.456, 0.406};
constexpr std::array<double, 3> kTimmDefaultStd{0.229, 0.224, 0.225};
constexpr double kTimmDefaultCropPct = 0.875;
constexpr int kMaxInputSize = 8192;

// A JSON value for an error message, shortened: a config field can hold anything.
std::string brief(const nlohmann::json& value)
{
    std::string text = value.dump();
    if (text.size() > 80) text = text.substr(0, 77) + "...";
    return text;
}

std::string formatTriple(const std::array<double, 3>& v)
{
    return "[" + numberText(v[0]) + ", " + numberText(v[1]) + ", " + numberText(v[2]) + "]";
}

// Three numbers (R, G, B); one number stands for all three, as Hugging Face allows.
std::array<double, 3> getTriple(const nlohmann::json& obj, const std::string& key, const std::string& where,
                                const std::array<double, 3>& fallback)
{
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (it->is_number()) {
        const double v = it->get<double>();
        return {v, v, v};
    }
    if (!it->is_array() || it->size() != 3 ||
        !std::all_of(it->begin(), it->end(), [](const auto& x) { return x.is_number(); }))
        throw Error(where + ": field '" + key + "' must be three numbers (R, G, B), found " + brief(*it));
    return {(*it)[0].get<double>(), (*it)[1].get<double>(), (*it)[2].get<double>()};
}

ImagePreprocessing fromTimmConfig(const nlohmann::json& cfg, const std::string& where)
{
    if (!cfg.is_object()) throw Error(where + ": expected a JSON object, found " + brief(cfg));
    int size = 224;
    const auto input = cfg.find("input_size");
    if (input != cfg.end() && !input->is_null()) {
        const bool ok =
            input->is_array() && input->size() == 3 &&
            std::all_of(input->begin(), input->end(), [](const auto& x) { return x.is_number_integer(); });
        if (!ok || (*input)[0].get<long long>() != 3)
            throw Error(where + ": field 'input_size' must be [3, height, width], found " + brief(*input));
        const long long h = (*input)[1].get<long long>(), w = (*input)[2].get<long long>();
        if (h != w)
            throw Error(where + ": field 'input_size' is not square (" + brief(*input) +
                        "); only square inputs are supported");
        if (h < 1 || h > kMaxInputSize)
            throw Error(where + ": field 'input_size' side must be 1.." + std::to_string(kMaxInputSize) +
                        ", found " + std::to_string(h));
        size = int(h);
    }
    const std::string interpolation =
        jsonutil::getString(cfg, "interpolation", where, std::string("bicubic"));
    ImagePreprocessing p =
        ImagePreprocessing::timmEval(size, jsonutil::getNumber(cfg, "crop_pct", where, kTimmDefaultCropPct),
                                     interpolationFromName(interpolation.empty() ? "bicubic" : interpolation,
                                                           where + ": field 'interpolation'"));
    p.mean = getTriple(cfg, "mean", where, kTimmDefaultMean);
    p.std = getTriple(cfg, "std", where, kTimmDefaultStd);
    const std::string cropMode = jsonutil::getString(cfg, "crop_mode", where, std::string("center"));
    if (cropMode == "squash")
        p.mode = ImagePreprocessing::Mode::SquashThenCenterCrop;
    else if (cropMode != "center" && !cropMode.empty())
        throw Error(where + ": field 'crop_mode' is '" + cropMode +
                    "', expected 'center' or 'squash' ('border' is not supported)");
    p.validate(where);
    return p;
}

// transformers 4.31 ViTImageProcessor: resize to (height, width) with PIL, rescale, normalise.
ImagePreprocessing fromHfConfig(const nlohmann::json& cfg, const std::string& where)
{
    if (!cfg.is_object()) throw Error(where + ": expected a JSON object");
    ImagePreprocessing p;
    p.mode = ImagePreprocessing::Mode::ResizeExact;
    p.cropPct = 1.0;
    if (!jsonutil::getBool(cfg, "do_resize", where, true))
        throw Error(where + ": field 'do_resize' is false; only processors that resize are supported");
    // size: {height, width} or an integer (resize to it), or {shortest_edge} (the shorter side, then a
    // centre crop: DINOv2's BitImageProcessor and CLIPImageProcessor).
    const auto squareSide = [&](const nlohmann::json& value, const std::string& field) -> int {
        long long side = 0;
        if (value.is_number_integer()) {
            side = value.get<long long>();
        } else if (value.is_object() && value.contains("height") && value.contains("width")) {
            const long long h = jsonutil::getInt(value, "height", where + ": " + field);
            const long long w = jsonutil::getInt(value, "width", where + ": " + field);
            if (h != w)
                throw Error(where + ": field '" + field + "' is not square (" + brief(value) +
                            "); only square inputs are supported");
            side = h;
        } else if (value.is_object() && value.contains("shortest_edge") && field == "size") {
            side = jsonutil::getInt(value, "shortest_edge", where + ": size");
        } else {
            throw Error(where + ": field '" + field + "' must be an integer or {\"height\", \"width\"}" +
                        (field == "size" ? std::string(" or {\"shortest_edge\"}") : std::string()) +
                        ", found " + brief(value));
        }
        if (side < 1 || side > kMaxInputSize)
            throw Error(where + ": field '" + field + "' must be 1.." + std::to_string(kMaxInputSize) +
                        ", found " + std::to_string(side));
        return int(side);
    };
    p.size = 224;
    bool shortestEdge = false;
    const auto size = cfg.find("size");
    if (size != cfg.end() && !size->is_null()) {
        p.size = squareSide(*size, "size");
        shortestEdge = size->is_object() && size->contains("shortest_edge");
    }
    if (jsonutil::getBool(cfg, "do_center_crop", where, false)) {
        const auto crop = cfg.find("crop_size");
        const int cropSide = crop != cfg.end() && !crop->is_null() ? squareSide(*crop, "crop_size") : 224;
        if (cropSide > p.size)
            throw Error(where + ": field 'crop_size' (" + std::to_string(cropSide) +
                        ") is larger than the resized image (" + std::to_string(p.size) +
                        "); only crops inside the image are supported");
        if (shortestEdge) {
            p.mode = ImagePreprocessing::Mode::HfShortestEdgeThenCenterCrop;
            p.shortestEdge = p.size;
            p.size = cropSide;
        } else if (cropSide != p.size) {
            throw Error(where + ": a resize to " + std::to_string(p.size) + "x" + std::to_string(p.size) +
                        " followed by a centre crop of " + std::to_string(cropSide) +
                        " is not supported (only {\"shortest_edge\"} sizes take a crop)");
        } // a crop of the whole resized image changes nothing
    } else if (shortestEdge) {
        throw Error(where +
                    ": field 'size' is {\"shortest_edge\"} without do_center_crop: the input would not "
                    "be square; only square inputs are supported");
    }
    const long long resample = jsonutil::getInt(cfg, "resample", where, 2); // PIL.Image.BILINEAR
    static const Interpolation kPil[] = {Interpolation::Nearest,  Interpolation::Lanczos,
                                         Interpolation::Bilinear, Interpolation::Bicubic,
                                         Interpolation::Box,      Interpolation::Hamming};
    if (resample < 0 || resample > 5)
        throw Error(where + ": field 'resample' must be a PIL filter number 0..5, found " +
                    std::to_string(resample));
    p.interpolation = kPil[resample];
    p.rescaleFactor = jsonutil::getBool(cfg, "do_rescale", where, true)
                          ? jsonutil::getNumber(cfg, "rescale_factor", where, 1.0 / 255.0)
                          : 1.0;
    if (jsonutil::getBool(cfg, "do_normalize", where, true)) {
        p.mean = getTriple(cfg, "image_mean", where, {0.5, 0.5, 0.5}); // IMAGENET_STANDARD_MEAN
        p.std = getTriple(cfg, "image_std", where, {0.5, 0.5, 0.5});
    } else {
        p.mean = {0.0, 0.0, 0.0};
        p.std = {1.0, 1.0, 1.0};
    }
    p.validate(where);
    return p;
}

} // namespace

ImagePreprocessing ImagePreprocessing::timmEval(int size, double cropPct, Interpolation interpolation)
{
    ImagePreprocessing p;
    p.mode = Mode::ShorterSideThenCenterCrop;
    p.size = size;
    p.cropPct = cropPct;
    p.interpolation = interpolation;
    p.mean = kTimmDefaultMean;
    p.std = kTimmDefaultStd;
    p.rescaleFactor = 1.0 / 255.0; // torchvision ToTensor
    return p;
}

ImagePreprocessing ImagePreprocessing::fromModelDir(const std::string& modelDir)
{
    namespace fs = std::filesystem;
    const std::string configPath = (fs::path(modelDir) / "config.json").string();
    const std::string processorPath = (fs::path(modelDir) / "preprocessor_config.json").string();
    std::error_code ec;
    if (fs::exists(configPath, ec)) {
        const nlohmann::json config = jsonutil::parseFile(configPath);
        if (config.is_object() && config.contains("pretrained_cfg"))
            return fromTimmConfig(config["pretrained_cfg"], configPath + ": pretrained_cfg");
    }
    if (fs::exists(processorPath, ec)) return fromHfConfig(jsonutil::parseFile(processorPath), processorPath);
    throw Error(modelDir + ": no image preprocessing: expected \"pretrained_cfg\" in config.json (timm) or a "
                           "preprocessor_config.json (Hugging Face)");
}

int ImagePreprocessing::resizeSize() const
{
    if (mode == Mode::ResizeExact) return size;
    if (mode == Mode::HfShortestEdgeThenCenterCrop) return shortestEdge;
    // math.floor(img_size / crop_pct) as timm computes scale_size.
    return int(std::floor(double(size) / cropPct));
}

void ImagePreprocessing::validate(const std::string& where) const
{
    if (size < 1 || size > kMaxInputSize)
        throw Error(where + ": output size must be 1.." + std::to_string(kMaxInputSize) + ", found " +
                    std::to_string(size));
    if (mode == Mode::HfShortestEdgeThenCenterCrop && (shortestEdge < size || shortestEdge > kMaxInputSize))
        throw Error(where + ": shortest edge " + std::to_string(shortestEdge) + " must be " +
                    std::to_string(size) + ".." + std::to_string(kMaxInputSize) + " (at least the crop)");
    if (mode == Mode::ShorterSideThenCenterCrop || mode == Mode::SquashThenCenterCrop) {
        if (!std::isfinite(cropPct) || cropPct <= 0.0)
            throw Error(where + ": crop_pct must be a positive number, found " + numberText(cropPct));
        const double scale = std::floor(double(size) / cropPct);
        if (scale < 1.0 || scale > kMaxInputSize)
            throw Error(where + ": crop_pct " + numberText(cropPct) + " gives a resize to " +
                        numberText(scale) + " pixels, expected 1.." + std::to_string(kMaxInputSize));
    }
    if (!std::isfinite(rescaleFactor) || rescaleFactor <= 0.0)
        throw Error(where + ": rescale factor must be a positive number, found " + numberText(rescaleFactor));
    for (int c = 0; c < 3; ++c) {
        if (!std::isfinite(mean[std::size_t(c)]))
            throw Error(where + ": mean " + formatTriple(mean) + " must be finite");
        if (!std::isfinite(std[std::size_t(c)]) || std[std::size_t(c)] == 0.0)
            throw Error(where + ": std " + formatTriple(std) + " must be finite and non-zero");
    }
}

std::string ImagePreprocessing::describe() const
{
    const std::string filter = interpolationName(interpolation) + ", antialiased as PIL";
    std::string text;
    switch (mode) {
    case Mode::ShorterSideThenCenterCrop:
        text = "timm: shorter side to " + std::to_string(resizeSize()) + " (" + filter + "), centre crop " +
               std::to_string(size) + "x" + std::to_string(size) + " (crop_pct " + numberText(cropPct) + ")";
        break;
    case Mode::SquashThenCenterCrop:
        text = "timm squash: resize to " + std::to_string(resizeSize()) + "x" + std::to_string(resizeSize()) +
               " (" + filter + "), centre crop " + std::to_string(size) + "x" + std::to_string(size) +
               " (crop_pct " + numberText(cropPct) + ")";
        break;
    case Mode::ResizeExact:
        text = "Hugging Face: resize to " + std::to_string(size) + "x" + std::to_string(size) + " (" +
               filter + ")";
        break;
    case Mode::HfShortestEdgeThenCenterCrop:
        text = "Hugging Face: shorter side to " + std::to_string(shortestEdge) + " (" + filter +
               "), centre crop " + std::to_string(size) + "x" + std::to_string(size);
        break;
    }
    return text + ", x * " + numberText(rescaleFactor) + ", mean " + formatTriple(mean) + ", std " +
           formatTriple(std);
}

} // namespace outlierlens
