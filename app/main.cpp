// The outlierlens executable: the desktop app without arguments, a command-line tool with a
// subcommand (DESIGN.md, "Command line").

#include "build_info.h"
#include "cli/command_line.h"
#include "gui/figures_command.h"
#include "gui/gui_benchmark.h"
#include "gui/inspection_controller.h"
#include "gui/job_manager.h"
#include "gui/main_window.h"
#include "gui/screenshot_tour.h"
#include "gui/transform_box.h"
#include "model/runtime.h"
#include "paths.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QCoreApplication>
#include <QDir>
#include <QIcon>
#include <QSettings>
#include <QStandardPaths>
#include <QStringList>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

namespace {

struct Subcommand
{
    const char* name;
    const char* summary;
    int (*run)(const QStringList& args);
    bool paints = false; ///< draws figures: needs a QApplication (offscreen: no window is shown)
    bool light = false;  ///< runs no model: not worth restarting for faster BLAS kernels (selectBlasKernels)
};

const Subcommand kSubcommands[] = {
    {"inspect", "run one input through a model, print the prediction, dump every activation",
     outlierlens::cli::runInspect},
    {"tokenize", "show how the model's tokenizer splits a text (one JSON line)",
     outlierlens::cli::runTokenize, false, true},
    {"stats", "outlier statistics over a whole data set (MNLI pairs, text or images) to HDF5",
     outlierlens::cli::runStats},
    {"train", "train a BERT, ViT or decoder (vanilla, clipped softmax, gated attention); JSON progress",
     outlierlens::cli::runTrain},
    {"sweep", "a grid of training runs and a summary table (the paper's Figures 6 and 7)",
     outlierlens::cli::runSweep},
    {"bench", "time forward passes with and without activation capture", outlierlens::cli::runBench},
    {"quantize", "simulate W8A8 quantization: FP vs quantized metric, max inf norm, kurtosis",
     outlierlens::cli::runQuantize},
    {"intervene", "set chosen activations to 0, their mean or a value and measure what the model loses",
     outlierlens::cli::runIntervene},
    {"weights", "weight outliers (An et al. 2025) from the checkpoint alone, no forward pass",
     outlierlens::cli::runWeights, false, true},
    {"convert", "rewrite a model's weights as (float16) safetensors", outlierlens::cli::runConvert, false,
     true},
    {"create-model", "write a randomly initialised BERT or decoder model folder",
     outlierlens::cli::runCreateModel, false, true},
    {"showcase", "where a decoder demo model shows its sink best (the app opens there)",
     outlierlens::cli::runShowcase},
    {"figures", "every figure of the papers the model and inputs allow, with CSVs and an index",
     outlierlens::cli::runFigures, true},
};

void printUsage(std::FILE* out)
{
    std::fprintf(out, "OutlierLens %s: see why transformers grow activation outliers.\n\n",
                 OUTLIERLENS_VERSION);
    std::fprintf(out,
                 "Usage: outlierlens [--model DIR]    open the desktop app (default: the bundled model)\n");
    std::fprintf(out, "       outlierlens <command> [options]\n\nCommands:\n");
    for (const auto& c : kSubcommands)
        std::fprintf(out, "  %-14s %s\n", c.name, c.summary);
    std::fprintf(out, "\n'outlierlens <command> --help' describes a command's options.\n");
}

int runGui(int argc, char* argv[])
{
    QApplication app(argc, argv);
    QCoreApplication::setOrganizationName(QStringLiteral("OutlierLens"));
    QCoreApplication::setApplicationName(QStringLiteral("OutlierLens"));
    QCoreApplication::setApplicationVersion(QStringLiteral(OUTLIERLENS_VERSION));
    QApplication::setWindowIcon(QIcon(QStringLiteral(":/outlierlens/outlierlens.svg")));
    QApplication::setDesktopFileName(QStringLiteral("outlierlens"));
    QCommandLineParser parser;
    parser.addOptions({
        {QStringLiteral("model"), QStringLiteral("Model folder to open."), QStringLiteral("dir")},
        {QStringLiteral("screenshots"), QStringLiteral("Save a screenshot of each page into DIR, then quit."),
         QStringLiteral("dir")},
        {QStringLiteral("pages"), QStringLiteral("Pages for --screenshots (comma-separated tab names)."),
         QStringLiteral("list")},
        {QStringLiteral("prefix"), QStringLiteral("File name prefix for --screenshots."),
         QStringLiteral("text")},
        {QStringLiteral("window-size"),
         QStringLiteral("Window size for --screenshots, WIDTHxHEIGHT (default 1500x920; the input dock keeps "
                        "about a third)."),
         QStringLiteral("WxH"), QStringLiteral("1500x920")},
        {QStringLiteral("seen-through"),
         QStringLiteral("Show the model seen through a transform that keeps its function (the Outliers and "
                        "Systematic pages' choice): none, smoothquant, rotation or smoothquant+rotation."),
         QStringLiteral("name"), QStringLiteral("none")},
        {QStringLiteral("bench-gui"),
         QStringLiteral("Measure GUI stalls and head redraw times (one JSON line), then quit.")},
        {QStringLiteral("bench-image"), QStringLiteral("--bench-gui: run this image (ViT) instead of text."),
         QStringLiteral("file")},
        {QStringLiteral("bench-stats"),
         QStringLiteral("--bench-gui: data of the statistics job (e.g. mnli:FILE:200)."),
         QStringLiteral("spec")},
        {QStringLiteral("bench-tokens"),
         QStringLiteral("--bench-gui: tokens of the text input (BERT: wordpieces, at most its positions; "
                        "decoders: words, cut to the app's limit). Default 128."),
         QStringLiteral("N"), QStringLiteral("128")},
    });
    if (!parser.parse(QCoreApplication::arguments()) || !parser.positionalArguments().isEmpty()) {
        std::fprintf(stderr, "outlierlens: %s\n\n",
                     qPrintable(parser.errorText().isEmpty() ? QStringLiteral("unexpected argument")
                                                             : parser.errorText()));
        printUsage(stderr);
        return outlierlens::cli::UsageError;
    }
    const std::optional<outlierlens::ModelTransform> seenThrough =
        outlierlens::parseSeenThrough(parser.value(QStringLiteral("seen-through")));
    if (!seenThrough) {
        std::fprintf(stderr, "outlierlens: --seen-through: expected one of %s, found '%s'\n",
                     qPrintable(outlierlens::seenThroughNames().join(QStringLiteral(", "))),
                     qPrintable(parser.value(QStringLiteral("seen-through"))));
        return outlierlens::cli::UsageError;
    }
    outlierlens::configureTorchThreads();
    if (parser.isSet(QStringLiteral("bench-gui")) || parser.isSet(QStringLiteral("screenshots"))) {
        // Automated runs keep out of the user's settings and job list, and start from defaults.
        QCoreApplication::setApplicationName(QStringLiteral("OutlierLens-automation"));
        QSettings().clear();
    }
    const QString data = QString::fromStdString(outlierlens::sampleDataDir());
    outlierlens::JobManager jobs(QCoreApplication::applicationFilePath(),
                                 QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) +
                                     QStringLiteral("/jobs"));
    outlierlens::MainWindow window(parser.value(QStringLiteral("model")),
                                   data + QStringLiteral("/mnli/mnli_dev_matched.jsonl"),
                                   data + QStringLiteral("/images"), &jobs);
    window.controller()->setTransform(*seenThrough); // before the first input runs
    window.show();
    if (parser.isSet(QStringLiteral("bench-gui")))
        (new outlierlens::GuiBenchmark(&window, &jobs, parser.value(QStringLiteral("bench-image")),
                                       parser.value(QStringLiteral("bench-stats")),
                                       parser.value(QStringLiteral("bench-tokens")).toInt()))
            ->start();
    if (parser.isSet(QStringLiteral("screenshots"))) {
        const QString pages =
            parser.isSet(QStringLiteral("pages"))
                ? parser.value(QStringLiteral("pages"))
                : QStringLiteral("Head,Overview,Outliers,Image,Compare,Teaching,Sweeps,Jobs");
        const QStringList wh = parser.value(QStringLiteral("window-size")).split(QLatin1Char('x'));
        const QSize size(wh.value(0).toInt(), wh.value(1).toInt());
        if (wh.size() != 2 || size.width() < 400 || size.height() < 300) {
            std::fprintf(
                stderr, "outlierlens: --window-size: expected WIDTHxHEIGHT of at least 400x300, found '%s'\n",
                qPrintable(parser.value(QStringLiteral("window-size"))));
            return outlierlens::cli::UsageError;
        }
        auto* tour = new outlierlens::ScreenshotTour(&window, parser.value(QStringLiteral("screenshots")),
                                                     pages.split(QLatin1Char(',')),
                                                     parser.value(QStringLiteral("prefix")), size);
        tour->start();
    }
    return app.exec();
}

