// An et al. 2025's systematic outliers over a data set (analysis/systematic_statistics): token
// categories, hand-made tensors whose counts are worked out by hand, the GPT-2 fixture dump (Hugging
// Face's activations) against plain loops written here, and the HDF5 group.

#include "../common/expect_error.h"
#include "analysis/systematic_statistics.h"
#include "io/hdf5_store.h"

#include <QTemporaryDir>
#include <QtTest>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

using namespace outlierlens;
using outlierlens::test::expectError;

namespace {

const std::string kGpt2 = OUTLIERLENS_TEST_DATA "/decoders/gpt2-seed0/reference.h5";

std::size_t index(TokenCategory c)
{
    return std::size_t(c);
}

/// The plain-loop version of one layer of one sample, in double.
struct Expected
{
    std::array<double, 3> top{};
    double median = 0;
    std::array<std::int64_t, kTokenCategories> heavy{};
};

Expected plainActivation(const std::vector<std::vector<double>>& x, double tau,
                         const std::vector<TokenCategory>& categories, std::vector<bool>* heavyOut = nullptr)
{
    std::vector<double> all;
    for (const auto& row : x)
        for (double v : row)
            all.push_back(std::fabs(v));
    double mean = 0;
    for (double v : all)
        mean += v;
    mean /= double(all.size());
    std::vector<double> sorted = all;
    std::sort(sorted.begin(), sorted.end());
    Expected e;
    for (std::size_t i = 0; i < 3 && i < sorted.size(); ++i)
        e.top[i] = sorted[sorted.size() - 1 - i];
    e.median = sorted[(sorted.size() - 1) / 2]; // the lower median
    std::vector<bool> heavy(x.size());
    for (std::size_t t = 0; t < x.size(); ++t) {
        double m = 0;
        for (double v : x[t])
            m = std::max(m, std::fabs(v));
        heavy[t] = m > tau * mean;
        if (heavy[t]) ++e.heavy[index(categories[t])];
    }
    if (heavyOut) *heavyOut = heavy;
    return e;
}

std::vector<std::vector<double>> rows(const torch::Tensor& x) // [T, d]
{
    const torch::Tensor c = x.to(torch::kDouble).contiguous();
    std::vector<std::vector<double>> out(std::size_t(c.size(0)));
    for (std::int64_t t = 0; t < c.size(0); ++t)
        for (std::int64_t j = 0; j < c.size(1); ++j)
            out[std::size_t(t)].push_back(c[t][j].item<double>());
    return out;
}

} // namespace

