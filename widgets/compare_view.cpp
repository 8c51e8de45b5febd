#include "compare_view.h"

#include "figure_style.h"
#include "head_view.h"

#include <QFontMetricsF>
#include <QLabel>
#include <QPainter>
#include <QResizeEvent>
#include <QSplitter>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace outlierlens {
namespace {

constexpr double kEntryGap = 24.0;     // between models in figures
constexpr int kSideCaptionWidth = 200; // on screen, a stacked model's caption beside its head
constexpr double kCaptionGap = 4.0;

} // namespace

CompareView::CompareView(QWidget* parent)
    : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    m_title = makeViewTitle(this);
    layout->addWidget(m_title);
    m_splitter = new QSplitter(Qt::Horizontal, this);
    m_splitter->setChildrenCollapsible(false);
    layout->addWidget(m_splitter, 1); // the title keeps its height, the models take the rest
}

void CompareView::setEntries(const QVector<CompareEntry>& entries)
{
    m_entries = entries;
    // Rebuild the columns: there are only two or three, and their panels depend on the data (gates).
    for (HeadView* view : m_heads) {
        QWidget* column = view->parentWidget();
        column->hide();
        column->setParent(nullptr);
        column->deleteLater();
    }
    m_heads.clear();
    m_captions.clear();
    for (int i = 0; i < m_entries.size(); ++i) {
        auto* column = new QWidget(m_splitter);
        // The columns take what the view has; their panels' size hints must not widen the window.
        column->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Ignored);
        column->setMinimumSize(1, 1);
        auto* layout = new QVBoxLayout(column);
        layout->setContentsMargins(2, 2, 2, 2);
        auto* captionLabel = new QLabel(column);
        captionLabel->setTextFormat(Qt::RichText);
        QStringList lines{QStringLiteral("<b>%1</b>").arg(m_entries[i].modelName.toHtmlEscaped())};
        for (const QString& metric : m_entries[i].metrics)
            lines << metric.toHtmlEscaped();
        captionLabel->setText(lines.join(QStringLiteral("<br>")));
        captionLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
        captionLabel->setWordWrap(true); // a narrow column wraps its caption instead of cutting it
        captionLabel->setAlignment(Qt::AlignLeft | Qt::AlignTop);
        layout->addWidget(captionLabel);
        auto* head = new HeadView(column);
        head->setTitleVisible(false);
        head->setValuePanelsVisible(m_valuePanels);
        head->setDistributionPanelVisible(m_distributionPanels);
        head->setData(m_entries[i].head);
        layout->addWidget(head, 1);
        m_splitter->addWidget(column);
        m_heads.append(head);
        m_captions.append(captionLabel);

        // The same head of different models: keep rows lined up across the models too.
        connect(head, &HeadView::userZoomed, this, [this, head](double cellSize, bool fit) {
            if (m_syncing) return;
            m_syncing = true;
            for (HeadView* other : m_heads)
                if (other != head) {
                    if (fit)
                        other->fitToWindow();
                    else
                        other->setCellSize(cellSize);
                    other->setVerticalScroll(head->verticalScroll());
                }
            m_syncing = false;
        });
        connect(head, &HeadView::verticalScrolled, this, [this, head](int value) {
            if (m_syncing) return;
            m_syncing = true;
            for (HeadView* other : m_heads)
                if (other != head) other->setVerticalScroll(value);
            m_syncing = false;
        });
    }
    m_title->setText(title());
    applyOrientation();
    m_splitter->setSizes(QList<int>(m_splitter->count(), 1 << 20)); // equal shares
}

void CompareView::setValuePanelsVisible(bool visible)
{
    m_valuePanels = visible;
    for (HeadView* head : m_heads)
        head->setValuePanelsVisible(visible);
    applyOrientation();
}

void CompareView::setDistributionPanelsVisible(bool visible)
{
    m_distributionPanels = visible;
    for (HeadView* head : m_heads)
        head->setDistributionPanelVisible(visible);
    applyOrientation();
}

void CompareView::showEvent(QShowEvent* event)
{
    // A view resized before it was shown had its resize event while hidden, with no room to measure.
    QWidget::showEvent(event);
    if (m_arrangement == Arrangement::Automatic) applyOrientation();
}

void CompareView::resizeEvent(QResizeEvent* event)
{
    QWidget::resizeEvent(event);
    if (m_arrangement == Arrangement::Automatic) applyOrientation();
}

void CompareView::setArrangement(Arrangement arrangement)
{
    m_arrangement = arrangement;
    applyOrientation();
}

void CompareView::applyOrientation()
{
    const Qt::Orientation o = orientation();
    // Stacked models put their caption beside the head (width is what they have spare), side-by-side ones
    // above it.
    for (int i = 0; i < m_heads.size() && i < m_captions.size(); ++i) {
        if (auto* box = qobject_cast<QBoxLayout*>(m_heads[i]->parentWidget()->layout()))
            box->setDirection(o == Qt::Vertical ? QBoxLayout::LeftToRight : QBoxLayout::TopToBottom);
        m_captions[i]->setMaximumWidth(o == Qt::Vertical ? kSideCaptionWidth : QWIDGETSIZE_MAX);
    }
    if (m_splitter->orientation() == o) return;
    m_splitter->setOrientation(o);
    // Equal shares along the new direction.
    m_splitter->setSizes(QList<int>(m_splitter->count(), 1 << 20));
}

