// `outlierlens figures` as a user runs it: the figure set of the demo models, each file there and not
// blank, and the CSVs' numbers equal to what the backend computes for the same inputs (the statistics
// file of `stats`, an `inspect` dump).

#include "../common/app_runner.h"
#include "../common/figure_set_files.h"

#include "analysis/statistics_file.h"
#include "io/hdf5_store.h"
#include "model/precision.h"
#include "text/mnli.h"
#include "train/sweep_summary.h"

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <map>
#include <numeric>
#include <tuple>

using namespace outlierlens;
using outlierlens::test::figureEntry;
using outlierlens::test::near;
using outlierlens::test::notBlank;
using outlierlens::test::readIndex;
using outlierlens::test::runApp;

namespace {

QString sample(const QString& relative)
{
    return QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/") + relative;
}

/// The CSV's lines after its "# key: value" provenance, and those keys.
struct Csv
{
    std::map<QString, QString> meta;
    QStringList lines;
};

Csv readCsv(const QString& path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) return {};
    Csv csv;
    for (const QString& line : QString::fromUtf8(file.readAll()).split(QLatin1Char('\n'))) {
        if (line.startsWith(QLatin1String("# "))) {
            const int colon = line.indexOf(QLatin1String(": "));
            csv.meta[line.mid(2, colon - 2)] = line.mid(colon + 2);
        } else {
            csv.lines << line;
        }
    }
    return csv;
}

/// Every page's size in points (the PDF's MediaBox entries, in page order).
QVector<QSizeF> pdfPageSizes(const QString& path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) return {};
    QVector<QSizeF> sizes;
    const QString text = QString::fromLatin1(file.readAll());
    QRegularExpressionMatchIterator it =
        QRegularExpression(QStringLiteral("/MediaBox\\s*\\[\\s*0\\s+0\\s+([0-9.]+)\\s+([0-9.]+)\\s*\\]"))
            .globalMatch(text);
    while (it.hasNext()) {
        const QRegularExpressionMatch m = it.next();
        sizes << QSizeF(m.captured(1).toDouble(), m.captured(2).toDouble());
    }
    return sizes;
}

/// A4 landscape is 841.89 x 595.28 pt: no page of the index may be taller (issue #39).
constexpr double kA4LandscapeHeight = 595.3;

QVector<int> ints(const QJsonValue& value)
{
    QVector<int> result;
    for (const auto& v : value.toArray())
        result << v.toInt();
    return result;
}

/// The statistics file the figures used (index.json's "statistics"); other files in statistics/ are the
/// --compare models' (Table 2).
QString statisticsFileOf(const QString& dir)
{
    QFile json(dir + QStringLiteral("/index.json"));
    if (json.open(QIODevice::ReadOnly)) {
        const QString relative =
            QJsonDocument::fromJson(json.readAll()).object()[QStringLiteral("statistics")].toString();
        if (!relative.isEmpty()) return dir + QLatin1Char('/') + relative;
    }
    const QStringList files = QDir(dir + QStringLiteral("/statistics")).entryList({QStringLiteral("*.h5")});
    return files.size() == 1 ? dir + QStringLiteral("/statistics/") + files.first() : QString();
}

} // namespace

