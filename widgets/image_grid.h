#pragma once
// GUI thread only.

#include "figure.h"
#include "image_figure.h"
#include "view_data.h"

#include <QStringList>
#include <QVector>
#include <QWidget>

namespace outlierlens {

/// Several images drawn as ImageFigure draws one (image with its outlier patches, cumulative
/// attention, attention probabilities, mean |V|), as the paper's Figures 16 and 17 lay out eight:
/// each image a cell with its sub-figure label, the cells wrapped into rows and columns so that the
/// figure keeps kMaxFigureSize (an A4 landscape page under the index's title and caption).
class ImageGrid : public QWidget, public Figure
{
    Q_OBJECT
public:
    /// A4 landscape is 1123 x 794 px at 96 DPI; the index page puts a title and caption above.
    static constexpr int kMaxFigureWidth = 1120;
    static constexpr int kMaxFigureHeight = 620;

    explicit ImageGrid(QWidget* parent = nullptr);

    /// `labels[i]` names image i above its cell, e.g. "(a) image #1: coffee_cup.png".
    void setImages(const QVector<ImageViewData>& images, const QStringList& labels);
    int count() const { return int(m_figures.size()); }
    /// Columns of the figure at `size` (the same arrangement paintFigure() uses).
    int columnsFor(const QSize& size) const;

    QSize preferredFigureSize() const override;
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// Each image's ImageFigure CSV with "subfigure,image" in front.
    QString figureCsv() const override;
    Provenance figureProvenance() const override;
    QString figureName() const override { return QStringLiteral("images"); }

    QSize sizeHint() const override { return {1000, 600}; }

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    QVector<ImageFigure> m_figures;
    QStringList m_labels;
};

} // namespace outlierlens
