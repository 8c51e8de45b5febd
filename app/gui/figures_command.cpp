// `outlierlens figures`: every figure of the papers that a model and its inputs allow, from one command.

#include "figures_command.h"

#include "figure_set.h"

#include "cli/command_line.h"
#include "cli/progress_printer.h"
#include "model/runtime.h"

#include <QDir>
#include <QFileInfo>

#include <cstdio>
#include <map>

namespace outlierlens::cli {

int runFigures(const QStringList& args)
{
    Command cmd(
        "figures",
        "Draw every figure of Bondarenko et al. 2023 (and An et al. 2025's Figures 1 and 3-11, 10 and 11 "
        "with --compare variants) that the model and inputs allow, each with a CSV of its numbers and "
        "provenance, plus "
        "index.html and index.pdf with every figure and its caption; figures the inputs cannot support "
        "are listed with the reason. Layers, heads and inputs: the paper's on a model of its size, "
        "else where the outliers are largest (the same statistics as `stats`, computed once per "
        "checkpoint, data and rule and kept in OUT/statistics/). Ctrl-C leaves no half-written file.");
    cmd.parser().addOptions({
        {"model", "Model folder.", "dir"},
        {"data",
         "Data set for the statistics and the inputs: mnli:FILE[:N], images:DIR[:N] or text:FILE[:N] "
         "(default: "
         "what the app's statistics job uses for the model's family).",
         "spec"},
        {"compare", "Clipped-softmax or gated models of the same shape, comma-separated (Figures 5, 14, 15).",
         "dir,dir"},
        {"sweep", "A folder written by `outlierlens sweep` (Figures 6 and 7, Table 1).", "dir"},
        {"quantize-data",
         "Table 2's W8A8: the task data of `quantize --data` for the model and --compare models, or none "
         "(default: from each model's training run folder, or the bundled demo family's).",
         "spec"},
        {"quantized",
         "Results of `outlierlens quantize --out PREFIX` (PREFIX.json), comma-separated, used by Tables 1 "
         "and 2 instead of computing W8A8.",
         "file,file"},
        {"out", "Output folder (created).", "dir"},
        {"only", "Figures to draw, comma-separated, of: " + figureNumbers().join(QLatin1Char(',')) + ".",
         "list"},
        {"format", "Comma-separated formats of png, svg, pdf (default png,pdf).", "list", "png,pdf"},
        {"dpi", "PNG resolution (default 150).", "N", "150"},
        {"threads", "Intra-op threads (default: the number of cores).", "N"},
        {"json-progress",
         "Progress as JSON lines on stdout (for the app's job list) instead of a bar on stderr."},
    });
    cmd.addOutlierRuleOptions(
        "Outlier rule of every figure, table, CSV and the statistics behind them: sigma (|x - mean| > k std, "
        "the default) or tau (|x| > tau mean|x|, An et al.'s paper rule); index.json and every caption name "
        "it.");
    cmd.addPrecisionOption(
        "fp32 (default) or bf16, a fast mode for the statistics and the forward passes: encoders' linear "
        "layers with bf16 operands and float32 results (attention products, softmax and LayerNorm in "
        "float32), decoders in bf16. Values "
        "then differ from fp32 in about the third significant digit and a value within that of the "
        "outlier threshold may change sides (docs/performance.md); every CSV and the index say which "
        "was used. Statistics are kept apart per precision.");
    if (auto code = cmd.parse(args)) return *code;
    return cmd.guarded([&]() -> int {
        configureTorchThreads(cmd.intValue("threads", 0, 1, 1024));
        FigureSetOptions o;
        o.modelDir = QString::fromStdString(cmd.required("model"));
        o.outDir = QString::fromStdString(cmd.required("out"));
        o.data = QString::fromStdString(cmd.value("data"));
        o.sweep = QString::fromStdString(cmd.value("sweep"));
        o.quantizeData = QString::fromStdString(cmd.value("quantize-data"));
        for (const QString& f : cmd.parser().value("quantized").split(QLatin1Char(','), Qt::SkipEmptyParts))
            o.quantized << f.trimmed();
        for (const QString& dir : cmd.parser().value("compare").split(QLatin1Char(','), Qt::SkipEmptyParts))
            o.compare << dir.trimmed();
        for (const QString& n : cmd.parser().value("only").split(QLatin1Char(','), Qt::SkipEmptyParts)) {
            if (!figureNumbers().contains(n.trimmed()))
                throw UsageException{"--only: no figure '" + n.trimmed().toStdString() + "' (figures: " +
                                     figureNumbers().join(QLatin1Char(',')).toStdString() + ")"};
            o.only << n.trimmed();
        }
        static const std::map<QString, ExportFormat> kFormats{{QStringLiteral("png"), ExportFormat::Png},
                                                              {QStringLiteral("svg"), ExportFormat::Svg},
                                                              {QStringLiteral("pdf"), ExportFormat::Pdf}};
        o.formats.clear();
        for (const QString& f : cmd.parser().value("format").split(QLatin1Char(','), Qt::SkipEmptyParts)) {
            const auto it = kFormats.find(f.trimmed().toLower());
            if (it == kFormats.end())
                throw UsageException{"--format: expected png, svg or pdf, found '" + f.toStdString() + "'"};
            if (!o.formats.contains(it->second)) o.formats << it->second;
        }
        if (o.formats.isEmpty()) throw UsageException{"--format: give at least one of png, svg, pdf"};
        o.dpi = cmd.intValue("dpi", 150, 10, 2400);
        o.rule = cmd.outlierRule();
        o.precision = cmd.precision(); // says once on stderr when bf16 falls back to fp32

        std::unique_ptr<ProgressPrinter> printer;
        QString stage;
        // An --out this command creates is removed again if it fails before anything is in it (a full disk).
        const bool outExisted = QFileInfo::exists(o.outDir);
        FigureSetResult r;
        try {
            r = renderFigureSet(o, interruptFlag(), [&](const QString& name, int done, int total) {
                if (name == QLatin1String("loading")) return;
                if (name != stage) {
                    stage = name;
                    printer = std::make_unique<ProgressPrinter>(
                        "figures",
                        name == QLatin1String("statistics") ? "inputs (statistics)"
                        : name == QLatin1String("quantize") ? "W8A8 steps (quantize)"
                                                            : "figures",
                        cmd.isSet("json-progress"));
                }
                if (total > 0) printer->update(done, total);
            });
        } catch (...) {
            if (!outExisted) QDir().rmdir(o.outDir); // only if empty
            throw;
        }
        int drawn = 0;
        for (const FigureOutcome& f : r.figures) {
            if (f.reason.isEmpty()) {
                ++drawn;
                std::printf("%-6s %s\n", qPrintable(f.id), qPrintable(f.title));
            } else {
                std::printf("%-6s not drawn: %s (%s)\n", qPrintable(f.id), qPrintable(f.title),
                            qPrintable(f.reason));
            }
        }
        std::printf("wrote %d figures, index.html and index.pdf to %s in %.1f s; %s%s\n", drawn,
                    qPrintable(QDir::toNativeSeparators(o.outDir)), r.seconds,
                    r.statisticsFile.isEmpty() ? "no statistics needed"
                    : r.statisticsReused       ? "statistics reused from "
                                               : "statistics in ",
                    qPrintable(r.statisticsFile));
        return Ok;
    });
}

} // namespace outlierlens::cli
