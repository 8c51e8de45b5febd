#pragma once
// GUI thread.

#include "figure.h"
#include "view_data.h"

#include <QStringList>
#include <QVector>
#include <QWidget>

class QLabel;
class QSplitter;

namespace outlierlens {

class HeadView;

/// One model's head for CompareView: same input, layer and head as the others.
struct CompareEntry
{
    QString modelName;   ///< e.g. "vanilla", "clipped softmax (gamma -0.03)", "gated attention"
    QStringList metrics; ///< a few caption lines, e.g. "max inf norm 73.2", "kurtosis 1,830"
    HeadViewData head;
};

/// Two or three models' views of the same head for the same input, each with a caption (model name and
/// metrics), under one title "Layer L, head H" (1-based). Side by side or stacked: a head's panels are wide
/// when T is small (T x d_head values), so Automatic puts them side by side only when that gives a
/// reasonable shape. Zoom and vertical scrolling are shared by all entries.
/// On screen, Automatic takes the arrangement that gives the larger cells in the view's own size
/// (and follows its resizing); the view never asks for more room than it has, so it does not push
/// the window's docks aside.
class CompareView : public QWidget, public Figure
{
    Q_OBJECT
public:
    enum class Arrangement { Automatic, SideBySide, Stacked };

    explicit CompareView(QWidget* parent = nullptr);

    void setEntries(const QVector<CompareEntry>& entries);
    const QVector<CompareEntry>& entries() const { return m_entries; }
    void setArrangement(Arrangement arrangement);
    /// V and P.V next to each model's probabilities (off by default: the probabilities get the room).
    void setValuePanelsVisible(bool visible);
    bool valuePanelsVisible() const { return m_valuePanels; }
    /// Each query's probabilities binned by size next to each model's probabilities (Figure 14: clipped
    /// softmax's exact zeros against vanilla's tail of tiny probabilities); off by default.
    void setDistributionPanelsVisible(bool visible);
    bool distributionPanelsVisible() const { return m_distributionPanels; }
    Arrangement arrangement() const { return m_arrangement; }
    /// Qt::Horizontal: side by side; Qt::Vertical: stacked (what Automatic chose for the current data).
    Qt::Orientation orientation() const;
    /// "Layer L, head H" (1-based).
    QString title() const;
    HeadView* headView(int index) const { return m_heads.value(index); }
    /// The caption text of an entry: model name, then the metric lines.
    QString caption(int index) const;

    // Figure
    QSize preferredFigureSize() const override;
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// Long format: model, panel, row, col, row_label, col_label, value (row and col 0-based).
    QString figureCsv() const override;
    Provenance figureProvenance() const override;
    QString figureName() const override;
    /// The heads' common cell size when the whole comparison fits `size` in `orientation`.
    double figureCellSizeFor(const QSizeF& size, Qt::Orientation orientation) const;

protected:
    void resizeEvent(QResizeEvent* event) override;
    void showEvent(QShowEvent* event) override;

private:
    double captionHeight() const;
    double figureTitleHeight() const;
    QSizeF figureExtent(double cellSize, Qt::Orientation orientation) const;
    void applyOrientation();

    QVector<CompareEntry> m_entries;
    QVector<HeadView*> m_heads;
    QVector<QLabel*> m_captions;
    QLabel* m_title = nullptr;
    QSplitter* m_splitter = nullptr;
    bool m_valuePanels = false;
    bool m_distributionPanels = false;
    Arrangement m_arrangement = Arrangement::Automatic;
    bool m_syncing = false;
};

} // namespace outlierlens
