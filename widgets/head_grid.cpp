#include "head_grid.h"

#include "chart_support.h"
#include "figure_style.h"
#include "head_view.h"

#include <QScrollArea>
#include <QVBoxLayout>

namespace outlierlens {
namespace {

/// A row's height in the window: enough for a readable attention matrix, the rest scrolls.
constexpr int kRowHeight = 360;

} // namespace

HeadGrid::HeadGrid(QWidget* parent)
    : QWidget(parent)
{
    m_scroll = new QScrollArea(this);
    m_scroll->setWidgetResizable(true);
    m_scroll->setFrameShape(QFrame::NoFrame);
    auto* body = new QWidget(m_scroll);
    m_rows = new QVBoxLayout(body);
    m_rows->setContentsMargins(0, 0, 0, 0);
    m_rows->addStretch(1);
    m_scroll->setWidget(body);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_scroll);
}

void HeadGrid::setHeads(const QVector<HeadViewData>& heads)
{
    m_heads = heads;
    while (m_views.size() > heads.size())
        delete m_views.takeLast();
    while (m_views.size() < heads.size()) {
        auto* view = new HeadView;
        view->setMinimumHeight(kRowHeight);
        const int index = int(m_views.size());
        connect(view, &HeadView::cellClicked, this, [this, index] { Q_EMIT headClicked(index); });
        m_rows->insertWidget(m_rows->count() - 1, view); // before the stretch
        m_views << view;
    }
    for (int i = 0; i < heads.size(); ++i)
        m_views[i]->setData(heads[i]);
}

void HeadGrid::setHighlightedTokens(const QVector<int>& tokens)
{
    for (HeadView* view : m_views)
        view->setHighlightedTokens(tokens);
}

QSize HeadGrid::preferredFigureSize() const
{
    QSize size(480, 0);
    for (const HeadView* view : m_views) {
        const QSize one = view->preferredFigureSize();
        size = QSize(std::max(size.width(), one.width()), size.height() + one.height());
    }
    return size.expandedTo(QSize(480, 240));
}

void HeadGrid::paintFigure(QPainter& painter, const QRect& area) const
{
    painter.fillRect(area, FigureStyle::background());
    int total = 0;
    for (const HeadView* view : m_views)
        total += view->preferredFigureSize().height();
    double y = area.top();
    for (const HeadView* view : m_views) { // each head gets its share of the height
        const double h = total > 0 ? double(area.height()) * view->preferredFigureSize().height() / total : 0;
        view->paintFigure(painter, QRect(area.left(), int(y), area.width(), int(h)));
        y += h;
    }
}

QString HeadGrid::figureCsv() const
{
    QString csv = QStringLiteral("layer (1-based),head (1-based),panel,row,col,row_label,col_label,value\n");
    for (int i = 0; i < m_views.size(); ++i) {
        csv += charts::prefixedCsvRows(
            m_views[i]->figureCsv(),
            QStringLiteral("%1,%2,").arg(m_heads[i].layer + 1).arg(m_heads[i].head + 1));
    }
    return csv;
}

Provenance HeadGrid::figureProvenance() const
{
    Provenance p = m_heads.isEmpty() ? Provenance{} : m_heads.first().provenance;
    if (!m_heads.isEmpty())
        p.selection = QStringLiteral("layer %1, heads %2-%3")
                          .arg(m_heads.first().layer + 1)
                          .arg(m_heads.first().head + 1)
                          .arg(m_heads.last().head + 1);
    return p;
}

QString HeadGrid::figureName() const
{
    if (m_heads.isEmpty()) return QStringLiteral("heads");
    for (const HeadViewData& h : m_heads)
        if (h.layer != m_heads.first().layer) return QStringLiteral("heads");
    return QStringLiteral("heads-L%1").arg(m_heads.first().layer + 1);
}

} // namespace outlierlens
