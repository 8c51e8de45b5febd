#pragma once
// GUI thread only.

#include "figure.h"
#include "image_figure.h"
#include "view_data.h"

#include <QWidget>

class QCheckBox;
class QLabel;
class QMimeData;

namespace outlierlens {

/// The image view (the paper's Figures 3, 16, 17 and 9c): the input image with its patch grid
/// tinted by outlier counts of one layer, the cumulative attention per key patch of one head of
/// the next layer, that head's attention matrix, mean |V| of outlier vs other patches and, when a
/// statistics file is loaded, outlier counts per patch position over a data set.
///
/// The widget shows exactly the figure (plus a hover highlight). Patch rows and columns are
/// 0-based everywhere ("patch r,c", as in inspection dumps). Dropping an image file emits
/// imageDropped(); the app loads it, this view never reads files.
class ImageView : public QWidget, public Figure
{
    Q_OBJECT

public:
    explicit ImageView(QWidget* parent = nullptr);
    ~ImageView() override;

    void setData(const ImageViewData& data);
    const ImageViewData& data() const { return m_figure.data(); }

    /// Whether the patch grid tinted by outlier counts is drawn over the image (on by default).
    /// A display option like a style: exports follow it.
    bool isOverlayVisible() const { return m_figure.isOverlayVisible(); }

    /// Widget coordinates of patch (row, col) of the image panel, 0-based; empty if out of range
    /// or no data.
    QRect patchRect(int row, int col) const;
    /// The patch under the mouse, or -1 / -1.
    int hoveredRow() const { return m_hoveredRow; }
    int hoveredColumn() const { return m_hoveredCol; }
    /// What the hover line shows, e.g.
    /// "patch 3,7 · 12 outliers in layer 10 · cumulative attention 4.5 · data set: 42 outliers".
    QString hoverText() const { return m_hoverText; }
    /// The titles of the panels shown, in drawing order (the data-set panel only with its data).
    QStringList panelTitles() const { return m_figure.panelTitles(); }

    // Figure
    QSize preferredFigureSize() const override;
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// Long format "quantity,row,col,value", rows and columns 0-based: patch_outliers,
    /// cumulative_attention and dataset_patch_outliers per patch; cls_cumulative_attention;
    /// attention (row = query token, col = key token, 0 = CLS); mean_abs_value_* (no row/col).
    QString figureCsv() const override;
    Provenance figureProvenance() const override;
    QString figureName() const override;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

public Q_SLOTS:
    void setOverlayVisible(bool visible);

Q_SIGNALS:
    /// A patch of any grid panel was clicked (0-based row and column).
    void patchClicked(int row, int col);
    /// The mouse moved onto another patch; -1 / -1 when it left the grids.
    void patchHovered(int row, int col);
    /// An image file was dropped onto the view (local path).
    void imageDropped(const QString& path);

protected:
    void paintEvent(QPaintEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void leaveEvent(QEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dragMoveEvent(QDragMoveEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void placeChildren();
    struct Hit;
    Hit hitTest(const QPoint& pos) const;
    QRect canvasRect() const;
    void updateHover(const QPoint& pos);
    void setHover(int row, int col, const QString& text);
    static QString droppedImagePath(const QMimeData* mime);

    ImageFigure m_figure; ///< data, overlay option, layout and drawing
    int m_hoveredRow = -1;
    int m_hoveredCol = -1;
    QString m_hoverText;
    QCheckBox* m_overlayToggle = nullptr;
    QLabel* m_hoverLabel = nullptr;
};

} // namespace outlierlens
