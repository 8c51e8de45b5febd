#pragma once
// Test thread only. Comparing a decoder's captures with Hugging Face reference tensors on the real tokens of
// padded rows (tst_decoder_parity, tst_family_parity).

#include "model/capture.h"
#include "tensor_compare.h"

#include <torch/torch.h>

#include <QtTest>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace outlierlens::test {

/// [B, T, n*dh] -> [B, n, T, dh]
inline torch::Tensor heads(const torch::Tensor& x, int n)
{
    return x.view({x.size(0), x.size(1), n, x.size(2) / n}).permute({0, 2, 1, 3});
}

/// Compares `actual` with `expected` ([B, ...] both) on the real tokens of each row only: the
/// dimensions `tokenDims` (counted after the batch dimension) are indexed by the row's real positions.
inline void compareReal(const QString& name, const torch::Tensor& actual, const torch::Tensor& expected,
                        const torch::Tensor& mask, std::vector<int> tokenDims, double tolerance,
                        double* worst = nullptr)
{
    QVERIFY2(actual.defined(), qPrintable(name + ": not captured"));
    QVERIFY2(actual.sizes() == expected.sizes(),
             qPrintable(QString("%1: shape %2, expected %3").arg(name, shapeOf(actual), shapeOf(expected))));
    for (int64_t b = 0; b < mask.size(0); ++b) {
        const torch::Tensor idx = mask[b].nonzero().flatten();
        torch::Tensor a = actual[b].to(torch::kDouble), e = expected[b].to(torch::kDouble);
        for (int d : tokenDims) {
            a = a.index_select(d, idx);
            e = e.index_select(d, idx);
        }
        const double diff = maxAbsDiff(a, e);
        if (worst) *worst = std::max(*worst, diff);
        OL_COMPARE_TENSORS(QString("%1 row %2").arg(name).arg(b), a, e, tolerance);
    }
}

/// Keeps what a forward pass hands over, by capture name (the model's view of a sink; the
/// analysis library's Recorder does the same for the app).
class Recorder : public ActivationSink
{
public:
    Recorder() = default;
    explicit Recorder(std::set<std::string> names)
        : m_all(false)
        , m_names(std::move(names))
    {}
    bool wants(CapturePoint point, int layer) const override
    {
        return m_all || m_names.count(captureName(point, layer)) > 0;
    }
    void put(CapturePoint point, int layer, const at::Tensor& batched) override
    {
        QVERIFY2(wants(point, layer), "put() without wants()");
        m_tensors[captureName(point, layer)] = batched;
    }
    torch::Tensor at(const std::string& name) const
    {
        const auto it = m_tensors.find(name);
        return it == m_tensors.end() ? torch::Tensor() : it->second;
    }
    bool contains(const std::string& name) const { return m_tensors.count(name) > 0; }
    const std::map<std::string, torch::Tensor>& tensors() const { return m_tensors; }

private:
    bool m_all = true;
    std::set<std::string> m_names;
    std::map<std::string, torch::Tensor> m_tensors;
};

} // namespace outlierlens::test
