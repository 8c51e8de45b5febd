#pragma once
// GUI thread only.

#include "figure.h"
#include "view_data.h"

#include <QWidget>

#include <memory>

QT_BEGIN_NAMESPACE
class QChartView;
class QLabel;
QT_END_NAMESPACE

namespace outlierlens {

struct TrainingChartSet;

/// Live curves of one training run: loss per step with the evaluation metric on a second axis,
/// and max inf norm and kurtosis of every layer over the evaluation steps (one line per layer,
/// named "layer 1".."layer L"). Meant to be refreshed about once a second while a run goes on.
class TrainingCharts : public QWidget, public Figure
{
    Q_OBJECT
public:
    explicit TrainingCharts(QWidget* parent = nullptr);
    ~TrainingCharts() override;

    /// Shows `curves` in full. Cheap enough for ~1 Hz: each series is refilled with one replace(),
    /// per-layer series are only recreated when the number of layers changes, axes are rescaled.
    void setCurves(const TrainingCurveData& curves);
    const TrainingCurveData& curves() const { return m_curves; }

    QSize preferredFigureSize() const override;
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// One row per step seen in either the progress or the evaluation lines.
    QString figureCsv() const override;
    Provenance figureProvenance() const override;
    QString figureName() const override;

private:
    TrainingCurveData m_curves;
    std::unique_ptr<TrainingChartSet> m_charts;
    QLabel* m_title = nullptr;
    QChartView* m_lossView = nullptr;
    QChartView* m_infNormView = nullptr;
    QChartView* m_kurtosisView = nullptr;
    QChartView* m_firstTokenView = nullptr;
};

} // namespace outlierlens
