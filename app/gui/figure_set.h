#pragma once
// The paper's figure set for one model (`outlierlens figures`): which figures the model and inputs
// allow, with the layers, heads and inputs chosen from the data, each drawn by the app's own view
// widgets offscreen. Runs forward passes and statistics on the calling thread, which must be the
// thread of the QApplication (the widgets paint there): the command line's main thread, never the
// desktop app's GUI thread.

#include "figure_export.h"
#include "figure_inputs.h"
#include "inspection_snapshot.h"
#include "model/precision.h"

#include <QString>
#include <QStringList>
#include <QVector>

#include <atomic>
#include <functional>

namespace outlierlens {

struct FigureSetOptions
{
    QString modelDir;
    /// A data set as `stats` takes it (mnli:FILE[:N], images:DIR[:N], text:FILE[:N]); empty: the data
    /// the app's statistics job uses for the model's family (ModelCatalog::statisticsData).
    QString data;
    QStringList compare; ///< more model folders (clipped / gated variants) for Figures 5, 14 and 15
    QString sweep;       ///< a sweep folder (summary.json) for Figures 6 and 7 and Table 1
    /// Table 2's W8A8: quantize's --data for the models ("none": not computed); empty: from each model's
    /// run folder or demo family (paper_tables.h, quantDataFor).
    QString quantizeData;
    QStringList quantized; ///< `quantize --out` results (PREFIX.json) for Tables 1 and 2, not computed
    QString outDir;
    QStringList only; ///< figure numbers to draw ("1", "2", "an1"); empty: all
    QVector<ExportFormat> formats{ExportFormat::Png, ExportFormat::Pdf};
    int dpi = 150;
    OutlierCriterion rule;
    /// Forward passes and statistics in bf16 (the fast mode of `inspect` and `stats`); the caller has
    /// already fallen back to fp32 where the CPU has no bf16 instructions (effectivePrecision).
    Precision precision = Precision::Fp32;
};

/// One figure of the set: drawn (files) or not (reason).
struct FigureOutcome
{
    QString id;     ///< "1a", "2", "9b", "an1", "table" (file names: figure-<id>.<ext>)
    QString number; ///< what --only selects: "1", "2", "9", "an1", "table"
    QString title;
    QString caption;   ///< what is drawn, with the layers, heads and inputs chosen (1-based)
    QString reason;    ///< why it could not be drawn from these inputs; empty when drawn
    QStringList files; ///< file names in the output folder (figures, then the CSV)
    QSize size;        ///< pixels at 96 DPI
    /// The app's view that draws it at the same settings: its tab ("Head", "Layer", "Outliers", ...), the
    /// layer and head (0-based, -1: any), the input (index into FigureSetResult::inputs, -1: none) and
    /// whether it shows the statistics file rather than one input.
    QString page;
    int layer = -1, head = -1, input = -1;
    bool statistics = false;
    /// Every layer, head and input (index into FigureSetResult::inputs) the figure shows, 0-based, when
    /// it shows several (Figures 2, 10-13, 16, 17): index.json's "layers", "heads" and "inputs".
    QVector<int> layers, heads, inputs;
};

struct FigureSetResult
{
    QVector<FigureOutcome> figures; ///< in the paper's order, drawn or not
    QVector<FigureInput> inputs;    ///< the inputs the figures use, in order ("#1" first)
    QString statisticsFile;         ///< the statistics the figures used (in <out>/statistics/)
    bool statisticsReused = false;  ///< found from an earlier run (same checkpoint, data and rule)
    double seconds = 0;
};

/// Figure numbers --only accepts, in order.
QStringList figureNumbers();

/// Draws every figure the model and inputs allow into options.outDir: figure-<id>.<png|svg|pdf> and
/// figure-<id>.csv (provenance lines first), then index.pdf (every figure with its caption; figures that
/// could not be drawn are listed with the reason), index.json (the same for programs, with the view and
/// input of each) and, last, index.html: its presence says the set is complete (an earlier index is
/// removed first). Statistics over the data set
/// are computed once per (checkpoint hash, data, rule) and kept in <out>/statistics/. Every file is
/// written atomically; when `cancel` becomes true it throws Cancelled between figures (no index
/// is written, finished figures stay). `progress(stage, done, total)`: done of total steps of stage
/// "loading", "statistics" or "figures" (total 0: the stage has begun, its size is not known yet).
/// Throws Error for a model, data or folder that cannot be used.
FigureSetResult
renderFigureSet(const FigureSetOptions& options, const std::atomic<bool>& cancel,
                const std::function<void(const QString& stage, int done, int total)>& progress);

} // namespace outlierlens
