#pragma once
// Any thread; no torch. Which [T, d] tensor a model family's figures and model-level metrics use.

#include "model/capture.h"
#include "model/model_family.h"

#include <vector>

namespace outlierlens {

/// The one home of "which tensor do a family's figures use" (DESIGN.md, Metrics): BERT's ffn_out (the
/// FFN output before the residual add), the block output `out` for images (ViT) and decoders. Its
/// per-layer max inf norm gives the model's max inf norm.
CapturePoint figureTensor(InputKind kind, bool decoder);

/// The tensors whose kurtosis is averaged into the model's "avg kurtosis": BERT's ffn_out and out, the
/// block output for ViT and decoders.
std::vector<CapturePoint> kurtosisTensors(InputKind kind, bool decoder);

} // namespace outlierlens
