#pragma once
// Any thread. Small deterministic view data for the heatmap, head, overview, compare and export tests.

#include "view_data.h"

#include <cmath>

namespace outlierlens::testdata {

/// "[CLS] the cat sat . [SEP] a cat , it sat . [SEP]" and padding words up to `count`.
inline QStringList tokens(int count)
{
    QStringList t =
        QStringLiteral("[CLS] the cat sat . [SEP] a cat , it sat . [SEP]").split(QLatin1Char(' '));
    while (t.size() < count)
        t << QStringLiteral("w%1").arg(t.size());
    return t.mid(0, count);
}

/// A rows x cols matrix whose value at (r, c) is a distinct number: 0.001 * (r * cols + c) + 0.0001234567.
inline MatrixData ramp(int rows, int cols)
{
    MatrixData m;
    m.rows = rows;
    m.cols = cols;
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c)
            m.values << float(0.001 * (r * cols + c) + 0.0001234567);
    return m;
}

/// Attention [T x T] where most probability goes to the [SEP] keys, as in do-nothing heads.
inline MatrixData sepAttention(const QStringList& toks, bool clipped)
{
    const int t = toks.size();
    MatrixData m;
    m.rows = m.cols = t;
    m.rowLabels = m.colLabels = toks;
    m.rowTitle = QStringLiteral("query token");
    m.colTitle = QStringLiteral("key token");
    m.valueTitle = QStringLiteral("attention probability");
    for (int i = 0; i < t; ++i) {
        QVector<double> e(t);
        double sum = 0;
        for (int j = 0; j < t; ++j)
            sum += (e[j] = std::exp((toks[j] == QLatin1String("[SEP]") ? 4.0 : 0.0) +
                                    0.1 * ((i * 7 + j * 3) % 5)));
        for (int j = 0; j < t; ++j) {
            double p = e[j] / sum;
            if (clipped) p = std::clamp(1.025 * p - 0.025, 0.0, 1.0);
            m.values << float(p);
        }
    }
    return m;
}

inline HeadViewData head(int t, int dHead, bool gated, bool clipped)
{
    HeadViewData h;
    h.layer = 10;
    h.head = 2;
    h.tokens = tokens(t);
    h.probabilities = sepAttention(h.tokens, clipped);
    h.clippedSoftmax = clipped;
    h.values.rows = h.product.rows = t;
    h.values.cols = h.product.cols = dHead;
    h.values.rowTitle = h.product.rowTitle = QStringLiteral("token");
    h.values.colTitle = h.product.colTitle = QStringLiteral("dimension (0-based)");
    for (int i = 0; i < t; ++i)
        for (int k = 0; k < dHead; ++k)
            h.values.values << float(std::sin(i * 1.3 + k * 0.7) *
                                     (h.tokens[i] == QLatin1String("[SEP]") ? 0.01 : 1.0));
    for (int i = 0; i < t; ++i)
        for (int k = 0; k < dHead; ++k) {
            double acc = 0;
            for (int j = 0; j < t; ++j)
                acc += h.probabilities.values[i * t + j] * h.values.values[j * dHead + k];
            h.product.values << float(acc);
        }
    if (gated)
        for (int i = 0; i < t; ++i)
            h.gate << (h.tokens[i] == QLatin1String("[SEP]") ? 0.03f : 0.8f);
    h.provenance.model = QStringLiteral("sample_data/models/tiny-bert");
    h.provenance.checkpointSha256 =
        QStringLiteral("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    h.provenance.input = QStringLiteral("the cat sat. / a cat, it sat.");
    return h;
}

} // namespace outlierlens::testdata
