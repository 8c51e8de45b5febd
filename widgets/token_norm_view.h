#pragma once
// GUI thread only.

#include "figure.h"
#include "view_data.h"

#include <QWidget>

namespace outlierlens {

/// Darcet et al. 2024's views of an image through a ViT ("Vision Transformers Need Registers"), one row per
/// model (a model with registers beside one without): the image with its high-norm patches outlined, the
/// norm of every patch token as a heatmap over the patch grid, the histogram of the token norms with the
/// high-norm cutoff, the class token's attention in the last layer for every head, and, with a statistics
/// file, the data set's norm histogram. Patch rows and columns are 0-based; layers and heads 1-based.
class TokenNormView : public QWidget, public Figure
{
    Q_OBJECT

public:
    explicit TokenNormView(QWidget* parent = nullptr);

    void setData(const TokenNormData& data) { setRows({data}); }
    /// One row per model, drawn top to bottom.
    void setRows(const QVector<TokenNormData>& rows);
    const QVector<TokenNormData>& rows() const { return m_rows; }

    /// The panel titles of one row, in drawing order.
    QStringList panelTitles(int row = 0) const;

    // Figure
    QSize preferredFigureSize() const override;
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// Long format "model,quantity,row,col,value", rows and columns 0-based: patch_norm per patch,
    /// prefix_norm (row = prefix token index, col empty), cutoff, cls_attention (row = head 0-based,
    /// col = patch index row-major), cls_prefix_attention (col = [CLS], then the registers),
    /// dataset_high_norm_patch (images where the patch is high-norm), dataset_histogram (row = bin, with
    /// its lower edge in col).
    QString figureCsv() const override;
    Provenance figureProvenance() const override;
    QString figureName() const override;

    QSize sizeHint() const override { return {1100, 420}; }
    QSize minimumSizeHint() const override { return {480, 240}; }

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    QVector<TokenNormData> m_rows;
};

} // namespace outlierlens
