#pragma once
// GUI thread only.

#include "figure.h"
#include "view_data.h"

#include <QStringList>
#include <QVector>
#include <QWidget>

#include <array>

QT_BEGIN_NAMESPACE
class QChartView;
class QLabel;
class QStackedWidget;
class QTabWidget;
class QTableWidget;
QT_END_NAMESPACE

namespace outlierlens {

class HeatmapView;

/// An et al. 2025's systematic outliers for one layer of a decoder, in three sections:
/// "Figure 1" (|h|, |x_down|, |W_down[:, j]| and the head-mean attention of the current input, heavy
/// tokens, outlier channels and outlier keys highlighted), "Per layer" (their Figs 3a, 4a, 5a, 6a on
/// log scales, the chosen layer marked) and "Tokens and heads" (Figs 3b, 6b by token category, 6c
/// and Table 1). Layers and heads are shown 1-based; channels, tokens and keys 0-based.
class SystematicView : public QWidget, public Figure
{
    Q_OBJECT
public:
    /// What a Figure 1 panel says when the data has no matrices (the source is a statistics file).
    static constexpr char kFigure1NeedsInputText[] =
        "Figure 1 needs the current input: choose Source: Current input";

    explicit SystematicView(QWidget* parent = nullptr);
    ~SystematicView() override;

    /// Replaces everything shown; the chosen layer is `data.layer` (0-based). Charts are rebuilt in bulk
    /// and the heatmaps fit their panels again.
    void setData(const SystematicViewData& data);
    const SystematicViewData& data() const { return m_data; }

    HeatmapView* hiddenView() const { return m_panels[0].view; }
    HeatmapView* downInputView() const { return m_panels[1].view; }
    HeatmapView* downWeightView() const { return m_panels[2].view; }
    HeatmapView* attentionView() const { return m_panels[3].view; }
    /// Table 1: one row per head (sortable; the head of a row is its first column, 1-based).
    QTableWidget* headTable() const { return m_headTable; }
    /// The sections ("Figure 1", "Per layer", "Tokens and heads").
    QTabWidget* sections() const { return m_tabs; }
    /// Titles of the charts shown: the four per-layer charts, the token categories, the heads.
    QStringList chartTitles() const;
    /// The head last clicked (table or bar), 0-based, or -1.
    int selectedHead() const { return m_selectedHead; }

    // Figure
    QSize preferredFigureSize() const override;
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// Sections separated by blank lines, each with its header row: the layer and thresholds, the
    /// per-layer series (long format), the token categories and the heads (Table 1). The Figure 1
    /// matrices are each heatmap's own figure (hiddenView() etc. are Figures too).
    QString figureCsv() const override;
    Provenance figureProvenance() const override { return m_data.provenance; }
    /// "systematic-L2" (1-based layer).
    QString figureName() const override;

Q_SIGNALS:
    /// A column of the |h| heatmap was clicked: hidden channel, 0-based.
    void channelClicked(int channel);
    /// A column of the attention heatmap was clicked: key token, 0-based.
    void keyClicked(int key);
    /// A row of Table 1 or a bar of the heads chart was clicked; 0-based.
    void headClicked(int head);

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    struct Panel
    {
        HeatmapView* view = nullptr;
        QLabel* message = nullptr;
        QStackedWidget* stack = nullptr;
        bool autoFit = true; ///< cells follow the panel's size until the user zooms
    };

    QString titleText() const;
    QStringList footerLines() const;
    void fillPanels();
    void fitPanel(int index);
    void fillCharts();
    void fillHeadTable();
    void selectHead(int head);

    SystematicViewData m_data;
    std::array<Panel, 4> m_panels;
    std::array<QChartView*, 6> m_chartViews{}; ///< 4 per layer, tokens, heads
    QLabel* m_title = nullptr;
    QLabel* m_details = nullptr;
    QTabWidget* m_tabs = nullptr;
    QTableWidget* m_headTable = nullptr;
    QLabel* m_tableCaption = nullptr;
    int m_selectedHead = -1;
};

} // namespace outlierlens
