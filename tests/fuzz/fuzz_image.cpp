// Fuzz target: image decoding (PNG, JPEG, BMP, WebP through OpenCV and libpng/libjpeg), from memory,
// and the preprocessing every decoded image goes through before a ViT sees it.

#include "fuzz_support.h"

#include "io/image.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace outlierlens;
    fuzzsupport::refusedOnlyWithError([&] {
        const RgbImage image = decodeImageData(data, size, "fuzz input");
        const ImagePreprocessing p = ImagePreprocessing::timmEval(32, 0.875, Interpolation::Bicubic);
        (void)preprocessImage(image, p);
    });
    return 0;
}
