#pragma once
// The thread that runs the model. The linear structure of the residual stream that transforms keeping a
// model's function edit (docs/quantization.md, "Transforms"): which layers read each pre-norm's output
// (SmoothQuant's migration), and which write into the stream (a rotation). Each layout lists its own
// (decoder layouts, the ViT engine); the transforms themselves live in backend/quant/transforms.h.

#include "model/capture.h"

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
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
    /// It reads the norm's channels [first, first + in): per-head gates read a slice. A slice reader reads
    /// all channels once its weight is widened to the norm's width (zero outside the slice).
    std::int64_t first = 0;
    /// Its bias [out], created as zeros if it has none (a rotation folds the norm's bias into it); empty
    /// where the reader cannot take one.
    std::function<torch::Tensor()> ensureBias;
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
    /// A rotation: from now on the norm reads the stream in the rotated basis, where a LayerNorm's mean
    /// is the component along `meanAxis` [d] (the rotated ones vector, unit length); RMSNorms ignore it.
    std::function<void(const torch::Tensor& meanAxis)> rotateNorm;
};

/// A weight whose outputs are added to the residual stream (attention output, FFN down projection).
struct ResidualWriter
{
    torch::Tensor weight; ///< [d, in] (nn.Linear), or [in, d] for GPT-2's Conv1D (inputOnRows)
    bool inputOnRows = false;
    torch::Tensor bias; ///< [d] or undefined
    /// FFN down projections: from now on the layer multiplies its input by this [in, in] orthogonal matrix
    /// before the quantizer sees it (QuaRot's online rotation); empty for other writers.
    std::function<void(const torch::Tensor& rotation)> rotateInput;
};

/// Everything a rotation of the residual stream (x -> x Q) touches in one model.
struct ResidualStream
{
    std::string refusal;               ///< why the model cannot be rotated; "" when it can
    std::vector<torch::Tensor> tables; ///< [rows, d] tables added into the stream: tokens, learned positions
    std::vector<ResidualWriter> writers; ///< every block's writers
    std::vector<NormReaders> norms;      ///< every block's pre-norms
    /// The final norm reads the stream through Q^T (so it and the head compute what they did), and writes
    /// through Q when the head is tied to the (rotated) token embeddings.
    std::function<void(const torch::Tensor& q)> rotateFinalNorm;
    /// Run by the rotation before it touches anything (a ViT folds LayerScale into the layers it scales:
    /// the same function); listing the stream changes nothing. Empty: nothing to prepare.
    std::function<void()> prepare;

    static ResidualStream refused(std::string why)
    {
        ResidualStream s;
        s.refusal = std::move(why);
        return s;
    }
};

/// Every pre-norm of `module` (a decoder's or a ViT's, also inside a task's wrapper module) with the
/// weights that read it, from the layout's own list. An Error when the model has none: BERT and post-LN OPT
/// normalise after the residual sum, so the norm's output is also the next block's residual and no scale
/// can be folded into it.
std::vector<NormReaders> preNormsOf(torch::nn::Module& module);

/// The residual stream of `module` (a decoder's or a ViT's, also inside a task's wrapper); `refusal` says
/// why not for models whose stream cannot be rotated (BERT, post-LN OPT, Gemma 2's post-norms, CLIP's
/// pre-encoder norm). Listing it leaves the model as it is (ResidualStream::prepare does what must come
/// first).
ResidualStream residualStreamOf(torch::nn::Module& module);

} // namespace outlierlens