const Subcommand* findSubcommand(const char* name)
{
    for (const auto& c : kSubcommands)
        if (std::strcmp(name, c.name) == 0) return &c;
    return nullptr;
}

/// Whether this invocation runs models (the app, or a command that does): only then is it worth
/// re-executing for better BLAS kernels (about 0.4 s of start-up here).
bool runsModels(int argc, char* argv[])
{
    if (argc < 2) return true;
    if (argv[1][0] != '-') {
        const Subcommand* c = findSubcommand(argv[1]);
        return c && !c->light;
    }
    return std::strcmp(argv[1], "--help") != 0 && std::strcmp(argv[1], "-h") != 0 &&
           std::strcmp(argv[1], "--version") != 0;
}

} // namespace

int main(int argc, char* argv[])
{
    // A write past a file-size limit (ulimit -f, a quota set that way) fails with EFBIG and is reported
    // like a full disk, naming the file, instead of the signal killing the process mid-write.
    std::signal(SIGXFSZ, SIG_IGN);
    if (runsModels(argc, argv)) outlierlens::selectBlasKernels(argv);
    outlierlens::configureAllocator();
    if (argc >= 2 && argv[1][0] != '-') {
        if (const Subcommand* found = findSubcommand(argv[1])) {
            const Subcommand& c = *found;
            outlierlens::cli::installInterruptHandlers(); // before any thread (Qt's, OpenMP's) starts
            if (c.paints) {
                qputenv("QT_QPA_PLATFORM", "offscreen"); // never a window, with or without a display
                if (qEnvironmentVariableIsEmpty("XDG_RUNTIME_DIR")) {
                    // The folder Qt falls back to, without its warning: the command needs no session.
                    const QByteArray dir =
                        QDir::tempPath().toLocal8Bit() + "/runtime-" + QByteArray::number(getuid());
                    ::mkdir(dir.constData(), 0700);
                    qputenv("XDG_RUNTIME_DIR", dir);
                }
            }
            std::unique_ptr<QCoreApplication> app = c.paints ? std::make_unique<QApplication>(argc, argv)
                                                             : std::make_unique<QCoreApplication>(argc, argv);
            QCoreApplication::setApplicationName(QStringLiteral("outlierlens"));
            QCoreApplication::setApplicationVersion(QStringLiteral(OUTLIERLENS_VERSION));
            QStringList args = QCoreApplication::arguments();
            args.erase(args.begin(), args.begin() + 2);
            return c.run(args);
        }
        std::fprintf(stderr, "outlierlens: unknown command '%s'\n\n", argv[1]);
        printUsage(stderr);
        return outlierlens::cli::UsageError;
    }
    if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
        printUsage(stdout);
        return 0;
    }
    if (argc >= 2 && std::strcmp(argv[1], "--version") == 0) {
        QCoreApplication app(argc, argv); // the executable's path locates the sample data
        std::fputs(qPrintable(outlierlens::versionText()), stdout);
        return 0;
    }
    return runGui(argc, argv);
}
