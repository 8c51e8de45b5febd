#pragma once
// GUI thread only.

#include "figure.h"
#include "view_data.h"

#include <QWidget>

#include <memory>

QT_BEGIN_NAMESPACE
class QChartView;
class QLabel;
QT_END_NAMESPACE

namespace outlierlens {

struct DashboardCharts;

/// The outlier dashboard (the paper's Figures 1 and 9) for one layer and tensor: outlier counts
/// per hidden dimension (green bars, 0-based; only the dimensions with outliers, each numbered, when
/// there are at most 32 of them), the tokens carrying the most outliers, and max
/// inf norm and kurtosis per layer (1-based on the axis, the dashboard's layer marked).
/// Hovering a dimension's column says which head of the next layer reads it; clicking it emits
/// dimensionClicked().
class OutlierDashboard : public QWidget, public Figure
{
    Q_OBJECT
public:
    /// At most this many tokens are shown, the ones with the most outliers (fewer when the chart is
    /// too short to label them all; the CSV has every token).
    static constexpr int kTopTokens = 20;

    explicit OutlierDashboard(QWidget* parent = nullptr);
    ~OutlierDashboard() override;

    /// The figure (paintFigure(), not the window) as the paper draws Figure 1: the dimensions with
    /// outliers ordered by count (largest first, at most 40, each numbered), the token bars vertical,
    /// both value axes "outlier count". The window keeps dimensions in index order (to click them) and
    /// horizontal token bars; the CSV is the same either way (dimensions in index order). Off by default.
    void setPaperLayout(bool paper);
    bool paperLayout() const { return m_paperLayout; }

    /// Replaces everything shown (series are refilled in bulk, never appended to).
    void setData(const OutlierDashboardData& data);
    const OutlierDashboardData& data() const { return m_data; }

    /// "dimension k: N outliers (head h+1 of the next layer)" with h = k / headDim (0-based k);
    /// empty for a dimension out of range.
    QString dimensionToolTip(int dimension) const;
    /// The chart of outliers per dimension, and where the bar of `dimension` is in its viewport
    /// (for tests and scripted demos that click a bar as a user would).
    QChartView* dimensionChartView() const { return m_dimensionView; }
    QPoint dimensionBarCenter(int dimension) const;
    /// The token labels the token chart shows, largest count first (for tests).
    QStringList shownTokens() const;
    /// The dimension last clicked (highlighted), or -1.
    int selectedDimension() const { return m_selectedDimension; }

    QSize preferredFigureSize() const override;
    void paintFigure(QPainter& painter, const QRect& area) const override;
    QString figureCsv() const override;
    Provenance figureProvenance() const override { return m_data.provenance; }
    QString figureName() const override;

Q_SIGNALS:
    /// A dimension's bar (or the plot column above it) was clicked; 0-based.
    void dimensionClicked(int dimension);
    /// The mouse moved onto another dimension's column; -1 when it leaves the bars.
    void dimensionHovered(int dimension);
    /// A context menu was asked for on a dimension's column (right click, the menu key); 0-based.
    void dimensionContextMenuRequested(int dimension, const QPoint& globalPos);

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    int dimensionAt(const QPoint& viewportPos) const;
    void setHoveredDimension(int dimension, const QPoint& globalPos);
    QString titleText() const;

    OutlierDashboardData m_data;
    std::unique_ptr<DashboardCharts> m_charts;
    QLabel* m_title = nullptr;
    QLabel* m_details = nullptr;
    QChartView* m_dimensionView = nullptr;
    QChartView* m_tokenView = nullptr;
    QChartView* m_layerView = nullptr;
    int m_hoveredDimension = -1;
    int m_pressedDimension = -1;
    int m_selectedDimension = -1;
    bool m_paperLayout = false;
};

} // namespace outlierlens
