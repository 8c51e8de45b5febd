#pragma once
// GUI thread only.

#include "figure.h"
#include "view_data.h"

#include <QVector>
#include <QWidget>

QT_BEGIN_NAMESPACE
class QScrollArea;
class QVBoxLayout;
QT_END_NAMESPACE

namespace outlierlens {

class HeadView;

/// Several heads at once, one HeadView per row (attention probabilities, V, P.V and the gate of each),
/// as the paper's Figures 10-13 and 16-17 lay them out: typically every head of one layer. Rows scroll;
/// the figure stacks the heads' own figures. Clicking a head emits headClicked() with its index.
class HeadGrid : public QWidget, public Figure
{
    Q_OBJECT
public:
    explicit HeadGrid(QWidget* parent = nullptr);

    void setHeads(const QVector<HeadViewData>& heads);
    const QVector<HeadViewData>& heads() const { return m_heads; }
    /// The row of head `index` (for tests).
    HeadView* view(int index) const { return m_views.value(index); }
    /// Marks tokens (0-based) in every head, as HeadView::setHighlightedTokens().
    void setHighlightedTokens(const QVector<int>& tokens);

    QSize preferredFigureSize() const override;
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// Every head's long-format CSV with its layer and head (1-based) in front.
    QString figureCsv() const override;
    Provenance figureProvenance() const override;
    /// "heads-L2" when every head is of layer 2 (1-based), else "heads".
    QString figureName() const override;

Q_SIGNALS:
    /// A cell of head `index` (into heads()) was clicked.
    void headClicked(int index);

private:
    QVector<HeadViewData> m_heads;
    QVector<HeadView*> m_views;
    QScrollArea* m_scroll = nullptr;
    QVBoxLayout* m_rows = nullptr;
};

} // namespace outlierlens
