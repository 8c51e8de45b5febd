// `outlierlens stats` as a user runs it. The statistics of a short run must equal what a plain,
// separate computation finds in the inspection dumps of the same inputs (so batching, padding and
// streaming change nothing), and interrupted or bad runs leave no file.

#include "../common/app_runner.h"
#include "../common/tensor_compare.h"

#include "io/hdf5_store.h"
#include "io/image.h"
#include "model/precision.h"
#include "model/vit_network.h"
#include "text/mnli.h"
#include "train/job_progress.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

using namespace outlierlens;
using outlierlens::test::fixture;
using outlierlens::test::Run;
using outlierlens::test::runApp;
namespace fs = std::filesystem;

namespace {

QString fx(const std::string& relative)
{
    return QString::fromStdString(fixture(relative));
}

/// The sigma rule written out plainly: |x - mean| > k * std (unbiased) over the whole sample.
torch::Tensor sigmaOutliers(const torch::Tensor& x, double k)
{
    const torch::Tensor d = x.to(torch::kDouble);
    return (d - d.mean()).abs() > k * d.std();
}

double kurtosisOf(const torch::Tensor& x)
{
    const torch::Tensor d = x.to(torch::kDouble).flatten();
    const double mu = d.mean().item<double>(), s = d.std().item<double>();
    return (d - mu).pow(4).mean().item<double>() / (std::pow(s, 4) + 1e-6);
}

/// `outlierlens stats` with `extra` set in its environment (runApp() takes the caller's).
Run runStatsWithEnv(const QStringList& args, const QString& name, const QString& value)
{
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(name, value);
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(OUTLIERLENS_BINARY_DIR "/app/outlierlens"), args);
    if (!p.waitForFinished(600000)) p.kill();
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
            QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}

/// How far two statistics files of the same inputs agree, as bench/compare_stats_precision.sh measures
/// it: sum over every outlier count (per dimension, per token) of min / sum of max, and the largest
/// relative difference of a layer's mean max inf norm and of the model's max inf norm.
struct Agreement
{
    double counts = 0;
    std::int64_t outliers = 0; ///< outlier values counted per dimension in the first file
    double worstInfNorm = 0;
    double modelInfNorm = 0;
};

Agreement agreement(const std::string& first, const std::string& second)
{
    Hdf5Reader a(first), b(second);
    Agreement result;
    double lo = 0, hi = 0;
    for (std::int64_t layer : a.intArrayAttribute("/", "layers")) {
        for (const char* tensor : {"attn_out", "ffn_out", "residual", "out"}) {
            const std::string g = "layer" + std::to_string(layer) + "/" + tensor;
            for (const char* counts : {"/outliers_per_dim", "/token_outliers"}) {
                const torch::Tensor x = a.readTensor(g + counts), y = b.readTensor(g + counts);
                lo += double(torch::minimum(x, y).sum().item<std::int64_t>());
                hi += double(torch::maximum(x, y).sum().item<std::int64_t>());
                if (std::string(counts) == "/outliers_per_dim")
                    result.outliers += x.sum().item<std::int64_t>();
            }
            const double ia = a.readTensor(g + "/mean_max_inf_norm").item<double>();
            const double ib = b.readTensor(g + "/mean_max_inf_norm").item<double>();
            result.worstInfNorm = std::max(result.worstInfNorm, std::abs(ib - ia) / std::abs(ia));
        }
    }
    result.counts = hi > 0 ? lo / hi : 1.0;
    const double ma = a.readTensor("summary/max_inf_norm").item<double>();
    result.modelInfNorm = std::abs(b.readTensor("summary/max_inf_norm").item<double>() - ma) / ma;
    return result;
}

} // namespace

