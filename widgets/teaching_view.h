#pragma once
// GUI thread only.

#include "figure.h"
#include "view_data.h"

#include <QStringList>
#include <QWidget>

namespace outlierlens {

/// The teaching diagram (the paper's Figures 4 and 5): the attention block as boxes and arrows,
/// previous FFN -> residual add -> LayerNorm -> Q, K, V -> (clipped) softmax -> P.V -> gate pi
/// (gated models only) -> output projection, each box with the live number for the chosen token,
/// layer and head, and a two-line plain-language caption that depends on the model kind.
/// Drawn large enough to be projected; the widget shows exactly the figure.
class TeachingView : public QWidget, public Figure
{
    Q_OBJECT

public:
    enum class Kind { Vanilla, Clipped, Gated };

    explicit TeachingView(QWidget* parent = nullptr);

    void setData(const TeachingData& data);
    const TeachingData& data() const { return m_data; }
    /// Gated if data().gated, else clipped if data().clipped, else vanilla.
    Kind kind() const;
    /// Thresholds the caption states: a query that puts at least kSink of its attention on sink tokens
    /// (TeachingData::sinkProbability) is doing nothing; a gate
    /// below kGateClosed is closed, above kGateOpen open.
    static constexpr double kSink = 0.5;
    static constexpr double kGateClosed = 0.1;
    static constexpr double kGateOpen = 0.5;
    /// The two caption lines, separated by '\n', derived from the numbers with the thresholds above
    /// and the data's outlier rule: what the head does, then whether its key carries outliers.
    QString caption() const;
    /// The box titles in drawing order ("gate \u03c0" only for gated models).
    QStringList boxTitles() const;

    // Figure
    QSize preferredFigureSize() const override;
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// "quantity,value": model, token, layer and head (1-based), then every number of the diagram.
    QString figureCsv() const override;
    Provenance figureProvenance() const override;
    QString figureName() const override;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    struct Box;
    QVector<Box> boxes() const;
    /// The caption's second line: outliers (or none) at the key the head attends to most.
    QString outlierSentence() const;

    TeachingData m_data;
    bool m_hasData = false;
};

} // namespace outlierlens
