#pragma once
// GUI thread.

#include "figure.h"
#include "view_data.h"

#include <QImage>
#include <QVector>
#include <QWidget>

namespace outlierlens {

/// Every layer x head at a glance: a grid of attention thumbnails (rows = layers 1..L, columns = heads
/// 1..H, as displayed) with the no-op score printed under each and a red frame on high scores; a legend
/// says what the score means. Clicking a thumbnail, or Enter on the keyboard-focused one (arrow keys
/// move the focus), emits headActivated() with 0-based numbers. The grid fits the widget; put it in a
/// QScrollArea for models with many layers.
class OverviewGrid : public QWidget, public Figure
{
    Q_OBJECT
public:
    explicit OverviewGrid(QWidget* parent = nullptr);

    void setData(const OverviewData& data);
    const OverviewData& data() const { return m_data; }
    /// Scores at or above this get the colour cue (default 0.5).
    void setHighScoreThreshold(double threshold);
    double highScoreThreshold() const { return m_threshold; }
    /// The keyboard focus cell, 0-based.
    int currentLayer() const { return m_currentLayer; }
    int currentHead() const { return m_currentHead; }
    void setCurrent(int layer, int head);
    /// Where the thumbnail of a head is drawn, in widget coordinates (0-based layer and head).
    QRect thumbnailRect(int layer, int head) const;

    // Figure
    QSize preferredFigureSize() const override;
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// layer, head (1-based, as displayed), score.
    QString figureCsv() const override;
    Provenance figureProvenance() const override { return m_data.provenance; }
    QString figureName() const override { return QStringLiteral("overview"); }

Q_SIGNALS:
    /// A head was chosen (click, Enter, Return or Space); 0-based.
    void headActivated(int layer, int head);
    void currentChanged(int layer, int head);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    bool event(QEvent* event) override;
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

private:
    struct Style;
    struct Layout;

    Style widgetStyle() const;
    static Style figureStyle();
    Layout layoutFor(const QRectF& area, const Style& style) const;
    void paintGrid(QPainter& painter, const Layout& layout, const Style& style, bool interactive) const;
    QString legendText() const;
    bool tileAt(const QPoint& pos, int* layer, int* head) const;
    const QImage& scaledThumbnail(int index, int pixels) const;
    QSize sizeForTile(double tile, const Style& style) const;

    OverviewData m_data;
    QVector<QImage> m_thumbnails;     // at most kMaxThumbnail cells a side, coloured
    mutable QVector<QImage> m_scaled; // the thumbnails at m_scaledSize pixels, for the widget
    mutable int m_scaledSize = -1;
    double m_colorMax = 1;
    double m_threshold = 0.5;
    int m_currentLayer = 0;
    int m_currentHead = 0;
};

} // namespace outlierlens