class TstSystematicStatistics : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void tokenCategories()
    {
        QVERIFY(tokenCategory("Summer", 0) == TokenCategory::Initial);
        QVERIFY(tokenCategory(".", 0) == TokenCategory::Initial); // position 0 first, as their code
        QVERIFY(tokenCategory(" .", 4) == TokenCategory::StrongDelimiter);
        QVERIFY(tokenCategory("\n", 7) == TokenCategory::StrongDelimiter);
        QVERIFY(tokenCategory("<0x0A>", 7) == TokenCategory::StrongDelimiter);
        QVERIFY(tokenCategory(" ---", 2) == TokenCategory::StrongDelimiter);
        QVERIFY(tokenCategory(" The", 1) == TokenCategory::WeakSemantic);
        QVERIFY(tokenCategory(" is", 1) == TokenCategory::WeakSemantic);
        QVERIFY(tokenCategory("7", 1) == TokenCategory::WeakSemantic);
        QVERIFY(tokenCategory(" ", 1) == TokenCategory::WeakSemantic); // "" is in their stop list
        QVERIFY(tokenCategory(" warm", 3) == TokenCategory::Other);
        QVERIFY(tokenCategory("10", 3) == TokenCategory::Other);
        QCOMPARE(tokenCategoryName(TokenCategory::StrongDelimiter), std::string("strong_delimiter"));
        // BERT's WordPiece tokens and ViT's labels.
        QVERIFY(wordPieceCategory("[CLS]", 0) == TokenCategory::Initial);
        QVERIFY(wordPieceCategory("[SEP]", 9) == TokenCategory::StrongDelimiter);
        QVERIFY(wordPieceCategory("##s", 3) == TokenCategory::Other);
        QVERIFY(wordPieceCategory("##.", 3) == TokenCategory::StrongDelimiter);
        QVERIFY(wordPieceCategory("the", 2) == TokenCategory::WeakSemantic);
        QVERIFY(tokenCategory("patch 3,7", 5) == TokenCategory::Other);
    }

    /// Sink tokens: initial token and strong delimiters, plus what `background` marks; background
    /// patches are the uniform ones of the image, [CLS] first.
    void sinkTokensAndBackgroundPatches()
    {
        const std::vector<TokenCategory> bert =
            wordPieceCategories({"[CLS]", "back", "##7", ".", "the", "[SEP]"});
        QCOMPARE(sinkTokens(bert), (std::vector<bool>{true, false, false, true, false, true}));
        QCOMPARE(sinkTokens(bert, {false, true}), (std::vector<bool>{true, true, false, true, false, true}));

        // A 4 x 4 RGB image in 2 x 2 patches, rows padded to 16 bytes: patch 0 black, patch 1 a
        // checkerboard of 0 and 30 (std 15), patch 2 constant grey with one value off by 3 (std < 6),
        // patch 3 a stripe of 0 and 14 (std 7).
        const int stride = 16;
        std::vector<std::uint8_t> rgb(std::size_t(stride) * 4, 0);
        const auto set = [&](int x, int y, std::uint8_t v) {
            for (int c = 0; c < 3; ++c)
                rgb[std::size_t(y) * stride + std::size_t(x) * 3 + c] = v;
        };
        for (int y = 0; y < 2; ++y)
            for (int x = 2; x < 4; ++x)
                set(x, y, (x + y) % 2 ? 30 : 0);
        for (int y = 2; y < 4; ++y)
            for (int x = 0; x < 2; ++x)
                set(x, y, 128);
        rgb[std::size_t(2) * stride] = 131;
        for (int y = 2; y < 4; ++y)
            for (int x = 2; x < 4; ++x)
                set(x, y, x == 2 ? 14 : 0);
        QCOMPARE(backgroundPatchTokens(rgb.data(), 4, 4, stride, 2),
                 (std::vector<bool>{false, true, false, true, false}));
        QVERIFY_THROWS_EXCEPTION(outlierlens::Error, backgroundPatchTokens(rgb.data(), 4, 4, stride, 3));
        // With registers (DINOv2-reg): [CLS], then the registers, none a patch, then the same patches.
        QCOMPARE(backgroundPatchTokens(rgb.data(), 4, 4, stride, 2, 2),
                 (std::vector<bool>{false, false, false, true, false, true, false}));
        QCOMPARE(imageTokenCategories(2, 3),
                 (std::vector<TokenCategory>{TokenCategory::Initial, TokenCategory::Register,
                                             TokenCategory::Register, TokenCategory::Other,
                                             TokenCategory::Other, TokenCategory::Other}));
        QCOMPARE(tokenCategoryName(TokenCategory::Register), std::string("register"));
        QCOMPARE(sinkTokens(imageTokenCategories(2, 3), {false, false, false, true, false, false}),
                 (std::vector<bool>{true, true, true, true, false, false})); // CLS, registers, background
    }

    /// T = 5, d = 4: token 2 carries 1e4 among ones; head 0 attends only to key 0, head 1 uniformly
    /// over the causal prefix. Every expected number is worked out by hand in the comments.
    void handMadeSample()
    {
        SystematicOptions o;
        o.layers = {0};
        o.numHeads = 2;
        o.tau = 5; // mean |h| = (19 + 1e4) / 20 = 500.95; 5 x that = 2504.75 < 1e4: token 2 is heavy
        SystematicStatistics stats(o);
        torch::Tensor h = torch::ones({5, 4});
        h[2][1] = -1e4;
        torch::Tensor down = torch::ones({5, 6}); // constant: mean 1, no token above 5
        torch::Tensor probs = torch::zeros({2, 5, 5}, torch::kDouble);
        for (int i = 0; i < 5; ++i) {
            probs[0][i][0] = 1.0;
            for (int j = 0; j <= i; ++j)
                probs[1][i][j] = 1.0 / (i + 1);
        }
        const std::vector<TokenCategory> cats = {TokenCategory::Initial, TokenCategory::Other,
                                                 TokenCategory::StrongDelimiter, TokenCategory::WeakSemantic,
                                                 TokenCategory::Other};
        stats.addSampleLayer(0, h, down, probs, cats);
        stats.endSample();
        const auto& acc = stats.layers().at(0);
        QCOMPARE(acc.out.sumTop[0], 1e4);
        QCOMPARE(acc.out.sumTop[1], 1.0);
        QCOMPARE(acc.out.sumMedian, 1.0);
        QCOMPARE(acc.out.heavy[index(TokenCategory::StrongDelimiter)], std::int64_t(1));
        QCOMPARE(acc.out.heavy[index(TokenCategory::Other)], std::int64_t(0));
        QCOMPARE(acc.downIn.heavy, (std::array<std::int64_t, kTokenCategories>{}));
        QCOMPARE(acc.tokens[index(TokenCategory::Other)], std::int64_t(2));
        // Received per key: head 0 = [5, 0, 0, 0, 0]; head 1 = [137/60, 77/60, 47/60, 27/60, 12/60].
        // Head mean = [(5 + 137/60) / 2, 77/120, 47/120, 27/120, 12/120]; threshold 0.1 x 5 = 0.5:
        // keys 0 (initial) and 1 (other) are outlier keys.
        const auto& att = stats.layers().at(0).attention;
        QVERIFY(std::fabs(att.sumTop[0] - (5 + 137.0 / 60) / 2) < 1e-12);
        QVERIFY(std::fabs(att.sumTop[1] - 77.0 / 120) < 1e-12);
        QVERIFY(std::fabs(att.sumMedian - 47.0 / 120) < 1e-12);
        QCOMPARE(att.outlierKeys[index(TokenCategory::Initial)], std::int64_t(1));
        QCOMPARE(att.outlierKeys[index(TokenCategory::Other)], std::int64_t(1));
        QCOMPARE(att.outlierKeys[index(TokenCategory::StrongDelimiter)], std::int64_t(0));
        // Share on keys {0, 1}: head 0 5/5 = 1; head 1 (137 + 77) / 60 / 5 = 214/300.
        QVERIFY(std::fabs(att.sumOutlierKeyShare[0] - 1.0) < 1e-12);
        QVERIFY(std::fabs(att.sumOutlierKeyShare[1] - 214.0 / 300) < 1e-12);
        // Each head's own outlier keys: head 0 {0}; head 1 {0, 1, 2} (47/60 >= 0.5 > 27/60).
        QCOMPARE(att.headOutlierKeys, (std::vector<std::int64_t>{1, 3}));
        // Consistency: heavy tokens {2}; head 0 has none of them (0), head 1 has it (1).
        QCOMPARE(att.consistencySamples, std::int64_t(1));
        QCOMPARE(att.sumConsistency, (std::vector<double>{0.0, 1.0}));
        // The sample's own flags (the Systematic outliers page marks them on its Figure 1).
        const auto& last = stats.lastSample().at(0);
        QCOMPARE(last.heavyOut, (std::vector<bool>{false, false, true, false, false}));
        QCOMPARE(last.heavyDown, std::vector<bool>(5, false));
        QCOMPARE(last.outlierKey, (std::vector<bool>{true, true, false, false, false}));
        QVERIFY(std::fabs(last.received[4] - 12.0 / 120) < 1e-12);
    }

    /// GPT-2 fixture: Hugging Face's layer outputs, down-projection inputs and attention of the three
    /// right-padded texts, through the accumulator and through plain loops here; tau 3 so that tokens
    /// qualify on random weights.
    void gpt2FixtureAgainstPlainLoops()
    {
        Hdf5Reader ref(kGpt2);
        const torch::Tensor hidden = ref.readTensor("hidden_states"); // [L+1, B, T, d]
        const torch::Tensor down = ref.readTensor("layers/x_down");   // [L, B, T, F]
        const torch::Tensor attn = ref.readTensor("attentions");      // [L, B, H, T, T]
        const torch::Tensor lengths = ref.readTensor("inputs/lengths");
        const std::vector<std::string> sides = ref.readStrings("inputs/padding_side");
        const int L = int(down.size(0)), H = int(attn.size(2));
        SystematicOptions o;
        for (int l = 0; l < L; ++l)
            o.layers.push_back(l);
        o.numHeads = H;
        o.tau = 3;
        SystematicStatistics stats(o);
        std::vector<Expected> expectedOut(static_cast<std::size_t>(L)),
            expectedDown(static_cast<std::size_t>(L));
        std::vector<std::array<std::int64_t, kTokenCategories>> expectedKeys(static_cast<std::size_t>(L));
        std::vector<std::vector<double>> expectedConsistency(
            std::size_t(L), std::vector<double>(static_cast<std::size_t>(H)));
        std::int64_t samples = 0, heavyTotal = 0;
        std::vector<std::int64_t> consistencySamples(static_cast<std::size_t>(L));
        for (std::int64_t b = 0; b < lengths.size(0); ++b) {
            if (sides[std::size_t(b)] != "right") continue;
            const std::int64_t T = lengths[b].item<std::int64_t>();
            std::vector<TokenCategory> cats;
            for (std::int64_t t = 0; t < T; ++t)
                cats.push_back(t == 0 ? TokenCategory::Initial
                                      : (t % 3 == 0 ? TokenCategory::StrongDelimiter : TokenCategory::Other));
            for (int l = 0; l < L; ++l) {
                const torch::Tensor h = hidden[l + 1][b].slice(0, 0, T);
                const torch::Tensor x = down[l][b].slice(0, 0, T);
                const torch::Tensor p = attn[l][b].slice(1, 0, T).slice(2, 0, T);
                stats.addSampleLayer(l, h, x, p, cats);

                std::vector<bool> heavy;
                const Expected eo = plainActivation(rows(h), o.tau, cats, &heavy);
                const Expected ed = plainActivation(rows(x), o.tau, cats);
                for (int i = 0; i < 3; ++i) {
                    expectedOut[l].top[i] += eo.top[i];
                    expectedDown[l].top[i] += ed.top[i];
                }
                expectedOut[l].median += eo.median;
                expectedDown[l].median += ed.median;
                std::int64_t heavyCount = 0;
                for (int c = 0; c < kTokenCategories; ++c) {
                    expectedOut[l].heavy[c] += eo.heavy[c];
                    expectedDown[l].heavy[c] += ed.heavy[c];
                    heavyCount += eo.heavy[c];
                }
                heavyTotal += heavyCount;
                const torch::Tensor pd = p.to(torch::kDouble).contiguous();
                for (std::int64_t j = 0; j < T; ++j) {
                    double meanReceived = 0;
                    for (int hd = 0; hd < H; ++hd)
                        for (std::int64_t i = 0; i < T; ++i)
                            meanReceived += pd[hd][i][j].item<double>() / H;
                    if (meanReceived >= 0.1 * double(T)) ++expectedKeys[l][index(cats[std::size_t(j)])];
                }
                if (heavyCount == 0) continue;
                ++consistencySamples[l];
                for (int hd = 0; hd < H; ++hd) {
                    std::int64_t overlap = 0;
                    for (std::int64_t j = 0; j < T; ++j) {
                        double received = 0;
                        for (std::int64_t i = 0; i < T; ++i)
                            received += pd[hd][i][j].item<double>();
                        if (received >= 0.1 * double(T) && heavy[std::size_t(j)]) ++overlap;
                    }
                    expectedConsistency[l][hd] += double(overlap) / double(heavyCount);
                }
            }
            stats.endSample();
            ++samples;
        }
        QCOMPARE(samples, std::int64_t(3));
        QVERIFY2(heavyTotal > 0, "tau 3 should find heavy tokens on the fixture");
        for (int l = 0; l < L; ++l) {
            const auto& acc = stats.layers().at(std::size_t(l));
            for (int i = 0; i < 3; ++i) {
                QVERIFY(std::fabs(acc.out.sumTop[i] - expectedOut[l].top[i]) < 1e-9);
                QVERIFY(std::fabs(acc.downIn.sumTop[i] - expectedDown[l].top[i]) < 1e-9);
            }
            QVERIFY(std::fabs(acc.out.sumMedian - expectedOut[l].median) < 1e-9);
            QVERIFY(std::fabs(acc.downIn.sumMedian - expectedDown[l].median) < 1e-9);
            QCOMPARE(acc.out.heavy, expectedOut[l].heavy);
            QCOMPARE(acc.downIn.heavy, expectedDown[l].heavy);
            QCOMPARE(acc.attention.outlierKeys, expectedKeys[l]);
            QCOMPARE(acc.attention.consistencySamples, consistencySamples[l]);
            for (int hd = 0; hd < H; ++hd)
                QVERIFY(std::fabs(acc.attention.sumConsistency[hd] - expectedConsistency[l][hd]) < 1e-12);
        }

        // Two workers that each saw part of the samples, merged, give the same sums.
        {
            SystematicStatistics first(o), second(o);
            std::int64_t seen = 0;
            for (std::int64_t b = 0; b < lengths.size(0); ++b) {
                if (sides[std::size_t(b)] != "right") continue;
                SystematicStatistics& part = seen++ == 0 ? first : second;
                const std::int64_t T = lengths[b].item<std::int64_t>();
                std::vector<TokenCategory> cats;
                for (std::int64_t t = 0; t < T; ++t)
                    cats.push_back(
                        t == 0 ? TokenCategory::Initial
                               : (t % 3 == 0 ? TokenCategory::StrongDelimiter : TokenCategory::Other));
                for (int l = 0; l < L; ++l)
                    part.addSampleLayer(l, hidden[l + 1][b].slice(0, 0, T), down[l][b].slice(0, 0, T),
                                        attn[l][b].slice(1, 0, T).slice(2, 0, T), cats);
                part.endSample();
            }
            first.merge(second);
            QCOMPARE(first.samples(), std::int64_t(3));
            for (int l = 0; l < L; ++l) {
                const auto& a = first.layers().at(std::size_t(l));
                const auto& b = stats.layers().at(std::size_t(l));
                QCOMPARE(a.out.heavy, b.out.heavy);
                QCOMPARE(a.tokens, b.tokens);
                QCOMPARE(a.attention.headOutlierKeys, b.attention.headOutlierKeys);
                QCOMPARE(a.attention.consistencySamples, b.attention.consistencySamples);
                QVERIFY(std::fabs(a.out.sumTop[0] - b.out.sumTop[0]) < 1e-9);
                QVERIFY(std::fabs(a.attention.sumMedian - b.attention.sumMedian) < 1e-9);
                for (int hd = 0; hd < H; ++hd)
                    QVERIFY(std::fabs(a.attention.sumOutlierKeyShare[hd] -
                                      b.attention.sumOutlierKeyShare[hd]) < 1e-9);
            }
            SystematicOptions other = o;
            other.numHeads = H + 1;
            expectError([&] { first.merge(SystematicStatistics(other)); }, {"cannot merge"});
        }

        // data(): the means over the three samples, as the file and the GUI give them.
        const SystematicData data = stats.data();
        QCOMPARE(data.samples, std::int64_t(3));
        QCOMPARE(int(data.layers.size()), L);
        for (int l = 0; l < L; ++l) {
            const SystematicLayerData* d = data.layerData(l);
            QVERIFY(d && d->layer == l);
            for (int i = 0; i < 3; ++i)
                QVERIFY(std::fabs(d->out.meanTop[i] - expectedOut[l].top[i] / 3) < 1e-9);
            QVERIFY(std::fabs(d->downIn.meanMedian - expectedDown[l].median / 3) < 1e-9);
            QCOMPARE(d->out.heavy, expectedOut[l].heavy);
            for (int hd = 0; hd < H; ++hd) {
                const double want =
                    consistencySamples[l] ? expectedConsistency[l][hd] / consistencySamples[l] : std::nan("");
                QVERIFY(std::isnan(want) ? std::isnan(d->attention.consistency[hd])
                                         : std::fabs(d->attention.consistency[hd] - want) < 1e-12);
            }
        }
        QVERIFY(data.layerData(L) == nullptr);

        // The file: means over samples, categories by name.
        QTemporaryDir dir;
        const std::string path = (dir.path() + "/s.h5").toStdString();
        {
            Hdf5Writer writer(path);
            stats.write(writer);
            writer.commit();
        }
        Hdf5Reader file(path);
        QCOMPARE(file.readStrings("systematic/categories"),
                 (std::vector<std::string>{"initial_token", "strong_delimiter", "weak_semantic", "other",
                                           "register"}));
        const torch::Tensor top = file.readTensor("systematic/layer1/out/mean_top_abs");
        QCOMPARE(top.size(0), std::int64_t(3));
        const double want = expectedOut[1].top[0] / 3; // the reader gives float32 back
        QVERIFY(std::fabs(top[0].item<double>() - want) <= 1e-6 * want);
        const torch::Tensor heavy = file.readTensor("systematic/layer0/out/heavy_tokens_by_category");
        for (int c = 0; c < kTokenCategories; ++c)
            QCOMPARE(heavy[c].item<std::int64_t>(), expectedOut[0].heavy[c]);
        QCOMPARE(file.readTensor("systematic/layer0/attention/consistency").size(0), std::int64_t(H));
    }

    void badInput()
    {
        SystematicOptions o;
        o.layers = {1};
        o.numHeads = 2;
        SystematicStatistics stats(o);
        const std::vector<TokenCategory> cats(3, TokenCategory::Other);
        expectError(
            [&] {
                stats.addSampleLayer(0, torch::ones({3, 4}), torch::ones({3, 8}), torch::ones({2, 3, 3}),
                                     cats);
            },
            {"layer 0 was not selected"});
        expectError(
            [&] {
                stats.addSampleLayer(1, torch::ones({3, 4}), torch::ones({3, 8}), torch::ones({4, 3, 3}),
                                     cats);
            },
            {"attn_probs must have shape [2, 3, 3], found [4, 3, 3]"});
        expectError(
            [&] {
                stats.addSampleLayer(1, torch::ones({3, 4}), torch::ones({2, 8}), torch::ones({2, 3, 3}),
                                     cats);
            },
            {"down_in must be [3, d_ff], found [2, 8]"});
        expectError(
            [&] {
                Hdf5Writer w((QDir::tempPath() + "/never.h5").toStdString());
                stats.write(w);
            },
            {"no sample was added"});
        o.tau = 0;
        expectError([&] { SystematicStatistics bad(o); },
                    {"tau and the attention fraction must be positive"});
    }
};

QTEST_APPLESS_MAIN(TstSystematicStatistics)
#include "tst_systematic_statistics.moc"
