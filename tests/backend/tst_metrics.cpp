// Per-sample metrics on hand-built tensors whose answers are known in closed form: planted
// outliers, the exact threshold of the sigma rule (unbiased std), the tau rule, Pearson kurtosis
// of distributions with analytic values, inf norm and attention outliers.

#include "../common/tensor_compare.h"

#include "analysis/metrics.h"
#include "common/error.h"

#include <QtTest>

#include <cmath>

using namespace outlierlens;

namespace {

/// A flat [T, d] sample with small values in [-0.5, 0.5] that never trip the sigma rule.
torch::Tensor smallPattern(std::int64_t tokens, std::int64_t dims)
{
    return torch::sin(torch::arange(tokens * dims, torch::kDouble) * 0.37).view({tokens, dims}) * 0.5;
}

OutlierCriterion sigma(double k)
{
    OutlierCriterion c;
    c.rule = OutlierRule::Sigma;
    c.k = k;
    return c;
}

OutlierCriterion tau(double t)
{
    OutlierCriterion c;
    c.rule = OutlierRule::Tau;
    c.tau = t;
    return c;
}

/// (token, dim) of every true entry of a bool [T, d] mask.
QList<QPair<int, int>> positions(const torch::Tensor& mask)
{
    QList<QPair<int, int>> out;
    const torch::Tensor nz = mask.nonzero();
    for (int64_t i = 0; i < nz.size(0); ++i)
        out.append({int(nz[i][0].item<int64_t>()), int(nz[i][1].item<int64_t>())});
    return out;
}

} // namespace

