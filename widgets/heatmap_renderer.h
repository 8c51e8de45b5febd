#pragma once
// GUI thread (fonts).

#include "view_data.h"

#include <QColor>
#include <QFont>
#include <QImage>
#include <QMargins>
#include <QPointF>
#include <QRectF>
#include <QSizeF>
#include <QString>
#include <QStringList>
#include <QVector>

class QPainter;

namespace outlierlens {

/// Draws one MatrixData as a heatmap: coloured cells, exact-zero marks, highlighted rows and columns, row
/// labels (left), column labels (top; rotated when they are words; every n-th when cells are small), a colour
/// bar with numbers, title and subtitle. Only the visible cells are coloured, into an image of one pixel per
/// cell, or, when cells are smaller than a device pixel, one pixel per block of cells at least a device pixel
/// large (level of detail: a block shows its largest value, its largest magnitude on a diverging scale, so a
/// single sharp cell such as an attention sink stays visible); blocks start at multiples of the block size,
/// so cells keep their place. The image is kept while the data, zoom and visible part allow. The geometry
/// comes in a Frame chosen by the caller: HeatmapView for the screen (scrolled, zoomed) and figures (whole
/// matrix at a given cell size), so both look the same. Cells need not be square: HeadView gives its value
/// panels narrower columns than rows. Rows and columns are numbered from 0.
class HeatmapRenderer
{
public:
    static constexpr double kMinBarHeight = 60.0;
    static constexpr double kMinCellSize = 0.05;
    static constexpr double kMaxCellSize = 96.0;

    struct Fonts
    {
        QFont title, label, small;
        QColor text, secondary, background;
    };
    /// Sizes that depend on the data and fonts, not on the cell size.
    struct Metrics
    {
        double titleHeight = 0;   // title and subtitle lines
        double headerHeight = 0;  // column labels
        double rowLabelWidth = 0; // 0 when hidden
        double colorBarWidth = 0; // 0 when hidden
        double legendHeight = 0;  // the legend entries under the bar ("exactly 0", "masked")
        double lineHeight = 0;    // of the label font
        double tickWidth = 0;
        double rowSpacing = 0; // least distance between row labels
        double colSpacing = 0;
        bool rotateColumns = false;
    };
    /// Where everything goes.
    struct Frame
    {
        Fonts fonts;
        Metrics metrics;
        QRectF title;          // title and subtitle
        QRectF header;         // column labels, directly above the cells
        QRectF rowLabels;      // left of the cells
        QRectF cells;          // where cells may be drawn (the visible part in a widget)
        QRectF exposed;        // the part of `cells` to paint now (a paint event's rectangle)
        QPointF origin;        // top-left corner of cell (0, 0)
        double cellWidth = 1;  // column pitch
        double cellHeight = 1; // row pitch
        double bottom = 0;     // lowest y the colour bar and its legend may use
        bool figure = false;
    };

    /// One drawn row or column label.
    struct Label
    {
        int index = 0;     // row or column, 0-based
        double centre = 0; // y of a row label, x of a column label
        QString text;      // before eliding
        bool highlighted = false;
    };

    /// The fixed fonts and colours of figures (FigureStyle).
    static Fonts figureFonts();
    /// The cell that shows all of a rows x cols matrix in width x height pixels: rows fill the height (up
    /// to `maxRowHeight`), columns the width but never wider than tall, so a T x d panel fills its box with
    /// narrow columns and T x T attention keeps square cells.
    static QSizeF fittedCell(double width, double height, int rows, int cols, double maxRowHeight);