Qt::Orientation CompareView::orientation() const
{
    if (m_arrangement != Arrangement::Automatic)
        return m_arrangement == Arrangement::SideBySide ? Qt::Horizontal : Qt::Vertical;
    if (m_heads.isEmpty()) return Qt::Horizontal;
    // On screen: the arrangement with the larger cells in the room each head really gets, after the
    // on-screen captions (wrapped to their column's width, in the widget font) and the title: stacking three
    // models at 1280 x 800 left each head less height than its panels needed, and the last one was cut.
    if (isVisible() && width() >= 200 && height() >= 200 && m_captions.size() == m_heads.size()) {
        const int n = int(m_heads.size());
        const double titleHeight = m_title ? m_title->sizeHint().height() : 0.0;
        const auto cellFor = [&](Qt::Orientation o) {
            const double columnWidth =
                (o == Qt::Horizontal ? (width() - 8.0 * (n - 1)) / n : double(width())) - 4.0; // margins
            double smallest = 1e9;
            for (int i = 0; i < n; ++i) {
                const double rows = o == Qt::Horizontal ? height() - titleHeight
                                                        : (height() - titleHeight - 8.0 * (n - 1)) / n;
                // Side by side: the caption above the head; stacked: beside it (applyOrientation()).
                const QSizeF room =
                    o == Qt::Horizontal
                        ? QSizeF(columnWidth, rows - m_captions[i]->heightForWidth(int(columnWidth)) - 8.0)
                        : QSizeF(columnWidth - kSideCaptionWidth - 8.0, rows - 4.0);
                // As the head will fit itself: rows, then columns narrowed to a share of them; a cell
                // counts by the geometric mean of its sides.
                const auto [rowHeight, columnShare] = m_heads[i]->fitCellsFor(room.toSize());
                smallest = std::min(smallest, rowHeight * std::sqrt(columnShare));
            }
            return smallest;
        };
        // Side by side (captions above, rows lined up) unless stacking gives clearly larger cells.
        return 1.05 * cellFor(Qt::Horizontal) >= cellFor(Qt::Vertical) ? Qt::Horizontal : Qt::Vertical;
    }
    // Not laid out yet: the shape closer to a 16:10 landscape page wins, at the heads' preferred cell size.
    const HeadView* first = m_heads.first();
    const double s = first->figureCellSizeFor(first->preferredFigureSize());
    const auto badness = [&](Qt::Orientation o) {
        const QSizeF e = figureExtent(s, o);
        return std::abs(std::log(e.width() / std::max(e.height(), 1.0) / 1.6));
    };
    return badness(Qt::Horizontal) <= badness(Qt::Vertical) ? Qt::Horizontal : Qt::Vertical;
}

QString CompareView::title() const
{
    if (m_entries.isEmpty() || m_entries.first().head.layer < 0) return tr("No head selected");
    const HeadViewData& head = m_entries.first().head;
    return tr("Layer %1, head %2").arg(head.layer + 1).arg(head.head + 1);
}

QString CompareView::caption(int index) const
{
    if (index < 0 || index >= m_entries.size()) return QString();
    return (QStringList{m_entries[index].modelName} + m_entries[index].metrics).join(QLatin1Char('\n'));
}

// ---- Figure ----

double CompareView::captionHeight() const
{
    int lines = 0;
    for (const CompareEntry& entry : m_entries)
        lines = std::max(lines, int(entry.metrics.size()));
    return std::ceil(QFontMetricsF(FigureStyle::captionFont()).height()) +
           lines * std::ceil(QFontMetricsF(FigureStyle::smallFont()).height()) + 2 * kCaptionGap;
}

double CompareView::figureTitleHeight() const
{
    return std::ceil(QFontMetricsF(FigureStyle::titleFont()).height()) + 8;
}

QSizeF CompareView::figureExtent(double cellSize, Qt::Orientation orientation) const
{
    double width = 0, height = 0;
    for (HeadView* head : m_heads) {
        const QSize e = head->figureExtent(cellSize);
        if (orientation == Qt::Horizontal) {
            width += e.width();
            height = std::max(height, captionHeight() + e.height());
        } else {
            width = std::max(width, double(e.width()));
            height += captionHeight() + e.height();
        }
    }
    const double gaps = kEntryGap * std::max(0, int(m_heads.size()) - 1);
    return orientation == Qt::Horizontal ? QSizeF(width + gaps, height + figureTitleHeight())
                                         : QSizeF(width, height + gaps + figureTitleHeight());
}

