#include "teaching_view.h"

#include "figure_painting.h"

#include <QFontMetricsF>
#include <QPainter>
#include <QPolygonF>

#include <algorithm>
#include <cmath>

namespace outlierlens {

using namespace painting;

namespace {

const QColor kText(25, 25, 25);
const QColor kMuted(95, 95, 95);
const QColor kBoxBorder(95, 115, 145);
const QColor kArrow(70, 70, 70);
const QColor kProblem(196, 58, 44); // where the outliers come from
const QColor kProblemFill(253, 235, 231);
const QColor kFix(28, 135, 76); // where the fix acts
const QColor kFixFill(230, 246, 235);
const QColor kCaptionFill(241, 244, 249);
const QString kNone = QStringLiteral("\u2013");

QString range(double lo, double hi)
{
    return displayNumber(lo) + QStringLiteral(" \u2026 ") + displayNumber(hi);
}

QString quoted(const QString& text)
{
    return QChar(0x201c) + text + QChar(0x201d);
}

QString csvField(const QString& text)
{
    if (!text.contains(QLatin1Char(',')) && !text.contains(QLatin1Char('"')) &&
        !text.contains(QLatin1Char('\n')))
        return text;
    QString escaped = text;
    escaped.replace(QLatin1Char('"'), QStringLiteral("\"\""));
    return QLatin1Char('"') + escaped + QLatin1Char('"');
}

} // namespace

struct TeachingView::Box
{
    QString title;
    QString detail;     ///< what the number is
    QStringList values; ///< the live numbers, bold
    int accent = 0;     ///< 0 plain, 1 where outliers come from, 2 where the fix acts
};

TeachingView::TeachingView(QWidget* parent)
    : QWidget(parent)
{
    setAttribute(Qt::WA_OpaquePaintEvent);
}

void TeachingView::setData(const TeachingData& data)
{
    m_data = data;
    m_hasData = true;
    update();
}

TeachingView::Kind TeachingView::kind() const
{
    if (m_data.gated) return Kind::Gated;
    return m_data.clipped ? Kind::Clipped : Kind::Vanilla;
}

QString TeachingView::outlierSentence() const
{
    const TeachingData& d = m_data;
    const QString key = quoted(d.largestProbabilityKey);
    if (d.keyOutliers < 0)
        return tr("Layer 1 reads the embeddings: no earlier layer can have written an outlier.");
    const QString where = tr("layer %1's %2").arg(d.layer).arg(d.outlierTensor);
    if (d.keyOutliers > 0)
        return tr("%1 carries %2 values over %3 in %4 (max |x| %5): those are the outliers.")
            .arg(key)
            .arg(d.keyOutliers)
            .arg(d.outlierRule, where, displayNumber(d.keyInputMax));
    return tr("No outlier at %1: nothing over %2 in %3 there (max |x| %4).")
        .arg(key, d.outlierRule, where, displayNumber(d.keyInputMax));
}

QString TeachingView::caption() const
{
    const TeachingData& d = m_data;
    if (!m_hasData)
        return tr("Choose a token, a layer and a head to see the live numbers.") + QLatin1Char('\n') +
               tr("Red boxes show where outliers come from, green ones where a fix acts.");
    const QString key = quoted(d.largestProbabilityKey);
    const QString largest = tr("largest p = %1 on %2").arg(displayNumber(d.largestProbability), key);
    switch (kind()) {
    case Kind::Gated: {
        const QString gate = displayNumber(d.gate);
        const QString state =
            d.gate < kGateClosed
                ? tr("The gate is closed (\u03c0 = %1 < %2): the head adds almost nothing to this token")
                      .arg(gate, displayNumber(kGateClosed))
            : d.gate > kGateOpen ? tr("The gate is open (\u03c0 = %1 > %2): the head updates this token")
                                       .arg(gate, displayNumber(kGateOpen))
                                 : tr("The gate is half open (\u03c0 = %1, between %2 and %3)")
                                       .arg(gate, displayNumber(kGateClosed), displayNumber(kGateOpen));
        return state + tr("; %1.").arg(largest) + QLatin1Char('\n') + outlierSentence();
    }
    case Kind::Clipped:
        if (d.visibleKeys > 0 && d.exactZeros == d.visibleKeys)
            return tr("Clipped softmax: all %1 of this query's probabilities are exactly 0: the head is "
                      "switched off here and adds nothing.")
                       .arg(d.visibleKeys) +
                   QLatin1Char('\n') + outlierSentence();
        return tr("Clipped softmax: %1 of this query's %2 probabilities are exactly 0; %3.")
                   .arg(d.exactZeros)
                   .arg(d.visibleKeys)
                   .arg(largest) +
               QLatin1Char('\n') + outlierSentence();
    case Kind::Vanilla:
        break;
    }
    // One definition of a sink (docs/metrics.md, "Sink tokens"): a head does nothing when it parks at
    // least kSink of this query's attention on sink tokens; much attention on another token is reading it.
    const QString sinks = d.sinkTokens.isEmpty() ? tr("sink tokens") : d.sinkTokens;
    if (d.sinkProbability >= kSink)
        return tr("To do nothing, the head puts %1 of its attention on sink tokens (%2; at least %3: a sink) "
                  "and adds |P\u00b7V| = %4.")
                   .arg(displayNumber(d.sinkProbability), sinks, displayNumber(kSink),
                        displayNumber(d.contextNorm)) +
               QLatin1Char('\n') + outlierSentence();
    if (d.largestProbability >= kSink)
        return tr("The head puts p = %1 on %2, which is no sink token (%3): it reads that token rather "
                  "than doing nothing (%4 on sinks).")
                   .arg(displayNumber(d.largestProbability), key, sinks, displayNumber(d.sinkProbability)) +
               QLatin1Char('\n') + outlierSentence();
    return tr("Here the head spreads its attention (%1 < %2; %3 on sink tokens): it is not doing nothing.")
               .arg(largest, displayNumber(kSink), displayNumber(d.sinkProbability)) +
           QLatin1Char('\n') + outlierSentence();
}

QVector<TeachingView::Box> TeachingView::boxes() const
{
    const TeachingData& d = m_data;
    const Kind k = kind();
    const bool vanilla = k == Kind::Vanilla;
    const auto live = [&](const QString& text) { return m_hasData ? text : kNone; };
    QVector<Box> out;
    // Where the outlier sits: the previous layer's output at the key the head attends to most.
    out.append({tr("previous layer"),
                d.keyOutliers >= 0
                    ? tr("layer %1, max |x| at %2").arg(d.layer).arg(quoted(d.largestProbabilityKey))
                    : tr("max |x| at the key"),
                {live(d.keyOutliers >= 0 ? displayNumber(d.keyInputMax) : kNone)},
                d.keyOutliers > 0 ? 1 : 0});
    if (d.preLayerNorm) {
        // Pre-LN: the FFN output joins the residual stream, which a LayerNorm normalises for Q, K, V.
        out.append(
            {tr("+ residual"), tr("block input range"), {live(range(d.layerNormMin, d.layerNormMax))}, 0});
        out.append({tr("LayerNorm"), tr("normalises the block input"), {}, 0});
    } else {
        out.append({tr("+ residual"), tr("x + FFN(x)"), {}, 0});
        out.append({tr("LayerNorm"), tr("output range"), {live(range(d.layerNormMin, d.layerNormMax))}, 0});
    }
    out.append({tr("Q, K, V"),
                d.layer >= 0 && d.head >= 0 ? tr("layer %1, head %2").arg(d.layer + 1).arg(d.head + 1)
                                            : tr("one head"),
                {},
                0});
    out.append({k == Kind::Clipped ? tr("clipped softmax") : tr("softmax"),
                tr("input range, largest p"),
                {live(range(d.softmaxInputMin, d.softmaxInputMax)),
                 live(displayNumber(d.largestProbability) + QStringLiteral(" \u2192 ") +
                      quoted(d.largestProbabilityKey))},
                vanilla && d.sinkProbability >= kSink ? 1 : (k == Kind::Clipped ? 2 : 0)});
    out.append({tr("P \u00b7 V"), tr("|P\u00b7V| of this token"), {live(displayNumber(d.contextNorm))}, 0});
    if (k == Kind::Gated)
        out.append({tr("gate \u03c0"),
                    tr("\u03c3(G(x)) scales P\u00b7V"),
                    {live(QStringLiteral("\u03c0 = ") + displayNumber(d.gate))},
                    2});
    out.append({tr("output projection"), tr("heads merged, W\u2092"), {}, 0});
    return out;
}

QStringList TeachingView::boxTitles() const
{
    QStringList titles;
    for (const Box& box : boxes())
        titles << box.title;
    return titles;
}

QSize TeachingView::preferredFigureSize() const
{
    return QSize(1280, 720);
}

QSize TeachingView::sizeHint() const
{
    return QSize(1100, 620);
}

QSize TeachingView::minimumSizeHint() const
{
    return QSize(480, 270);
}

void TeachingView::paintFigure(QPainter& p, const QRect& areaRect) const
{
    const QRectF area(areaRect);
    const double b = std::max(6.0, std::min(area.width() / 46.0, area.height() / 26.0));
    const TeachingData& d = m_data;
    p.save();
    p.setClipRect(areaRect);
    p.fillRect(areaRect, Qt::white);
    p.setRenderHint(QPainter::Antialiasing, true);
    p.setRenderHint(QPainter::TextAntialiasing, true);

    const QRectF inner = area.adjusted(0.8 * b, 0.6 * b, -0.8 * b, -0.5 * b);
    const QRectF title(inner.left(), inner.top(), inner.width(), 1.6 * b);
    const QRectF subtitle(inner.left(), title.bottom(), inner.width(), 1.2 * b);
    const QRectF footer(inner.left(), inner.bottom() - 1.0 * b, inner.width(), 1.0 * b);
    const QRectF captionBox(inner.left(), footer.top() - 0.4 * b - 3.2 * b, inner.width(), 3.2 * b);
    const QRectF diagram(inner.left(), subtitle.bottom() + 0.6 * b, inner.width(),
                         captionBox.top() - 0.6 * b - subtitle.bottom() - 0.6 * b);

    p.setPen(kText);
    drawFitted(p, title, Qt::AlignLeft | Qt::AlignVCenter, tr("How an attention head does nothing"),
               pixelFont(1.2 * b, true));
    QStringList what;
    if (!d.token.isEmpty()) what << tr("token %1").arg(quoted(d.token));
    if (d.layer >= 0 && d.head >= 0) what << tr("layer %1, head %2").arg(d.layer + 1).arg(d.head + 1);
    if (!d.modelDescription.isEmpty()) what << d.modelDescription;
    // Legend of the accents, right-aligned on the subtitle line.
    const Kind k = kind();
    const bool problem = k == Kind::Vanilla;
    const QString legend = problem ? tr("where outliers come from") : tr("where the fix acts");
    const QFont legendFont = pixelFont(0.7 * b);
    const double legendWidth = QFontMetricsF(legendFont, p.device()).horizontalAdvance(legend);
    const QRectF swatch(subtitle.right() - legendWidth - 1.5 * b, subtitle.center().y() - 0.4 * b, 0.9 * b,
                        0.8 * b);
    p.setPen(QPen(problem ? kProblem : kFix, 0.14 * b));
    p.setBrush(problem ? kProblemFill : kFixFill);
    p.drawRoundedRect(swatch, 0.2 * b, 0.2 * b);
    p.setPen(kMuted);
    p.setFont(legendFont);
    p.drawText(QRectF(swatch.right() + 0.4 * b, subtitle.top(), legendWidth + 0.2 * b, subtitle.height()),
               Qt::AlignLeft | Qt::AlignVCenter, legend);
    drawFitted(
        p, QRectF(subtitle.left(), subtitle.top(), swatch.left() - subtitle.left() - b, subtitle.height()),
        Qt::AlignLeft | Qt::AlignVCenter, what.join(QStringLiteral("  \u00b7  ")), pixelFont(0.8 * b));

    // Two rows of boxes: the block's input side, then the head.
    const QVector<Box> all = boxes();
    const int firstRow = 4;
    const int secondRow = int(all.size()) - firstRow;
    const double gap = 1.6 * b, rowGap = 3.2 * b, topRoom = 1.5 * b;
    const double bw = (diagram.width() - 3 * gap) / 4;
    const double bh = std::max(1.0, std::min(4.8 * b, (diagram.height() - topRoom - rowGap) / 2));
    const double y1 =
        diagram.top() + topRoom + std::max(0.0, (diagram.height() - topRoom - rowGap - 2 * bh) / 2);
    const double y2 = y1 + bh + rowGap;
    const double spacing2 = secondRow > 1 ? (diagram.width() - secondRow * bw) / (secondRow - 1) : 0;
    QVector<QRectF> rects;
    for (int i = 0; i < firstRow; ++i)
        rects.append(QRectF(diagram.left() + i * (bw + gap), y1, bw, bh));
    for (int i = 0; i < secondRow; ++i)
        rects.append(QRectF(diagram.left() + i * (bw + spacing2), y2, bw, bh));

    // Arrows first, boxes on top.
    for (int i = 0; i + 1 < rects.size(); ++i) {
        if (i == firstRow - 1) continue; // the row change is drawn below
        drawArrow(p,
                  QPolygonF({QPointF(rects[i].right(), rects[i].center().y()),
                             QPointF(rects[i + 1].left(), rects[i + 1].center().y())}),
                  kArrow, b);
    }
    const QRectF& qkv = rects[firstRow - 1];
    const QRectF& softmax = rects[firstRow];
    const QRectF& product = rects[firstRow + 1];
    const double yQK = qkv.bottom() + rowGap * 0.35, yV = qkv.bottom() + rowGap * 0.68;
    const double xQK = qkv.center().x() - 0.2 * bw, xV = qkv.center().x() + 0.2 * bw;
    drawArrow(p,
              QPolygonF({QPointF(xQK, qkv.bottom()), QPointF(xQK, yQK), QPointF(softmax.center().x(), yQK),
                         QPointF(softmax.center().x(), softmax.top())}),
              kArrow, b);
    drawArrow(
        p,
        QPolygonF({QPointF(xV, qkv.bottom()), QPointF(xV, yV), QPointF(product.center().x() + 0.2 * bw, yV),
                   QPointF(product.center().x() + 0.2 * bw, product.top())}),
        kArrow, b);
    const QRectF& residual = rects[1];
    drawArrow(p,
              QPolygonF({QPointF(residual.center().x(), residual.top() - 1.3 * b),
                         residual.center() - QPointF(0, bh / 2)}),
              kArrow, b);
    p.setPen(kMuted);
    p.setFont(pixelFont(0.75 * b));
    p.drawText(QRectF(softmax.center().x() + 0.3 * b, yQK - 1.2 * b, 4 * b, 1.1 * b),
               Qt::AlignLeft | Qt::AlignBottom, tr("Q, K"));
    p.drawText(QRectF(xV + 0.3 * b, qkv.bottom(), 3 * b, yV - qkv.bottom()), Qt::AlignLeft | Qt::AlignVCenter,
               tr("V"));
    p.drawText(QRectF(residual.center().x() + 0.35 * b, residual.top() - 1.4 * b, bw / 2, 1.2 * b),
               Qt::AlignLeft | Qt::AlignVCenter, tr("x (skip)"));

    const double fb = std::min(b, bh / 4.6); // text scale inside the boxes
    for (int i = 0; i < all.size(); ++i) {
        const Box& box = all[i];
        const QRectF& r = rects[i];
        const QColor border = box.accent == 1 ? kProblem : box.accent == 2 ? kFix : kBoxBorder;
        const QColor fill = box.accent == 1 ? kProblemFill : box.accent == 2 ? kFixFill : QColor(Qt::white);
        p.setPen(QPen(border, (box.accent ? 0.16 : 0.08) * b));
        p.setBrush(fill);
        p.drawRoundedRect(r, 0.35 * b, 0.35 * b);

        struct Line
        {
            QString text;
            QFont font;
            QColor color;
        };
        QVector<Line> lines = {{box.title, pixelFont(0.95 * fb, true), kText}};
        if (!box.detail.isEmpty()) lines.append({box.detail, pixelFont(0.68 * fb), kMuted});
        for (const QString& value : box.values)
            lines.append({value, pixelFont(0.95 * fb, true),
                          box.accent == 1   ? kProblem
                          : box.accent == 2 ? kFix
                                            : kText});
        double total = 0;
        for (const Line& line : lines)
            total += line.font.pixelSize() * 1.3;
        double y = r.center().y() - total / 2;
        const QRectF textArea = r.adjusted(0.35 * b, 0, -0.35 * b, 0);
        for (const Line& line : lines) {
            const double h = line.font.pixelSize() * 1.3;
            p.setPen(line.color);
            drawFitted(p, QRectF(textArea.left(), y, textArea.width(), h), Qt::AlignCenter, line.text,
                       line.font);
            y += h;
        }
    }

    p.setPen(Qt::NoPen);
    p.setBrush(kCaptionFill);
    p.drawRoundedRect(captionBox, 0.4 * b, 0.4 * b);
    const QStringList captionLines = caption().split(QLatin1Char('\n'));
    const QRectF text = captionBox.adjusted(0.7 * b, 0.3 * b, -0.7 * b, -0.3 * b);
    // Both lines at one size, or a shrunk long line looks unrelated to its neighbour. A long line wraps
    // within its half of the box before the size shrinks (shrunk to one line, it had been ~7 px).
    const auto fitsWrapped = [&](int px) {
        for (int i = 0; i < captionLines.size() && i < 2; ++i) {
            const QRectF need =
                QFontMetricsF(pixelFont(px, i == 0))
                    .boundingRect(QRectF(0, 0, text.width(), 1e6), Qt::TextWordWrap, captionLines[i]);
            if (need.height() > text.height() / 2 || need.width() > text.width()) return false;
        }
        return true;
    };
    int captionPx = pixelFont(0.95 * b).pixelSize();
    while (captionPx > 6 && !fitsWrapped(captionPx))
        --captionPx;
    for (int i = 0; i < captionLines.size() && i < 2; ++i) {
        p.setPen(kText);
        p.setFont(pixelFont(captionPx, i == 0));
        p.drawText(QRectF(text.left(), text.top() + i * text.height() / 2, text.width(), text.height() / 2),
                   Qt::AlignLeft | Qt::AlignVCenter | Qt::TextWordWrap, captionLines[i]);
    }

    QStringList provenance;
    for (const QString& part : {d.provenance.model, d.provenance.input})
        if (!part.isEmpty()) provenance << part;
    provenance << Provenance::indexingNote();
    p.setPen(kMuted);
    drawFitted(p, footer, Qt::AlignLeft | Qt::AlignVCenter, provenance.join(QStringLiteral("  \u00b7  ")),
               pixelFont(0.55 * b));
    p.restore();
}

QString TeachingView::figureCsv() const
{
    const TeachingData& d = m_data;
    QString csv = QStringLiteral("quantity,value\n");
    const auto text = [&](const char* name, const QString& value) {
        csv += QLatin1String(name) + QLatin1Char(',') + csvField(value) + QLatin1Char('\n');
    };
    const auto number = [&](const char* name, double value) { text(name, QString::number(value, 'g', 8)); };
    text("model", d.modelDescription);
    text("token", d.token);
    text("layer_1_based", QString::number(d.layer + 1));
    text("head_1_based", QString::number(d.head + 1));
    number("ffn_output_max", d.ffnOutputMax);
    number("layernorm_output_min", d.layerNormMin);
    number("layernorm_output_max", d.layerNormMax);
    number("softmax_input_min", d.softmaxInputMin);
    number("softmax_input_max", d.softmaxInputMax);
    number("largest_probability", d.largestProbability);
    text("largest_probability_key", d.largestProbabilityKey);
    number("largest_key_is_sink", d.largestKeyIsSink ? 1 : 0);
    number("sink_probability", d.sinkProbability);
    number("context_norm", d.contextNorm);
    if (d.gated) number("gate", d.gate);
    if (d.keyOutliers >= 0) {
        text("outlier_rule", d.outlierRule + QLatin1Char(' ') + d.outlierTensor);
        number("key_outliers", d.keyOutliers);
        number("key_input_max", d.keyInputMax);
        number("token_outliers", d.tokenOutliers);
    }
    if (d.clipped) number("exact_zero_probabilities", d.exactZeros);
    return csv;
}

Provenance TeachingView::figureProvenance() const
{
    Provenance provenance = m_data.provenance;
    if (provenance.selection.isEmpty() && m_data.layer >= 0 && m_data.head >= 0)
        provenance.selection = QStringLiteral("token %1, layer %2, head %3")
                                   .arg(quoted(m_data.token))
                                   .arg(m_data.layer + 1)
                                   .arg(m_data.head + 1);
    return provenance;
}

QString TeachingView::figureName() const
{
    if (m_data.layer < 0 || m_data.head < 0) return QStringLiteral("teaching");
    return QStringLiteral("teaching-L%1-H%2").arg(m_data.layer + 1).arg(m_data.head + 1);
}

void TeachingView::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    paintFigure(painter, rect());
}

} // namespace outlierlens
