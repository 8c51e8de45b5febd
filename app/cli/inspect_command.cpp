// `outlierlens inspect`: one input through a model, prediction printed, every capture point dumped.

#include "cli/command_line.h"

#include "analysis/bert_inspection.h"
#include "analysis/decoder_inspection.h"
#include "analysis/inspection_dump.h"
#include "analysis/metrics.h"
#include "analysis/vit_inspection.h"
#include "common/error.h"
#include "io/npy.h"
#include "model/config.h"
#include "model/model_family.h"
#include "model/runtime.h"
#include "paths.h"
#include "text/imagenet.h"
#include "text/wordpiece.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace outlierlens::cli {
namespace {

std::string joinTokens(const std::vector<std::string>& tokens)
{
    std::string out;
    for (const auto& t : tokens)
        out += (out.empty() ? "" : " ") + t;
    return out;
}

/// NaN or Inf in the output ends the command with an error, after the dump (which shows where they
/// arose): never a prediction printed from them.
int finish(const std::string& modelDir, const std::string& outputNotice)
{
    if (!outputNotice.empty()) throw Error(modelDir + ": " + outputNotice);
    return Ok;
}

int inspectBertModel(Command& cmd, const std::string& modelDir)
{
    const std::string text = cmd.requiredText("text");
    const std::optional<std::string> pair = cmd.optionalText("pair");
    const int maxLength = cmd.intValue("max-length", 0, 2, 1 << 20);

    BertNetwork network = BertNetwork::load(modelDir, cmd.variantOverride());
    const BertTokenizer tokenizer = BertTokenizer::fromModelDir(modelDir);
    if (tokenizer.vocabSize() != network.config().vocabSize)
        throw Error(modelDir + "/vocab.txt has " + std::to_string(tokenizer.vocabSize()) +
                    " tokens but the model's vocab_size is " + std::to_string(network.config().vocabSize));

    const BertConfig& c = network.config();
    std::printf("model: %s (%s, %d layers, %d heads, hidden %d; %s)\n", modelDir.c_str(),
                toString(network.head()).c_str(), c.numLayers, c.numHeads, c.hiddenSize,
                c.variant.describe().c_str());
    for (const auto& note : network.loadReport().ignored)
        std::printf("note: left out %s\n", note.c_str());

    const BertInspection result = inspectBert(network, tokenizer, text, pair, maxLength);
    if (const std::string cut = truncationNotice(
            result.fullLength, std::int64_t(result.encoding.inputIds.size()), pair.has_value());
        !cut.empty())
        std::fprintf(stderr, "note: %s\n", cut.c_str());
    std::printf("tokens (%zu): %s\n", result.encoding.tokens.size(),
                joinTokens(result.encoding.tokens).c_str());
    if (result.predicted >= 0) {
        std::printf("prediction: %s (", c.id2label[std::size_t(result.predicted)].c_str());
        for (std::size_t i = 0; i < result.probabilities.size(); ++i)
            std::printf("%s%s %.4f", i ? ", " : "", c.id2label[i].c_str(), result.probabilities[i]);
        std::printf(")\n");
    } else if (network.head() == BertHead::MaskedLM && result.outputNotice.empty()) {
        const torch::Tensor logits = result.activations.at("logits")[0];
        for (std::size_t i = 0; i < result.encoding.inputIds.size(); ++i) {
            if (result.encoding.inputIds[i] != tokenizer.maskId()) continue;
            const auto top = torch::softmax(logits[std::int64_t(i)], -1).topk(5);
            std::printf("[MASK] at %zu:", i);
            for (int k = 0; k < 5; ++k)
                std::printf(" %s %.3f", tokenizer.idToToken(std::get<1>(top)[k].item<std::int64_t>()).c_str(),
                            std::get<0>(top)[k].item<double>());
            std::printf("\n");
        }
    }

    if (cmd.isSet("dump")) {
        const std::string dumpPath = cmd.value("dump");
        if (interruptFlag()) return interruptedExitCode();
        const std::string input = pair ? text + " ||| " + *pair : text;
        writeInspectionDump(dumpPath, result.activations, 0, std::int64_t(result.encoding.tokens.size()),
                            result.encoding.tokens, {modelDir, network.checkpointSha256(), input},
                            c.id2label);
        std::printf("dump: %s (%zu activations)\n", dumpPath.c_str(), result.activations.tensors().size());
    }
    return finish(modelDir, result.outputNotice);
}

/// --input-ids as a list of ids (analysis/decoder_inspection.h); a usage error names a bad entry.
std::vector<std::int64_t> inputIdsOption(const std::string& text)
{
    try {
        return parseTokenIds(text);
    } catch (const Error& e) {
        throw UsageException{std::string("--input-ids: ") + e.what()};
    }
}

int inspectDecoderModel(Command& cmd, const std::string& modelDir, Precision precision)
{
    if (cmd.isSet("pair")) throw UsageException{"--pair needs a BERT model; " + modelDir + " is a decoder"};
    const bool givenIds = cmd.isSet("input-ids");
    if (givenIds && cmd.isSet("text")) throw UsageException{"give --text or --input-ids, not both"};
    const std::string text = givenIds ? cmd.value("input-ids") : cmd.requiredText("text");
    const std::vector<std::int64_t> ids = givenIds ? inputIdsOption(text) : std::vector<std::int64_t>();
    const int maxLength = cmd.intValue("max-length", 0, 1, 1 << 20);
    DecoderNetwork network = DecoderNetwork::load(modelDir, cmd.variantOverride());
    if (precision == Precision::Bf16) network.setComputeDtype(torch::kBFloat16);
    // Token ids run without a tokenizer: one only labels them, when the folder has one this app reads.
    std::unique_ptr<DecoderTokenizer> tokenizer;
    if (!givenIds) {
        tokenizer = DecoderTokenizer::fromModelDir(modelDir);
    } else if (DecoderTokenizer::existsIn(modelDir)) {
        try {
            tokenizer = DecoderTokenizer::fromModelDir(modelDir);
        } catch (const Error& e) {
            std::fprintf(stderr, "note: tokens are shown as ids (%s)\n", e.what());
        }
    }
    const DecoderConfig& c = network.config();
    std::printf("model: %s (%s, %d layers, %d heads, hidden %d; %s)\n", modelDir.c_str(),
                c.architectures.empty() ? toString(c.arch).c_str() : c.architectures.front().c_str(),
                c.numLayers, c.numHeads, c.hiddenSize, c.variant.describe().c_str());
    for (const auto& note : network.loadReport().ignored)
        std::printf("note: left out %s\n", note.c_str());

    const DecoderInspection result =
        givenIds ? inspectDecoderIds(network, ids, tokenizer.get())
                 : inspectDecoder(network, *tokenizer, text, maxLength, !cmd.isSet("no-special-tokens"));
    if (const std::string cut =
            truncationNotice(result.fullLength, std::int64_t(result.encoding.inputIds.size()));
        !cut.empty())
        std::fprintf(stderr, "note: %s\n", cut.c_str());
    std::printf("tokens (%zu): %s\n", result.labels.size(), joinTokens(result.labels).c_str());
    if (!result.nextTokens.empty()) {
        std::printf("next token:");
        for (std::size_t i = 0; i < result.nextTokens.size(); ++i)
            std::printf("%s %s %.4f", i ? "," : "",
                        tokenizer ? decoderTokenLabel(*tokenizer, result.nextTokens[i].first).c_str()
                                  : ("#" + std::to_string(result.nextTokens[i].first)).c_str(),
                        result.nextTokens[i].second);
        std::printf("\n");
    }
    if (cmd.isSet("dump")) {
        const std::string dumpPath = cmd.value("dump");
        if (interruptFlag()) return interruptedExitCode();
        writeInspectionDump(dumpPath, result.activations, 0, std::int64_t(result.encoding.tokens.size()),
                            result.encoding.tokens, {modelDir, network.checkpointSha256(), text});
        std::printf("dump: %s (%zu activations)\n", dumpPath.c_str(), result.activations.tensors().size());
    }
    return finish(modelDir, result.outputNotice);
}

/// Class names for a ViT: its own id2label, else ImageNet's for 1000 classes, else "class N".
std::vector<std::string> vitClassNames(const VitConfig& c)
{
    if (!c.id2label.empty()) return c.id2label;
    if (c.numClasses == 1000)
        return ImageNetClasses::fromFiles(sampleDataFile("imagenet/imagenet_classes_ILSVRC2012.txt")).names();
    std::vector<std::string> names;
    for (int i = 0; i < c.numClasses; ++i)
        names.push_back("class " + std::to_string(i));
    return names;
}

/// An already preprocessed input from --pixels: float32 [C, h, w] or [1, C, h, w] (NumPy .npy).
torch::Tensor readPixels(const std::string& path, const VitConfig& c)
{
    torch::Tensor pixels = readNpyFloat32(path);
    if (pixels.dim() == 3) pixels = pixels.unsqueeze(0);
    if (pixels.dim() != 4 || pixels.size(0) != 1 || pixels.size(1) != c.numChannels)
        throw Error(path + ": expected preprocessed pixels of shape [" + std::to_string(c.numChannels) +
                    ", h, w] or [1, " + std::to_string(c.numChannels) + ", h, w], found " +
                    shapeString(pixels));
    return pixels;
}

int inspectVitModel(Command& cmd, const std::string& modelDir)
{
    const bool givenPixels = cmd.isSet("pixels");
    if (givenPixels && cmd.isSet("image")) throw UsageException{"give --image or --pixels, not both"};
    const std::string input = givenPixels ? cmd.required("pixels") : cmd.required("image");
    VitNetwork network = VitNetwork::load(modelDir, cmd.variantOverride());
    const VitConfig& c = network.config();
    // --pixels bypasses the image processor: the model sees exactly the file's numbers, at its size.
    const torch::Tensor pixels = givenPixels ? readPixels(input, c) : torch::Tensor();
    const int rows = givenPixels ? int(pixels.size(2) / c.patchSize) : c.gridSize();
    const int cols = givenPixels ? int(pixels.size(3) / c.patchSize) : c.gridSize();
    std::printf("model: %s (%s, %d layers, %d heads, hidden %d, %dx%d patches%s; %s)\n", modelDir.c_str(),
                c.architecture.c_str(), c.numLayers, c.numHeads, c.hiddenSize, rows, cols,
                c.numRegisters > 0 ? (", " + std::to_string(c.numRegisters) + " registers").c_str() : "",
                c.variant.describe().c_str());
    for (const auto& note : network.loadReport().ignored)
        std::printf("note: left out %s\n", note.c_str());
    VitInspection result;
    if (givenPixels) {
        std::printf("pixels: %s, [%lld, %lld, %lld] as given (no preprocessing)\n", input.c_str(),
                    static_cast<long long>(pixels.size(1)), static_cast<long long>(pixels.size(2)),
                    static_cast<long long>(pixels.size(3)));
        result = inspectVitPixels(network, pixels);
    } else {
        const ImagePreprocessing preprocessing = ImagePreprocessing::fromModelDir(modelDir);
        std::printf("preprocessing: %s\n", preprocessing.describe().c_str());
        result = inspectVit(network, preprocessing, input);
    }
    if (!result.top.empty()) {
        const std::vector<std::string> names = vitClassNames(c);
        std::printf("top-%zu:", result.top.size());
        for (std::size_t i = 0; i < result.top.size(); ++i) {
            const int k = result.top[i];
            std::printf("%s %s %.4f", i ? "," : "", names[std::size_t(k)].c_str(),
                        result.probabilities[std::size_t(k)]);
        }
        std::printf("\n");
    }
    if (cmd.isSet("dump")) {
        if (interruptFlag()) return interruptedExitCode();
        const std::string dumpPath = cmd.value("dump");
        const std::vector<std::string> labels = c.tokenLabels(rows, cols);
        writeInspectionDump(dumpPath, result.activations, 0, std::int64_t(labels.size()), labels,
                            {modelDir, network.checkpointSha256(), input},
                            c.numClasses > 0 ? vitClassNames(c) : std::vector<std::string>{}, {rows, cols});
        std::printf("dump: %s (%zu activations)\n", dumpPath.c_str(), result.activations.tensors().size());
    }
    return finish(modelDir, result.outputNotice);
}

} // namespace