class TstStats : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void textStatisticsEqualThoseFromDumps()
    {
        QTemporaryDir dir;
        // Seven pairs of different lengths, batched by three: every batch is padded.
        const std::vector<NliPair> pairs =
            readNliPairs(OUTLIERLENS_SOURCE_DIR "/sample_data/mnli/mnli_dev_matched.jsonl", 7);
        const QString data = dir.path() + "/pairs.tsv";
        {
            std::ofstream out(data.toStdString());
            out << "index\tsentence1\tsentence2\tgold_label\n";
            for (std::size_t i = 0; i < pairs.size(); ++i)
                out << i << '\t' << pairs[i].premise << '\t' << pairs[i].hypothesis << '\t' << pairs[i].label
                    << '\n';
        }
        const double k = 3.0;
        const QString statsPath = dir.path() + "/stats.h5";
        Run r = runApp({"stats", "--model", fx("bert/hf"), "--data", "mnli:" + data, "--k", "3", "--batch",
                        "3", "--systematic", "--out", statsPath});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));

        // The dumps, one per pair, and everything recomputed from them.
        std::map<std::string, std::int64_t> tokenOutliers; // layer1/ffn_out
        torch::Tensor perDim = torch::zeros({128}, torch::kLong);
        double sumInf = 0, sumKurt = 0;
        std::int64_t examined = 0;
        double sumTopOut = 0, sumHeadMeanTop = 0; // systematic: layer 1's largest |h| and received attention
        std::int64_t positions = 0, separators = 0;
        std::map<std::string, double> cumAttention; // layer1, head 0, by key string
        std::map<std::string, std::int64_t> occurrences;
        double vOutlier = 0, vOther = 0;
        std::int64_t nOutlier = 0, nOther = 0;
        for (std::size_t i = 0; i < pairs.size(); ++i) {
            const QString dump = dir.path() + QStringLiteral("/d%1.h5").arg(i);
            r = runApp({"inspect", "--model", fx("bert/hf"), "--text",
                        QString::fromStdString(pairs[i].premise), "--pair",
                        QString::fromStdString(pairs[i].hypothesis), "--dump", dump});
            QVERIFY2(r.exitCode == 0, qPrintable(r.err));
            Hdf5Reader d(dump.toStdString());
            const std::vector<std::string> tokens = d.readStrings("tokens");
            const torch::Tensor ffn = d.readTensor("layer1/ffn_out");
            const torch::Tensor mask = sigmaOutliers(ffn, k);
            perDim += mask.sum(0);
            examined += ffn.numel();
            sumInf += ffn.abs().max().item<double>();
            sumKurt += kurtosisOf(ffn);
            for (std::size_t t = 0; t < tokens.size(); ++t)
                tokenOutliers[tokens[t]] += mask[std::int64_t(t)].sum().item<std::int64_t>();
            sumTopOut += d.readTensor("layer1/out").abs().max().item<double>();
            sumHeadMeanTop += d.readTensor("layer1/attn_probs").mean(0).sum(0).max().item<double>();
            positions += std::int64_t(tokens.size());
            separators += std::count(tokens.begin() + 1, tokens.end(), std::string("[SEP]"));
            // Head 0 of layer 1: cumulative attention per key, and |V| of keys that carry an
            // outlier in layer 0's output versus the rest (Figure 3e).
            const torch::Tensor probs = d.readTensor("layer1/attn_probs")[0];
            const torch::Tensor values = d.readTensor("layer1/attn_values")[0];
            const torch::Tensor prevOutliers = sigmaOutliers(d.readTensor("layer0/out"), k).any(1);
            for (std::size_t j = 0; j < tokens.size(); ++j) {
                const auto jj = std::int64_t(j);
                cumAttention[tokens[j]] += probs.select(1, jj).sum().item<double>();
                occurrences[tokens[j]] += 1;
                const double meanAbsV = values[jj].abs().mean().item<double>();
                if (prevOutliers[jj].item<bool>())
                    vOutlier += meanAbsV, ++nOutlier;
                else
                    vOther += meanAbsV, ++nOther;
            }
        }

        Hdf5Reader s(statsPath.toStdString());
        QCOMPARE(std::int64_t(s.numberAttribute("/", "samples")), std::int64_t(pairs.size()));
        QVERIFY(torch::equal(s.readTensor("layer1/ffn_out/outliers_per_dim"), perDim));
        QVERIFY2(perDim.sum().item<std::int64_t>() > 0,
                 "k = 3 must find outliers in this model, or the test proves nothing");
        QCOMPARE(s.readTensor("layer1/ffn_out/values_examined").item<std::int64_t>(), examined);
        QVERIFY(std::abs(s.readTensor("layer1/ffn_out/mean_max_inf_norm").item<double>() -
                         sumInf / double(pairs.size())) < 1e-4);
        QVERIFY(std::abs(s.readTensor("layer1/ffn_out/mean_kurtosis").item<double>() -
                         sumKurt / double(pairs.size())) < 1e-3);

        const std::vector<std::string> names = s.readStrings("tokens");
        const torch::Tensor counted = s.readTensor("layer1/ffn_out/token_outliers");
        const torch::Tensor cumulative = s.readTensor("layer1/heads/mean_cumulative_attention")[0];
        QCOMPARE(names.size(), occurrences.size());
        for (std::size_t i = 0; i < names.size(); ++i) {
            QCOMPARE(counted[std::int64_t(i)].item<std::int64_t>(), tokenOutliers[names[i]]);
            const double expected = cumAttention[names[i]] / double(occurrences[names[i]]);
            QVERIFY2(std::abs(cumulative[std::int64_t(i)].item<double>() - expected) < 1e-4,
                     names[i].c_str());
        }
        QCOMPARE(s.readTensor("layer1/heads/outlier_keys").item<std::int64_t>(), nOutlier);
        QCOMPARE(s.readTensor("layer1/heads/other_keys").item<std::int64_t>(), nOther);
        if (nOutlier > 0)
            QVERIFY(std::abs(s.readTensor("layer1/heads/mean_abs_value_outlier_keys")[0].item<double>() -
                             vOutlier / nOutlier) < 1e-4);
        QVERIFY(std::abs(s.readTensor("layer1/heads/mean_abs_value_other_keys")[0].item<double>() -
                         vOther / nOther) < 1e-4);
        QVERIFY(s.stringAttribute("/", "checkpoint_sha256").size() == 64);
        QVERIFY(s.stringAttribute("/", "data").find("pairs.tsv") != std::string::npos);

        // An et al.'s systematic outliers of the padded batches, from the same dumps: each pair's [CLS]
        // is its initial token, [SEP] a strong delimiter; the largest |h| and received attention.
        const torch::Tensor byCategory = s.readTensor("systematic/layer1/tokens_by_category");
        QCOMPARE(byCategory[0].item<std::int64_t>(), std::int64_t(pairs.size()));
        QVERIFY(byCategory[1].item<std::int64_t>() >= separators);
        QCOMPARE(byCategory.sum().item<std::int64_t>(), positions);
        QVERIFY(std::abs(s.readTensor("systematic/layer1/out/mean_top_abs")[0].item<double>() -
                         sumTopOut / double(pairs.size())) < 1e-4 * sumTopOut);
        QVERIFY(std::abs(s.readTensor("systematic/layer1/attention/mean_top_abs")[0].item<double>() -
                         sumHeadMeanTop / double(pairs.size())) < 1e-4 * sumHeadMeanTop);
    }

    void imageFolderWithBadFiles()
    {
        QTemporaryDir dir;
        const fs::path images = dir.path().toStdString() + "/images";
        fs::create_directories(images);
        fs::copy_file(fixture("vit/images/chelsea_cat.png"), images / "a_cat.png");
        fs::copy_file(fixture("vit/images/grace_hopper.jpg"), images / "b_hopper.jpg");
        std::ofstream(images / "c_broken.png") << "not a png";
        std::ofstream(images / "README.txt") << "ignored: not an image extension";
        const QString statsPath = dir.path() + "/vit.h5";
        const Run r = runApp({"stats", "--model", fx("vit/timm"), "--data",
                              "images:" + QString::fromStdString(images.string()), "--layers", "1",
                              "--systematic", "--out", statsPath});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("c_broken.png"), qPrintable(r.err));
        Hdf5Reader s(statsPath.toStdString());
        QCOMPARE(std::int64_t(s.numberAttribute("/", "samples")), std::int64_t(2));
        QCOMPARE(std::int64_t(s.numberAttribute("/", "skipped_inputs")), std::int64_t(1));
        QCOMPARE(s.shape("layer1/out/patch_outliers"), (std::vector<std::int64_t>{14, 14}));
        QVERIFY(!s.exists("layer0"));

        // The patch map equals the one computed from the two images' dumps.
        torch::Tensor expected = torch::zeros({14, 14}, torch::kLong);
        std::int64_t cls = 0;
        for (const char* name : {"a_cat.png", "b_hopper.jpg"}) {
            const QString dump = dir.path() + "/" + name + ".h5";
            const Run i = runApp({"inspect", "--model", fx("vit/timm"), "--image",
                                  QString::fromStdString((images / name).string()), "--dump", dump});
            QVERIFY2(i.exitCode == 0, qPrintable(i.err));
            const torch::Tensor mask =
                sigmaOutliers(Hdf5Reader(dump.toStdString()).readTensor("layer1/out"), 6.0).sum(1);
            cls += mask[0].item<std::int64_t>();
            expected += mask.slice(0, 1).view({14, 14});
        }
        QVERIFY(torch::equal(s.readTensor("layer1/out/patch_outliers"), expected));
        QCOMPARE(s.readTensor("layer1/out/cls_outliers").item<std::int64_t>(), cls);
        // An et al.'s categories for images: the CLS token is the initial token, the 196 patches "other".
        const torch::Tensor byCategory = s.readTensor("systematic/layer1/tokens_by_category");
        QCOMPARE(byCategory[0].item<std::int64_t>(), std::int64_t(2));
        QCOMPARE(byCategory[3].item<std::int64_t>(), std::int64_t(2 * 196));
    }

    void imageNetLayoutReportsAccuracy()
    {
        // A 1000-class ViT (random weights) and a two-class slice of ImageNet's validation layout.
        QTemporaryDir dir;
        VitConfig c = VitConfig::preset("vit-tiny");
        c.imageSize = 32, c.numLayers = 1, c.hiddenSize = 48, c.intermediateSize = 96;
        c.architecture = "vit_custom";
        VitNetwork::create(c, 5).save(
            (dir.path() + "/model").toStdString(),
            R"({"input_size": [3, 32, 32], "interpolation": "bicubic", "crop_pct": 0.875,
                                          "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]})");
        const fs::path val = dir.path().toStdString() + "/val";
        fs::create_directories(val / "n01440764");
        fs::create_directories(val / "n01443537");
        fs::copy_file(fixture("vit/images/chelsea_cat.png"),
                      val / "n01440764" / "ILSVRC2012_val_00000002.png");
        fs::copy_file(fixture("vit/images/grace_hopper.jpg"),
                      val / "n01443537" / "ILSVRC2012_val_00000001.jpg");
        const QString statsPath = dir.path() + "/s.h5";
        const Run r = runApp({"stats", "--model", dir.path() + "/model", "--data",
                              "images:" + QString::fromStdString(val.string()), "--out", statsPath});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("top-5"), qPrintable(r.out));
        Hdf5Reader s(statsPath.toStdString());
        const double top1 = s.numberAttribute("/", "accuracy_top1"),
                     top5 = s.numberAttribute("/", "accuracy_top5");
        QVERIFY(top1 >= 0 && top1 <= top5 && top5 <= 1);
    }

    /// For the app's job list: --json-progress reports progress as the JSON lines `train` prints, read
    /// by the job list's parser (train/job_progress.h); without it a person gets the line on stderr.
    void jsonProgressLinesForTheJobList()
    {
        QTemporaryDir dir;
        const QString data = "mnli:" OUTLIERLENS_SOURCE_DIR "/sample_data/mnli/mnli_dev_matched.jsonl:10";
        const QString statsPath = dir.path() + "/stats.h5";
        Run r = runApp({"stats", "--json-progress", "--model", fx("bert/hf"), "--data", data, "--batch", "3",
                        "--out", statsPath});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(!r.err.contains("stats: "), qPrintable(r.err)); // no human progress line
        const std::int64_t samples =
            std::int64_t(Hdf5Reader(statsPath.toStdString()).numberAttribute("/", "samples"));
        QCOMPARE(samples, std::int64_t(10));

        std::vector<JobProgress> progress;
        QStringList other;
        for (const QString& line : r.out.split('\n', Qt::SkipEmptyParts)) {
            if (const auto p = parseProgressLine(line.toStdString()))
                progress.push_back(*p);
            else
                other << line;
        }
        // Progress lines, then the result line a person reads (and the job list shows when done).
        QCOMPARE(other.size(), 1);
        QVERIFY2(other.first().startsWith("wrote " + statsPath), qPrintable(other.first()));
        QVERIFY2(!progress.empty(), qPrintable(r.out));
        // Batches of three over ten pairs: 3, 6, 9, 10 done (at most one line a second, always the last).
        std::int64_t before = 0;
        double elapsedBefore = 0;
        for (const JobProgress& p : progress) {
            QCOMPARE(p.total, samples);
            QVERIFY(p.step > before && (p.step % 3 == 0 || p.step == samples));
            QVERIFY(std::isfinite(p.elapsed) && p.elapsed >= elapsedBefore);
            QVERIFY(std::isfinite(p.eta) && p.eta >= 0);
            before = p.step;
            elapsedBefore = p.elapsed;
        }
        QCOMPARE(progress.front().step, std::int64_t(3));
        QCOMPARE(progress.back().step, samples);
        QCOMPARE(progress.back().eta, 0.0);
        // The job list reads the last progress line from the job's log (stdout).
        const std::string log = dir.path().toStdString() + "/job.log";
        std::ofstream(log) << r.out.toStdString();
        const std::optional<JobProgress> last = lastProgressIn(log);
        QVERIFY(last.has_value());
        QCOMPARE(last->step, samples);
        QCOMPARE(last->total, samples);

        // Without the flag: the progress a person reads, on stderr; no JSON on stdout.
        r = runApp({"stats", "--model", fx("bert/hf"), "--data", data, "--batch", "3", "--out", statsPath});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("stats: 10/10 pairs (100%)"), qPrintable(r.err));
        QVERIFY2(!r.out.contains("\"progress\""), qPrintable(r.out));
    }

    void interruptLeavesNoFile()
    {
        QTemporaryDir dir;
        const QString statsPath = dir.path() + "/never.h5";
        QProcess p;
        p.start(QStringLiteral(OUTLIERLENS_BINARY_DIR "/app/outlierlens"),
                {"stats", "--model", fx("bert/hf"), "--data",
                 "mnli:" OUTLIERLENS_SOURCE_DIR "/sample_data/mnli/mnli_dev_matched.jsonl", "--out",
                 statsPath});
        QVERIFY(p.waitForStarted());
        // Wait until it reports progress, then Ctrl-C.
        QByteArray err;
        QTRY_VERIFY_WITH_TIMEOUT((err += p.readAllStandardError()).contains("stats:") ||
                                     p.state() == QProcess::NotRunning,
                                 120000);
        QCOMPARE(p.state(), QProcess::Running);
        ::kill(pid_t(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 130);
        QVERIFY(!QFile::exists(statsPath));
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files).size(), 0);
    }

    void bf16AgreesWithFp32()
    {
        // The documented effect of the fast mode on a bundled demo model: outlier counts agree on >= 99%
        // of counted values and the max inf norm within 1%.
        QTemporaryDir dir;
        const QStringList common = {
            "stats", "--model",
            QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/models/bert-mnli-vanilla"), "--data",
            "mnli:" OUTLIERLENS_SOURCE_DIR "/sample_data/mnli/mnli_dev_matched.jsonl:256"};
        const QString fp32 = dir.path() + "/fp32.h5", bf16 = dir.path() + "/bf16.h5";
        Run r = runApp(common + QStringList{"--out", fp32});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QCOMPARE(Hdf5Reader(fp32.toStdString()).stringAttribute("/", "precision"), std::string("fp32"));
        r = runApp(common + QStringList{"--precision", "bf16", "--out", bf16});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        if (!cpuSupportsBf16()) {
            QVERIFY2(r.err.contains("no bfloat16 instructions"), qPrintable(r.err));
            QCOMPARE(Hdf5Reader(bf16.toStdString()).stringAttribute("/", "precision"), std::string("fp32"));
            QSKIP("this CPU has no bf16 instructions: checked the fallback instead");
        }
        QVERIFY2(!r.err.contains("bfloat16 instructions"), qPrintable(r.err));
        QCOMPARE(Hdf5Reader(bf16.toStdString()).stringAttribute("/", "precision"), std::string("bf16"));
        const Agreement agree = agreement(fp32.toStdString(), bf16.toStdString());
        QVERIFY2(agree.outliers > 0, "the demo model must have outliers, or the test proves nothing");
        QVERIFY2(agree.counts >= 0.99, qPrintable(QString::number(agree.counts)));
        QVERIFY2(agree.modelInfNorm <= 0.01, qPrintable(QString::number(agree.modelInfNorm)));
        QVERIFY2(agree.worstInfNorm <= 0.01, qPrintable(QString::number(agree.worstInfNorm)));
    }

    void bf16FallsBackOnceWithoutCpuSupport()
    {
        QTemporaryDir dir;
        const QString out = dir.path() + "/s.h5";
        const Run r =
            runStatsWithEnv({"stats", "--model", fx("bert/hf"), "--data",
                             "mnli:" OUTLIERLENS_SOURCE_DIR "/sample_data/mnli/mnli_dev_matched.jsonl:3",
                             "--precision", "bf16", "--out", out},
                            "OUTLIERLENS_NO_BF16", "1");
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QCOMPARE(r.err.count("no bfloat16 instructions"), 1);
        QVERIFY2(r.err.contains("fp32"), qPrintable(r.err));
        QCOMPARE(Hdf5Reader(out.toStdString()).stringAttribute("/", "precision"), std::string("fp32"));
    }

    void badArguments_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<int>("exitCode");
        QTest::addColumn<QString>("mustMention");
        QTest::newRow("bad spec") << QStringList{"stats", "--model", fx("bert/hf"), "--data",
                                                 "csv:x", "--out",   "/tmp/x.h5"}
                                  << 1 << "unknown kind 'csv'";
        QTest::newRow("images for BERT")
            << QStringList{"stats", "--model", fx("bert/hf"), "--data", "images:/tmp", "--out", "/tmp/x.h5"}
            << 1 << "BERT model";
        QTest::newRow("missing file")
            << QStringList{"stats", "--model",  fx("bert/hf"), "--data", "mnli:/nonexistent.tsv",
                           "--out", "/tmp/x.h5"}
            << 1 << "/nonexistent.tsv";
        QTest::newRow("layer out of range")
            << QStringList{"stats",
                           "--model",
                           fx("bert/hf"),
                           "--data",
                           "mnli:" OUTLIERLENS_SOURCE_DIR "/sample_data/mnli/mnli_dev_matched.jsonl:2",
                           "--layers",
                           "5",
                           "--out",
                           "/tmp/x.h5"}
            << 1 << "layer 5";
        QTest::newRow("bad rule") << QStringList{"stats",  "--model", fx("bert/hf"), "--data",   "mnli:x",
                                                 "--rule", "median",  "--out",       "/tmp/x.h5"}
                                  << 2
                                  << "median"; // a usage error, as every bad option value (one rule parser)
        QTest::newRow("unknown precision")
            << QStringList{"stats",
                           "--model",
                           fx("bert/hf"),
                           "--data",
                           "mnli:" OUTLIERLENS_SOURCE_DIR "/sample_data/mnli/mnli_dev_matched.jsonl:2",
                           "--precision",
                           "fp16",
                           "--out",
                           "/tmp/x.h5"}
            << 2 << "--precision must be fp32 or bf16, not 'fp16'";
        QTest::newRow("no out") << QStringList{"stats", "--model", fx("bert/hf"), "--data", "mnli:x"} << 2
                                << "--out";
    }
    void badArguments()
    {
        QFETCH(QStringList, args);
        QFETCH(int, exitCode);
        QFETCH(QString, mustMention);
        const Run r = runApp(args);
        QCOMPARE(r.exitCode, exitCode);
        QVERIFY2(r.err.contains(mustMention), qPrintable(r.err));
        QVERIFY(!QFile::exists("/tmp/x.h5"));
    }
};

QTEST_GUILESS_MAIN(TstStats)
#include "tst_stats.moc"
