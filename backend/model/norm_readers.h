#pragma once
// The thread that runs the model. Which linear layers read each pre-norm's output: what a transform that
// keeps the model's function (SmoothQuant's migration, docs/quantization.md) edits. Each layout that
// allows it lists its own (decoder layouts, the ViT engine); the transforms live in backend/quant.

#include "model/capture.h"

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace outlierlens {

/// A weight whose input is (part of) a norm's output.
struct NormReader
{
    torch::Tensor weight; ///< [out, in] (nn.Linear), or [in, out] for GPT-2's Conv1D (inputOnRows)
    bool inputOnRows = false;
    std::int64_t first = 0; ///< it reads the norm's channels [first, first + in): per-head gates read a slice
};

/// One norm before a block's linear layers, and every weight that reads its output.
struct NormReaders
{
    std::string name;                     ///< the norm's module name, e.g. "layers.2.input_layernorm"
    int layer = 0;                        ///< 0-based block
    QuantSite site = QuantSite::AttnNorm; ///< the site the block passes the normed activation through
    torch::Tensor weight;                 ///< the norm's scale [d]
    torch::Tensor bias;                   ///< [d] (LayerNorm) or undefined (RMSNorm)
    bool onePlusWeight = false;           ///< Gemma's norms scale by 1 + weight
    std::vector<NormReader> readers;
};

/// Every pre-norm of `module` (a decoder's or a ViT's, also inside a task's wrapper module) with the
/// weights that read it, from the layout's own list. An Error when the model has none: BERT and post-LN OPT
/// normalise after the residual sum, so the norm's output is also the next block's residual and no scale
/// can be folded into it.
std::vector<NormReaders> preNormsOf(torch::nn::Module& module);

} // namespace outlierlens
