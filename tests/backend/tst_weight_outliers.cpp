// Weight outliers (An et al. 2025) from a checkpoint alone: hand-made matrices with planted
// outliers, every linear of the decoder fixtures against plain loops over the stored floats,
// bfloat16 storage against float32, pytorch_model.bin against safetensors, and `outlierlens
// weights` as a user runs it.

#include "../common/app_runner.h"
#include "../common/expect_error.h"
#include "../common/tensor_compare.h"

#include "analysis/weight_outliers.h"
#include "common/error.h"
#include "io/safetensors.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

using namespace outlierlens;
using outlierlens::test::fixture;
using outlierlens::test::Run;
using outlierlens::test::runApp;
namespace fs = std::filesystem;

namespace {

/// The statistics recomputed here with plain loops, W in nn.Linear layout [O, I].
struct Reference
{
    std::vector<double> column; ///< [I]
    std::vector<double> row;    ///< [O]
    std::int64_t paperCount = 0;
};

/// `data` holds the stored matrix [R, C] row-major; GPT-2's Conv1D stores W transposed ([I, O]).
Reference recompute(const float* data, std::int64_t R, std::int64_t C, bool conv1d, double tau)
{
    const std::int64_t O = conv1d ? C : R, I = conv1d ? R : C;
    auto w = [&](std::int64_t i, std::int64_t j) {
        return std::fabs(double(conv1d ? data[j * C + i] : data[i * C + j]));
    };
    Reference ref;
    for (std::int64_t j = 0; j < I; ++j) {
        double max = 0, sum = 0;
        for (std::int64_t i = 0; i < O; ++i) {
            max = std::max(max, w(i, j));
            sum += w(i, j);
        }
        ref.column.push_back(max / (sum / double(O) + 1e-8));
    }
    for (std::int64_t i = 0; i < O; ++i) {
        double max = 0, sum = 0;
        for (std::int64_t j = 0; j < I; ++j) {
            max = std::max(max, w(i, j));
            sum += w(i, j);
        }
        ref.row.push_back(max / (sum / double(I) + 1e-8));
        for (std::int64_t j = 0; j < I; ++j)
            if (w(i, j) > tau * (sum / double(I))) ++ref.paperCount;
    }
    return ref;
}

bool close(double a, double b, double relative)
{
    return std::fabs(a - b) <= relative * std::max(std::fabs(a), std::fabs(b));
}

/// Every entry of `got` within `relative` of `want`, or a message naming the first that is not.
QString compareVectors(const std::vector<double>& got, const std::vector<double>& want, double relative)
{
    if (got.size() != want.size())
        return QStringLiteral("size %1, expected %2").arg(got.size()).arg(want.size());
    for (std::size_t k = 0; k < got.size(); ++k)
        if (!close(got[k], want[k], relative))
            return QStringLiteral("entry %1: %2, expected %3")
                .arg(k)
                .arg(got[k], 0, 'g', 17)
                .arg(want[k], 0, 'g', 17);
    return {};
}

std::string modelDir(const std::string& name)
{
    return fixture("decoders/" + name + "/hf");
}

/// 4 x 5 ones with two planted entries: W[2,3] = 100, W[0,1] = -50.
torch::Tensor planted()
{
    torch::Tensor w = torch::ones({4, 5});
    w[2][3] = 100.0;
    w[0][1] = -50.0;
    return w;
}

const std::map<std::string, const WeightModuleStats*> byTensor(const WeightScan& scan)
{
    std::map<std::string, const WeightModuleStats*> out;
    for (const WeightModuleStats& r : scan.results)
        out[r.tensor] = &r;
    return out;
}

} // namespace

