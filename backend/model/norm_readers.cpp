#include "model/norm_readers.h"

#include "common/error.h"
#include "model/decoder_modules.h"
#include "model/vit.h"

#include <optional>

namespace outlierlens {

std::vector<NormReaders> preNormsOf(torch::nn::Module& module)
{
    const auto listed = [](torch::nn::Module* m) -> std::optional<std::vector<NormReaders>> {
        if (auto* lm = dynamic_cast<decoder::DecoderLmImpl*>(m)) return lm->preNorms();
        if (auto* vit = dynamic_cast<VisionTransformerImpl*>(m)) return vit->preNorms();
        return std::nullopt;
    };
    std::optional<std::vector<NormReaders>> found = listed(&module);
    // modules(false): the module itself need not be held by a shared_ptr.
    for (const auto& m : module.modules(false))
        if (!found) found = listed(m.get());
    std::vector<NormReaders> norms = found ? std::move(*found) : std::vector<NormReaders>();
    if (norms.empty())
        throw Error("this model has no pre-norm that only linear layers read: its blocks normalise after the "
                    "residual sum (BERT, post-LN OPT), so the norm's output is also the next residual and no "
                    "scale or rotation can be folded into it; SmoothQuant and rotation apply to pre-norm "
                    "decoders and ViTs");
    return norms;
}

ResidualStream residualStreamOf(torch::nn::Module& module)
{
    const auto streamOf = [](torch::nn::Module* m) -> std::optional<ResidualStream> {
        if (auto* lm = dynamic_cast<decoder::DecoderLmImpl*>(m)) return lm->residualStream();
        if (auto* vit = dynamic_cast<VisionTransformerImpl*>(m)) return vit->residualStream();
        return std::nullopt;
    };
    std::optional<ResidualStream> found = streamOf(&module);
    for (const auto& m : module.modules(false))
        if (!found) found = streamOf(m.get());
    if (!found)
        return ResidualStream::refused(
            "BERT normalises after the residual sum (post-LN): the norm's output is the "
            "next residual, so a rotation cannot pass through it");
    ResidualStream stream = std::move(*found);
    return stream;
}

} // namespace outlierlens
