#pragma once
// GUI thread.

#include "figure.h"
#include "view_data.h"

#include <QPointF>
#include <QVector>
#include <QWidget>

#include <array>

class QLabel;
class QScrollArea;
class QScrollBar;

namespace outlierlens {

class HeatmapView;

/// One attention head for one input, as in the paper's Figures 2 and 10-15: side by side the gate
/// probabilities pi (gated models only), the attention probabilities [T x T], the values V [T x d_head]
/// and their product P.V [T x d_head], each a HeatmapView with a caption. All panels share one cell size,
/// so rows (tokens) line up; they zoom together (Ctrl+wheel, +/-, 0 on any panel), scroll together
/// vertically (one scroll bar on the right) and as one row horizontally. The title shows layer and head
/// 1-based.
class HeadView : public QWidget, public Figure
{
    Q_OBJECT
public:
    enum Panel { GatePanel = 0, ProbabilitiesPanel = 1, ValuesPanel = 2, ProductPanel = 3 };

    explicit HeadView(QWidget* parent = nullptr);

    void setData(const HeadViewData& data);
    const HeadViewData& data() const { return m_data; }
    /// "Layer L, head H", 1-based.
    QString title() const;
    /// Shows the title above the panels and in the figure (default); CompareView shows it once instead.
    void setTitleVisible(bool visible);
    bool hasGatePanel() const { return !m_data.gate.isEmpty(); }
    HeatmapView* panel(Panel panel) const { return m_panels[panel]; }
    /// Marks tokens (0-based positions) in every panel: rows everywhere, key columns in the probabilities.
    void setHighlightedTokens(const QVector<int>& tokens);
    bool isFitToWindow() const { return m_fit; }
    double cellSize() const { return m_cell; }
    /// The cell size at which every panel fits the view.
    double fitCellSize() const;
    int verticalScroll() const;

    // Figure
    QSize preferredFigureSize() const override;
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// Long format: panel, row, col, row_label, col_label, value (row and col 0-based).
    QString figureCsv() const override;
    Provenance figureProvenance() const override;
    QString figureName() const override;

    /// For composite figures (CompareView) that give several heads the same cell size.
    QSize figureExtent(double cellSize) const;
    double figureCellSizeFor(const QSizeF& size) const;
    void paintFigureWithCellSize(QPainter& painter, const QPointF& topLeft, double cellSize) const;

public Q_SLOTS:
    void setCellSize(double pixels);
    void fitToWindow();
    void setVerticalScroll(int pixels);

Q_SIGNALS:
    void cellHovered(int panel, int row, int col);
    void cellClicked(int panel, int row, int col);
    /// The user zoomed one of the panels (all panels follow); `fit` when it was a fit-to-window.
    void userZoomed(double cellSize, bool fit);
    void verticalScrolled(int pixels);

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;
    void changeEvent(QEvent* event) override;

private:
    QVector<HeatmapView*> visiblePanels() const;
    void onPanelZoomed(HeatmapView* source);
    void onPanelScrolled(HeatmapView* source, int value);
    void syncTopMargins();
    void refit();
    void applyCellSize(double cellSize, int scroll);
    void updateScrollRange();
    int figureTitleHeight() const;

    HeadViewData m_data;
    QLabel* m_title = nullptr;
    QScrollArea* m_scroll = nullptr; // the row of panels, scrolled horizontally as one
    QScrollBar* m_vbar = nullptr;    // drives every panel's rows
    std::array<HeatmapView*, 4> m_panels{};
    double m_cell = 12;
    bool m_fit = true;
    bool m_titleVisible = true;
    bool m_syncing = false;
};

} // namespace outlierlens
