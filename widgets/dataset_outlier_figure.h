#pragma once
// GUI thread only.

#include "figure.h"
#include "view_data.h"

#include <QVector>
#include <QWidget>

namespace outlierlens {

/// An image model's outliers over a data set, the three panels of the paper's Figure 9 (ViT-S/16 on
/// ImageNet), all from a statistics file: (a) the mean per-image max |x| (inf norm) of each layer's
/// output, (b) the outlier count of each hidden dimension in one layer, (c) the outlier count of each
/// patch position in that layer.
struct DatasetOutlierData
{
    QString title;                   ///< e.g. "vit-fmnist-vanilla over 1000 images"
    QString tensor;                  ///< the tensor of (a)-(c), e.g. "out" (the block output)
    QVector<double> infNormPerLayer; ///< (a) index = 0-based layer; NaN where a layer was not analysed
    int layer = -1;                  ///< 0-based layer of (b) and (c)
    QVector<double> perDimension;    ///< (b) [d], 0-based dimensions
    int headDim = 0;                 ///< dimension k feeds head k / headDim of the next layer (captions)
    int gridRows = 0, gridCols = 0;  ///< (c) the patch grid
    QVector<double> perPatch;        ///< (c) gridRows * gridCols, row-major, 0-based rows and columns
    double clsCount = 0;             ///< the CLS token's outliers (not a patch: said under (c))
    QString criterion;               ///< the outlier rule in words
    Provenance provenance;
};

/// Paints DatasetOutlierData as one figure (three panels side by side). The widget shows the figure.
class DatasetOutlierFigure : public QWidget, public Figure
{
    Q_OBJECT
public:
    explicit DatasetOutlierFigure(QWidget* parent = nullptr);

    void setData(const DatasetOutlierData& data);
    const DatasetOutlierData& data() const { return m_data; }

    QSize preferredFigureSize() const override { return {1100, 460}; }
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// Three tables one after the other, separated by an empty line: "layer (1-based),mean max inf
    /// norm"; "dimension (0-based),outlier count"; "patch row (0-based),patch col (0-based),outlier
    /// count" (then a "cls,," row). Empty cells where a layer was not analysed.
    QString figureCsv() const override;
    Provenance figureProvenance() const override { return m_data.provenance; }
    QString figureName() const override;

    QSize sizeHint() const override { return {900, 380}; }

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    DatasetOutlierData m_data;
};

} // namespace outlierlens