    /// Replaces the matrix (a values size other than rows * cols empties it) and clears the highlights.
    void setData(const MatrixData& data, ColorScale scale);
    const MatrixData& data() const { return m_data; }
    ColorScale colorScale() const { return m_scale; }
    void setTitle(const QString& title) { m_title = title; }
    QString title() const { return m_title; }
    /// <= 0: max |value| of the data.
    void setFixedMaximum(double maximum);
    double colorMaximum() const { return m_colorMax; }
    void setMarkExactZeros(bool mark);
    bool marksExactZeros() const { return m_markZeros; }
    /// True when the matrix is causal and has a cell above the diagonal (drawn as masked).
    bool hasMaskedCells() const { return m_data.causal && m_data.cols > 1 && m_data.rows > 0; }
    /// The legend lines under the colour bar: "exactly 0" (marked zeros), "masked (causal)".
    QStringList legendEntries() const;
    void setHighlightedRows(const QVector<int>& rows) { m_highlightRows = rows; }
    void setHighlightedColumns(const QVector<int>& columns) { m_highlightCols = columns; }
    QVector<int> highlightedRows() const { return m_highlightRows; }
    QVector<int> highlightedColumns() const { return m_highlightCols; }
    /// Highlighted rows and columns get an outline over their cells (the default), or only their labels
    /// in the highlight colour (where cells are too small for an outline not to hide them).
    void setHighlightOutlines(bool outlines) { m_highlightOutlines = outlines; }
    void setRowLabelsVisible(bool visible) { m_rowLabelsVisible = visible; }
    void setColorBarVisible(bool visible) { m_colorBarVisible = visible; }

    Metrics measure(const Fonts& fonts) const;
    void paint(QPainter& painter, const Frame& frame) const;

    /// Figures: the whole matrix in figure fonts; cells of `cell` (width x height) pixels.
    QMargins figureMargins() const;
    Frame figureFrame(const QPointF& topLeft, const QSizeF& cell, int top) const;
    /// The largest square cell size that fits `area`, and where the figure starts (centred horizontally).
    void figurePlacement(const QRect& area, QPointF* topLeft, double* cellSize) const;
    QSize preferredFigureSize() const;
    void paintFigure(QPainter& painter, const QRect& area) const;
    QRectF figureCellRect(const QRect& area, int row, int col) const;

    /// row, col, row_label, col_label, value (long format, header first).
    QString csv() const;
    /// Exact value (%.6g), row label and column label.
    QString cellToolTip(int row, int col) const;
    QString rowLabel(int row) const;
    QString columnLabel(int col) const;
    /// The row (column) labels `frame` draws: highlighted ones first, then every n-th that keeps labels
    /// apart, only in the visible part. When every 5th or sparser, they are positions instead of words.
    QVector<Label> rowLabels(const Frame& frame) const;
    QVector<Label> columnLabels(const Frame& frame) const;

private:
    QString subtitle() const;
    /// The colour range (max |value| or max value) and whether there are exact zeros: one pass.
    void updateColorRange();
    /// Cells grouped in blocks of kx x ky, coloured; `blocks` in block coordinates.
    QImage colorBlocks(int kx, int ky, const QRect& blocks, bool zeros) const;
    /// Widest row and column label in `font` (cached while the labels and the font stay).
    void widestLabels(const QFont& font, double* rows, double* cols) const;
    void paintCells(QPainter& painter, const Frame& frame) const;
    void paintZeroCrosses(QPainter& painter, const Frame& frame) const;
    void paintHighlights(QPainter& painter, const Frame& frame) const;
    void paintRowLabels(QPainter& painter, const Frame& frame) const;
    void paintColumnLabels(QPainter& painter, const Frame& frame) const;
    /// The colour bar's share of `m` (tick width, bar width, legend height); in heatmap_color_bar.cpp.
    void measureColorBar(const Fonts& fonts, Metrics* m) const;
    void paintColorBar(QPainter& painter, const Frame& frame) const;

    MatrixData m_data;
    ColorScale m_scale = ColorScale::Sequential;
    QString m_title;
    double m_fixedMax = 0;
    double m_colorMax = 1;
    bool m_markZeros = false;
    bool m_hasZeros = false;
    bool m_rowLabelsVisible = true;
    bool m_highlightOutlines = true;
    bool m_colorBarVisible = true;
    QVector<int> m_highlightRows;
    QVector<int> m_highlightCols;
    struct LevelImage
    {
        int kx = 0, ky = 0; // cells per pixel
        QRect blocks;       // the blocks it holds
        bool zeros = false; // exact zeros grey
        QImage image;
    };
    mutable LevelImage m_level; // the last drawn (paint is const; GUI thread only)
    struct LabelWidths
    {
        QString fontKey;
        QStringList rows, cols; // shared copies: comparing is cheap when they are the same lists
        int rowCount = -1, colCount = -1;
        double widestRow = 0, widestCol = 0;
    };
    mutable LabelWidths m_labelWidths;
};

} // namespace outlierlens