class TstMetrics : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void plantedOutlier_data()
    {
        QTest::addColumn<int>("token");
        QTest::addColumn<int>("dim");
        QTest::addColumn<double>("value");
        QTest::newRow("positive, middle") << 3 << 5 << 100.0;
        QTest::newRow("negative, first token") << 0 << 0 << -80.0;
        QTest::newRow("last token, last dim") << 7 << 15 << 60.0;
    }

    void plantedOutlier()
    {
        QFETCH(int, token);
        QFETCH(int, dim);
        QFETCH(double, value);
        torch::Tensor x = smallPattern(8, 16);
        x[token][dim] = value;
        for (auto dtype : {torch::kFloat, torch::kDouble}) {
            const torch::Tensor mask = outlierMask(x.to(dtype), sigma(6));
            QCOMPARE(mask.scalar_type(), torch::kBool);
            QCOMPARE(mask.sizes().vec(), x.sizes().vec());
            QCOMPARE(positions(mask), (QList<QPair<int, int>>{{token, dim}}));
        }
    }

    void gaussianHasNoOutliersAtSixSigma()
    {
        torch::manual_seed(1234);
        const torch::Tensor x = torch::randn({128, 768});
        QCOMPARE(outlierMask(x, sigma(6)).sum().item<int64_t>(), int64_t(0));
        // The same sample has plenty of 2-sigma values (about 4.6 %): the rule is not blind.
        const int64_t twoSigma = outlierMask(x, sigma(2)).sum().item<int64_t>();
        QVERIFY2(twoSigma > 3500 && twoSigma < 5500, qPrintable(QString::number(twoSigma)));
    }

    void sigmaRuleUsesUnbiasedStd()
    {
        // mean 4, deviations -3 -2 -1 6: unbiased std sqrt(50/3) = 4.08, biased sqrt(50/4) = 3.54.
        const torch::Tensor x = torch::tensor({1.0, 2.0, 3.0, 10.0}).view({2, 2});
        QCOMPARE(positions(outlierMask(x, sigma(1.0))), (QList<QPair<int, int>>{{1, 1}}));
        // 1.6 * 4.08 = 6.53 > 6 (no outlier); with a biased std 1.6 * 3.54 = 5.66 < 6 would flag it.
        QCOMPARE(outlierMask(x, sigma(1.6)).sum().item<int64_t>(), int64_t(0));
        QCOMPARE(positions(outlierMask(x, sigma(1.46))), (QList<QPair<int, int>>{{1, 1}}));
    }

    void loneSpikeThreshold_data()
    {
        // A lone spike s among n - 1 zeros deviates by (n - 1)/sqrt(n) unbiased standard deviations:
        // above 6 exactly when n >= 38. With T = 1 this is also the single-token case.
        QTest::addColumn<int>("tokens");
        QTest::addColumn<int>("dims");
        QTest::addColumn<bool>("flagged");
        QTest::newRow("T=1, 37 values") << 1 << 37 << false;
        QTest::newRow("T=1, 38 values") << 1 << 38 << true;
        QTest::newRow("T=2, 36 values") << 2 << 18 << false;
        QTest::newRow("T=2, 38 values") << 2 << 19 << true;
    }

    void loneSpikeThreshold()
    {
        QFETCH(int, tokens);
        QFETCH(int, dims);
        QFETCH(bool, flagged);
        torch::Tensor x = torch::zeros({tokens, dims});
        x[tokens - 1][dims - 1] = 5.0f;
        const int64_t count = outlierMask(x, sigma(6)).sum().item<int64_t>();
        QCOMPARE(count, int64_t(flagged ? 1 : 0));
    }

    void tauRule()
    {
        // mean|x| = 4, so tau = 2 flags |x| > 8: only the 10 (and the sign does not matter).
        const torch::Tensor x = torch::tensor({1.0, -2.0, 3.0, -10.0}).view({2, 2});
        QCOMPARE(positions(outlierMask(x, tau(2))), (QList<QPair<int, int>>{{1, 1}}));
        QCOMPARE(outlierMask(x, tau(2.5)).sum().item<int64_t>(), int64_t(0)); // 10 > 10 is false

        // A lone spike among zeros: mean|x| = s / n, so it is a tau outlier exactly when n > tau.
        for (const auto& [tokens, expected] : {std::pair<int, int64_t>{10, 1}, {4, 0}}) {
            torch::Tensor y = torch::zeros({tokens, 200});
            y[1][7] = 1e4f;
            QCOMPARE(outlierMask(y, tau(1000)).sum().item<int64_t>(), expected);
        }
        // The default sigma rule flags the 2000-value spike too; the rules agree on clear cases.
        torch::Tensor y = torch::zeros({10, 200});
        y[1][7] = 1e4f;
        QCOMPARE(positions(outlierMask(y, OutlierCriterion())), (QList<QPair<int, int>>{{1, 7}}));
    }

    void constantAndTinyTensors()
    {
        for (double c : {0.0, 0.1, -3.0}) {
            const torch::Tensor x = torch::full({5, 7}, c, torch::kFloat);
            // Defined: a constant tensor has no outliers, even for rules (tiny k, tau < 1) that
            // would flag any rounding deviation or every value.
            for (const auto& criterion : {sigma(6), sigma(0.001), tau(1000), tau(0.5)})
                QCOMPARE(outlierMask(x, criterion).sum().item<int64_t>(), int64_t(0));
            QCOMPARE(pearsonKurtosis(x), 0.0); // 0 / (0 + eps): defined as 0, never NaN
            QCOMPARE(maxInfNorm(x), std::abs(double(float(c))));
        }
        const torch::Tensor one = torch::full({1, 1}, 42.0);
        QCOMPARE(outlierMask(one, sigma(6)).sizes().vec(), one.sizes().vec());
        QCOMPARE(outlierMask(one, sigma(6)).sum().item<int64_t>(), int64_t(0));
        QVERIFY(std::isnan(pearsonKurtosis(one)));
        QCOMPARE(maxInfNorm(one), 42.0);
    }

    /// First-token attention (docs/metrics.md): per head, the mean over queries T/2 .. T-1 of P[i, 0].
    void firstTokenAttentionIsTheLaterQueriesShareOnKeyZero()
    {
        // Two heads, T = 5: queries 2, 3 and 4 count (T/2 = 2). Head 0 puts 0.9, 0.6 and 0.3 on key 0
        // (mean 0.6); head 1 puts 0.5 on it for every query (mean 0.5); the early queries are made
        // extreme so that counting them would show.
        torch::Tensor p = torch::zeros({2, 5, 5}, torch::kFloat);
        p[0][0][0] = 1, p[0][1][0] = 0, p[0][2][0] = 0.9f, p[0][3][0] = 0.6f, p[0][4][0] = 0.3f;
        for (int i = 0; i < 5; ++i)
            p[1][i][0] = 0.5f;
        p[1][0][0] = 1;
        const torch::Tensor f = firstTokenAttention(p);
        QCOMPARE(f.scalar_type(), torch::kDouble);
        QCOMPARE(f.numel(), std::int64_t(2));
        QVERIFY(std::abs(f[0].item<double>() - 0.6) < 1e-6);
        QVERIFY(std::abs(f[1].item<double>() - 0.5) < 1e-6);
        // A batch of one is accepted as well.
        QVERIFY(torch::allclose(firstTokenAttention(p.unsqueeze(0)), f));
    }

    void kurtosis_data()
    {
        QTest::addColumn<QVector<double>>("values");
        QTest::addColumn<double>("expected");
        // +-1 in equal numbers: mu4 = 1, s^2 = n / (n - 1) (unbiased).
        QTest::newRow("two-point, n=4") << QVector<double>{1, -1, 1, -1} << 1.0 / ((16.0 / 9.0) + 1e-6);
        QTest::newRow("two-point, n=10")
            << QVector<double>{1, -1, 1, -1, 1, -1, 1, -1, 1, -1} << 1.0 / ((100.0 / 81.0) + 1e-6);
        // 0 0 0 10: mu 2.5, mu4 = (3 * 2.5^4 + 7.5^4) / 4 = 820.3125, s^2 = 75 / 3 = 25.
        QTest::newRow("skewed") << QVector<double>{0, 0, 0, 10} << 820.3125 / (625.0 + 1e-6);
    }

    void kurtosis()
    {
        QFETCH(QVector<double>, values);
        QFETCH(double, expected);
        const torch::Tensor x = torch::tensor(std::vector<double>(values.begin(), values.end()));
        QVERIFY(std::abs(pearsonKurtosis(x.view({1, -1})) - expected) < 1e-12);
        QVERIFY(std::abs(pearsonKurtosis(x.view({-1, 1}).to(torch::kFloat)) - expected) < 1e-6);
    }

    void kurtosisOfLargeSamples()
    {
        // Discrete uniform on n points of [0, 1] (spacing h): population variance (n^2 - 1) h^2 / 12,
        // Pearson kurtosis 3 - 6(n^2 + 1) / (5(n^2 - 1)) -> 9/5. The unbiased s^2 is n / (n - 1)
        // times the population variance, and the eps matters here (s^4 = 1/144 is small).
        const int64_t n = 100001;
        const torch::Tensor u = torch::linspace(0, 1, n, torch::kDouble).view({11, -1});
        const double nd = double(n);
        const double h = 1.0 / (nd - 1);
        const double variance = (nd * nd - 1) * h * h / 12.0;
        const double mu4 = variance * variance * (3.0 - 6.0 * (nd * nd + 1) / (5.0 * (nd * nd - 1)));
        const double s2 = variance * nd / (nd - 1);
        const double expected = mu4 / (s2 * s2 + 1e-6);
        QVERIFY2(std::abs(pearsonKurtosis(u) - expected) < 1e-9,
                 qPrintable(QString::number(pearsonKurtosis(u), 'g', 12)));
        QVERIFY(std::abs(expected - 1.8) < 1e-3);
        // Scaled up, the eps no longer matters and the value tends to 9/5.
        QVERIFY(std::abs(pearsonKurtosis(u * 1000) - 1.8) < 1e-4);

        // A large normal sample (float32, offset far from zero: float64 accumulation matters):
        // kurtosis 3 with standard error sqrt(24 / n) = 0.005.
        torch::manual_seed(7);
        const torch::Tensor g = torch::randn({1000, 1000}) + 100.0f;
        const double k = pearsonKurtosis(g);
        QVERIFY2(std::abs(k - 3.0) < 0.03, qPrintable(QString::number(k)));

        // Heavy tails: planting outliers raises kurtosis far above 3, as in the paper.
        torch::Tensor withOutliers = torch::randn({128, 768});
        withOutliers.index_put_({torch::indexing::Slice(), 308}, 60.0f);
        QVERIFY(pearsonKurtosis(withOutliers) > 100);
    }

    void infNorm()
    {
        const torch::Tensor x = torch::tensor({0.5, -7.25, 3.0, 5.0, -1.0, 0.0}).view({3, 2});
        QCOMPARE(maxInfNorm(x), 7.25);
        QCOMPARE(maxInfNorm(x.to(torch::kFloat)), 7.25);
        QCOMPARE(maxInfNorm(-x), 7.25);
        QVERIFY_THROWS_EXCEPTION(Error, maxInfNorm(torch::zeros({0, 4})));
    }

    void attentionOutliers()
    {
        // H = 3, T = 4, (head, query, key).
        torch::Tensor p = torch::zeros({3, 4, 4}, torch::kDouble);
        p[0].index_put_({torch::indexing::Slice(), 0}, 1.0); // every query on key 0: cumulative 4
        p[1].fill_(0.25);                                    // uniform: cumulative 1 per key
        // Head 2: key 0 gets exactly 0.4 = 0.1 * T (the bound is inclusive), key 3 nothing.
        p[2][0] = torch::tensor({0.4, 0.6, 0.0, 0.0}, torch::kDouble);
        for (int q = 1; q < 4; ++q)
            p[2][q] = torch::tensor({0.0, 0.7, 0.3, 0.0}, torch::kDouble);

        const torch::Tensor keys = attentionOutlierKeys(p);
        QCOMPARE(keys.scalar_type(), torch::kBool);
        QCOMPARE(keys.sizes().vec(), (std::vector<int64_t>{3, 4}));
        const torch::Tensor expected =
            torch::tensor({1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0}).view({3, 4}).to(torch::kBool);
        QVERIFY(torch::equal(keys, expected));

        // A higher fraction: 0.5 * T = 2 keeps only head 0's key 0 and head 2's key 1 (2.7).
        const torch::Tensor strict = attentionOutlierKeys(p, 0.5);
        QCOMPARE(strict.sum().item<int64_t>(), int64_t(2));
        QVERIFY(strict[0][0].item<bool>() && strict[2][1].item<bool>());

        // T = 1: the single key gets all the attention.
        QVERIFY(attentionOutlierKeys(torch::ones({2, 1, 1})).all().item<bool>());
        QVERIFY_THROWS_EXCEPTION(Error, attentionOutlierKeys(torch::ones({2, 3, 4})));
        QVERIFY_THROWS_EXCEPTION(Error, attentionOutlierKeys(torch::ones({3, 3})));
    }

    /// summariseSample() (three passes over the values) gives the numbers of outlierMask(),
    /// maxInfNorm() and pearsonKurtosis() (torch ops in float64), for any dtype, layout and rule.
    void sampleSummaryAgreesWithTheTensorMetrics_data()
    {
        QTest::addColumn<QString>("layout");
        QTest::addColumn<bool>("tauRule");
        for (const char* layout : {"float", "bfloat16", "transposed", "constant"})
            for (bool tauRule : {false, true})
                QTest::newRow(qPrintable(QStringLiteral("%1, %2").arg(layout).arg(tauRule ? "tau" : "sigma")))
                    << QString::fromLatin1(layout) << tauRule;
    }

    void sampleSummaryAgreesWithTheTensorMetrics()
    {
        QFETCH(QString, layout);
        QFETCH(bool, tauRule);
        torch::Tensor x = smallPattern(40, 24).to(torch::kFloat);
        x[3][5] = 90.0f, x[17][5] = -70.0f, x[39][23] = 60.0f, x[20][0] = 1e6f; // a tau outlier (tau 100) too
        if (layout == QLatin1String("bfloat16")) x = x.to(torch::kBFloat16);
        if (layout == QLatin1String("transposed")) x = x.t().contiguous().t(); // strides (1, 40)
        if (layout == QLatin1String("constant")) x = torch::full({40, 24}, 2.5f);
        const OutlierCriterion c = tauRule ? tau(100) : sigma(kDefaultSigmaK); // n = 960 > tau
        const SampleSummary s = summariseSample(x, c);
        const torch::Tensor mask = outlierMask(x, c);
        const auto list = [](const torch::Tensor& t) {
            const torch::Tensor l = t.to(torch::kLong).contiguous();
            return std::vector<std::int64_t>(l.data_ptr<std::int64_t>(),
                                             l.data_ptr<std::int64_t>() + l.numel());
        };
        QCOMPARE(s.perDim, list(mask.sum(0)));
        QCOMPARE(s.perToken, list(mask.sum(1)));
        QCOMPARE(s.positions, list(mask.flatten().nonzero().flatten()));
        if (layout != QLatin1String("constant")) QVERIFY(!s.positions.empty());
        QCOMPARE(s.maxInfNorm, maxInfNorm(x));
        QVERIFY2(std::abs(s.kurtosis - pearsonKurtosis(x)) <= 1e-9 * std::max(1.0, pearsonKurtosis(x)),
                 qPrintable(QStringLiteral("%1 vs %2").arg(s.kurtosis).arg(pearsonKurtosis(x))));
        QVERIFY_THROWS_EXCEPTION(Error, summariseSample(torch::zeros({0, 4}), c));
        QVERIFY_THROWS_EXCEPTION(Error, summariseSample(torch::zeros({2, 3, 4}), c));
    }

    void criterionNames()
    {
        QCOMPARE(OutlierCriterion().describe(),
                 std::string("|x - mean| > 6 std (unbiased), per sample over T x d"));
        QCOMPARE(tau(1000).describe(), std::string("|x| > 1000 mean|x|, per sample over T x d"));
        QCOMPARE(sigma(4.5).describe(),
                 std::string("|x - mean| > 4.5 std (unbiased), per sample over T x d"));
        QCOMPARE(outlierRuleName(OutlierRule::Tau), std::string("tau"));
        QCOMPARE(parseOutlierRule("sigma"), OutlierRule::Sigma);
        QCOMPARE(parseOutlierRule(outlierRuleName(OutlierRule::Tau)), OutlierRule::Tau);
        QVERIFY_THROWS_EXCEPTION(Error, parseOutlierRule("6sigma"));
        QCOMPARE(parseOutlierRule("so-paper"), OutlierRule::Tau); // An et al.'s names
        QCOMPARE(parseOutlierRule("so-code"), OutlierRule::Tau);
        QVERIFY(sigma(6) == OutlierCriterion());
        QVERIFY(sigma(5) != OutlierCriterion());
    }
};

QTEST_APPLESS_MAIN(TstMetrics)
#include "tst_metrics.moc"
