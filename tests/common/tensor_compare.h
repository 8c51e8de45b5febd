#pragma once
// Test helpers shared by the numeric tests (test thread only).

#include <torch/torch.h>

#include <QString>
#include <QtTest>

#include <string>

namespace outlierlens::test {

inline std::string fixture(const std::string& relative)
{
    return std::string(OUTLIERLENS_TEST_DATA) + "/" + relative;
}

/// max |a - b| as double; shapes must match (a failed QCOMPARE otherwise).
inline double maxAbsDiff(const torch::Tensor& a, const torch::Tensor& b)
{
    if (a.sizes() != b.sizes()) return std::numeric_limits<double>::infinity();
    return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

inline QString shapeOf(const torch::Tensor& t)
{
    QString s = QStringLiteral("[");
    for (int i = 0; i < t.dim(); ++i)
        s += (i ? QStringLiteral(", ") : QString()) + QString::number(t.size(i));
    return s + QStringLiteral("]");
}

} // namespace outlierlens::test

/// Compares two tensors within an absolute tolerance, printing the name, the shapes and the error.
#define OL_COMPARE_TENSORS(name, actual, expected, tolerance)                                                \
    do {                                                                                                     \
        const torch::Tensor a_ = (actual);                                                                   \
        const torch::Tensor e_ = (expected);                                                                 \
        if (a_.sizes() != e_.sizes())                                                                        \
            QFAIL(                                                                                           \
                qPrintable(QString("%1: shape %2, expected %3")                                              \
                               .arg(name, outlierlens::test::shapeOf(a_), outlierlens::test::shapeOf(e_)))); \
        const double d_ = outlierlens::test::maxAbsDiff(a_, e_);                                             \
        if (!(d_ <= (tolerance)))                                                                            \
            QFAIL(qPrintable(QString("%1: max |diff| %2 > %3").arg(name).arg(d_).arg(tolerance)));           \
    } while (false)
