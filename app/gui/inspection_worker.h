#pragma once
// An InspectionWorker lives in its own QThread (InspectionController moves it there); its slots run
// there and never on the GUI thread. Every request carries a generation id that comes back with
// the result, so the controller can drop results of superseded requests. No exception leaves a
// slot: errors become failed(generation, message).

#include "inspection_snapshot.h"
#include "model/precision.h"
#include "quant/intervention_spec.h"
#include "quant/model_transform.h"

#include <QObject>
#include <QString>
#include <QStringList>
#include <QVector>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>

namespace outlierlens {

class ActivationSink;
struct StatisticsFile;
using StatisticsPtr = std::shared_ptr<const StatisticsFile>;

class InspectionWorker : public QObject
{
    Q_OBJECT
public:
    InspectionWorker();
    ~InspectionWorker() override;

    /// Set from the GUI thread to stop a running batch prediction between batches.
    std::atomic<bool>& cancelFlag() { return m_cancel; }
    /// Set from the GUI thread: the running prediction's next batch starts at this row (the first row
    /// the table shows) unless it is done already; -1 = no wish.
    std::atomic<int>& priorityRow() { return m_priorityRow; }

public Q_SLOTS:
    void loadModel(quint64 generation, const QString& dir);
    void inspectText(quint64 generation, const QString& text, const QString& pair);
    void inspectImage(quint64 generation, const QString& path, const QString& credit);
    /// A generated example of the synthetic task the model was trained on (seeded).
    void inspectSyntheticExample(quint64 generation, quint64 seed);
    /// Predicted class of every pair, in batches, reported with predictionsReady and progress (pairs
    /// done, total) as they finish. One batch at a time, from priorityRow() when set, else onwards
    /// from the last batch (wrapping): after each batch the rest is posted to this thread's queue
    /// again, so inspections asked for meanwhile run first instead of waiting for thousands of pairs.
    /// requestFinished() comes after the last batch (or the cancel).
    void predictPairs(quint64 generation, const QStringList& premises, const QStringList& hypotheses,
                      int next = 0);
    void loadStatistics(quint64 generation, const QString& path);
    /// Fast mode: later inspections compute in bf16 (BERT and ViT under bf16 autocast, decoders in
    /// bf16) where the CPU has bf16 instructions, else in float32 with a notice in the snapshot.
    void setFastMode(bool on);
    /// The rule later inspections count outliers by (and An et al.'s heavy-token tau).
    void setOutlierRule(const outlierlens::OutlierCriterion& rule);
    /// Later inspections run a copy of the model with `transform` applied (the same function; the
    /// activations a quantizer of the transformed model sees). SmoothQuant's scales come from the input
    /// inspected; a rotation alone is applied once per model. An inspection of a model the transform does
    /// not apply to fails with the refusal.
    void setTransform(const outlierlens::ModelTransform& transform);
    /// Later inspections apply `intervention` (none: nullopt) to the model's activations (a mean needs its
    /// means given: Intervention::means). An inspection fails when the model never reaches its site (a
    /// gate intervention on a model without gates).
    void setIntervention(const std::optional<outlierlens::Intervention>& intervention);
    /// Later decoder inspections also keep An et al.'s lifecycle tensors of these layers (0-based; the
    /// snapshot's `lifecycle`, in this order); empty: none (the default: they cost memory).
    void setLifecycleLayers(const QVector<int>& layers);

Q_SIGNALS:
    void modelLoaded(quint64 generation, const outlierlens::ModelInfo& info);
    void inspected(quint64 generation, const outlierlens::SnapshotPtr& snapshot);
    void predictionsReady(quint64 generation, int firstRow, const QVector<int>& labels);
    void statisticsLoaded(quint64 generation, const outlierlens::StatisticsPtr& statistics,
                          const QString& path);
    void progress(quint64 generation, qint64 done, qint64 total);
    void failed(quint64 generation, const QString& message);
    /// Emitted last by every request, whether it succeeded, failed or was cancelled.
    void requestFinished(quint64 generation);

private:
    struct Model;
    void ensureThreads();
    void inspectDecoderText(quint64 generation, const QString& text); // inside inspectText's guard
    /// The precision the next forward pass runs in; the fallback notice goes to `snapshot`.
    Precision forwardPrecision(InspectionSnapshot& snapshot) const;
    /// Decoder inputs are cut to this many tokens in the app (the command line takes the model's maximum).
    static constexpr int kMaxDecoderTokens = 2048;
    /// The model that inspections run: m_model itself, or m_view with m_transform applied (rebuilt when
    /// the transform changes, and for each input when SmoothQuant's scales come from it); `calibrate` runs
    /// the current input through a model with the sink it is given.
    /// Reads a model folder (the network, its tokenizer or preprocessing, what the app shows of it).
    static std::unique_ptr<Model> loadFolder(const QString& dir);
    Model& viewModel(const std::function<void(Model&, ActivationSink&)>& calibrate);
    std::unique_ptr<Model> m_model;
    std::unique_ptr<Model> m_view;
    ModelTransform m_transform, m_viewTransform;
    std::optional<Intervention> m_intervention;
    QVector<int> m_lifecycleLayers;
    std::atomic<bool> m_cancel{false};
    std::atomic<int> m_priorityRow{-1};
    quint64 m_predictionGeneration = 0; ///< the prediction m_predicted belongs to
    QVector<bool> m_predicted;          ///< rows of that prediction done
    int m_predictedCount = 0;
    bool m_threadsConfigured = false;
    bool m_fastMode = false;
    OutlierCriterion m_outlierRule;
};

} // namespace outlierlens