double CompareView::figureCellSizeFor(const QSizeF& size, Qt::Orientation orientation) const
{
    // Extents grow linearly with the cell size, except for the max(): bisect.
    double lo = 0.05, hi = 96.0;
    for (int i = 0; i < 40; ++i) {
        const double mid = 0.5 * (lo + hi);
        const QSizeF e = figureExtent(mid, orientation);
        (e.width() <= size.width() && e.height() <= size.height() ? lo : hi) = mid;
    }
    return lo;
}

QSize CompareView::preferredFigureSize() const
{
    if (m_heads.isEmpty()) return QSize(480, 240);
    const HeadView* first = m_heads.first();
    const double s = first->figureCellSizeFor(first->preferredFigureSize());
    return figureExtent(s, orientation()).toSize().expandedTo(QSize(480, 240));
}

void CompareView::paintFigure(QPainter& painter, const QRect& area) const
{
    painter.fillRect(area, FigureStyle::background());
    const Qt::Orientation o = orientation();
    const double s = figureCellSizeFor(area.size(), o);
    const QSizeF extent = figureExtent(s, o);
    QPointF at(area.left() + std::max(0.0, (area.width() - extent.width()) / 2), area.top());
    painter.save();
    painter.setFont(FigureStyle::titleFont());
    painter.setPen(FigureStyle::text());
    painter.drawText(QRectF(at.x(), at.y(), std::max(extent.width(), 300.0), figureTitleHeight()),
                     Qt::AlignLeft | Qt::AlignVCenter, title());
    painter.restore();
    at.ry() += figureTitleHeight();
    const QFontMetricsF captionMetrics(FigureStyle::captionFont());
    const QFontMetricsF smallMetrics(FigureStyle::smallFont());
    for (int i = 0; i < m_heads.size(); ++i) {
        const QSize e = m_heads[i]->figureExtent(s);
        painter.save();
        double y = at.y() + kCaptionGap;
        painter.setFont(FigureStyle::captionFont());
        painter.setPen(FigureStyle::text());
        const double width = std::max(double(e.width()), 200.0);
        painter.drawText(QRectF(at.x(), y, width, captionMetrics.height()), Qt::AlignLeft | Qt::AlignVCenter,
                         captionMetrics.elidedText(m_entries[i].modelName, Qt::ElideRight, width));
        y += std::ceil(captionMetrics.height());
        painter.setFont(FigureStyle::smallFont());
        painter.setPen(FigureStyle::secondaryText());
        for (const QString& metric : m_entries[i].metrics) {
            painter.drawText(QRectF(at.x(), y, width, smallMetrics.height()),
                             Qt::AlignLeft | Qt::AlignVCenter,
                             smallMetrics.elidedText(metric, Qt::ElideRight, width));
            y += std::ceil(smallMetrics.height());
        }
        painter.restore();
        m_heads[i]->paintFigureWithCellSize(painter, QPointF(at.x(), at.y() + captionHeight()), s);
        if (o == Qt::Horizontal)
            at.rx() += e.width() + kEntryGap;
        else
            at.ry() += captionHeight() + e.height() + kEntryGap;
    }
}

QString CompareView::figureCsv() const
{
    QString csv = QStringLiteral("model,panel,row,col,row_label,col_label,value\n");
    for (int i = 0; i < m_heads.size(); ++i) {
        const QString prefix = csvField(m_entries[i].modelName) + QLatin1Char(',');
        const QString body = m_heads[i]->figureCsv();
        for (qsizetype start = body.indexOf(QLatin1Char('\n')) + 1; start > 0 && start < body.size();) {
            qsizetype end = body.indexOf(QLatin1Char('\n'), start);
            if (end < 0) end = body.size() - 1;
            csv += prefix;
            csv += QStringView(body).mid(start, end - start + 1);
            start = end + 1;
        }
    }
    return csv;
}

Provenance CompareView::figureProvenance() const
{
    Provenance p;
    QStringList models, hashes;
    for (const CompareEntry& entry : m_entries) {
        models << (entry.head.provenance.model.isEmpty() ? entry.modelName : entry.head.provenance.model);
        hashes << entry.head.provenance.checkpointSha256;
    }
    p.model = models.join(QStringLiteral(" | "));
    p.checkpointSha256 = hashes.join(QStringLiteral(" | "));
    if (!m_entries.isEmpty()) {
        p.input = m_entries.first().head.provenance.input;
        const HeadViewData& head = m_entries.first().head;
        p.selection = head.provenance.selection.isEmpty() && head.layer >= 0
                          ? tr("layer %1, head %2").arg(head.layer + 1).arg(head.head + 1)
                          : head.provenance.selection;
    }
    return p;
}

QString CompareView::figureName() const
{
    if (m_entries.isEmpty() || m_entries.first().head.layer < 0) return QStringLiteral("compare");
    const HeadViewData& head = m_entries.first().head;
    return QStringLiteral("compare-L%1-H%2").arg(head.layer + 1).arg(head.head + 1);
}

} // namespace outlierlens
