#pragma once
// GUI thread.

#include "figure.h"
#include "heatmap_renderer.h"
#include "view_data.h"

#include <QAbstractScrollArea>
#include <QImage>
#include <QMargins>
#include <QSizeF>
#include <QStringList>
#include <QVector>

#include <optional>

namespace outlierlens {

/// One MatrixData as coloured cells: row labels on the left, column labels on top (rotated when they are
/// words), a colour bar with numbers and a title. Hovering a cell shows its exact value and its row and
/// column labels. Zoom: Ctrl+wheel, +/- keys, 0 fits the window; pan: scroll bars or drag. Exact zeros
/// can be marked (clipped softmax). Rows and columns can be highlighted. Cells are square unless
/// setCellDimensions() gives them another width; zooming keeps their aspect ratio.
/// Row and column numbers are 0-based positions (token index, hidden dimension).
class HeatmapView : public QAbstractScrollArea, public Figure
{
    Q_OBJECT
public:
    explicit HeatmapView(QWidget* parent = nullptr);
    ~HeatmapView() override;

    /// Replaces the matrix; keeps the zoom mode (fit or cell size) and clears the highlights.
    void setData(const MatrixData& data, ColorScale scale);
    const MatrixData& data() const { return m_renderer.data(); }
    ColorScale colorScale() const { return m_renderer.colorScale(); }
    void setTitle(const QString& title);
    QString title() const { return m_renderer.title(); }
    /// Colour range 0..max (Sequential) or -max..+max (Diverging); <= 0 takes max|value| of the data.
    void setFixedMaximum(double maximum);
    /// The magnitude mapped to the end of the colour bar.
    double colorMaximum() const { return m_renderer.colorMaximum(); }
    /// Cells whose value is exactly 0.0 get a cross (or a grey fill when cells are tiny) and a legend entry.
    void setMarkExactZeros(bool mark);
    bool marksExactZeros() const { return m_renderer.marksExactZeros(); }
    void setHighlightedRows(const QVector<int>& rows);
    void setHighlightedColumns(const QVector<int>& columns);
    QVector<int> highlightedRows() const { return m_renderer.highlightedRows(); }
    QVector<int> highlightedColumns() const { return m_renderer.highlightedColumns(); }
    void setRowLabelsVisible(bool visible);
    void setColorBarVisible(bool visible);
    void setProvenance(const Provenance& provenance) { m_provenance = provenance; }
    void setFigureName(const QString& name) { m_figureName = name; }

    /// Side of a square cell in pixels; the cell height (row pitch) when cells are not square.
    double cellSize() const { return m_cell; }
    /// Column pitch and row pitch in pixels.
    double cellWidth() const { return m_cell * m_aspect; }
    double cellHeight() const { return m_cell; }
    QSizeF cellDimensions() const { return QSizeF(cellWidth(), m_cell); }
    bool isFitToWindow() const { return m_fit; }
    /// The cell height at which the whole matrix fits the current viewport (at the current aspect ratio).
    double fitCellSize() const;
    /// Height of the title and column labels above the cells, as this view would draw them.
    int naturalTopMargin() const;
    /// Lets views placed side by side start their cells at the same height (rows aligned).
    void setMinimumTopMargin(int pixels);
    /// The widget size that shows all of a matrix with square `cellSize` cells (no scroll bars).
    QSize sizeForCellSize(double cellSize) const;
    /// The same for `cell.width()` x `cell.height()` cells.
    QSize sizeForCellDimensions(const QSizeF& cell) const;
    /// Room around the cells in the widget: row labels, title and column labels, colour bar.
    QMargins cellMargins() const;
    /// Where cells are drawn, in viewport coordinates.
    QRect cellArea() const;
    /// Top-left corner of cell (0, 0) in viewport coordinates (moves when scrolling).
    QPointF cellOrigin() const;
    /// The cell under a viewport position; false outside the matrix.
    bool cellAt(const QPoint& viewportPos, int* row, int* col) const;
    /// The tooltip text of a cell: exact value (%.6g), row label and column label.
    QString cellToolTip(int row, int col) const;
    /// The row (column) labels drawn now, as drawn before eliding: token strings, or every n-th position
    /// when rows (columns) are too small for every label.
    QStringList shownRowLabels() const;
    QStringList shownColumnLabels() const;

    // Figure
    QSize preferredFigureSize() const override;
    void paintFigure(QPainter& painter, const QRect& area) const override;
    QString figureCsv() const override;
    Provenance figureProvenance() const override { return m_provenance; }
    QString figureName() const override;

    /// Room a figure needs around its cells (row labels, title and column labels, colour bar), so that
    /// composite figures can give several matrices the same cell size and aligned rows.
    QMargins figureMargins() const;
    /// Draws the figure with square cells of `cellSize` whose top-left corner is at
    /// `topLeft + (figureMargins().left(), top)`; `top` >= figureMargins().top().
    void paintFigureWithCellSize(QPainter& painter, const QPointF& topLeft, double cellSize, int top) const;
    /// The same with `cell.width()` x `cell.height()` cells.
    void paintFigureWithCellDimensions(QPainter& painter, const QPointF& topLeft, const QSizeF& cell,
                                       int top) const;
    /// The rectangle of a cell as paintFigure(painter, area) draws it.
    QRectF figureCellRect(const QRect& area, int row, int col) const;

public Q_SLOTS:
    void zoomIn();
    void zoomOut();
    void fitToWindow();
    /// Sets a square cell size (leaves fit mode) without emitting userZoomed(); keeps the centre in view.
    void setCellSize(double pixels);
    /// The same for cells `cell.width()` wide and `cell.height()` high (e.g. narrow value columns).
    void setCellDimensions(const QSizeF& cell);

Q_SIGNALS:
    void cellHovered(int row, int col);
    void cellClicked(int row, int col);
    /// A context menu was asked for on a cell (right click, the menu key); `globalPos` places it.
    void cellContextMenuRequested(int row, int col, const QPoint& globalPos);
    /// The user changed the zoom (wheel, keys, zoom slots); linked views follow with setCellSize().
    /// `cellSize` is the cell height.
    void userZoomed(double cellSize);

protected:
    void paintEvent(QPaintEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    bool viewportEvent(QEvent* event) override;
    void scrollContentsBy(int dx, int dy) override;
    void changeEvent(QEvent* event) override;
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

private:
    using Frame = HeatmapRenderer::Frame;
    using Metrics = HeatmapRenderer::Metrics;

    HeatmapRenderer::Fonts widgetFonts() const;
    const Metrics& widgetMetrics() const;
    Frame widgetFrame() const;
    void invalidateMetrics();
    void changed(); // after a change of data or style
    void updateScrollBars();
    void zoomAt(const QSizeF& cell, const QPointF& anchor, bool user);
    void zoomBy(double factor, const QPointF& anchor);
    void updateHover(const QPoint& viewportPos, const QPoint& globalPos);

    HeatmapRenderer m_renderer;
    QString m_figureName;
    Provenance m_provenance;
    mutable std::optional<Metrics> m_metrics; // of the widget fonts, per data or style change
    double m_cell = 12;                       // cell height
    double m_aspect = 1;                      // cell width / height
    bool m_fit = true;
    int m_minTopMargin = 0;
    int m_hoverRow = -1;
    int m_hoverCol = -1;
    QPoint m_pressPos;
    QPoint m_pressScroll;
    bool m_pressed = false;
    bool m_dragging = false;
};

} // namespace outlierlens
