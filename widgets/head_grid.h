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

/// Several heads at once, one HeadView per row (attention probabilities, V, P.V and the gate of each):
/// typically every head of one layer (the Layer page). Rows scroll; the figure stacks the heads' own
/// figures. Clicking a head emits headClicked() with its index. With setSubfigures() the figure is laid
/// out as the paper's Figures 2 and 10-13: labelled sub-figures in rows and columns on one A4 landscape
/// page.
class HeadGrid : public QWidget, public Figure
{
    Q_OBJECT
public:
    explicit HeadGrid(QWidget* parent = nullptr);

    /// A4 landscape is 1123 x 794 px at 96 DPI; the figure set's index puts a title and caption above.
    static constexpr int kMaxFigureWidth = 1120;
    static constexpr int kMaxFigureHeight = 620;

    void setHeads(const QVector<HeadViewData>& heads);
    /// The paper's layout for the figure (call after setHeads()): head i under `labels[i]` (e.g. "(a)
    /// layer 10, head 3, pair #16"), `columns` columns (0: as many as make the heads largest), the whole
    /// figure within kMaxFigureWidth x kMaxFigureHeight (scaled as one when the heads need more room);
    /// `inputs[i]` names head i's input in the CSV and the footer. The heads' own titles are hidden.
    void setSubfigures(const QStringList& labels, const QStringList& inputs, int columns = 0);
    bool hasSubfigures() const { return !m_labels.isEmpty(); }
    /// The sub-figures' columns at a figure size (as paintFigure() arranges them); 1 without sub-figures.
    int columnsFor(const QSize& size) const;
    const QVector<HeadViewData>& heads() const { return m_heads; }
    /// The row of head `index` (for tests).
    HeadView* view(int index) const { return m_views.value(index); }
    /// Marks tokens (0-based) in every head, as HeadView::setHighlightedTokens().
    void setHighlightedTokens(const QVector<int>& tokens);

    QSize preferredFigureSize() const override;
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// Every head's long-format CSV with its layer and head (1-based) in front; with sub-figures, the
    /// sub-figure's letter and input before them.
    QString figureCsv() const override;
    Provenance figureProvenance() const override;
    /// "heads-L2" when every head is of layer 2 (1-based), else "heads".
    QString figureName() const override;

Q_SIGNALS:
    /// A cell of head `index` (into heads()) was clicked.
    void headClicked(int index);

private:
    struct Arrangement;
    Arrangement arrange(const QSizeF& size) const;

    QVector<HeadViewData> m_heads;
    QStringList m_labels, m_inputs;
    int m_columns = 0;
    QVector<HeadView*> m_views;
    QScrollArea* m_scroll = nullptr;
    QVBoxLayout* m_rows = nullptr;
};

} // namespace outlierlens