class TestFigures : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void decoderFamilyWithComparisons()
    {
        QTemporaryDir out;
        const QString models = sample(QStringLiteral("models/"));
        const QStringList args{QStringLiteral("figures"),
                               QStringLiteral("--model"),
                               models + QStringLiteral("backcopy-vanilla"),
                               QStringLiteral("--compare"),
                               models + QStringLiteral("backcopy-gated,") + models +
                                   QStringLiteral("backcopy-clipped"),
                               QStringLiteral("--data"),
                               QStringLiteral("text:") + sample(QStringLiteral("text/wiki_en_valid.txt:12")),
                               QStringLiteral("--format"),
                               QStringLiteral("png,svg"),
                               QStringLiteral("--dpi"),
                               QStringLiteral("96"),
                               QStringLiteral("--quantize-data"), // Table 2's W8A8: tst_figure_tables
                               QStringLiteral("none"),
                               QStringLiteral("--out"),
                               out.path()};
        const auto r = runApp(args);
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        // Every figure a decoder family allows, in both formats, with its CSV.
        for (const QString id : {"1", "2", "4", "5", "10", "11", "13", "14", "15", "an1", "an3", "an7", "an8",
                                 "an9", "an10", "an11"}) {
            const QString base = out.path() + QStringLiteral("/figure-") + id;
            QVERIFY2(notBlank(base + QStringLiteral(".png")), qPrintable(id));
            QVERIFY2(QFileInfo(base + QStringLiteral(".svg")).size() > 1000, qPrintable(id));
            Csv csv = readCsv(base + QStringLiteral(".csv"));
            QVERIFY2(csv.lines.size() > 2, qPrintable(id));
            // Comparisons name every model's checkpoint.
            QVERIFY2(QRegularExpression(QStringLiteral("^[0-9a-f]{64}"))
                         .match(csv.meta[QStringLiteral("checkpoint_sha256")])
                         .hasMatch(),
                     qPrintable(id));
            QVERIFY(csv.meta[QStringLiteral("rule")].contains(QStringLiteral("6")));
            QVERIFY(csv.meta[QStringLiteral("data")].contains(QStringLiteral("wiki_en_valid")));
        }
        // What the inputs cannot support is listed with the reason, and no file made for it.
        QVERIFY(!QFile::exists(out.path() + QStringLiteral("/figure-3.png")));
        QFile html(out.path() + QStringLiteral("/index.html"));
        QVERIFY(html.open(QIODevice::ReadOnly));
        const QString index = QString::fromUtf8(html.readAll());
        QVERIFY(index.contains(QStringLiteral("Not drawn: needs an image model and images")));
        QVERIFY(index.contains(QStringLiteral("needs a sweep folder")));
        QVERIFY(index.contains(QStringLiteral("<img src=\"figure-14.png\"")));
        QFile pdf(out.path() + QStringLiteral("/index.pdf"));
        QVERIFY(pdf.open(QIODevice::ReadOnly));
        const QByteArray pdfBytes = pdf.readAll();
        QVERIFY(pdfBytes.startsWith("%PDF"));
        // One page per drawn figure (1, 2, 4, 5, 10, 11, 13, 14, 15, an1, an3, an7-an11) and table (the
        // layer table and Table 2), and one listing what was not drawn.
        QCOMPARE(
            QString::fromLatin1(pdfBytes).count(QRegularExpression(QStringLiteral("/Type\\s*/Page[^s]"))),
            19);
        QVERIFY(!QFile::exists(out.path() + QStringLiteral("/index.pdf.tmp")));
        // index.json says where the app shows each figure, and on which input.
        QFile json(out.path() + QStringLiteral("/index.json"));
        QVERIFY(json.open(QIODevice::ReadOnly));
        const QJsonObject indexJson = QJsonDocument::fromJson(json.readAll()).object();
        const QJsonArray inputs = indexJson[QStringLiteral("inputs")].toArray();
        QCOMPARE(inputs.size(), 12); // the data's 12 (up to the paper's sequence #88, Figures 10 and 11)
        QCOMPARE(inputs[0].toObject()[QStringLiteral("kind")].toString(), QStringLiteral("text"));
        bool sawHead = false;
        for (const auto& value : indexJson[QStringLiteral("figures")].toArray()) {
            const QJsonObject f = value.toObject();
            if (f[QStringLiteral("id")].toString() != QLatin1String("2")) continue;
            sawHead = true;
            // The showcase head of backcopy-vanilla (its showcase.json: layer 2, head 1), input #1.
            QCOMPARE(f[QStringLiteral("page")].toString(), QStringLiteral("Head"));
            QCOMPARE(f[QStringLiteral("layer")].toInt(), 1);
            QCOMPARE(f[QStringLiteral("head")].toInt(), 0);
            QCOMPARE(f[QStringLiteral("input")].toInt(), 0);
            // Issue #39.5: (a) on input #1, (b) and (c) on input #5.
            QCOMPARE(ints(f[QStringLiteral("inputs")]), (QVector<int>{0, 4}));
        }
        QVERIFY(sawHead);
        {
            // Figure 2's rows name their sub-figure and input, and the footer both inputs.
            Csv figure2 = readCsv(out.path() + QStringLiteral("/figure-2.csv"));
            QVERIFY(figure2.lines.value(0).startsWith(QStringLiteral("subfigure,input,layer (1-based),")));
            std::map<QString, QString> inputOf;
            for (const QString& line : figure2.lines.mid(1))
                if (!line.isEmpty())
                    inputOf[line.section(QLatin1Char(','), 0, 0)] = line.section(QLatin1Char(','), 1, 1);
            QCOMPARE(int(inputOf.size()), 3);
            // Labels without a number of their own get the input's ("#5 words 193-240 of ...").
            const QString first =
                QStringLiteral("#1 ") + inputs[0].toObject()[QStringLiteral("label")].toString();
            const QString fifth =
                QStringLiteral("#5 ") + inputs[4].toObject()[QStringLiteral("label")].toString();
            QCOMPARE(inputOf[QStringLiteral("a")], first);
            QCOMPARE(inputOf[QStringLiteral("b")], fifth);
            QCOMPARE(inputOf[QStringLiteral("c")], fifth);
            QVERIFY2(figure2.meta[QStringLiteral("input")].contains(QStringLiteral("(a) ") + first) &&
                         figure2.meta[QStringLiteral("input")].contains(QStringLiteral("(b, c) ") + fifth),
                     qPrintable(figure2.meta[QStringLiteral("input")]));
        }
        // Issue #39.2: every figure fits an A4 landscape page (the figures' pages come first in the PDF, in
        // the index's order).
        {
            const QVector<QSizeF> pages = pdfPageSizes(out.path() + QStringLiteral("/index.pdf"));
            int page = 0;
            for (const auto& value : indexJson[QStringLiteral("figures")].toArray()) {
                const QJsonObject f = value.toObject();
                const QString id = f[QStringLiteral("id")].toString();
                if (f[QStringLiteral("files")].toArray().isEmpty() || id.startsWith(QLatin1String("table")))
                    continue;
                QVERIFY(page < pages.size());
                // Every figure's page (issue #39: no page taller than A4 landscape), an3's too.
                QVERIFY2(pages[page].height() <= kA4LandscapeHeight,
                         qPrintable(QStringLiteral("figure %1: %2 pt").arg(id).arg(pages[page].height())));
                ++page;
            }
            QVERIFY(page >= 10);
        }

        // Figure 14 bins each query's probabilities: the clipped model's exact zeros and the vanilla
        // model's tail of tiny values, each row's shares recounted here from the figure's own
        // probabilities (Figure 2's are checked against `inspect` below).
        const Csv figure14 = readCsv(out.path() + QStringLiteral("/figure-14.csv"));
        QCOMPARE(figure14.lines.value(0), QStringLiteral("model,panel,row,col,row_label,col_label,value"));
        std::map<QString, std::map<std::pair<int, int>, double>> probabilities, zeroShare;
        for (const QString& line : figure14.lines.mid(1)) {
            const QStringList cells = line.split(QLatin1Char(','));
            if (cells.size() < 7) continue;
            const std::pair<int, int> rc{cells[2].toInt(), cells[3].toInt()};
            if (cells[1] == QLatin1String("probabilities")) {
                probabilities[cells[0]][rc] = cells.last().toDouble();
                // Issue #40.5: a masked key (after its query) is empty, not the 0 of an exact zero.
                QVERIFY2((rc.second > rc.first) == cells.last().isEmpty(), qPrintable(line));
            }
            if (cells[1] == QLatin1String("distribution") && rc.second == 0)
                zeroShare[cells[0]][{rc.first, 0}] = cells.last().toDouble();
        }
        QCOMPARE(zeroShare.size(), std::size_t(2)); // vanilla and clipped; the gated model is Figure 15's
        for (const auto& [model, shares] : zeroShare) {
            double rowsWithZeros = 0;
            for (const auto& [rc, share] : shares) {
                const int row = rc.first;
                int zeros = 0;
                for (int key = 0; key <= row; ++key) // causal: the keys this query sees
                    zeros += probabilities[model].at({row, key}) == 0.0 ? 1 : 0;
                QVERIFY2(std::abs(share - double(zeros) / (row + 1)) < 1e-6,
                         qPrintable(QStringLiteral("%1 row %2").arg(model).arg(row)));
                rowsWithZeros += zeros > 0 ? 1 : 0;
            }
            // Only clipped softmax makes exact zeros, and it does in most rows of its head.
            if (model.contains(QLatin1String("clipped")))
                QVERIFY2(rowsWithZeros > 0.5 * shares.size(), qPrintable(model));
            else
                QCOMPARE(rowsWithZeros, 0.0);
        }

        // The table and Figure 1 are the statistics file's numbers (what `stats` computes).
        const QString statsPath = statisticsFileOf(out.path());
        QVERIFY(!statsPath.isEmpty());
        const StatisticsFile stats = readStatisticsFile(statsPath.toStdString());
        QCOMPARE(stats.samples, std::int64_t(12));
        const Csv table = readCsv(out.path() + QStringLiteral("/table.csv"));
        // Issue #39.8: the columns say which tensors (the statistics file's inf-norm tensor; the mean of its
        // kurtosis tensors, for a decoder `out`).
        QStringList kurtosisOf;
        for (const std::string& t : stats.summary.kurtosisTensors)
            kurtosisOf << QString::fromStdString(t);
        QCOMPARE(kurtosisOf, QStringList{QStringLiteral("out")});
        QCOMPARE(table.lines.value(0), QStringLiteral("layer,max_inf_norm_%1,mean_kurtosis_out")
                                           .arg(QString::fromStdString(stats.summary.infNormTensor)));
        QCOMPARE(int(stats.summary.layers.size()), 3);
        for (int l = 0; l < 3; ++l) {
            const QStringList cells = table.lines.value(1 + l).split(QLatin1Char(','));
            QCOMPARE(cells.value(0).toInt(), l + 1);
            // The file stores float32; the CSV writes each with 9 significant digits (exact for a float).
            QCOMPARE(cells.value(1).toFloat(), float(stats.summary.meanMaxInfNorm[std::size_t(l)]));
            QCOMPARE(cells.value(2).toFloat(), float(stats.summary.meanKurtosis[std::size_t(l)]));
        }
        // Figure 1 is drawn at layer 1 (the layer before the showcase head's, layer 2 of this model).
        const Csv figure1 = readCsv(out.path() + QStringLiteral("/figure-1.csv"));
        const std::vector<std::int64_t>& perDim = stats.layers.at(0).tensors.at("out").outliersPerDim;
        QCOMPARE(figure1.lines.value(0), QStringLiteral("dimension (0-based),count"));
        std::int64_t total = 0;
        for (std::size_t j = 0; j < perDim.size(); ++j) {
            QCOMPARE(figure1.lines.value(1 + int(j)), QStringLiteral("%1,%2").arg(j).arg(perDim[j]));
            total += perDim[j];
        }
        QVERIFY2(total > 0, "the vanilla model's layer-1 outliers are counted");
        {
            // Issue #39.3: Figure 10's head owns the dimension with the most outliers of layer 1 (dimension k
            // belongs to head k / d_head), Figure 11's the most outlying dimension of the other head; with
            // both of its two heads taken, Figure 12 says why it is not drawn. 12 inputs: the first four.
            std::vector<int> order(perDim.size());
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(),
                             [&](int a, int b) { return perDim[std::size_t(a)] > perDim[std::size_t(b)]; });
            const int first = order[0] / stats.headDim;
            int second = -1;
            for (int k : order)
                if (perDim[std::size_t(k)] > 0 && k / stats.headDim != first) {
                    second = k / stats.headDim;
                    break;
                }
            QCOMPARE(stats.numHeads, 2);
            QVERIFY(second >= 0);
            const QJsonObject figure10 = figureEntry(indexJson, QStringLiteral("10"));
            QCOMPARE(ints(figure10[QStringLiteral("heads")]), QVector<int>{first});
            QCOMPARE(ints(figure10[QStringLiteral("layers")]), (QVector<int>{0, 1}));
            QCOMPARE(ints(figure10[QStringLiteral("inputs")]), (QVector<int>{0, 1, 2, 3}));
            QVERIFY(figure10[QStringLiteral("caption")].toString().contains(
                QStringLiteral("hidden dimension %1 ").arg(order[0])));
            QCOMPARE(ints(figureEntry(indexJson, QStringLiteral("11"))[QStringLiteral("heads")]),
                     QVector<int>{second});
            QVERIFY(
                figureEntry(indexJson, QStringLiteral("12"))[QStringLiteral("reason")].toString().contains(
                    QStringLiteral("2 heads owns outlier dimensions")));
            QCOMPARE(ints(figureEntry(indexJson, QStringLiteral("13"))[QStringLiteral("layers")]),
                     (QVector<int>{0, 1, 2}));
        }
        {
            // Issue #39.4: drawn as the paper draws it, the dimensions with outliers ordered by count and
            // counted on an "outlier count" axis (the CSV above keeps index order).
            const int withOutliers =
                int(std::count_if(perDim.begin(), perDim.end(), [](std::int64_t c) { return c > 0; }));
            QFile svg(out.path() + QStringLiteral("/figure-1.svg"));
            QVERIFY(svg.open(QIODevice::ReadOnly));
            const QString text = QString::fromUtf8(svg.readAll());
            QVERIFY(text.contains(QStringLiteral("outlier count")));
            QVERIFY2(text.contains(QStringLiteral("by outlier count: %1 of the %2 with outliers")
                                       .arg(std::min(withOutliers, 40))
                                       .arg(withOutliers)),
                     qPrintable(QString::number(withOutliers)));
        }

        // A second run reuses the statistics (same checkpoint, data and rule) and says so.
        const auto again = runApp(args + QStringList{QStringLiteral("--only"), QStringLiteral("1,table")});
        QVERIFY2(again.exitCode == 0, qPrintable(again.err));
        QVERIFY2(again.out.contains(QStringLiteral("statistics reused from")), qPrintable(again.out));
    }

    /// --precision bf16: the statistics and forward passes in the fast mode, said in every CSV and the
    /// index, with statistics kept apart from fp32 ones; on a CPU without bf16 (simulated) it says so
    /// once and computes in fp32.
    void precisionIsRecordedAndKeptApart()
    {
        QTemporaryDir out;
        const QStringList common{QStringLiteral("figures"),
                                 QStringLiteral("--model"),
                                 sample(QStringLiteral("models/backcopy-vanilla")),
                                 QStringLiteral("--data"),
                                 QStringLiteral("text:") + sample(QStringLiteral("text/wiki_en_valid.txt:6")),
                                 QStringLiteral("--only"),
                                 QStringLiteral("1,2"),
                                 QStringLiteral("--format"),
                                 QStringLiteral("png"),
                                 QStringLiteral("--out"),
                                 out.path()};
        const bool bf16 = cpuSupportsBf16();
        const QString expected = bf16 ? QStringLiteral("bf16") : QStringLiteral("fp32");
        const auto fast = runApp(common + QStringList{QStringLiteral("--precision"), QStringLiteral("bf16")});
        QVERIFY2(fast.exitCode == 0, qPrintable(fast.err + fast.out));
        for (const char* id : {"1", "2"}) {
            Csv csv = readCsv(out.path() + QStringLiteral("/figure-%1.csv").arg(QLatin1String(id)));
            QCOMPARE(csv.meta[QStringLiteral("precision")], expected);
        }
        const QString statsPath = statisticsFileOf(out.path());
        QVERIFY(!statsPath.isEmpty());
        QCOMPARE(
            QString::fromStdString(readStatisticsFile(statsPath.toStdString()).provenance.at("precision")),
            expected);
        QFile json(out.path() + QStringLiteral("/index.json"));
        QVERIFY(json.open(QIODevice::ReadOnly));
        QCOMPARE(QJsonDocument::fromJson(json.readAll()).object()[QStringLiteral("precision")].toString(),
                 expected);
        // fp32 into the same folder does not reuse bf16 statistics (where bf16 ran).
        const auto exact = runApp(common);
        QVERIFY2(exact.exitCode == 0, qPrintable(exact.err + exact.out));
        QCOMPARE(exact.out.contains(QStringLiteral("statistics reused from")), !bf16);
        QCOMPARE(QDir(out.path() + QStringLiteral("/statistics")).entryList({QStringLiteral("*.h5")}).size(),
                 bf16 ? 2 : 1);
        QCOMPARE(readCsv(out.path() + QStringLiteral("/figure-2.csv")).meta[QStringLiteral("precision")],
                 QStringLiteral("fp32"));
        // Without bf16 instructions: one sentence on stderr, fp32 in the files.
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("OUTLIERLENS_NO_BF16"), QStringLiteral("1"));
        const auto fallback =
            runApp(common + QStringList{QStringLiteral("--precision"), QStringLiteral("bf16"),
                                        QStringLiteral("--only"), QStringLiteral("2")},
                   600000, env);
        QVERIFY2(fallback.exitCode == 0, qPrintable(fallback.err));
        QCOMPARE(fallback.err.count(QStringLiteral("--precision bf16")), 1);
        QCOMPARE(readCsv(out.path() + QStringLiteral("/figure-2.csv")).meta[QStringLiteral("precision")],
                 QStringLiteral("fp32"));
    }

    void bertHeadsAreTheInspectedNumbers()
    {
        QTemporaryDir out;
        const QString model = sample(QStringLiteral("models/bert-mnli-vanilla"));
        const QString data = sample(QStringLiteral("mnli/mnli_dev_matched.jsonl"));
        const auto r =
            runApp({QStringLiteral("figures"), QStringLiteral("--model"), model, QStringLiteral("--data"),
                    QStringLiteral("mnli:") + data + QStringLiteral(":24"), QStringLiteral("--only"),
                    QStringLiteral("1,2,10,14,table"), QStringLiteral("--format"), QStringLiteral("png"),
                    QStringLiteral("--out"), out.path()});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QVERIFY(notBlank(out.path() + QStringLiteral("/figure-2.png")));
        QVERIFY(notBlank(out.path() + QStringLiteral("/figure-10.png")));
        QVERIFY2(r.out.contains(QStringLiteral("not drawn: Figure 14")), qPrintable(r.out)); // no --compare
        // Figures 2 (its first head) and 10 (every head of a layer) show the first MNLI pair: the same
        // probabilities, values and P.V as `inspect` dumps for it.
        const NliPair pair = readNliPairs(data.toStdString(), 1).at(0);
        const QString firstLabel = readIndex(out.path())[QStringLiteral("inputs")]
                                       .toArray()[0]
                                       .toObject()[QStringLiteral("label")]
                                       .toString();
        QVERIFY(firstLabel.contains(QStringLiteral("pair #1 ")));
        const QString dump = out.path() + QStringLiteral("/dump.h5");
        const auto inspected =
            runApp({QStringLiteral("inspect"), QStringLiteral("--model"), model, QStringLiteral("--text"),
                    QString::fromStdString(pair.premise), QStringLiteral("--pair"),
                    QString::fromStdString(pair.hypothesis), QStringLiteral("--dump"), dump});
        QVERIFY2(inspected.exitCode == 0, qPrintable(inspected.err));
        Hdf5Reader reader(dump.toStdString());
        const std::map<QString, std::string> panels{{QStringLiteral("probabilities"), "attn_probs"},
                                                    {QStringLiteral("values"), "attn_values"},
                                                    {QStringLiteral("product"), "attn_context"}};
        for (const QString& figure : {QStringLiteral("2"), QStringLiteral("10")}) {
            const Csv csv = readCsv(out.path() + QStringLiteral("/figure-%1.csv").arg(figure));
            QCOMPARE(csv.lines.value(0),
                     QStringLiteral("subfigure,input,layer (1-based),head (1-based),panel,row,col,row_label,"
                                    "col_label,value"));
            // The sub-figures on input #1 (each row names its input): Figure 2's (a), Figure 10's first
            // sequence in both layers (the data has fewer than the paper's #88: its first inputs).
            std::map<std::tuple<int, int, QString>, std::map<std::pair<int, int>, double>> blocks;
            std::map<std::tuple<int, int, QString>, std::int64_t> expected;
            for (const QString& line : csv.lines.mid(1)) {
                if (line.section(QLatin1Char(','), 1, 1) != firstLabel) continue;
                const QStringList cells = line.section(QLatin1Char(','), 2).split(QLatin1Char(','));
                if (cells.size() < 8 || !panels.count(cells[2])) continue;
                const int layer = cells[0].toInt() - 1, head = cells[1].toInt() - 1;
                const auto key = std::make_tuple(layer, head, cells[2]);
                if (!expected.count(key)) {
                    const torch::Tensor t =
                        reader.readTensor("layer" + std::to_string(layer) + "/" + panels.at(cells[2]))[head];
                    expected[key] = t.numel();
                }
                auto& block = blocks[key];
                // Token labels may hold commas: the numbers are the first five fields and the last.
                if (std::int64_t(block.size()) < expected[key])
                    block[{cells[3].toInt(), cells[4].toInt()}] = cells.last().toDouble();
            }
            QVERIFY2(!blocks.empty(), qPrintable(figure));
            for (const auto& [key, block] : blocks) {
                const auto& [layer, head, panel] = key;
                const torch::Tensor t =
                    reader.readTensor("layer" + std::to_string(layer) + "/" + panels.at(panel))[head].to(
                        torch::kDouble);
                QCOMPARE(std::int64_t(block.size()), t.numel());
                const auto a = t.accessor<double, 2>();
                for (const auto& [rc, value] : block)
                    QVERIFY2(std::abs(value - a[rc.first][rc.second]) <
                                 1e-6 * (1 + std::abs(a[rc.first][rc.second])),
                             qPrintable(QStringLiteral("figure %1, layer %2 head %3 %4 (%5, %6)")
                                            .arg(figure)
                                            .arg(layer + 1)
                                            .arg(head + 1)
                                            .arg(panel)
                                            .arg(rc.first)
                                            .arg(rc.second)));
            }
            // Figure 10: one head in two layers, 3 panels each; Figure 2: one head.
            QCOMPARE(int(blocks.size()), figure == QLatin1String("10") ? 3 * 2 : 3);
        }
        // Issue #39.3: Figure 10's head owns the hidden dimension with the most outliers of the layer its
        // figures read (dimension k belongs to head k / d_head), from the statistics file.
        const QJsonObject index = readIndex(out.path());
        const StatisticsFile stats = readStatisticsFile(statisticsFileOf(out.path()).toStdString());
        int lb = -1;
        for (const QString id : {"1", "1a", "1b"})
            lb = std::max(lb, figureEntry(index, id)[QStringLiteral("layer")].toInt(-1));
        QVERIFY(lb >= 0);
        const std::vector<std::int64_t>& perDim =
            stats.layers.at(std::size_t(lb)).tensors.at("ffn_out").outliersPerDim;
        const auto top = std::max_element(perDim.begin(), perDim.end());
        const QJsonObject figure10 = figureEntry(index, QStringLiteral("10"));
        QCOMPARE(ints(figure10[QStringLiteral("inputs")]), (QVector<int>{0, 1, 2, 3})); // 24 pairs: the first
        if (*top > 0) {
            QCOMPARE(ints(figure10[QStringLiteral("heads")]),
                     QVector<int>{int(top - perDim.begin()) / stats.headDim});
            QVERIFY(figure10[QStringLiteral("caption")].toString().contains(
                QStringLiteral("hidden dimension %1 ").arg(top - perDim.begin())));
        } else {
            // This small demo model has no outliers there at 6 sigma over 24 pairs: the planner's head
            // (Figure 2's), said in the caption, and no Figure 11.
            QCOMPARE(ints(figure10[QStringLiteral("heads")]),
                     ints(figureEntry(index, QStringLiteral("2"))[QStringLiteral("heads")]));
            QVERIFY(figure10[QStringLiteral("caption")].toString().contains(
                QStringLiteral("no hidden dimension")));
        }
    }

    void vitImagesAndHeads()
    {
        QTemporaryDir out;
        const auto r =
            runApp({QStringLiteral("figures"), QStringLiteral("--model"),
                    sample(QStringLiteral("models/vit-fmnist-vanilla")), QStringLiteral("--data"),
                    QStringLiteral("images:") + sample(QStringLiteral("images:8")), QStringLiteral("--only"),
                    QStringLiteral("3,9,16,17,2"), QStringLiteral("--format"), QStringLiteral("png,pdf"),
                    QStringLiteral("--dpi"), QStringLiteral("96"), QStringLiteral("--out"), out.path()});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        for (const QString id : {"3", "9", "16"}) {
            QVERIFY2(notBlank(out.path() + QStringLiteral("/figure-%1.png").arg(id)), qPrintable(id));
            QVERIFY(QFileInfo(out.path() + QStringLiteral("/figure-%1.pdf").arg(id)).size() > 1000);
        }
        QVERIFY2(r.out.contains(QStringLiteral("not drawn: Figure 2")), qPrintable(r.out));
        const QJsonObject index = readIndex(out.path());
        const StatisticsFile stats = readStatisticsFile(statisticsFileOf(out.path()).toStdString());
        QCOMPARE(stats.samples, std::int64_t(8));

        // Issue #39.1: Figure 9 is (a) each layer's mean max |x| of its output, (b) the outlier count per
        // hidden dimension and (c) per patch position of the chosen layer, all as in the statistics file.
        const QJsonObject figure9 = figureEntry(index, QStringLiteral("9"));
        const int layer = figure9[QStringLiteral("layer")].toInt(-1);
        QVERIFY(layer >= 0 && layer < stats.numLayers);
        QCOMPARE(figure9[QStringLiteral("page")].toString(), QStringLiteral("Outliers"));
        const Csv csv9 = readCsv(out.path() + QStringLiteral("/figure-9.csv"));
        QStringList section;
        QVector<QStringList> sections;
        for (const QString& line : csv9.lines) {
            if (line.isEmpty()) {
                if (!section.isEmpty()) sections << section;
                section.clear();
            } else {
                section << line;
            }
        }
        if (!section.isEmpty()) sections << section;
        QCOMPARE(sections.size(), 3);
        QCOMPARE(sections[0].value(0), QStringLiteral("layer (1-based),mean max inf norm"));
        QCOMPARE(sections[0].size(), 1 + stats.numLayers);
        for (const LayerStatisticsData& l : stats.layers)
            QCOMPARE(sections[0].value(1 + l.layer).section(QLatin1Char(','), 1).toFloat(),
                     float(l.tensors.at("out").meanMaxInfNorm));
        const TensorStatisticsData& t = stats.layers.at(std::size_t(layer)).tensors.at("out");
        QCOMPARE(sections[1].value(0), QStringLiteral("dimension (0-based),outlier count"));
        QCOMPARE(sections[1].size(), 1 + int(t.outliersPerDim.size()));
        for (std::size_t k = 0; k < t.outliersPerDim.size(); ++k)
            QCOMPARE(sections[1].value(1 + int(k)), QStringLiteral("%1,%2").arg(k).arg(t.outliersPerDim[k]));
        QCOMPARE(sections[2].value(0),
                 QStringLiteral("patch row (0-based),patch col (0-based),outlier count"));
        QCOMPARE(sections[2].size(), 2 + stats.gridRows * stats.gridCols);
        std::int64_t patchTotal = 0;
        for (int i = 0; i < stats.gridRows * stats.gridCols; ++i) {
            QCOMPARE(sections[2].value(1 + i), QStringLiteral("%1,%2,%3")
                                                   .arg(i / stats.gridCols)
                                                   .arg(i % stats.gridCols)
                                                   .arg(t.patchOutliers[std::size_t(i)]));
            patchTotal += t.patchOutliers[std::size_t(i)];
        }
        QCOMPARE(sections[2].last(), QStringLiteral("cls,,%1").arg(t.clsOutliers));
        QCOMPARE(patchTotal + t.clsOutliers, t.outliers); // every outlier is a patch's or the CLS token's

        // Issue #39.2: Figures 16 and 17 are Figure 3 for eight images: outliers of the chosen layer (and of
        // the next) and a head of the layer after, each image a labelled sub-figure, on one A4 page.
        const QJsonObject figure16 = figureEntry(index, QStringLiteral("16"));
        QCOMPARE(ints(figure16[QStringLiteral("layers")]), (QVector<int>{layer, layer + 1}));
        QCOMPARE(ints(figure16[QStringLiteral("inputs")]), (QVector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
        QCOMPARE(ints(figure16[QStringLiteral("heads")]).size(), 1);
        const Csv csv16 = readCsv(out.path() + QStringLiteral("/figure-16.csv"));
        QStringList subfigures;
        for (const QString& line : csv16.lines.mid(1))
            if (!line.isEmpty() && !subfigures.contains(line.section(QLatin1Char(','), 0, 0)))
                subfigures << line.section(QLatin1Char(','), 0, 0);
        QCOMPARE(subfigures.size(), 8);
        QVERIFY2(subfigures.first().startsWith(QStringLiteral("(a) #1 image ")),
                 qPrintable(subfigures.first()));
        const QJsonObject figure17 = figureEntry(index, QStringLiteral("17"));
        if (layer + 2 <= stats.numLayers - 1)
            QCOMPARE(ints(figure17[QStringLiteral("layers")]), (QVector<int>{layer + 1, layer + 2}));
        else
            QVERIFY(figure17[QStringLiteral("reason")].toString().contains(QStringLiteral("last layer")));
        for (const QString id : {"9", "16"}) {
            const QImage png(out.path() + QStringLiteral("/figure-%1.png").arg(id));
            QVERIFY2(png.height() <= 620 && png.width() <= 1120, qPrintable(id));
        }
        for (const QSizeF& page :
             pdfPageSizes(out.path() + QStringLiteral("/index.pdf")).mid(1)) // after Fig 3
            QVERIFY2(page.height() <= kA4LandscapeHeight, qPrintable(QString::number(page.height())));
    }

    /// Issue #39.7: a Fashion-MNIST model without images of its own is drawn on Fashion-MNIST (Debian's
    /// test set, or the bundled Fashion-MNIST pictures without it), never on the bundled photos.
    void fashionMnistModelDrawsFashionMnist()
    {
        QTemporaryDir out;
        const auto r =
            runApp({QStringLiteral("figures"), QStringLiteral("--model"),
                    sample(QStringLiteral("models/vit-fmnist-vanilla")), QStringLiteral("--only"),
                    QStringLiteral("9,16"), QStringLiteral("--format"), QStringLiteral("png"),
                    QStringLiteral("--dpi"), QStringLiteral("96"), QStringLiteral("--out"), out.path()});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const QJsonObject index = readIndex(out.path());
        QVERIFY2(index[QStringLiteral("data")].toString().contains(QStringLiteral("data/fashion-mnist-test")),
                 qPrintable(index[QStringLiteral("data")].toString()));
        const QJsonArray inputs = index[QStringLiteral("inputs")].toArray();
        QVERIFY(!inputs.isEmpty());
        const bool debian =
            QFileInfo::exists(QStringLiteral("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"));
        const StatisticsFile stats = readStatisticsFile(statisticsFileOf(out.path()).toStdString());
        for (const auto& value : inputs) {
            const QString path = value.toObject()[QStringLiteral("first")].toString();
            QVERIFY2(path.contains(QStringLiteral("/data/fashion-mnist-test/")), qPrintable(path));
            if (debian) QCOMPARE(QImage(path).size(), QSize(28, 28)); // Fashion-MNIST's own pictures
        }
        if (debian) {
            QCOMPARE(inputs.size(), 88);
            QVERIFY(
                inputs[0].toObject()[QStringLiteral("label")].toString().contains(QStringLiteral("0001-")));
            QCOMPARE(stats.samples, std::int64_t(1000));
        } else {
            QVERIFY(
                inputs[0].toObject()[QStringLiteral("label")].toString().contains(QStringLiteral("fmnist_")));
        }
        QVERIFY(notBlank(out.path() + QStringLiteral("/figure-9.png")));
        QVERIFY(notBlank(out.path() + QStringLiteral("/figure-16.png")));
        // A second run reuses the pictures and their statistics.
        const auto again = runApp({QStringLiteral("figures"), QStringLiteral("--model"),
                                   sample(QStringLiteral("models/vit-fmnist-vanilla")),
                                   QStringLiteral("--only"), QStringLiteral("9"), QStringLiteral("--format"),
                                   QStringLiteral("png"), QStringLiteral("--out"), out.path()});
        QVERIFY2(again.exitCode == 0, qPrintable(again.err));
        QVERIFY2(again.out.contains(QStringLiteral("statistics reused from")), qPrintable(again.out));
    }

    /// Issue #39.3: on a BERT-base-sized model the paper's own choice: Figure 10 head 3 (dimension 180)
    /// and Figure 11 head 12 (dimension 720) in layers 10 and 11 on sequences #16, #21, #61 and #88,
    /// Figure 12 heads 1, 7, 8 and 10 on #16, Figure 13 head 3 in layers 1-8 on #16; each page no taller
    /// than A4 landscape, and the sub-figures the numbers of `inspect` for those inputs.
    void bertBaseSizedPaperSelection()
    {
        QTemporaryDir out;
        const QString model = out.path() + QStringLiteral("/bert-base");
        auto r =
            runApp({QStringLiteral("create-model"), QStringLiteral("--preset"), QStringLiteral("bert-base"),
                    QStringLiteral("--vocab"), QStringLiteral(OUTLIERLENS_TEST_DATA "/bert/hf/vocab.txt"),
                    QStringLiteral("--fp16"), QStringLiteral("--out"), model});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QString data = sample(QStringLiteral("mnli/mnli_dev_matched.jsonl"));
        const QString figures = out.path() + QStringLiteral("/figures");
        r = runApp({QStringLiteral("figures"), QStringLiteral("--model"), model, QStringLiteral("--data"),
                    QStringLiteral("mnli:") + data + QStringLiteral(":100"), QStringLiteral("--only"),
                    QStringLiteral("10,11,12,13"), QStringLiteral("--format"), QStringLiteral("png,pdf"),
                    QStringLiteral("--dpi"), QStringLiteral("96"), QStringLiteral("--out"), figures});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const QJsonObject index = readIndex(figures);
        const QJsonArray inputs = index[QStringLiteral("inputs")].toArray();
        QCOMPARE(inputs.size(), 88);
        for (int n : {16, 21, 61, 88})
            QVERIFY(inputs[n - 1].toObject()[QStringLiteral("label")].toString().startsWith(
                QStringLiteral("pair #%1 ").arg(n)));
        const QVector<int> sequences{15, 20, 60, 87};
        const struct
        {
            QString id;
            QVector<int> layers, heads, inputs;
        } expected[] = {{QStringLiteral("10"), {9, 10}, {2}, sequences},
                        {QStringLiteral("11"), {9, 10}, {11}, sequences},
                        {QStringLiteral("12"), {9, 10}, {0, 6, 7, 9}, {15}},
                        {QStringLiteral("13"), {0, 1, 2, 3, 4, 5, 6, 7}, {2}, {15}}};
        for (const auto& e : expected) {
            const QJsonObject f = figureEntry(index, e.id);
            QVERIFY2(f[QStringLiteral("reason")].toString().isEmpty(),
                     qPrintable(f[QStringLiteral("reason")].toString()));
            QCOMPARE(ints(f[QStringLiteral("layers")]), e.layers);
            QCOMPARE(ints(f[QStringLiteral("heads")]), e.heads);
            QCOMPARE(ints(f[QStringLiteral("inputs")]), e.inputs);
            const QImage png(figures + QStringLiteral("/figure-%1.png").arg(e.id));
            QVERIFY2(png.height() <= 620 && png.width() <= 1120,
                     qPrintable(QStringLiteral("%1: %2 x %3").arg(e.id).arg(png.width()).arg(png.height())));
        }
        QVERIFY(figureEntry(index, QStringLiteral("10"))[QStringLiteral("caption")].toString().contains(
            QStringLiteral("hidden dimension 180")));
        const QVector<QSizeF> pages = pdfPageSizes(figures + QStringLiteral("/index.pdf"));
        QVERIFY(pages.size() >= 4);
        for (int i = 0; i < 4; ++i)
            QVERIFY2(pages[i].height() <= kA4LandscapeHeight, qPrintable(QString::number(pages[i].height())));

        // Figure 10's sub-figure (a) is layer 10, head 3 on pair #16: the probabilities `inspect` dumps.
        const NliPair pair = readNliPairs(data.toStdString(), 16).at(15);
        const QString dump = out.path() + QStringLiteral("/dump.h5");
        r = runApp({QStringLiteral("inspect"), QStringLiteral("--model"), model, QStringLiteral("--text"),
                    QString::fromStdString(pair.premise), QStringLiteral("--pair"),
                    QString::fromStdString(pair.hypothesis), QStringLiteral("--dump"), dump});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const torch::Tensor p =
            Hdf5Reader(dump.toStdString()).readTensor("layer9/attn_probs")[2].to(torch::kDouble);
        const auto a = p.accessor<double, 2>();
        const Csv csv = readCsv(figures + QStringLiteral("/figure-10.csv"));
        std::int64_t checked = 0;
        QStringList letters;
        for (const QString& line : csv.lines.mid(1)) {
            if (line.isEmpty()) continue;
            const QString letter = line.section(QLatin1Char(','), 0, 0);
            if (!letters.contains(letter)) letters << letter;
            if (letter != QLatin1String("a")) continue;
            QVERIFY(line.section(QLatin1Char(','), 1, 1).startsWith(QStringLiteral("pair #16 ")));
            const QStringList cells = line.section(QLatin1Char(','), 2).split(QLatin1Char(','));
            QCOMPARE(cells[0], QStringLiteral("10"));
            QCOMPARE(cells[1], QStringLiteral("3"));
            if (cells[2] != QLatin1String("probabilities")) continue;
            const double expectedValue = a[cells[3].toInt()][cells[4].toInt()];
            QVERIFY(std::abs(cells.last().toDouble() - expectedValue) < 1e-6 * (1 + std::abs(expectedValue)));
            ++checked;
        }
        QCOMPARE(checked, p.numel());
        QCOMPARE(letters, (QStringList{"a", "b", "c", "d", "e", "f", "g", "h"}));
    }

    /// Figures 6 and 7 from a sweep folder: a clipped-softmax sweep (alpha) gives Figure 6 with every
    /// point in its CSV, and Figure 7 is listed as not drawn, saying why.
    void sweepFigures()
    {
        QTemporaryDir out;
        const QString sweep = out.path() + QStringLiteral("/sweep");
        std::vector<SweepSummaryRow> rows;
        for (const char* alpha : {"2", "4", "8"}) {
            SweepSummaryRow row;
            row.name = std::string("alpha=") + alpha;
            row.settings = {{"alpha", alpha}};
            row.state = "finished";
            row.metricName = "perplexity";
            row.metric = 3.0 + std::atof(alpha) / 10;
            row.maxInfNorm = 50.0 / std::atof(alpha);
            row.avgKurtosis = 40.0 / std::atof(alpha);
            rows.push_back(row);
        }
        setRelativeMetrics(rows);
        QVERIFY(QDir().mkpath(sweep));
        writeSweepSummary(sweep.toStdString(), rows);
        const auto r = runApp({QStringLiteral("figures"), QStringLiteral("--model"),
                               sample(QStringLiteral("models/backcopy-clipped")), QStringLiteral("--sweep"),
                               sweep, QStringLiteral("--only"), QStringLiteral("6,7"),
                               QStringLiteral("--format"), QStringLiteral("png,svg"), QStringLiteral("--out"),
                               out.path() + QStringLiteral("/figures")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QVERIFY(notBlank(out.path() + QStringLiteral("/figures/figure-6.png")));
        {
            // Issue #39.4: the max inf norm on a log axis, as the paper draws Figure 6.
            QFile svg(out.path() + QStringLiteral("/figures/figure-6.svg"));
            QVERIFY(svg.open(QIODevice::ReadOnly));
            QVERIFY(svg.readAll().contains("max inf norm (log scale)"));
        }
        QVERIFY2(r.out.contains(QStringLiteral("not drawn: Figure 7")), qPrintable(r.out));
        const Csv csv = readCsv(out.path() + QStringLiteral("/figures/figure-6.csv"));
        for (const char* name : {"alpha=2", "alpha=4", "alpha=8"})
            QVERIFY2(csv.lines.join(QLatin1Char('\n')).contains(QLatin1String(name)), name);
    }

    /// Checkpoints written by Hugging Face and timm (the test fixtures), one family each: the figures
    /// each allows are drawn.
    void fixtureCheckpoints()
    {
        const QString fixtures = QStringLiteral(OUTLIERLENS_TEST_DATA "/");
        const QString text = QStringLiteral("text:") + sample(QStringLiteral("text/wiki_en_valid.txt:4"));
        const struct
        {
            QString model, data, only;
            QStringList files;
        } cases[] = {
            {fixtures + QStringLiteral("decoders/llama-seed0/hf"),
             text,
             QStringLiteral("2,an1,table"),
             {QStringLiteral("figure-2.png"), QStringLiteral("figure-an1.png"), QStringLiteral("table.csv")}},
            {fixtures + QStringLiteral("decoders/opt-oft-gated-linear-seed0/hf"),
             text,
             QStringLiteral("2,4"),
             {QStringLiteral("figure-2.png"), QStringLiteral("figure-4.png")}},
            {fixtures + QStringLiteral("bert/hf"),
             QStringLiteral("mnli:") + sample(QStringLiteral("mnli/mnli_dev_matched.jsonl:8")),
             QStringLiteral("1,2"),
             {QStringLiteral("figure-2.png")}},
            {fixtures + QStringLiteral("vit/timm"),
             QStringLiteral("images:") + fixtures + QStringLiteral("vit/images"),
             QStringLiteral("3,9"),
             {QStringLiteral("figure-3.png"), QStringLiteral("figure-9.png")}},
        };
        for (const auto& c : cases) {
            QTemporaryDir out;
            const auto r = runApp({QStringLiteral("figures"), QStringLiteral("--model"), c.model,
                                   QStringLiteral("--data"), c.data, QStringLiteral("--only"), c.only,
                                   QStringLiteral("--format"), QStringLiteral("png"), QStringLiteral("--out"),
                                   out.path()});
            QVERIFY2(r.exitCode == 0, qPrintable(c.model + QLatin1Char('\n') + r.err + r.out));
            for (const QString& file : c.files) {
                const QString path = out.path() + QLatin1Char('/') + file;
                QVERIFY2(file.endsWith(QLatin1String(".csv")) ? QFileInfo(path).size() > 50 : notBlank(path),
                         qPrintable(c.model + QLatin1Char(' ') + file));
            }
        }
    }

    /// Ctrl-C during the statistics: exit 130, no statistics file, no index, no temporary file.
    void interruptLeavesNothingHalfWritten()
    {
        QTemporaryDir out;
        QProcess p;
        p.start(QStringLiteral(OUTLIERLENS_BINARY_DIR "/app/outlierlens"),
                {QStringLiteral("figures"), QStringLiteral("--model"),
                 sample(QStringLiteral("models/bert-mnli-vanilla")), QStringLiteral("--data"),
                 QStringLiteral("mnli:") + sample(QStringLiteral("mnli/mnli_dev_matched.jsonl")),
                 QStringLiteral("--out"), out.path()});
        QVERIFY(p.waitForStarted());
        // Wait until the statistics pass has begun (its progress on stderr), then interrupt it.
        QByteArray err;
        QTRY_VERIFY_WITH_TIMEOUT((err += p.readAllStandardError()).contains("inputs (statistics)"), 60000);
        ::kill(p.processId(), SIGINT);
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 130);
        QDirIterator it(out.path(), QDir::Files, QDirIterator::Subdirectories);
        QStringList left;
        while (it.hasNext())
            left << it.next();
        QVERIFY2(left.isEmpty(), qPrintable(left.join(QLatin1Char(' '))));
    }

    /// A model inside a training run folder also gets its training curves: the CSV's first-token attention
    /// per layer is the largest of the heads' values in the run's metrics.jsonl (the trainer's probe).
    void trainingCurvesOfARun()
    {
        QTemporaryDir out;
        const QString run = out.path() + QStringLiteral("/run");
        auto r =
            runApp({QStringLiteral("train"), QStringLiteral("--from-preset"), QStringLiteral("demo-backcopy"),
                    QStringLiteral("--output"), run, QStringLiteral("--steps"), QStringLiteral("20"),
                    QStringLiteral("--warmup-steps"), QStringLiteral("5"), QStringLiteral("--eval-every"),
                    QStringLiteral("10"), QStringLiteral("--threads"), QStringLiteral("1")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        r = runApp({QStringLiteral("figures"), QStringLiteral("--model"), run + QStringLiteral("/final"),
                    QStringLiteral("--only"), QStringLiteral("training"), QStringLiteral("--format"),
                    QStringLiteral("png"), QStringLiteral("--out"), out.path() + QStringLiteral("/figures")});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QVERIFY(notBlank(out.path() + QStringLiteral("/figures/figure-training.png")));
        // The evaluations of metrics.jsonl: step -> per layer, the largest head's first-token attention.
        QFile metrics(run + QStringLiteral("/metrics.jsonl"));
        QVERIFY(metrics.open(QIODevice::ReadOnly));
        std::map<int, std::vector<double>> expected;
        for (const QByteArray& line : metrics.readAll().split('\n')) {
            const QJsonObject o = QJsonDocument::fromJson(line).object();
            if (o[QStringLiteral("type")].toString() != QLatin1String("eval")) continue;
            std::vector<double> perLayer;
            for (const auto& heads : o[QStringLiteral("first_token_attention")].toArray()) {
                double largest = 0;
                for (const auto& v : heads.toArray())
                    largest = std::max(largest, v.toDouble());
                perLayer.push_back(largest);
            }
            expected[o[QStringLiteral("step")].toInt()] = perLayer;
        }
        QCOMPARE(int(expected.size()), 3); // steps 0, 10 and 20
        const Csv csv = readCsv(out.path() + QStringLiteral("/figures/figure-training.csv"));
        const QStringList header = csv.lines.value(0).split(QLatin1Char(','));
        const int first = int(header.indexOf(QStringLiteral("first-token attention layer 1")));
        QVERIFY(first > 0);
        int checked = 0;
        for (const QString& line : csv.lines.mid(1)) {
            const QStringList cells = line.split(QLatin1Char(','));
            const auto it = expected.find(cells.value(0).toInt());
            if (line.isEmpty() || it == expected.end()) continue;
            for (std::size_t l = 0; l < it->second.size(); ++l)
                QCOMPARE(cells.value(first + int(l)).toDouble(), it->second[l]);
            ++checked;
        }
        QCOMPARE(checked, 3);
    }

    void badOptionsAreUsageErrors()
    {
        QTemporaryDir out;
        const QString model = sample(QStringLiteral("models/backcopy-vanilla"));
        // The paper has 17 figures (its Figure 8 is listed as not drawn, with the reason).
        auto r =
            runApp({QStringLiteral("figures"), QStringLiteral("--model"), model, QStringLiteral("--only"),
                    QStringLiteral("18"), QStringLiteral("--out"), out.path()});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(QStringLiteral("--only: no figure '18'")), qPrintable(r.err));
        r = runApp({QStringLiteral("figures"), QStringLiteral("--model"), model, QStringLiteral("--only"),
                    QStringLiteral("8"), QStringLiteral("--out"), out.path() + QStringLiteral("/eight")});
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(figureEntry(readIndex(out.path() + QStringLiteral("/eight")),
                             QStringLiteral("8"))[QStringLiteral("reason")]
                     .toString()
                     .contains(QStringLiteral("not drawn by this version")),
                 qPrintable(r.out));
        r = runApp({QStringLiteral("figures"), QStringLiteral("--model"), model, QStringLiteral("--format"),
                    QStringLiteral("jpg"), QStringLiteral("--out"), out.path()});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(QStringLiteral("--format")), qPrintable(r.err));
        r = runApp({QStringLiteral("figures"), QStringLiteral("--model"),
                    out.path() + QStringLiteral("/none"), QStringLiteral("--out"), out.path()});
        QCOMPARE(r.exitCode, 1);
        QVERIFY(QDir(out.path()).entryList(QDir::Files).isEmpty());
        // Issue #41.4: a missing --compare model is found before the output folder is made.
        const QString fresh = out.path() + QStringLiteral("/fresh");
        r = runApp({QStringLiteral("figures"), QStringLiteral("--model"), model, QStringLiteral("--compare"),
                    out.path() + QStringLiteral("/missing"), QStringLiteral("--out"), fresh});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(out.path() + QStringLiteral("/missing")), qPrintable(r.err));
        QVERIFY(!QFileInfo::exists(fresh));
        // Issue #39.6: a bad --data is an error for every model, the synthetic-task ones included (they
        // draw from generated examples and take no --data), before anything is written.
        for (const QString& m :
             {QStringLiteral("models/synthetic-vanilla"), QStringLiteral("models/backcopy-vanilla")}) {
            r = runApp({QStringLiteral("figures"), QStringLiteral("--model"), sample(m),
                        QStringLiteral("--data"), QStringLiteral("bogus:x"), QStringLiteral("--out"), fresh});
            QCOMPARE(r.exitCode, 1);
            QVERIFY2(r.err.contains(QStringLiteral("--data 'bogus:x'")), qPrintable(r.err));
            QVERIFY(!QFileInfo::exists(fresh + QStringLiteral("/index.html")));
        }
        // A synthetic-task model without sample inputs draws generated examples only and refuses data.
        const QString generated = out.path() + QStringLiteral("/generated-only");
        QVERIFY(!test::syntheticModelWithoutSamples(generated).isEmpty());
        r = runApp({QStringLiteral("figures"), QStringLiteral("--model"), generated, QStringLiteral("--data"),
                    QStringLiteral("text:") + sample(QStringLiteral("text/wiki_en_valid.txt")),
                    QStringLiteral("--out"), fresh});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(QStringLiteral("generated examples")), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestFigures)
#include "tst_figures.moc"
