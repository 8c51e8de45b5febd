#pragma once
// GUI thread.

#include "figure.h"
#include "view_data.h"

#include <QPointF>
#include <QSizeF>
#include <QVector>
#include <QWidget>

#include <array>
#include <utility>

class QLabel;
class QScrollArea;
class QScrollBar;

namespace outlierlens {

class HeatmapView;

/// The distribution of each query's attention probabilities (Figure 14's per-row panel): a [T x 11]
/// matrix whose row t holds the share of query t's keys (those it can see: all of them, or keys
/// 0..t when the probabilities are causal) whose probability p falls in each bin: exactly 0; (0, 1e-8);
/// [1e-8, 1e-7), ..., [1e-2, 0.1) (one bin per decade); [0.1, 0.5); [0.5, 1]. Each row sums to 1.
/// Columns are labelled "0", ">0", then by the bins' lower edges ("≥1e-8", ..., "≥0.1", "≥0.5").
MatrixData probabilityDistributionPerRow(const MatrixData& probabilities);

/// One attention head for one input, as in the paper's Figures 2 and 10-15: side by side the gate
/// probabilities pi (gated models only), the attention probabilities [T x T], the values V [T x d_head]
/// and their product P.V [T x d_head], each a HeatmapView with a caption. All panels share one row
/// height, so rows (tokens) line up. Cells are square in the attention matrix and the gate column (at least
/// kMinGateWidth wide); V and P.V get narrower columns (valueColumnWidth()) so that d_head columns do not
/// squeeze the attention matrix. Panels zoom together (Ctrl+wheel, +/-, 0 on any panel), scroll together
/// vertically (one scroll bar on the right) and as one row horizontally. Figures use the same proportions.
/// The title shows layer and head 1-based.
class HeadView : public QWidget, public Figure
{
    Q_OBJECT
public:
    /// GatedProductPanel: pi * (P.V), the head's output after the gate (gated models, Figure 15).
    /// DistributionPanel: each query's probabilities binned by size (probabilityDistributionPerRow),
    /// shown on request (Figure 14: where clipped softmax puts exact zeros and vanilla a long tail).
    enum Panel {
        GatePanel = 0,
        ProbabilitiesPanel = 1,
        ValuesPanel = 2,
        ProductPanel = 3,
        GatedProductPanel = 4,
        DistributionPanel = 5
    };
    static constexpr int kPanelCount = 6;
    /// The gate strip is at least this wide, whatever the row height (a 512-token head has 2 px rows).
    static constexpr double kMinGateWidth = 12.0;

    explicit HeadView(QWidget* parent = nullptr);

    void setData(const HeadViewData& data);
    const HeadViewData& data() const { return m_data; }
    /// "Layer L, head H", 1-based.
    QString title() const;
    /// Shows the title above the panels and in the figure (default); CompareView shows it once instead.
    void setTitleVisible(bool visible);
    bool hasGatePanel() const { return !m_data.gate.isEmpty(); }
    /// Shows V and P.V next to the probabilities (default); CompareView may show the probabilities alone,
    /// and then the gate strip has no colour bar of its own (it uses the probabilities' [0, 1] map).
    void setValuePanelsVisible(bool visible);
    bool valuePanelsVisible() const { return m_valuePanelsVisible; }
    /// Shows the per-row distribution of the probabilities right of the probabilities (off by default).
    void setDistributionPanelVisible(bool visible);
    bool distributionPanelVisible() const { return m_distributionPanelVisible; }
    HeatmapView* panel(Panel panel) const { return m_panels[panel]; }
    /// Marks tokens (0-based positions) in every panel: rows everywhere, key columns in the probabilities.
    void setHighlightedTokens(const QVector<int>& tokens);
    bool isFitToWindow() const { return m_fit; }
    /// The row height in pixels shared by all panels: the side of the square attention and gate cells.
    double cellSize() const { return m_cell; }
    /// The largest row height (up to 48 px) at which every panel fits the view's width and height.
    double fitCellSize() const;
    /// Fit to the window for panels given `available` pixels (the scrolled area; CompareView asks for
    /// the room an arrangement would give): the row height and the columns' share of it (1: square).
    std::pair<double, double> fitCellsFor(const QSize& available) const;
    /// The column width of V and P.V at a row height: a share of it chosen from T and d_head so that a
    /// value panel is at most a third as wide as the attention matrix, but at least 2 px (nor above the
    /// row height).
    double valueColumnWidth(double rowHeight) const;
    int verticalScroll() const;

    // Figure
    QSize preferredFigureSize() const override;
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// Long format: panel, row, col, row_label, col_label, value (row and col 0-based).
    QString figureCsv() const override;
    Provenance figureProvenance() const override;
    QString figureName() const override;

    /// For composite figures (CompareView) that give several heads the same row height (`cellSize`).
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
    /// A context menu was asked for on a cell of a panel.
    void cellContextMenuRequested(int panel, int row, int col, const QPoint& globalPos);
    /// The user zoomed one of the panels (all panels follow); `fit` when it was a fit-to-window.
    void userZoomed(double cellSize, bool fit);
    void verticalScrolled(int pixels);

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;
    void changeEvent(QEvent* event) override;

private:
    QVector<HeatmapView*> visiblePanels() const;
    /// The gate when the data has one; V and P.V unless hidden; the probabilities always.
    bool panelShown(int panel) const;
    void onPanelZoomed(HeatmapView* source);
    void onPanelScrolled(HeatmapView* source, int value);
    void syncTopMargins();
    void refit();
    void applyCellSize(double cellSize, int scroll);
    /// Width x height of one cell of a panel at a row height, its width times `columnShare` (fit to a
    /// narrow window: columns narrower than rows), at least kMinValueColumn wide.
    QSizeF panelCell(int panel, double rowHeight, double columnShare = 1.0) const;
    /// The summed cell widths of the visible panels at a row height.
    double cellsWidth(double rowHeight, double columnShare = 1.0) const;
    /// Fit to the window: the row height and the columns' share of it (1: square cells).
    std::pair<double, double> fitCells() const;
    void updateScrollRange();
    int figureTitleHeight() const;

    HeadViewData m_data;
    QLabel* m_title = nullptr;
    QScrollArea* m_scroll = nullptr; // the row of panels, scrolled horizontally as one
    QScrollBar* m_vbar = nullptr;    // drives every panel's rows
    std::array<HeatmapView*, kPanelCount> m_panels{};
    double m_cell = 12;
    double m_columnShare = 1.0; ///< column width / row height of the attention matrix (fit to window)
    bool m_fit = true;
    bool m_titleVisible = true;
    bool m_valuePanelsVisible = true;
    bool m_distributionPanelVisible = false;
    bool m_syncing = false;
};

} // namespace outlierlens
