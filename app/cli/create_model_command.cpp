// `outlierlens create-model`: a randomly initialised BERT model folder of a named size. Setup uses
// it for the bundled placeholder model; people use it to try the tools without a download.

#include "cli/command_line.h"

#include "common/atomic_file.h"
#include "common/atomic_folder.h"
#include "common/error.h"
#include "common/input_file.h"
#include "model/bert_network.h"
#include "model/decoder_network.h"
#include "text/decoder_tokenizer.h"

#include <QString>

#include <torch/types.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace outlierlens::cli {
namespace {

std::string joined(const std::vector<std::string>& names)
{
    std::string out;
    for (const auto& n : names)
        out += (out.empty() ? "" : ", ") + n;
    return out;
}

/// A random-weight decoder of a preset shape (benchmarks, trying the tools), written atomically.
int createDecoder(Command& cmd, const std::string& preset, const std::string& out)
{
    namespace fs = std::filesystem;
    DecoderConfig config = DecoderConfig::preset(preset);
    config.variant = cmd.variantOverride().applyTo(config.variant);
    const std::string dtypeName = cmd.isSet("dtype") ? cmd.value("dtype") : "fp32";
    const std::map<std::string, std::pair<torch::ScalarType, const char*>> dtypes = {
        {"fp32", {torch::kFloat, "float32"}},
        {"fp16", {torch::kHalf, "float16"}},
        {"bf16", {torch::kBFloat16, "bfloat16"}}};
    if (!dtypes.count(dtypeName)) throw UsageException{"--dtype must be fp32, fp16 or bf16"};
    config.torchDtype = dtypes.at(dtypeName).second;
    std::vector<fs::path> tokenizerFiles;
    if (cmd.isSet("tokenizer")) {
        const std::string dir = cmd.value("tokenizer");
        const std::unique_ptr<DecoderTokenizer> tokenizer = DecoderTokenizer::fromModelDir(dir);
        config.vocabSize = int(tokenizer->vocabSize());
        if (tokenizer->bosId() >= 0) config.bosTokenId = int(tokenizer->bosId());
        if (tokenizer->eosId() >= 0) config.eosTokenId = int(tokenizer->eosId());
        if (tokenizer->padId() >= 0) config.padTokenId = int(tokenizer->padId());
        for (const char* name : {"vocab.json", "merges.txt", "encoder.json", "vocab.bpe", "tokenizer.model",
                                 "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
            if (fs::exists(fs::path(dir) / name)) tokenizerFiles.push_back(fs::path(dir) / name);
    }
    if (fs::exists(out) && !(fs::is_directory(out) && fs::is_empty(out)))
        throw Error(out + ": already exists and is not an empty folder");
    const int seed = cmd.intValue("seed", 0, 0, 1 << 30);
    std::printf("creating %s (%d layers, hidden %d, vocabulary %d) ...\n", preset.c_str(), config.numLayers,
                config.hiddenSize, config.vocabSize);
    std::fflush(stdout);
    // One tensor at a time is drawn in float32 and written: a 7B preset in bf16 takes a few GB. Out of
    // memory (or address space) says so, with the folder and the shape, instead of "std::bad_alloc" or
    // LibTorch's allocator message.
    const auto outOfMemory = [&](const std::string& detail) {
        return Error(out + ": not enough memory to build " + preset + " (" +
                     std::to_string(config.numLayers) + " layers, hidden " +
                     std::to_string(config.hiddenSize) + ", FFN " + std::to_string(config.intermediateSize) +
                     ", vocabulary " + std::to_string(config.vocabSize) + ") as " + dtypeName + detail);
    };
    AtomicFolder folder(out); // removed again if anything below fails (a full disk)
    const fs::path tempDir(folder.path());
    try {
        DecoderNetwork::writeRandom(config, std::uint64_t(seed), tempDir.string(),
                                    dtypes.at(dtypeName).first);
    } catch (const std::bad_alloc&) {
        throw outOfMemory("");
    } catch (const c10::Error& e) {
        const std::string what = e.what_without_backtrace();
        if (what.find("allocate") == std::string::npos)
            throw; // ours: "cannot allocate", LibTorch's: "can't allocate"
        throw outOfMemory(": " + what.substr(0, what.find('\n')));
    }
    for (const fs::path& f : tokenizerFiles)
        copyFileContents(f.string(), (tempDir / f.filename()).string());
    {
        std::ostringstream card;
        card << "# Random-weight " << toString(config.arch) << " decoder (" << preset << ")\n\n"
             << "Written by `outlierlens create-model` with seed " << seed
             << ". Its weights are random (Hugging Face initialisation);\nit has never been trained: "
                "its predictions and attention patterns mean nothing. It exists\nfor benchmarks and to "
                "try the tools.\n\n"
             << "- layers " << config.numLayers << ", hidden " << config.hiddenSize << ", heads "
             << config.numHeads << ", vocabulary " << config.vocabSize << ", weights " << dtypeName
             << "\n- attention: " << config.variant.describe() << "\n"
             << (tokenizerFiles.empty() ? "- no tokenizer files: give token ids (bench) or copy them in\n"
                                        : "");
        writeTextFileAtomically((tempDir / "README.md").string(), card.str());
    }
    folder.commit();
    std::printf("wrote %s (%s, %s, random weights)\n", out.c_str(), preset.c_str(), dtypeName.c_str());
    return Ok;
}

} // namespace

int runCreateModel(const QStringList& args)
{
    Command cmd("create-model",
                "Write a randomly initialised BERT or decoder (GPT-2, OPT, LLaMA) model folder (config.json, "
                "model.safetensors, tokenizer files, README.md) of a preset size. Its weights are random: it "
                "is for benchmarks and trying the tools, not for drawing conclusions.");
    cmd.parser().addOptions({
        {"preset",
         "Model size: bert-base, bert-large, bert-6l, bert-small, bert-mini, bert-tiny; decoders: gpt2-tiny, "
         "opt-tiny, llama-tiny, gpt2, opt-125m, opt-350m, tinyllama-1.1b, llama-7b, llama3-8b, qwen2.5-7b, "
         "mistral-7b.",
         "name"},
        {"head", "classifier (default), mlm or encoder.", "kind"},
        {"labels", "Comma-separated class names (default entailment,neutral,contradiction).", "list"},
        {"vocab", "BERT: vocab.txt to copy into the folder (its line count sets vocab_size).", "file"},
        {"seed", "Random seed (default 0).", "N"},
        {"fp16", "Store the weights as float16 (half the size)."},
        {"out", "Output folder (must not exist yet, or be empty).", "dir"},
    });
    cmd.parser().addOptions({
        {"dtype", "Decoders: storage type of the weights, fp32 (default), fp16 or bf16.", "type"},
        {"tokenizer",
         "Decoders: a folder whose tokenizer files (vocab.json + merges.txt, tokenizer.model, "
         "tokenizer_config.json, ...) are copied into the model; sets vocab_size.",
         "dir"},
    });
    cmd.addVariantOptions();
    if (auto code = cmd.parse(args)) return *code;
    return cmd.guarded([&]() -> int {
        namespace fs = std::filesystem;
        const std::string out = cmd.required("out");
        const std::string presetName = cmd.isSet("preset") ? cmd.value("preset") : "bert-mini";
        const std::vector<std::string> decoderPresets = DecoderConfig::presetNames();
        if (std::find(decoderPresets.begin(), decoderPresets.end(), presetName) != decoderPresets.end())
            return createDecoder(cmd, presetName, out);
        if (cmd.isSet("dtype") || cmd.isSet("tokenizer"))
            throw UsageException{"--dtype and --tokenizer are for decoder presets (" +
                                 joined(decoderPresets) + ")"};
        const std::string vocab = cmd.required("vocab");
        BertConfig config = BertConfig::preset(presetName);
        config.variant = cmd.variantOverride().applyTo(config.variant);

        std::int64_t lines = 0;
        {
            std::ifstream in = openInputFile(vocab);
            if (!in) throw Error(vocab + ": cannot open vocabulary");
            std::string line;
            while (std::getline(in, line))
                ++lines;
        }
        if (lines < 104)
            throw Error(vocab + ": " + std::to_string(lines) + " lines is too few for a BERT vocabulary");
        config.vocabSize = int(lines);

        const std::string headName = cmd.isSet("head") ? cmd.value("head") : "classifier";
        BertHead head;
        if (headName == "classifier")
            head = BertHead::SequenceClassification;
        else if (headName == "mlm")
            head = BertHead::MaskedLM;
        else if (headName == "encoder")
            head = BertHead::Encoder;
        else
            throw UsageException{"--head must be classifier, mlm or encoder"};
        if (head == BertHead::SequenceClassification) {
            const QString labels = cmd.isSet("labels") ? cmd.parser().value("labels")
                                                       : QStringLiteral("entailment,neutral,contradiction");
            for (const QString& l : labels.split(QLatin1Char(','), Qt::SkipEmptyParts))
                config.id2label.push_back(l.trimmed().toStdString());
        }
        if (fs::exists(out) && !(fs::is_directory(out) && fs::is_empty(out)))
            throw Error(out + ": already exists and is not an empty folder");

        const int seed = cmd.intValue("seed", 0, 0, 1 << 30);
        const BertNetwork network = BertNetwork::create(config, head, std::uint64_t(seed));
        // Write into a sibling temp folder and rename, so a failure leaves no half-made model.
        AtomicFolder folder(out);
        const fs::path tempDir(folder.path());
        network.save(tempDir.string(), cmd.isSet("fp16"));
        copyFileContents(vocab, (tempDir / "vocab.txt").string());
        {
            std::ostringstream card;
            card << "# Random-weight BERT (" << (cmd.isSet("preset") ? cmd.value("preset") : "bert-mini")
                 << ")\n\n"
                 << "This model was written by `outlierlens create-model` with seed " << seed
                 << ". Its weights are random\n(Hugging Face initialisation: normal(0, 0.02)); it has never "
                    "been trained. "
                    "Its predictions\nand attention patterns mean nothing: it exists so the tools have a "
                    "model to open.\n\n"
                 << "- head: " << toString(head) << "\n- layers " << config.numLayers << ", hidden "
                 << config.hiddenSize << ", heads " << config.numHeads << ", vocabulary " << config.vocabSize
                 << "\n- attention: " << config.variant.describe() << "\n";
            writeTextFileAtomically((tempDir / "README.md").string(), card.str());
        }
        folder.commit();
        std::printf("wrote %s (%s, random weights)\n", out.c_str(), toString(head).c_str());
        return Ok;
    });
}

} // namespace outlierlens::cli