class TstWeightOutliers : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void plantedColumnHasTheHandComputedRatio()
    {
        const WeightMatrixStats s = analyzeWeightMatrix(planted(), {});
        QCOMPARE(s.outFeatures, std::int64_t(4));
        QCOMPARE(s.inFeatures, std::int64_t(5));
        QCOMPARE(s.columnRatio.size(), std::size_t(5));
        // Column 3: |W| = 1, 1, 100, 1: max 100, mean 103 / 4.
        QCOMPARE(s.columnRatio[3], 100.0 / (103.0 / 4.0 + 1e-8));
        // Column 1: 50, 1, 1, 1: max 50, mean 53 / 4.
        QCOMPARE(s.columnRatio[1], 50.0 / (53.0 / 4.0 + 1e-8));
        QCOMPARE(s.columnRatio[0], 1.0 / (1.0 + 1e-8));
        // Row 2: 1, 1, 1, 100, 1: max 100, mean 104 / 5; row 0: 1, 50, 1, 1, 1.
        QCOMPARE(s.rowRatio[2], 100.0 / (104.0 / 5.0 + 1e-8));
        QCOMPARE(s.rowRatio[0], 50.0 / (54.0 / 5.0 + 1e-8));
        QCOMPARE(s.maxColumnRatio(), 100.0 / (103.0 / 4.0 + 1e-8));
        QCOMPARE(s.medianColumnRatio(), 1.0 / (1.0 + 1e-8));
        QCOMPARE(s.moduleRatio(), 100.0 / (104.0 / 5.0 + 1e-8)); // the row ratio is larger here
        QCOMPARE(s.topColumns(3), (std::vector<std::int64_t>{3, 1, 0}));
        QCOMPARE(s.paperCount, std::int64_t(-1)); // so-code does not apply the paper's rule
        QVERIFY(s.paperPositions.empty());
    }

    void paperRuleFindsExactlyThePlantedPositions()
    {
        WeightOutlierOptions o;
        o.rule = WeightRule::SoPaper;
        o.tau = 3.0; // row 2: 100 > 3 * 20.8; row 0: 50 > 3 * 10.8; ones: 1 < 3 * mean
        const WeightMatrixStats s = analyzeWeightMatrix(planted(), o);
        QCOMPARE(s.paperCount, std::int64_t(2));
        QCOMPARE(s.paperPositions.size(), std::size_t(2));
        QCOMPARE(s.paperPositions[0].row, std::int64_t(2)); // ratio 100 / 20.8 = 4.81 first
        QCOMPARE(s.paperPositions[0].column, std::int64_t(3));
        QCOMPARE(s.paperPositions[0].value, 100.0);
        QCOMPARE(s.paperPositions[0].ratio, 100.0 / 20.8);
        QCOMPARE(s.paperPositions[1].row, std::int64_t(0)); // 50 / 10.8 = 4.63
        QCOMPARE(s.paperPositions[1].column, std::int64_t(1));
        QCOMPARE(s.paperPositions[1].value, -50.0);
        o.tau = 5.0; // above both ratios: nothing
        QCOMPARE(analyzeWeightMatrix(planted(), o).paperCount, std::int64_t(0));
        o.tau = 4.7; // between them: only (2, 3)
        const WeightMatrixStats one = analyzeWeightMatrix(planted(), o);
        QCOMPARE(one.paperCount, std::int64_t(1));
        QCOMPARE(one.paperPositions[0].column, std::int64_t(3));
    }

    void paperRuleIsStrictAtTheDefaultTau()
    {
        // A lone 1 among zeros in a row of I values: mean 1 / I, an outlier iff 1 > 1000 / I.
        WeightOutlierOptions o;
        o.rule = WeightRule::SoPaper;
        for (const std::int64_t I : {1000, 1001}) {
            torch::Tensor w = torch::zeros({3, I});
            w[1][7] = 1.0;
            const WeightMatrixStats s = analyzeWeightMatrix(w, o);
            QCOMPARE(s.paperCount, std::int64_t(I > 1000 ? 1 : 0));
            if (I > 1000) {
                QCOMPARE(s.paperPositions[0].row, std::int64_t(1));
                QCOMPARE(s.paperPositions[0].column, std::int64_t(7));
            }
        }
    }

    void layoutsAndDtypesGiveTheSameNumbers()
    {
        WeightOutlierOptions o;
        o.rule = WeightRule::SoPaper;
        o.tau = 3.0;
        const WeightMatrixStats linear = analyzeWeightMatrix(planted(), o);
        // GPT-2's Conv1D stores W transposed; the numbers are those of W.
        const WeightMatrixStats conv1d = analyzeWeightMatrix(planted().t().contiguous(), o, /*conv1d=*/true);
        QCOMPARE(conv1d.outFeatures, std::int64_t(4));
        QCOMPARE(conv1d.columnRatio, linear.columnRatio);
        QCOMPARE(conv1d.rowRatio, linear.rowRatio);
        QCOMPARE(conv1d.paperCount, linear.paperCount);
        QCOMPARE(conv1d.paperPositions[1].row, std::int64_t(0));
        QCOMPARE(conv1d.paperPositions[1].column, std::int64_t(1));
        // 1, 100 and -50 are exact in float16 and bfloat16.
        for (const auto dtype : {torch::kHalf, torch::kBFloat16, torch::kDouble}) {
            const WeightMatrixStats s = analyzeWeightMatrix(planted().to(dtype), o);
            QCOMPARE(s.columnRatio, linear.columnRatio);
            QCOMPARE(s.rowRatio, linear.rowRatio);
            QCOMPARE(s.paperCount, linear.paperCount);
        }
        // Many pieces of rows (2^22 elements each) give the same as plain loops.
        torch::manual_seed(3);
        torch::Tensor big = torch::randn({1100, 8192}) * 0.02;
        big[1037][4100] = 100.0; // > 1000 x the row mean |w| of about 0.016
        const Reference ref = recompute(big.data_ptr<float>(), 1100, 8192, false, 1000.0);
        WeightOutlierOptions paper;
        paper.rule = WeightRule::SoPaper; // tau 1000
        const WeightMatrixStats s = analyzeWeightMatrix(big, paper);
        QCOMPARE(compareVectors(s.columnRatio, ref.column, 1e-12), QString());
        QCOMPARE(compareVectors(s.rowRatio, ref.row, 1e-12), QString());
        QCOMPARE(s.paperCount, ref.paperCount);
        QCOMPARE(s.topColumns(1), std::vector<std::int64_t>{4100});
        QCOMPARE(s.paperCount, std::int64_t(1));
        QCOMPARE(s.paperPositions.at(0).row, std::int64_t(1037));
    }

    void badInputIsAnError()
    {
        QVERIFY_THROWS_EXCEPTION(Error, analyzeWeightMatrix(torch::ones({5}), {}));
        QVERIFY_THROWS_EXCEPTION(Error, analyzeWeightMatrix(torch::ones({2, 2}, torch::kLong), {}));
        QVERIFY(weightRuleFromString("so-paper") == WeightRule::SoPaper);
        QCOMPARE(toString(WeightRule::SoCode), std::string("so-code"));
        QVERIFY_THROWS_EXCEPTION(Error, weightRuleFromString("sigma"));
        test::expectError(
            [] { scanWeightOutliers(fixture("decoders/no-such-model"), {}, WeightModules::All); },
            {QStringLiteral("no-such-model"), QStringLiteral("not a folder")});
    }

    /// A sharded checkpoint (Hugging Face's index + two shards) is read shard by shard and gives the
    /// numbers of the same model in one file.
    void shardedCheckpointEqualsTheSingleFile()
    {
        WeightOutlierOptions paper;
        paper.rule = WeightRule::SoPaper;
        paper.tau = 3;
        const WeightScan one =
            scanWeightOutliers(fixture("decoders/llama-seed0/hf"), paper, WeightModules::All);
        const WeightScan sharded =
            scanWeightOutliers(fixture("decoders/llama-seed0/hf_sharded"), paper, WeightModules::All);
        QVERIFY(QString::fromStdString(sharded.weightsFile).endsWith("model.safetensors.index.json"));
        QCOMPARE(sharded.results.size(), one.results.size());
        QVERIFY(one.results.size() > 10);
        for (std::size_t i = 0; i < one.results.size(); ++i) {
            QCOMPARE(sharded.results[i].tensor, one.results[i].tensor);
            QCOMPARE(sharded.results[i].stats.columnRatio, one.results[i].stats.columnRatio);
            QCOMPARE(sharded.results[i].stats.rowRatio, one.results[i].stats.rowRatio);
            QCOMPARE(sharded.results[i].stats.paperCount, one.results[i].stats.paperCount);
        }
    }

    void everyLinearOfTheFixturesMatchesPlainLoops_data()
    {
        QTest::addColumn<QString>("name");
        for (const char* name : {"gpt2-seed0", "opt-seed0", "opt-postln-proj-seed0",
                                 "opt-oft-gated-linear-seed0", "llama-seed0"})
            QTest::newRow(name) << QString::fromLatin1(name);
    }

    void everyLinearOfTheFixturesMatchesPlainLoops()
    {
        QFETCH(QString, name);
        const std::string dir = modelDir(name.toStdString());
        const bool gpt2 = name == QLatin1String("gpt2-seed0");
        WeightOutlierOptions o;
        o.rule = WeightRule::SoPaper;
        o.tau = 4.0; // random weights: a few entries per matrix exceed 4 x their row's mean |w|
        const WeightScan scan = scanWeightOutliers(dir, o, WeightModules::All);
        const auto got = byTensor(scan);

        const StateDict raw = readSafetensors(dir + "/model.safetensors");
        std::set<std::string> expected;
        std::int64_t paperTotal = 0;
        for (const auto& [tensorName, t] : raw) {
            const bool embedding = tensorName.find("embed") != std::string::npos ||
                                   tensorName.find("wte") != std::string::npos ||
                                   tensorName.find("wpe") != std::string::npos;
            if (t.dim() != 2 || embedding) continue;
            expected.insert(tensorName);
            const auto it = got.find(tensorName);
            QVERIFY2(it != got.end(), tensorName.c_str());
            const WeightModuleStats& r = *it->second;
            const bool conv1d = gpt2 && tensorName.find(".h.") != std::string::npos;
            QCOMPARE(r.conv1d, conv1d);
            QCOMPARE(r.dtype, std::string("float32"));
            const torch::Tensor c = t.contiguous();
            const Reference ref = recompute(c.data_ptr<float>(), c.size(0), c.size(1), conv1d, o.tau);
            QCOMPARE(r.stats.outFeatures, conv1d ? c.size(1) : c.size(0));
            const QString where = QString::fromStdString(tensorName) + QStringLiteral(" columns: ");
            QCOMPARE(where + compareVectors(r.stats.columnRatio, ref.column, 1e-12), where);
            QCOMPARE(where + compareVectors(r.stats.rowRatio, ref.row, 1e-12), where);
            QCOMPARE(r.stats.paperCount, ref.paperCount);
            QCOMPARE(std::int64_t(r.stats.paperPositions.size()), ref.paperCount);
            paperTotal += ref.paperCount;
            // The summaries of their plots, from the reference vectors.
            std::vector<double> sorted = ref.column;
            std::sort(sorted.begin(), sorted.end());
            QCOMPARE(r.stats.medianColumnRatio(), sorted[(sorted.size() - 1) / 2]);
            QCOMPARE(r.stats.maxColumnRatio(), sorted.back());
            const std::int64_t top = r.stats.topColumns(1).at(0);
            QCOMPARE(ref.column[std::size_t(top)], sorted.back());
            QVERIFY(close(r.stats.moduleRatio(),
                          std::max(sorted.back(), *std::max_element(ref.row.begin(), ref.row.end())), 1e-12));
        }
        QCOMPARE(got.size(), expected.size()); // nothing else (norms, biases, embeddings) was scanned
        QVERIFY2(paperTotal > 0, "tau 4 should find some entries in random weights");

        // --modules down: exactly one down projection per layer, in layer order.
        const WeightScan down = scanWeightOutliers(dir, {}, WeightModules::Down);
        QCOMPARE(down.results.size(), std::size_t(2));
        for (int l = 0; l < 2; ++l) {
            const WeightModuleStats& r = down.results[std::size_t(l)];
            QCOMPARE(r.layer, l);
            QVERIFY(r.down);
            const std::string want = gpt2 ? "mlp.c_proj" : name.startsWith("opt") ? "fc2" : "mlp.down_proj";
            QCOMPARE(r.module, want);
            QCOMPARE(r.stats.columnRatio, got.at(r.tensor)->stats.columnRatio);
            QCOMPARE(r.stats.inFeatures, std::int64_t(name.startsWith("llama") ? 172 : 256));
        }
    }

    void pytorchBinGivesTheSameAsSafetensors()
    {
        // gpt2-seed0's pytorch_model.bin holds lm_head.weight as the same storage as wte: skipped.
        QTemporaryDir tmp;
        const fs::path src = modelDir("gpt2-seed0");
        fs::copy_file(src / "config.json", fs::path(tmp.path().toStdString()) / "config.json");
        fs::copy_file(src / "pytorch_model.bin", fs::path(tmp.path().toStdString()) / "pytorch_model.bin");
        const WeightScan bin = scanWeightOutliers(tmp.path().toStdString(), {}, WeightModules::All);
        const WeightScan st = scanWeightOutliers(src.string(), {}, WeightModules::All);
        QCOMPARE(bin.results.size(), st.results.size());
        for (std::size_t k = 0; k < st.results.size(); ++k) {
            QCOMPARE(bin.results[k].tensor, st.results[k].tensor);
            QCOMPARE(bin.results[k].stats.columnRatio, st.results[k].stats.columnRatio);
            QCOMPARE(bin.results[k].stats.rowRatio, st.results[k].stats.rowRatio);
        }
        QVERIFY(std::any_of(bin.skipped.begin(), bin.skipped.end(), [](const std::string& s) {
            return s.rfind("lm_head.weight: output head tied", 0) == 0;
        }));
    }

    void encodersAreScannedByTheirModuleNames()
    {
        // BERT: six linears per layer, then the pooler and the classifier; W_down is output.dense.
        const WeightScan bert = scanWeightOutliers(fixture("bert/hf"), {}, WeightModules::All);
        const StateDict raw = readSafetensors(fixture("bert/hf/model.safetensors"));
        std::vector<std::string> modules;
        for (const WeightModuleStats& r : bert.results)
            if (r.layer == 1) modules.push_back(r.module);
        QCOMPARE(modules, (std::vector<std::string>{"attention.output.dense", "attention.self.key",
                                                    "attention.self.query", "attention.self.value",
                                                    "intermediate.dense", "output.dense"}));
        for (const WeightModuleStats& r : bert.results) {
            QCOMPARE(r.down, r.layer >= 0 && r.module == "output.dense");
            const torch::Tensor t = raw.at(r.tensor).contiguous();
            const Reference ref = recompute(t.data_ptr<float>(), t.size(0), t.size(1), false, 1000);
            QCOMPARE(compareVectors(r.stats.columnRatio, ref.column, 1e-12), QString());
        }
        QCOMPARE(bert.results.back().layer, -1); // outside the layers last
        // The same ViT saved by Hugging Face (output.dense) and timm (mlp.fc2): the same W_down.
        const WeightScan hf = scanWeightOutliers(fixture("vit/hf"), {}, WeightModules::Down);
        const WeightScan timm = scanWeightOutliers(fixture("vit/timm"), {}, WeightModules::Down);
        QCOMPARE(hf.results.size(), timm.results.size());
        QVERIFY(!hf.results.empty());
        for (std::size_t k = 0; k < hf.results.size(); ++k) {
            QCOMPARE(hf.results[k].module, std::string("output.dense"));
            QCOMPARE(timm.results[k].module, std::string("mlp.fc2"));
            QCOMPARE(hf.results[k].layer, timm.results[k].layer);
            QCOMPARE(
                compareVectors(hf.results[k].stats.columnRatio, timm.results[k].stats.columnRatio, 1e-12),
                QString());
        }
    }

    void bfloat16StorageMatchesFloat32WithinRounding()
    {
        // The float32 llama fixture written as bfloat16 by writeSafetensors, and the same model as
        // PyTorch rounded it (hf_bf16): both read as bfloat16 give the ratios of the rounded values
        // exactly, and those of the float32 weights within bfloat16's rounding.
        const std::string f32 = modelDir("llama-seed0");
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        fs::copy_file(fs::path(f32) / "config.json", dir / "config.json");
        const StateDict raw = readSafetensors(f32 + "/model.safetensors");
        writeSafetensors((dir / "model.safetensors").string(), raw, SafetensorsDtype::BFloat16);

        const WeightScan a = scanWeightOutliers(f32, {}, WeightModules::All);
        const WeightScan b = scanWeightOutliers(dir.string(), {}, WeightModules::All);
        const WeightScan torchMade =
            scanWeightOutliers(fixture("decoders/llama-seed0/hf_bf16"), {}, WeightModules::All);
        QCOMPARE(b.results.size(), a.results.size());
        QCOMPARE(torchMade.results.size(), a.results.size());
        const double bf16Bound = (2.0 / 256) / (1 - 1.0 / 256);
        double largest = 0;
        for (std::size_t k = 0; k < a.results.size(); ++k) {
            const WeightModuleStats& x = a.results[k];
            const WeightModuleStats& y = b.results[k];
            QCOMPARE(y.tensor, x.tensor);
            QCOMPARE(y.dtype, std::string("bfloat16"));
            QCOMPARE(torchMade.results[k].stats.columnRatio, y.stats.columnRatio);
            // Rounding to bfloat16 (8 significant bits) moves each |w| by at most u = 2^-8 relative,
            // so max / mean by at most 2u / (1 - u).
            const QString where = QString::fromStdString(x.tensor) + QStringLiteral(": ");
            QCOMPARE(where + compareVectors(y.stats.columnRatio, x.stats.columnRatio, bf16Bound), where);
            QCOMPARE(where + compareVectors(y.stats.rowRatio, x.stats.rowRatio, bf16Bound), where);
            // Exactly the ratios of the rounded values (computed here with plain loops).
            const torch::Tensor rounded =
                raw.at(x.tensor).to(torch::kBFloat16).to(torch::kFloat).contiguous();
            const Reference ref =
                recompute(rounded.data_ptr<float>(), rounded.size(0), rounded.size(1), false, 1000);
            QCOMPARE(where + compareVectors(y.stats.columnRatio, ref.column, 1e-12), where);
            for (std::size_t j = 0; j < x.stats.columnRatio.size(); ++j)
                largest = std::max(largest, std::fabs(y.stats.columnRatio[j] / x.stats.columnRatio[j] - 1));
        }
        QVERIFY2(largest > 0, "bfloat16 rounding should move some ratio"); // it really was bfloat16
        QVERIFY(largest <= bf16Bound);
    }

    void commandWritesTheCsv()
    {
        QTemporaryDir tmp;
        const QString model = QString::fromStdString(modelDir("llama-seed0"));
        const QString csv = tmp.path() + QStringLiteral("/weights.csv");
        const Run r =
            runApp({QStringLiteral("weights"), QStringLiteral("--model"), model, QStringLiteral("--modules"),
                    QStringLiteral("all"), QStringLiteral("--out"), csv});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(QStringLiteral("W_down per layer")), qPrintable(r.out));
        QVERIFY2(r.out.contains(QStringLiteral("mlp.down_proj")), qPrintable(r.out));

        QFile file(csv);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QStringList lines = QString::fromUtf8(file.readAll()).split('\n', Qt::SkipEmptyParts);
        QVERIFY(lines.size() >= 2);
        QVERIFY(lines[0].startsWith(QStringLiteral("# outlierlens weights")));
        QVERIFY2(lines[0].contains(QStringLiteral("rule so-code")), qPrintable(lines[0]));
        QVERIFY2(lines[0].contains(QRegularExpression(QStringLiteral("checkpoint_sha256 [0-9a-f]{64}"))),
                 qPrintable(lines[0]));
        const QStringList header = lines[1].split(',');
        QCOMPARE(header.first(), QStringLiteral("layer"));
        const int module = int(header.indexOf(QStringLiteral("module")));
        const int tensor = int(header.indexOf(QStringLiteral("tensor")));
        const int maxColumn = int(header.indexOf(QStringLiteral("max_column_ratio")));
        const int median = int(header.indexOf(QStringLiteral("median_column_ratio")));
        const int top = int(header.indexOf(QStringLiteral("top_columns")));
        QVERIFY(module > 0 && tensor > 0 && maxColumn > 0 && median > 0 && top > 0);
        QCOMPARE(lines.size() - 2, 2 * 7 + 1); // q, k, v, o, gate, up, down per layer + the untied lm_head

        const StateDict raw = readSafetensors(modelDir("llama-seed0") + "/model.safetensors");
        int downs = 0;
        for (int k = 2; k < lines.size(); ++k) {
            const QStringList f = lines[k].split(',');
            QCOMPARE(f.size(), header.size());
            const std::string name = f[tensor].toStdString();
            QVERIFY2(raw.count(name), name.c_str());
            const torch::Tensor t = raw.at(name).contiguous();
            const Reference ref = recompute(t.data_ptr<float>(), t.size(0), t.size(1), false, 1000);
            std::vector<double> sorted = ref.column;
            std::sort(sorted.begin(), sorted.end());
            QVERIFY2(close(f[maxColumn].toDouble(), sorted.back(), 1e-12), qPrintable(lines[k]));
            QVERIFY2(close(f[median].toDouble(), sorted[(sorted.size() - 1) / 2], 1e-12),
                     qPrintable(lines[k]));
            // top_columns: "j:ratio;..." with the largest first.
            const QStringList first = f[top].split(';').first().split(':');
            QCOMPARE(ref.column[std::size_t(first[0].toLongLong())], sorted.back());
            if (f[module] == QLatin1String("mlp.down_proj")) ++downs;
        }
        QCOMPARE(downs, 2);

        // JSON, the paper's rule.
        const QString json = tmp.path() + QStringLiteral("/weights.json");
        const Run p = runApp({QStringLiteral("weights"), QStringLiteral("--model"), model,
                              QStringLiteral("--rule"), QStringLiteral("so-paper"), QStringLiteral("--tau"),
                              QStringLiteral("4"), QStringLiteral("--out"), json});
        QVERIFY2(p.exitCode == 0, qPrintable(p.err));
        std::ifstream in(json.toStdString());
        const nlohmann::json j = nlohmann::json::parse(in);
        QCOMPARE(j.at("rule").get<std::string>(), std::string("so-paper"));
        QCOMPARE(j.at("tau").get<double>(), 4.0);
        QCOMPARE(j.at("results").size(), std::size_t(2));
        const torch::Tensor down = raw.at("model.layers.1.mlp.down_proj.weight").contiguous();
        const Reference ref = recompute(down.data_ptr<float>(), down.size(0), down.size(1), false, 4.0);
        QVERIFY(ref.paperCount > 0);
        QCOMPARE(j.at("results")[1].at("outliers").get<std::int64_t>(), ref.paperCount);
    }

    void commandRejectsBadInput_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<int>("exitCode");
        const QString model = QString::fromStdString(modelDir("llama-seed0"));
        QTest::newRow("unknown rule") << QStringList{"--model", model, "--rule", "sigma"} << 2;
        QTest::newRow("tau without so-paper") << QStringList{"--model", model, "--tau", "10"} << 2;
        QTest::newRow("negative tau")
            << QStringList{"--model", model, "--rule", "so-paper", "--tau", "-1"} << 2;
        QTest::newRow("modules") << QStringList{"--model", model, "--modules", "attn"} << 2;
        QTest::newRow("top 0") << QStringList{"--model", model, "--top", "0"} << 2;
        QTest::newRow("no model") << QStringList{} << 2;
        QTest::newRow("missing folder") << QStringList{"--model", model + "/nope"} << 1;
    }

    void commandRejectsBadInput()
    {
        QFETCH(QStringList, args);
        QFETCH(int, exitCode);
        QTemporaryDir tmp;
        const QString out = tmp.path() + QStringLiteral("/w.txt");
        const Run r = runApp(QStringList{QStringLiteral("weights")} + args);
        QCOMPARE(r.exitCode, exitCode);
        QCOMPARE(r.err.count('\n'), 1); // one line
        QVERIFY(r.out.isEmpty());
        // A wrong --out extension is refused before anything is computed or written.
        const Run bad =
            runApp({QStringLiteral("weights"), QStringLiteral("--model"),
                    QString::fromStdString(modelDir("llama-seed0")), QStringLiteral("--out"), out});
        QCOMPARE(bad.exitCode, 2);
        QVERIFY(!QFile::exists(out));
    }
};

QTEST_GUILESS_MAIN(TstWeightOutliers)
#include "tst_weight_outliers.moc"
