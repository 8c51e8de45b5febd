// `outlierlens create-model`: a randomly initialised BERT model folder of a named size. Setup uses
// it for the bundled placeholder model; people use it to try the tools without a download.

#include "cli/command_line.h"

#include "common/error.h"
#include "model/bert_network.h"

#include <QString>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace outlierlens::cli {

int runCreateModel(const QStringList& args)
{
    Command cmd("create-model",
                "Write a randomly initialised BERT model folder (config.json, model.safetensors, "
                "vocab.txt, README.md) of a preset size. Its weights are random: it is for trying "
                "the tools, not for drawing conclusions.");
    cmd.parser().addOptions({
        {"preset", "Model size: bert-base, bert-large, bert-6l, bert-small, bert-mini, bert-tiny.", "name"},
        {"head", "classifier (default), mlm or encoder.", "kind"},
        {"labels", "Comma-separated class names (default entailment,neutral,contradiction).", "list"},
        {"vocab", "vocab.txt to copy into the folder (its line count sets vocab_size).", "file"},
        {"seed", "Random seed (default 0).", "N"},
        {"fp16", "Store the weights as float16 (half the size)."},
        {"out", "Output folder (must not exist yet, or be empty).", "dir"},
    });
    cmd.addVariantOptions();
    if (auto code = cmd.parse(args)) return *code;
    try {
        namespace fs = std::filesystem;
        const std::string out = cmd.required("out");
        const std::string vocab = cmd.required("vocab");
        BertConfig config = BertConfig::preset(cmd.isSet("preset") ? cmd.value("preset") : "bert-mini");
        config.variant = cmd.variantOverride().applyTo(config.variant);

        std::int64_t lines = 0;
        {
            std::ifstream in(vocab);
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
        const fs::path finalDir(out);
        const fs::path tempDir = finalDir.string() + ".tmp";
        fs::remove_all(tempDir);
        network.save(tempDir.string(), cmd.isSet("fp16"));
        fs::copy_file(vocab, tempDir / "vocab.txt");
        {
            std::ofstream card(tempDir / "README.md");
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
        }
        if (fs::exists(finalDir)) fs::remove(finalDir);
        fs::rename(tempDir, finalDir);
        std::printf("wrote %s (%s, random weights)\n", out.c_str(), toString(head).c_str());
        return Ok;
    } catch (const UsageException& e) {
        return cmd.fail(e.message, UsageError);
    } catch (const std::exception& e) {
        return cmd.fail(e.what());
    }
}

} // namespace outlierlens::cli
