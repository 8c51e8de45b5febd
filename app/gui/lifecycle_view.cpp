#include "lifecycle_view.h"

#include <algorithm>
#include <cmath>

namespace outlierlens {
namespace {

/// Columns [first, first + width) of a [rows][stride] array as a signed matrix.
MatrixData slice(const float* data, int rows, int stride, int first, int width, const QStringList& tokens,
                 const QString& colTitle, const QString& valueTitle)
{
    MatrixData m;
    m.rows = rows, m.cols = width;
    m.values.resize(rows * width);
    for (int r = 0; r < rows; ++r)
        std::copy_n(data + std::size_t(r) * stride + first, width, m.values.data() + std::size_t(r) * width);
    m.rowLabels = tokens;
    m.rowTitle = QStringLiteral("token");
    m.colTitle = colTitle;
    m.valueTitle = valueTitle;
    return m;
}

/// The column of row `row`'s largest |value| in a [rows][cols] array; -1 for none.
int largestColumn(const float* data, int cols, int row)
{
    if (row < 0 || cols <= 0) return -1;
    const float* r = data + std::size_t(row) * cols;
    return int(std::max_element(r, r + cols, [](float a, float b) { return std::abs(a) < std::abs(b); }) - r);
}

/// The `n` columns of row `row` with the largest |value|, ascending.
QVector<int> largestColumns(const float* data, int cols, int row, int n)
{
    QVector<int> order(cols);
    for (int c = 0; c < cols; ++c)
        order[c] = c;
    if (row < 0) return {};
    const float* r = data + std::size_t(row) * cols;
    n = std::min(n, cols);
    std::partial_sort(order.begin(), order.begin() + n, order.end(),
                      [r](int a, int b) { return std::abs(r[a]) > std::abs(r[b]); });
    QVector<int> top(order.begin(), order.begin() + n);
    std::sort(top.begin(), top.end());
    return top;
}

GridPanel panel(const QString& title, MatrixData matrix, const QVector<int>& rows, const QVector<int>& cols,
                ColorScale scale = ColorScale::Diverging)
{
    GridPanel p;
    p.title = title;
    p.matrix = std::move(matrix);
    p.scale = scale;
    p.rows = rows;
    p.cols = cols;
    return p;
}

/// Letters the panels "(a) ...", in order.
QVector<GridPanel> lettered(QVector<GridPanel> panels)
{
    for (int i = 0; i < panels.size(); ++i) {
        panels[i].label = QStringLiteral("(%1) %2").arg(QChar(QLatin1Char('a' + i))).arg(panels[i].title);
        panels[i].title.clear(); // the label names it
    }
    return panels;
}

const float* layerOf(const QVector<float>& stacked, int layer, int T, int d)
{
    return stacked.size() >= qsizetype(layer + 1) * T * d ? stacked.constData() + std::size_t(layer) * T * d
                                                          : nullptr;
}

/// The largest |value| of `n` values.
double largestAbs(const float* v, std::size_t n)
{
    double m = 0;
    for (std::size_t i = 0; i < n; ++i)
        m = std::max(m, double(std::abs(v[i])));
    return m;
}

} // namespace

LifecycleChoice chooseLifecycle(const InspectionSnapshot& s, int sinkLayer, int sinkHead)
{
    LifecycleChoice c;
    const int L = s.L(), T = s.T, d = s.d();
    const auto carries = [&](int layer, int token) {
        const QVector<int>& perToken = s.outliersOf(QStringLiteral("out"), layer).perToken;
        return token < perToken.size() && perToken[token] > 0;
    };
    for (int l = 0; l < L && c.emergence < 0; ++l) {
        const float* h = layerOf(s.out, l, T, d);
        double best = -1;
        for (int t = 0; h && t < T; ++t)
            if (carries(l, t)) {
                const double v = std::abs(h[largestColumn(h, d, t) + std::size_t(t) * d]);
                if (v > best) best = v, c.token = t, c.emergence = l;
            }
    }
    QString emergenceWhy = QStringLiteral("the first layer whose output has outlier values");
    if (c.emergence < 0) { // no outlier anywhere: the layer whose largest |h| grows most over its input's
        double best = 0;
        double before = largestAbs(s.embeddings.constData(), std::size_t(s.embeddings.size()));
        for (int l = 0; l < L; ++l) {
            const float* out = layerOf(s.out, l, T, d);
            const double now = out ? largestAbs(out, std::size_t(T) * d) : 0;
            if (before > 0 && now / before > best) best = now / before, c.emergence = l;
            before = now;
        }
        emergenceWhy = QStringLiteral("no output has outlier values: the layer whose largest |h| grows most "
                                      "over its input's");
        if (c.emergence < 0) return c;
        const float* h = layerOf(s.out, c.emergence, T, d);
        c.token = h ? int((std::max_element(h, h + std::size_t(T) * d,
                                            [](float a, float b) { return std::abs(a) < std::abs(b); }) -
                           h) /
                          d)
                    : 0;
    }
    for (int position : s.outliersOf(QStringLiteral("out"), c.emergence).positions)
        if (position / d == c.token && !c.channels.contains(position % d)) c.channels << position % d;
    std::sort(c.channels.begin(), c.channels.end());
    // Spread: the head the other figures show when it reads the emergence layer's output or later.
    if (sinkLayer > c.emergence && sinkHead >= 0) {
        c.spread = sinkLayer, c.head = sinkHead;
    } else if (c.emergence + 1 < L) {
        c.spread = c.emergence + 1;
        double best = -1;
        for (int head = 0; head < s.H(); ++head) {
            const float* p = s.probsOf(c.spread, head);
            double sum = 0; // the token's attention from the queries that can see it
            for (int q = c.token; q < T; ++q)
                sum += p[std::size_t(q) * T + c.token];
            if (sum > best) best = sum, c.head = head;
        }
    } else {
        c.noSpread =
            QStringLiteral("the massive activation emerges in the last layer: no later head reads it");
    }
    const bool anyOutlier = c.channels.size() > 0 || carries(c.emergence, c.token);
    for (int l = c.emergence + 1; anyOutlier && l < L && c.disappearance < 0; ++l)
        if (!carries(l, c.token)) c.disappearance = l;
    if (!anyOutlier)
        c.noEnd =
            QStringLiteral("no layer's output has outlier values by the figures' rule: there is no massive "
                           "activation to follow to its end");
    else if (c.disappearance < 0)
        c.noEnd =
            QStringLiteral("token %1 keeps outlier values to the last layer's output: on this input the "
                           "massive activation does not disappear")
                .arg(c.token);
    QStringList channels;
    for (int ch : c.channels)
        channels << QString::number(ch);
    c.note =
        QStringLiteral("emergence: layer %1 (%2; token %3 \"%4\", channels %5)")
            .arg(c.emergence + 1)
            .arg(emergenceWhy)
            .arg(c.token)
            .arg(s.tokens.value(c.token), channels.isEmpty() ? QStringLiteral("none") : channels.join(", "));
    if (c.spread >= 0)
        c.note += QStringLiteral("; spread: layer %1, head %2 (%3)")
                      .arg(c.spread + 1)
                      .arg(c.head + 1)
                      .arg(c.spread == sinkLayer && c.head == sinkHead
                               ? QStringLiteral("the head the other figures show")
                               : QStringLiteral("the head of the next layer with the most attention on it"));
    if (c.disappearance >= 0)
        c.note +=
            QStringLiteral("; disappearance: layer %1 (the first later layer whose output has no outlier "
                           "value on that token)")
                .arg(c.disappearance + 1);
    return c;
}

QVector<GridPanel> buildFfnLifecycle(const InspectionSnapshot& s, const LifecycleLayer& x,
                                     const LifecycleChoice& c)
{
    const int T = s.T, d = s.d(), l = x.layer, f = x.ffn;
    const QVector<int> rows = c.token >= 0 ? QVector<int>{c.token} : QVector<int>();
    const QString channel = QStringLiteral("channel (0-based)");
    QVector<int> downChannel; // x_down's largest at the token
    if (x.downIn.size() == qsizetype(T) * f && f > 0 && c.token >= 0)
        downChannel << largestColumn(x.downIn.constData(), f, c.token);
    QVector<GridPanel> p;
    const auto wide = [&](const QVector<float>& v, const QString& title) {
        if (v.size() == qsizetype(T) * f && f > 0)
            p << panel(title, slice(v.constData(), T, f, 0, f, s.tokens, channel, title), rows, downChannel);
    };
    const auto narrow = [&](const float* v, const QString& title) {
        if (v) p << panel(title, slice(v, T, d, 0, d, s.tokens, channel, title), rows, c.channels);
    };
    narrow(x.ffnNormIn.size() == qsizetype(T) * d ? x.ffnNormIn.constData() : nullptr,
           QStringLiteral("FFN norm's input"));
    narrow(x.ffnNormOut.size() == qsizetype(T) * d ? x.ffnNormOut.constData() : nullptr,
           QStringLiteral("FFN norm's output"));
    wide(x.gate, QStringLiteral("gate projection"));
    wide(x.up, x.gate.isEmpty() ? QStringLiteral("first linear, before its activation")
                                : QStringLiteral("up projection"));
    wide(x.act, QStringLiteral("activation of the gate"));
    wide(x.downIn, QStringLiteral("x_down"));
    narrow(layerOf(s.ffnOut, l, T, d), QStringLiteral("FFN output"));
    narrow(layerOf(s.out, l, T, d), QStringLiteral("layer output h"));
    return lettered(p);
}

QVector<GridPanel> buildAttentionLifecycle(const InspectionSnapshot& s, const LifecycleLayer& x,
                                           const LifecycleChoice& c)
{
    const int T = s.T, d = s.d(), l = x.layer, dh = s.dh(), H = s.H(), head = c.head;
    const QVector<int> rows = c.token >= 0 ? QVector<int>{c.token} : QVector<int>();
    const QString channel = QStringLiteral("channel (0-based)");
    QVector<GridPanel> p;
    const float* input = l == 0
                             ? (s.embeddings.size() == qsizetype(T) * d ? s.embeddings.constData() : nullptr)
                             : layerOf(s.out, l - 1, T, d);
    if (input)
        p << panel(QStringLiteral("block input"),
                   slice(input, T, d, 0, d, s.tokens, channel, QStringLiteral("x")), rows, c.channels);
    if (const float* normed = layerOf(s.attnIn, l, T, d))
        p << panel(QStringLiteral("attention norm's output"),
                   slice(normed, T, d, 0, d, s.tokens, channel, QStringLiteral("x")), rows, c.channels);
    const QString dim = QStringLiteral("dimension of the head (0-based)");
    const int kvHead = x.kvHeads > 0 ? head / std::max(1, H / x.kvHeads) : head;
    const bool hasKey = x.kvHeads > 0 && x.key.size() == qsizetype(T) * x.kvHeads * dh;
    QVector<int> keyDims;
    if (hasKey && c.token >= 0) {
        const MatrixData k =
            slice(x.key.constData(), T, x.kvHeads * dh, kvHead * dh, dh, s.tokens, dim, QStringLiteral("k"));
        keyDims = largestColumns(k.values.constData(), dh, c.token, 2);
    }
    if (x.query.size() == qsizetype(T) * H * dh)
        p << panel(QStringLiteral("q of head %1, before the rotary embedding").arg(head + 1),
                   slice(x.query.constData(), T, H * dh, head * dh, dh, s.tokens, dim, QStringLiteral("q")),
                   rows, keyDims);
    if (hasKey)
        p << panel(
            x.kvHeads == H ? QStringLiteral("k of head %1, before the rotary embedding").arg(head + 1)
                           : QStringLiteral("k of key head %1 (head %2's), before the rotary embedding")
                                 .arg(kvHead + 1)
                                 .arg(head + 1),
            slice(x.key.constData(), T, x.kvHeads * dh, kvHead * dh, dh, s.tokens, dim, QStringLiteral("k")),
            rows, keyDims);
    if (s.values.size() >= qsizetype(s.L()) * H * T * dh)
        p << panel(QStringLiteral("v"),
                   slice(s.valuesOf(l, head), T, dh, 0, dh, s.tokens, dim, QStringLiteral("v")), rows, {});
    const QString key = QStringLiteral("key token");
    const auto attention = [&](const float* values, const QString& title, const QString& valueTitle,
                               ColorScale scale) {
        MatrixData m = slice(values, T, T, 0, T, s.tokens, key, valueTitle);
        m.colLabels = s.tokens;
        m.rowTitle = QStringLiteral("query token");
        m.causal = true;
        m.window = s.model.windowOf(l);
        p << panel(title, m, {}, rows, scale);
    };
    if (x.scores.size() == qsizetype(H) * T * T)
        attention(x.scores.constData() + std::size_t(head) * T * T, QStringLiteral("attention scores"),
                  QStringLiteral("score"), ColorScale::Diverging);
    attention(s.probsOf(l, head), QStringLiteral("attention probabilities"), QStringLiteral("probability"),
              ColorScale::Sequential);
    return lettered(p);
}

} // namespace outlierlens
