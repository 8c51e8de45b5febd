#pragma once
// Pure functions (any thread) for the figure set (figure_set.cpp): which heads, layers and inputs the
// paper's Figures 10-13 show, and Figure 9's numbers from a statistics file. Layers, heads, dimensions
// and input indices are 0-based; inputs are written 1-based ("#16") where the paper numbers them.

#include "dataset_outlier_figure.h"

#include <QString>
#include <QVector>

namespace outlierlens {

struct StatisticsFile;

/// Figure 9 (a)-(c) from a statistics file: the mean per-input max |x| of `tensor` in every layer, and in
/// `layer` its outlier count per hidden dimension and per patch position (with the CLS token's).
/// Layers the file did not analyse are NaN in (a); (b) and (c) are empty when `layer` was not analysed.
DatasetOutlierData buildDatasetOutliers(const StatisticsFile& stats, const QString& path, int layer,
                                        const QString& tensor, int headDim);

/// The heads of one layer chosen by the hidden dimensions they own (dimension k belongs to head
/// k / headDim, the head of the next layer that reads it, as the paper links head #3 to dimension #180
/// of BERT-base): Figure 10's head owns the dimension with the most outliers, Figure 11's the most
/// outlying dimension of another head, Figure 12's contrast set owns none (or the fewest) of them.
struct OutlierHeads
{
    int first = -1, second = -1;       ///< -1 when no (second) head owns an outlier dimension
    int firstDim = -1, secondDim = -1; ///< the dimensions that chose them
    double firstCount = 0, secondCount = 0;
    QVector<int> contrast;        ///< up to `contrastCount` heads, ascending
    bool contrastOwnsNone = true; ///< false: every head owns outliers; those with the fewest
};
/// `perDimension`: outlier counts per hidden dimension [heads * headDim]; ties go to the lower dimension.
OutlierHeads headsOwningOutliers(const QVector<double>& perDimension, int headDim, int heads,
                                 int contrastCount);

/// The paper's sequences of Figures 10-12, 1-based numbers in the data set.
inline const QVector<int>& paperSequenceNumbers()
{
    static const QVector<int> numbers{16, 21, 61, 88};
    return numbers;
}
/// Indices (0-based) of the inputs a figure shows: `numbers` (1-based) when the data has all of them,
/// else the first numbers.size() inputs (fewer when there are fewer).
QVector<int> inputsByNumber(const QVector<int>& numbers, int available);

} // namespace outlierlens