int runInspect(const QStringList& args)
{
    Command cmd("inspect", "Run one input through a model, print its prediction and dump every capture point "
                           "(DESIGN.md) to an HDF5 file.");
    cmd.parser().addOptions({
        {"model", "Model folder (config.json, model.safetensors or pytorch_model.bin, vocab.txt).", "dir"},
        {"text", "Text (BERT: the premise of a pair; decoders: the text).", "text"},
        {"input-ids",
         "Decoders: run these token ids as they are, comma-separated (e.g. 1,5,9); no tokenizer needed, and "
         "none is applied (no BOS added).",
         "ids"},
        {"pair", "Second segment (BERT): the hypothesis.", "text"},
        {"image", "Image file (ViT).", "file"},
        {"pixels",
         "ViT: an already preprocessed input, a NumPy .npy of float32 [3, h, w] or [1, 3, h, w] "
         "(little-endian, C order), run as it is without the image processor; h and w are the model's "
         "size, or multiples of its patch size for models that interpolate positions (DINOv2, CLIP).",
         "X.npy"},
        {"max-length", "Truncate the token sequence to N tokens (default: the model's maximum).", "N"},
        {"no-special-tokens", "Decoders: do not add the tokenizer's BOS (OPT </s>, LLaMA <s>)."},
        {"dump", "Write every capture point to this HDF5 file.", "out.h5"},
        {"threads", "LibTorch threads (default: all cores).", "N"},
    });
    cmd.addVariantOptions();
    cmd.addPrecisionOption(
        "fp32 (default) or bf16, a fast mode: in BERT and ViT each linear layer multiplies "
        "bf16 operands into a float32 result (attention products, softmax and LayerNorm "
        "stay float32), decoders compute in bf16; values then differ from fp32 in about "
        "the third significant digit.");
    if (auto code = cmd.parse(args)) return *code;
    return cmd.guarded([&]() -> int {
        configureTorchThreads(cmd.intValue("threads", 0, 1, 1024));
        const std::string modelDir = cmd.required("model");
        const Precision precision = cmd.precision();
        const ModelFamily& family = modelFamilyOfDir(modelDir);
        if ((cmd.isSet("image") || cmd.isSet("pixels")) && !family.takesImages())
            throw UsageException{"--image/--pixels need a model that reads images; " + modelDir + " is a " +
                                 family.name + " model (use --text)"};
        if ((cmd.isSet("text") || cmd.isSet("pair")) && !family.takesText())
            throw UsageException{"--text/--pair need a model that reads text; " + modelDir + " is a " +
                                 family.name + " model (use --image)"};
        switch (family.engine) {
        case FamilyEngine::Decoder:
            return inspectDecoderModel(cmd, modelDir, precision);
        case FamilyEngine::Bert: {
            const AutocastScope autocast(precision);
            return inspectBertModel(cmd, modelDir);
        }
        case FamilyEngine::Vit:
            break;
        }
        const AutocastScope autocast(precision);
        return inspectVitModel(cmd, modelDir);
    });
}

} // namespace outlierlens::cli
