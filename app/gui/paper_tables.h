#pragma once
// Thread of the QApplication (the figure set's thread: the tables paint with fonts). Bondarenko et al.'s
// Tables 1 and 2 for `outlierlens figures` (docs/figures.md, "Tables"): Table 1 from a sweep folder of
// `outlierlens sweep`, Table 2 from the model and the --compare models side by side. Table 2 computes the
// other models' statistics and, where no `quantize` result is given, the W8A8 metric, on the calling
// thread.

#include "figure_inputs.h"
#include "figure_set.h"
#include "paper_table_figure.h"

#include <QString>
#include <QStringList>
#include <QVector>

#include <atomic>
#include <functional>
#include <optional>

namespace outlierlens {

class FigureIndexWriter;
struct StatisticsFile;

/// "vanilla", "clipped softmax", "gated attention", or the variant as ModelInfo describes it (the tables'
/// and An et al.'s variant figures' name of a model's attention).
QString attentionOf(const ModelInfo& m);

/// Where `quantize` finds a model's task data (its --data, --seq-length and --nli-train-pairs), and why.
struct QuantDataChoice
{
    QString spec;
    int seqLength = 128;
    qint64 nliTrainPairs = 8000;
    QString
        source; ///< "--quantize-data", "the run folder's run.json", "the demo family (docs/demo-models.md)"
};

/// The task data of `modelDir` for `quantize`: `option` (figures' --quantize-data) when given, else the
/// config of the `outlierlens train` run folder holding the model, else the bundled demo family's
/// (docs/demo-models.md). Empty with `why` otherwise.
std::optional<QuantDataChoice> quantDataFor(const QString& modelDir, const QString& option, QString* why);

/// The numbers of one `quantize` experiment that the tables show.
struct W8A8Result
{
    QString metricName; ///< "perplexity", "accuracy"
    double fp = 0, mean = 0, std = 0;
    int seeds = 0;
    QString data;   ///< quantize's --data
    QString source; ///< the result file, or "computed"
};

/// Seeds of a W8A8 experiment the figures compute (quantize's other defaults: 16 calibration batches of
/// 32, running min-max, per-tensor weights). One: a seed costs as much as the FP evaluation and more (a
/// demo model's experiment takes 25-90 s per seed on two busy cores, docs/figures.md); its value is the
/// first of `quantize`'s seeds.
constexpr int kPaperTableSeeds = 1;

/// Runs `quantize`'s experiment (runQuantExperiment, the paper's placement) at W8A8 with quantize's
/// defaults and kPaperTableSeeds seeds; `step(message)` after each stage (loading, FP, each seed).
/// Throws Error for bad input, Cancelled when `cancel` is set. (paper_table_quant.cpp: the one torch unit.)
W8A8Result computeW8A8(const QString& modelDir, const QuantDataChoice& data, const std::atomic<bool>& cancel,
                       const std::function<void(const QString&)>& step);

/// Stages of computeW8A8() that call `step` (for progress totals).
constexpr int kW8A8Steps = 2 + kPaperTableSeeds;

/// Reads a `quantize --out PREFIX` result (PREFIX.json). Throws Error naming the file.
W8A8Result readQuantizeResult(const QString& path, QString* modelDir);

/// The tables of one figure set: plans them (available or with a reason) and builds and draws each.
class PaperTables
{
public:
    /// `models`: the model, then the --compare models; `stats`: the model's statistics over `dataSpec`
    /// (null: `statsReason`); `compared`: the --compare models' over the same data, in order (kept by the
    /// caller; empty when not computed); `figureLayer`: the layer (0-based) the figures chose for the
    /// outliers.
    PaperTables(const FigureSetOptions& options, QVector<ModelInfo> models, const StatisticsFile* stats,
                QString statsReason, const std::vector<ComparedStatistics>& compared, QString dataSpec,
                int figureLayer);

    /// "table1" (the sweep) and "table2" (the variants): the outcome to plan, with its reason when it
    /// cannot be made.
    FigureOutcome sweepOutcome() const;
    FigureOutcome variantOutcome() const;
    static bool isPaperTable(const QString& id);

    /// Builds table `outcome.id` and draws it with `index` (figure-<id>.<format> and .csv, a PDF page, its
    /// numbers in index.json); sets the caption. Both tables may compute W8A8 first, reporting
    /// `progress("quantize", done, total)`. Throws Error, or Cancelled.
    void draw(FigureIndexWriter& index, FigureOutcome& outcome, const QVector<ExportFormat>& formats, int dpi,
              const std::atomic<bool>& cancel, const std::function<void(const QString&, int, int)>& progress);

    /// The tables as built (for the caller and tests of the numbers).
    PaperTableData sweepTable(const std::atomic<bool>& cancel,
                              const std::function<void(const QString&, int, int)>& progress) const;
    PaperTableData variantTable(const std::atomic<bool>& cancel,
                                const std::function<void(const QString&, int, int)>& progress) const;

private:
    const FigureSetOptions& o;
    QVector<ModelInfo> m_models;
    const StatisticsFile* m_stats;
    const std::vector<ComparedStatistics>& m_compared;
    QString m_statsReason, m_data;
    int m_layer;
};

} // namespace outlierlens
