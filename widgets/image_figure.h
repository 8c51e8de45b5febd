#pragma once
// GUI thread only.

#include "view_data.h"

#include <QCoreApplication>
#include <QPainter>
#include <QRect>
#include <QRectF>
#include <QSize>
#include <QStringList>
#include <QVector>

namespace outlierlens {

/// The drawing behind ImageView, without a widget: layout, painting and CSV of an ImageViewData at
/// any size. ImageView uses the same layout to map the mouse to patches, so what is hovered is what
/// is drawn. Patch rows and columns are 0-based; layers and heads are shown 1-based.
class ImageFigure
{
    Q_DECLARE_TR_FUNCTIONS(ImageFigure)

public:
    enum class Panel { Image, Cumulative, Matrix, Bars, Dataset };
    /// The top of the cumulative-attention colour bar: the largest of the patches' sums and the CLS
    /// cell's, so that the bar covers every cell it colours.
    static double cumulativeColorMax(const ImageViewData& data);

    /// Where everything goes in an area; all rects are in the area's coordinates.
    struct Layout
    {
        struct PanelTitle
        {
            Panel kind;
            QRectF titleBand;
        };
        double base = 12;  ///< text pixel size everything scales with
        bool empty = true; ///< no image and no grid: only a hint is drawn
        QRectF title, footer, body;
        QVector<PanelTitle> panels; ///< in drawing order; the data-set panel only with its data
        QRectF image;               ///< the picture; the patch grid covers it exactly
        QRectF cumulative, cls;     ///< the cumulative-attention grid and the CLS cell
        QRectF matrix;              ///< the attention matrix
        QRectF bars;                ///< the plot area of the mean |V| bars
        QRectF dataset;             ///< the data-set grid (empty without data)
    };

    void setData(const ImageViewData& data) { m_data = data; }
    const ImageViewData& data() const { return m_data; }
    void setOverlayVisible(bool visible) { m_overlayVisible = visible; }
    bool isOverlayVisible() const { return m_overlayVisible; }

    Layout layout(const QRect& area) const;
    void paint(QPainter& painter, const QRect& area) const;
    QSize preferredSize() const;
    QString panelTitle(Panel kind) const;
    QStringList panelTitles() const;
    /// See ImageView::figureCsv().
    QString csv() const;
    Provenance provenance() const;
    QString name() const;

    /// rows * cols values, the only shape the panels draw (anything else shows "no data").
    static bool validGrid(const QVector<float>& values, int rows, int cols);
    /// "layer 10" for 0-based 9.
    static QString layerWords(int zeroBasedLayer);
    /// "head 3 of layer 11": the head of the layer after data.layer.
    static QString headWords(const ImageViewData& data);

private:
    ImageViewData m_data;
    bool m_overlayVisible = true;
};

} // namespace outlierlens
