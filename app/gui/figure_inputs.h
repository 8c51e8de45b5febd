#pragma once
// The figure set's models and inputs (figure_set.cpp): forward passes through the app's own inspection
// worker, run on the calling thread. Not for the desktop app's GUI thread.

#include "inspection_snapshot.h"

#include "analysis/statistics_file.h"
#include "model/precision.h"

#include <QString>
#include <QStringList>
#include <QVector>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace outlierlens {

class InspectionWorker;

/// One input of a figure: a sentence pair, a text, an image file or a generated example.
struct FigureInput
{
    enum class Kind { Pair, Text, Image, Synthetic };
    Kind kind = Kind::Text;
    QString first;  ///< premise, text or image path
    QString second; ///< hypothesis
    quint64 seed = 0;
    QString label; ///< for captions: "MNLI-m pair #1", "sample_inputs.txt line 3", "image coffee_cup.png"
};

/// A model folder loaded once by an InspectionWorker; inspections are cached by input.
class FigureModel
{
public:
    /// Throws Error with the worker's message when the folder does not load. Bf16: the worker's fast mode.
    FigureModel(const QString& dir, const OutlierCriterion& rule, Precision precision = Precision::Fp32);
    ~FigureModel();
    FigureModel(const FigureModel&) = delete;
    FigureModel& operator=(const FigureModel&) = delete;

    const ModelInfo& info() const { return m_info; }
    /// Every activation of `input` (cached). Throws Error with the worker's message.
    SnapshotPtr inspect(const FigureInput& input) { return inspect(input, QString()); }
    /// The same with An et al.'s lifecycle tensors of `layers` (the snapshot's `lifecycle`; decoders).
    SnapshotPtr inspectLifecycle(const FigureInput& input, const QVector<int>& layers);

private:
    /// `variant` keys the cache beside the input (what else the worker was asked to keep).
    SnapshotPtr inspect(const FigureInput& input, const QString& variant);
    void check();
    std::unique_ptr<InspectionWorker> m_worker;
    ModelInfo m_info;
    SnapshotPtr m_last;
    QString m_error;
    quint64 m_generation = 0;
    std::map<QString, SnapshotPtr> m_cache;
};

/// The inputs the per-input figures use, in order (the paper's "data sequence #1" is the first):
/// MNLI pairs of `dataSpec`'s file (or the bundled MNLI-m file), the model's own sample inputs
/// (decoders with sample_inputs.txt, starting at showcase.json's), chunks of 48 words of a text
/// file, images of an image folder, or generated examples (synthetic-task models). At most `count`, and
/// at most the N of a spec's `:N`.
QVector<FigureInput> figureInputs(const ModelInfo& model, const QString& dataSpec, int count);

/// The data a Fashion-MNIST classifier (an image model whose ten class names are Fashion-MNIST's) is drawn
/// on when no --data is given and it ships no images of its own (sample_images/): "images:DIR" of the
/// first `count` images of the Fashion-MNIST test set (Debian's dataset-fashion-mnist, t10k files) written
/// as 0001-<class>.png ... into <outDir>/data/fashion-mnist-test (kept, so a second run reuses it and its
/// statistics), or of the bundled fmnist_*.png pictures when the package is missing. Empty for any other
/// model. Throws Error when the folder cannot be written.
QString fashionMnistData(const ModelInfo& model, const QString& outDir, int count = 1000);

/// The data set statistics (`stats`, with An et al.'s group) of `model` over `dataSpec` by `rule`,
/// computed with runStatistics() in `precision` into `dir`/<checkpoint hash>-<data, rule and precision
/// hash>.h5, or reused when an earlier run wrote that file (the data file's size and time are part of
/// the key). Throws Cancelled (no file left) or Error.
struct FigureStatistics
{
    QString path;
    bool reused = false;
};
FigureStatistics figureStatistics(const ModelInfo& model, const QString& dataSpec,
                                  const OutlierCriterion& rule, Precision precision, const QString& dir,
                                  const std::atomic<bool>& cancel,
                                  const std::function<void(qint64 done, qint64 total)>& progress);

/// A --compare model's statistics over the model's data (figureStatistics(), read back), or why there are
/// none.
struct ComparedStatistics
{
    std::optional<StatisticsFile> stats;
    QString path; ///< the file in the statistics folder
    QString note; ///< why there are none
};

/// The statistics of each of `models` over `dataSpec`, as figureStatistics() computes or reuses them; a
/// model whose statistics fail gets the error as its note. Throws Cancelled.
std::vector<ComparedStatistics>
comparedStatistics(const QVector<ModelInfo>& models, const QString& dataSpec, const OutlierCriterion& rule,
                   Precision precision, const QString& dir, const std::atomic<bool>& cancel,
                   const std::function<void(qint64 done, qint64 total)>& progress);

/// The run folder of `outlierlens train` that holds model folder `dir` (its final/ or a checkpoint: the
/// nearest folder up to two levels above with a metrics.jsonl), or empty.
QString runFolderOf(const QString& dir);

} // namespace outlierlens
