// Bondarenko et al.'s Tables 1 and 2 from `outlierlens figures` as a user makes them, each number against
// what the test computes itself with other commands: `stats` (max inf norm, avg kurtosis), `quantize` (FP
// and W8A8) and, for a sweep, each run's own metrics.jsonl and model config.

#include "../common/app_runner.h"
#include "../common/csv_rows.h"
#include "../common/figure_set_files.h"

#include "analysis/statistics_file.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <map>

using namespace outlierlens;
using outlierlens::test::near;
using outlierlens::test::notBlank;
using outlierlens::test::readCsvRows;
using outlierlens::test::runApp;

namespace {

QString sample(const QString& relative)
{
    return QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/") + relative;
}

QJsonObject readJson(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

/// A table of the figure set: index.json's entry of `id` (its "table": columns and rows).
struct Table
{
    QJsonObject entry;
    QStringList columns;
    QJsonArray rows;
    QStringList notes;

    int column(const QString& key) const { return int(columns.indexOf(key)); }
    /// Row whose first cell is `name`, or an empty array.
    QJsonArray row(const QString& name) const
    {
        for (const auto& r : rows)
            if (r.toArray().first().toString() == name) return r.toArray();
        return {};
    }
    double number(const QString& rowName, const QString& key) const
    {
        const QJsonValue v = row(rowName).at(column(key));
        return v.isNull() || v.isUndefined() ? NAN : v.toDouble();
    }
};

Table tableOf(const QString& outDir, const QString& id)
{
    Table t;
    for (const auto& f :
         readJson(outDir + QStringLiteral("/index.json"))[QStringLiteral("figures")].toArray())
        if (f.toObject()[QStringLiteral("id")].toString() == id) t.entry = f.toObject();
    const QJsonObject table = t.entry[QStringLiteral("table")].toObject();
    for (const auto& c : table[QStringLiteral("columns")].toArray())
        t.columns << c.toString();
    t.rows = table[QStringLiteral("rows")].toArray();
    for (const auto& n : table[QStringLiteral("notes")].toArray())
        t.notes << n.toString();
    return t;
}

#define VERIFY_NEAR(a, b, rel)                                                                               \
    QVERIFY2(near((a), (b), (rel)), qPrintable(QStringLiteral("%1 = %2, expected %3 (%4)")                   \
                                                   .arg(QLatin1String(#a))                                   \
                                                   .arg((a), 0, 'g', 10)                                     \
                                                   .arg((b), 0, 'g', 10)                                     \
                                                   .arg(QLatin1String(#b))))

/// `outlierlens stats` of a model over `data`, read back.
StatisticsFile statsOf(const QString& model, const QString& data, const QString& out)
{
    const auto r = runApp({QStringLiteral("stats"), QStringLiteral("--model"), model,
                           QStringLiteral("--data"), data, QStringLiteral("--out"), out});
    if (r.exitCode != 0) qWarning("%s", qPrintable(r.err));
    return readStatisticsFile(out.toStdString());
}

/// `outlierlens quantize --out PREFIX` of a model, its JSON read back.
QJsonObject quantizeOf(const QStringList& args, const QString& prefix)
{
    const auto r =
        runApp(QStringList{QStringLiteral("quantize")} + args + QStringList{QStringLiteral("--out"), prefix});
    if (r.exitCode != 0) qWarning("%s", qPrintable(r.err));
    return readJson(prefix + QStringLiteral(".json"));
}

/// The statistics' own per-layer numbers give the table's definitions: max inf norm = the largest per-layer
/// mean max |x| of the inf-norm tensor; avg kurtosis = the mean over layers of the kurtosis tensors' means.
void checkDefinitions(const StatisticsFile& s)
{
    double largest = 0, kurtosis = 0;
    int entries = 0;
    for (const LayerStatisticsData& l : s.layers) {
        largest = std::max(largest, l.tensors.at(s.summary.infNormTensor).meanMaxInfNorm);
        for (const std::string& t : s.summary.kurtosisTensors)
            kurtosis += l.tensors.at(t).meanKurtosis, ++entries;
    }
    VERIFY_NEAR(s.summary.maxInfNorm, largest, 1e-6);
    VERIFY_NEAR(s.summary.avgKurtosis, kurtosis / entries, 1e-5);
}

} // namespace

class TestFigureTables : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    /// Table 2 of two new decoders, vanilla and clipped softmax with the same weights (their statistics must
    /// not be shared): every cell against `stats` and `quantize` run here on the same models and data, W8A8
    /// computed by `figures` with quantize's code path. (Gated attention: the demo family below.)
    void variantTableOfNewModels()
    {
        QTemporaryDir dir;
        const QString bytes = sample(QStringLiteral("tokenizers/bytes"));
        const QMap<QString, QStringList> variants{{QStringLiteral("tiny-vanilla"), {}},
                                                  {QStringLiteral("tiny-clipped"),
                                                   {QStringLiteral("--softmax"), QStringLiteral("clipped"),
                                                    QStringLiteral("--gamma"), QStringLiteral("-0.03")}}};
        for (auto it = variants.begin(); it != variants.end(); ++it) {
            const auto r = runApp(QStringList{QStringLiteral("create-model"), QStringLiteral("--preset"),
                                              QStringLiteral("opt-tiny"), QStringLiteral("--tokenizer"),
                                              bytes, QStringLiteral("--seed"), QString::number(3),
                                              QStringLiteral("--out"), dir.filePath(it.key())} +
                                  it.value());
            QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        }
        const QString data = QStringLiteral("text:") + sample(QStringLiteral("text/wiki_en_valid.txt:6"));
        const QString quantData = QStringLiteral("text:") + sample(QStringLiteral("text/wiki_en_valid.txt"));
        const QString out = dir.filePath(QStringLiteral("figures"));
        const auto r = runApp({QStringLiteral("figures"), QStringLiteral("--model"),
                               dir.filePath(QStringLiteral("tiny-vanilla")), QStringLiteral("--compare"),
                               dir.filePath(QStringLiteral("tiny-clipped")), QStringLiteral("--data"), data,
                               QStringLiteral("--quantize-data"), quantData, QStringLiteral("--only"),
                               QStringLiteral("table2"), QStringLiteral("--format"),
                               QStringLiteral("png,pdf"), QStringLiteral("--out"), out});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QVERIFY(notBlank(out + QStringLiteral("/figure-table2.png"), 50));
        QVERIFY(QFileInfo(out + QStringLiteral("/figure-table2.pdf")).size() > 1000);
        const Table t = tableOf(out, QStringLiteral("table2"));
        QVERIFY2(t.entry[QStringLiteral("reason")].toString().isEmpty(),
                 qPrintable(t.entry[QStringLiteral("reason")].toString()));
        QCOMPARE(t.rows.size(), 2);
        // The CSV holds the same rows as index.json.
        const QVector<QStringList> csv = readCsvRows(out + QStringLiteral("/figure-table2.csv"));
        QCOMPARE(csv.value(0), t.columns);
        QCOMPARE(csv.size(), 3);
        for (int i = 1; i < csv.size(); ++i) {
            QCOMPARE(csv[i].value(0), t.rows[i - 1].toArray().first().toString());
            VERIFY_NEAR(csv[i].value(t.column(QStringLiteral("max_inf_norm"))).toDouble(),
                        t.rows[i - 1].toArray().at(t.column(QStringLiteral("max_inf_norm"))).toDouble(),
                        1e-8);
        }
        const int layer = t.entry[QStringLiteral("layer")].toInt();
        for (const QString& name : variants.keys()) {
            const QString model = dir.filePath(name);
            // Attention variant of the row.
            const QString attention = t.row(name).at(t.column(QStringLiteral("attention"))).toString();
            QCOMPARE(attention, name.endsWith(QLatin1String("clipped")) ? QStringLiteral("clipped softmax")
                                : name.endsWith(QLatin1String("gated")) ? QStringLiteral("gated attention")
                                                                        : QStringLiteral("vanilla"));
            // Max inf norm and avg kurtosis: `stats` over the same data.
            const StatisticsFile s = statsOf(model, data, dir.filePath(name + QStringLiteral(".h5")));
            checkDefinitions(s);
            VERIFY_NEAR(t.number(name, QStringLiteral("max_inf_norm")), s.summary.maxInfNorm, 1e-5);
            QCOMPARE(int(t.number(name, QStringLiteral("max_inf_norm_layer"))),
                     s.summary.maxInfNormLayer + 1);
            VERIFY_NEAR(t.number(name, QStringLiteral("avg_kurtosis")), s.summary.avgKurtosis, 1e-5);
            // The second column appears exactly when a row's max is in the last layer and the figures
            // look elsewhere; then it is that layer's mean max |x|.
            const int at = t.column(QStringLiteral("max_inf_norm_layer_%1").arg(layer + 1));
            if (at >= 0)
                VERIFY_NEAR(t.number(name, t.columns[at]), s.summary.meanMaxInfNorm[std::size_t(layer)],
                            1e-5);
            // FP and W8A8: `quantize` with the same data and its defaults, one seed as the figures compute.
            const QJsonObject q = quantizeOf({QStringLiteral("--model"), model, QStringLiteral("--data"),
                                              quantData, QStringLiteral("--seeds"), QStringLiteral("1")},
                                             dir.filePath(name + QStringLiteral("-w8a8")));
            QVERIFY(!q.isEmpty());
            QCOMPARE(t.row(name).at(t.column(QStringLiteral("metric"))).toString(),
                     q[QStringLiteral("metric")].toString());
            VERIFY_NEAR(t.number(name, QStringLiteral("fp")), q[QStringLiteral("fp")].toDouble(), 1e-4);
            VERIFY_NEAR(t.number(name, QStringLiteral("w8a8")),
                        q[QStringLiteral("quantized_mean")].toDouble(), 1e-4);
            QVERIFY(std::isnan(t.number(name, QStringLiteral("w8a8_std")))); // no spread of one seed
            QVERIFY(t.row(name)
                        .at(t.column(QStringLiteral("w8a8_source")))
                        .toString()
                        .startsWith(QLatin1String("computed")));
        }
        bool lastDominates = false;
        for (const QString& name : variants.keys())
            lastDominates |= int(t.number(name, QStringLiteral("max_inf_norm_layer"))) == 2;
        QCOMPARE(t.column(QStringLiteral("max_inf_norm_layer_%1").arg(layer + 1)) >= 0,
                 lastDominates && layer != 1);
    }

    /// Table 2 of the bundled decoder family, the example: the last layer (layer 3) dominates the
    /// max inf norm in every variant, so the table adds the max inf norm at the figures' layer (layer 1,
    /// before the showcase head), where gated attention removes what vanilla grows. W8A8: the gated model's
    /// from a given `quantize` result of two seeds, the others not computed (--quantize-data none), saying
    /// so.
    void variantTableOfTheDemoFamily()
    {
        QTemporaryDir dir;
        const QString models = sample(QStringLiteral("models/"));
        const QString data = QStringLiteral("text:") + sample(QStringLiteral("text/wiki_en_valid.txt:12"));
        const QStringList quantArgs{QStringLiteral("--data"),
                                    QStringLiteral("backcopy:") +
                                        sample(QStringLiteral("text/wiki_en_train.txt")),
                                    QStringLiteral("--seq-length"), QStringLiteral("64")};
        const QJsonObject gatedW8A8 =
            quantizeOf(QStringList{QStringLiteral("--model"), models + QStringLiteral("backcopy-gated"),
                                   QStringLiteral("--seeds"), QStringLiteral("2")} +
                           quantArgs,
                       dir.filePath(QStringLiteral("backcopy-gated")));
        QVERIFY(!gatedW8A8.isEmpty());
        const QString given = dir.filePath(QStringLiteral("backcopy-gated.json"));
        const QString out = dir.filePath(QStringLiteral("figures"));
        const auto r =
            runApp({QStringLiteral("figures"), QStringLiteral("--model"),
                    models + QStringLiteral("backcopy-vanilla"), QStringLiteral("--compare"),
                    models + QStringLiteral("backcopy-clipped,") + models + QStringLiteral("backcopy-gated"),
                    QStringLiteral("--data"), data, QStringLiteral("--quantized"), given,
                    QStringLiteral("--quantize-data"), QStringLiteral("none"), QStringLiteral("--only"),
                    QStringLiteral("table2"), QStringLiteral("--format"), QStringLiteral("png"),
                    QStringLiteral("--out"), out});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const Table t = tableOf(out, QStringLiteral("table2"));
        QCOMPARE(t.rows.size(), 3);
        QCOMPARE(t.entry[QStringLiteral("layer")].toInt(), 0);
        QVERIFY2(t.column(QStringLiteral("max_inf_norm_layer_1")) >= 0,
                 qPrintable(t.columns.join(QLatin1Char(','))));
        std::map<QString, double> atLayer1;
        for (const QString& name : {QStringLiteral("backcopy-vanilla"), QStringLiteral("backcopy-clipped"),
                                    QStringLiteral("backcopy-gated")}) {
            const StatisticsFile s = statsOf(models + name, data, dir.filePath(name + QStringLiteral(".h5")));
            checkDefinitions(s);
            QCOMPARE(s.summary.maxInfNormLayer, 2); // the last layer, in every variant
            VERIFY_NEAR(t.number(name, QStringLiteral("max_inf_norm")), s.summary.maxInfNorm, 1e-5);
            VERIFY_NEAR(t.number(name, QStringLiteral("avg_kurtosis")), s.summary.avgKurtosis, 1e-5);
            atLayer1[name] = t.number(name, QStringLiteral("max_inf_norm_layer_1"));
            VERIFY_NEAR(atLayer1[name], s.summary.meanMaxInfNorm[0], 1e-5);
            const QString source = t.row(name).at(t.column(QStringLiteral("w8a8_source"))).toString();
            if (name.endsWith(QLatin1String("gated"))) {
                QCOMPARE(source, QStringLiteral("backcopy-gated.json"));
                VERIFY_NEAR(t.number(name, QStringLiteral("fp")), gatedW8A8[QStringLiteral("fp")].toDouble(),
                            1e-12);
                VERIFY_NEAR(t.number(name, QStringLiteral("w8a8")),
                            gatedW8A8[QStringLiteral("quantized_mean")].toDouble(), 1e-12);
                VERIFY_NEAR(t.number(name, QStringLiteral("w8a8_std")),
                            gatedW8A8[QStringLiteral("quantized_std")].toDouble(), 1e-12);
            } else {
                QCOMPARE(source, QStringLiteral("n/a"));
                QVERIFY(std::isnan(t.number(name, QStringLiteral("w8a8"))));
                QVERIFY(t.notes.join(QLatin1Char('\n'))
                            .contains(name + QStringLiteral(": FP and W8A8 not available: not computed "
                                                            "(--quantize-data none)")));
            }
        }
        // Read at the figures' layer the comparison is the paper's: the gate removes the sink's outlier.
        QVERIFY(atLayer1[QStringLiteral("backcopy-gated")] < atLayer1[QStringLiteral("backcopy-vanilla")]);
        QVERIFY(t.notes.join(QLatin1Char(' ')).contains(QStringLiteral("last layer (layer 3)")));
    }

    /// Table 1 from a real sweep (a vanilla baseline and two clipped-softmax points of a tiny masked LM): the
    /// metric, max inf norm and avg kurtosis of each run's last evaluation in its metrics.jsonl, gamma and
    /// zeta from its model's config.json, W8A8 from the one point that has a `quantize` result.
    void sweepTable()
    {
        QTemporaryDir dir;
        const QString sweep = dir.filePath(QStringLiteral("sweep"));
        const QString train = sample(QStringLiteral("text/wiki_en_train.txt"));
        const QJsonObject base{
            {QStringLiteral("task"), QStringLiteral("mlm")},
            {QStringLiteral("corpus"), train},
            {QStringLiteral("valid_corpus"), sample(QStringLiteral("text/wiki_en_valid.txt"))},
            {QStringLiteral("vocab"), sample(QStringLiteral("bert/vocab.txt"))},
            {QStringLiteral("preset"), QStringLiteral("bert-tiny")},
            {QStringLiteral("hidden_size"), 32},
            {QStringLiteral("num_layers"), 2},
            {QStringLiteral("num_heads"), 2},
            {QStringLiteral("intermediate_size"), 64},
            {QStringLiteral("seq_length"), 32},
            {QStringLiteral("batch_size"), 8},
            {QStringLiteral("steps"), 6},
            {QStringLiteral("warmup_steps"), 2},
            {QStringLiteral("log_every"), 1},
            {QStringLiteral("eval_every"), 3},
            {QStringLiteral("checkpoint_every"), 6},
            {QStringLiteral("eval_batches"), 2},
            {QStringLiteral("threads"), 1}};
        const QJsonObject config{
            {QStringLiteral("output"), sweep},
            {QStringLiteral("base"), base},
            {QStringLiteral("grid"),
             QJsonObject{{QStringLiteral("softmax"), QJsonArray{QStringLiteral("clipped")}},
                         {QStringLiteral("gamma"), QJsonArray{-0.05, -0.1}}}},
            {QStringLiteral("baseline"),
             QJsonObject{{QStringLiteral("softmax"), QStringLiteral("vanilla")}}}};
        const QString configFile = dir.filePath(QStringLiteral("sweep.json"));
        {
            QFile f(configFile);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QJsonDocument(config).toJson());
        }
        auto r = runApp({QStringLiteral("sweep"), QStringLiteral("--config"), configFile});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QString quantizedPoint = QStringLiteral("gamma=-0.05,softmax=clipped");
        const QJsonObject q = quantizeOf(
            {QStringLiteral("--model"), sweep + QLatin1Char('/') + quantizedPoint + QStringLiteral("/final"),
             QStringLiteral("--data"), QStringLiteral("text:") + train, QStringLiteral("--seq-length"),
             QStringLiteral("32"), QStringLiteral("--seeds"), QStringLiteral("2"),
             QStringLiteral("--calib-batches"), QStringLiteral("2"), QStringLiteral("--eval-batches"),
             QStringLiteral("2")},
            sweep + QLatin1Char('/') + quantizedPoint + QStringLiteral("/quantize"));
        QVERIFY(!q.isEmpty());

        const QString out = dir.filePath(QStringLiteral("figures"));
        r = runApp({QStringLiteral("figures"), QStringLiteral("--model"),
                    sweep + QStringLiteral("/baseline/final"), QStringLiteral("--sweep"), sweep,
                    QStringLiteral("--only"), QStringLiteral("table1"), QStringLiteral("--format"),
                    QStringLiteral("png"), QStringLiteral("--out"), out});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        QVERIFY(notBlank(out + QStringLiteral("/figure-table1.png"), 50));
        const Table t = tableOf(out, QStringLiteral("table1"));
        QCOMPARE(t.rows.size(), 3);
        QCOMPARE(readCsvRows(out + QStringLiteral("/figure-table1.csv")).value(0), t.columns);
        for (const QString& point :
             {QStringLiteral("baseline"), QStringLiteral("gamma=-0.05,softmax=clipped"),
              QStringLiteral("gamma=-0.1,softmax=clipped")}) {
            // The run's last evaluation, read here from its metrics.jsonl.
            QFile metrics(sweep + QLatin1Char('/') + point + QStringLiteral("/metrics.jsonl"));
            QVERIFY(metrics.open(QIODevice::ReadOnly));
            QJsonObject last;
            for (const QByteArray& line : metrics.readAll().split('\n')) {
                const QJsonObject o = QJsonDocument::fromJson(line).object();
                if (o[QStringLiteral("type")].toString() == QLatin1String("eval")) last = o;
            }
            QVERIFY(!last.isEmpty());
            QCOMPARE(last[QStringLiteral("step")].toInt(), 6);
            VERIFY_NEAR(t.number(point, QStringLiteral("fp")),
                        last[QStringLiteral("eval")].toObject()[QStringLiteral("perplexity")].toDouble(),
                        1e-5);
            // A masked LM's max inf norm is ffn_out's; its avg kurtosis averages ffn_out and out
            // (docs/metrics.md).
            double largest = 0, kurtosis = 0;
            int entries = 0;
            for (const auto& v :
                 last[QStringLiteral("max_inf_norm")].toObject()[QStringLiteral("ffn_out")].toArray())
                largest = std::max(largest, v.toDouble());
            for (const char* tensor : {"ffn_out", "out"})
                for (const auto& v :
                     last[QStringLiteral("kurtosis")].toObject()[QLatin1String(tensor)].toArray())
                    kurtosis += v.toDouble(), ++entries;
            QCOMPARE(entries, 4);
            VERIFY_NEAR(t.number(point, QStringLiteral("max_inf_norm")), largest, 1e-5);
            VERIFY_NEAR(t.number(point, QStringLiteral("avg_kurtosis")), kurtosis / entries, 1e-5);
            // Gamma and zeta of the point's model (a vanilla point: 0 and 1).
            const QJsonObject variant =
                readJson(sweep + QLatin1Char('/') + point +
                         QStringLiteral("/final/config.json"))[QStringLiteral("outlierlens")]
                    .toObject();
            const bool clipped = variant[QStringLiteral("softmax")].toString() == QLatin1String("clipped");
            QCOMPARE(clipped, point != QLatin1String("baseline"));
            VERIFY_NEAR(t.number(point, QStringLiteral("gamma")),
                        clipped ? variant[QStringLiteral("gamma")].toDouble() : 0.0, 1e-9);
            VERIFY_NEAR(t.number(point, QStringLiteral("zeta")),
                        clipped ? variant[QStringLiteral("zeta")].toDouble(1) : 1.0, 1e-9);
            // W8A8: the point with a quantize result reads it; the others are computed on their run's own
            // task data (run.json: the masked-LM corpus, 32 tokens), equal to `quantize --seeds 1` there.
            if (point == quantizedPoint) {
                VERIFY_NEAR(t.number(point, QStringLiteral("w8a8")),
                            q[QStringLiteral("quantized_mean")].toDouble(), 1e-9);
                VERIFY_NEAR(t.number(point, QStringLiteral("w8a8_fp")), q[QStringLiteral("fp")].toDouble(),
                            1e-9);
                QCOMPARE(t.row(point).at(t.column(QStringLiteral("w8a8_source"))).toString(),
                         QStringLiteral("quantize.json"));
            } else {
                const QJsonObject one = quantizeOf(
                    {QStringLiteral("--model"), sweep + QLatin1Char('/') + point + QStringLiteral("/final"),
                     QStringLiteral("--data"), QStringLiteral("text:") + train,
                     QStringLiteral("--seq-length"), QStringLiteral("32"), QStringLiteral("--seeds"),
                     QStringLiteral("1")},
                    dir.filePath(point + QStringLiteral("-one-seed")));
                QVERIFY(!one.isEmpty());
                VERIFY_NEAR(t.number(point, QStringLiteral("w8a8")),
                            one[QStringLiteral("quantized_mean")].toDouble(), 1e-9);
                VERIFY_NEAR(t.number(point, QStringLiteral("w8a8_fp")), one[QStringLiteral("fp")].toDouble(),
                            1e-9);
                QVERIFY(std::isnan(t.number(point, QStringLiteral("w8a8_std")))); // one seed: no spread
                QVERIFY(t.row(point)
                            .at(t.column(QStringLiteral("w8a8_source")))
                            .toString()
                            .startsWith(QStringLiteral("computed")));
            }
        }
        VERIFY_NEAR(t.number(QStringLiteral("gamma=-0.1,softmax=clipped"), QStringLiteral("gamma")), -0.1,
                    1e-9);

        // --quantize-data none: nothing computed; the table says which points have no W8A8 and how to get it.
        const QString bare = dir.filePath(QStringLiteral("figures-none"));
        r = runApp({QStringLiteral("figures"), QStringLiteral("--model"),
                    sweep + QStringLiteral("/baseline/final"), QStringLiteral("--sweep"), sweep,
                    QStringLiteral("--only"), QStringLiteral("table1"), QStringLiteral("--quantize-data"),
                    QStringLiteral("none"), QStringLiteral("--format"), QStringLiteral("png"),
                    QStringLiteral("--out"), bare});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const Table none = tableOf(bare, QStringLiteral("table1"));
        QVERIFY(std::isnan(none.number(QStringLiteral("baseline"), QStringLiteral("w8a8"))));
        QVERIFY(!std::isnan(none.number(quantizedPoint, QStringLiteral("w8a8"))));
        const QString notes = none.notes.join(QLatin1Char(' '));
        QVERIFY2(notes.contains(QStringLiteral("W8A8 not available for")) &&
                     notes.contains(QStringLiteral("baseline")) &&
                     notes.contains(QStringLiteral("--quantize-data none")),
                 qPrintable(notes));
    }

    /// Without their inputs the tables are listed with the reason, and no file is made for them.
    void unavailableTablesSayWhy()
    {
        QTemporaryDir dir;
        QVERIFY(QDir().mkpath(dir.filePath(QStringLiteral("empty-sweep"))));
        // A synthetic-task model without sample inputs: no data set to compute statistics over.
        const QString model = dir.filePath(QStringLiteral("generated-only"));
        QVERIFY(!test::syntheticModelWithoutSamples(model).isEmpty());
        const auto r =
            runApp({QStringLiteral("figures"), QStringLiteral("--model"), model, QStringLiteral("--sweep"),
                    dir.filePath(QStringLiteral("empty-sweep")), QStringLiteral("--only"),
                    QStringLiteral("table1,table2"), QStringLiteral("--format"), QStringLiteral("png"),
                    QStringLiteral("--out"), dir.filePath(QStringLiteral("figures"))});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const Table t1 = tableOf(dir.filePath(QStringLiteral("figures")), QStringLiteral("table1"));
        const Table t2 = tableOf(dir.filePath(QStringLiteral("figures")), QStringLiteral("table2"));
        QVERIFY2(t1.entry[QStringLiteral("reason")].toString().contains(QStringLiteral("summary.json")),
                 qPrintable(t1.entry[QStringLiteral("reason")].toString()));
        QVERIFY2(t2.entry[QStringLiteral("reason")].toString().contains(QStringLiteral("no data set")),
                 qPrintable(t2.entry[QStringLiteral("reason")].toString()));
        QVERIFY(!QFileInfo::exists(dir.filePath(QStringLiteral("figures/figure-table1.png"))));
        QVERIFY(!QFileInfo::exists(dir.filePath(QStringLiteral("figures/figure-table2.csv"))));
        QVERIFY(r.out.contains(QStringLiteral("not drawn: Table 1")));
    }
};

int main(int argc, char** argv)
{
    // A test function runs `figures`, `stats` and `quantize` several times: minutes on a busy 2-core machine,
    // more than QtTest's default 5 minutes per function.
    if (qEnvironmentVariableIsEmpty("QTEST_FUNCTION_TIMEOUT")) qputenv("QTEST_FUNCTION_TIMEOUT", "900000");
    QCoreApplication app(argc, argv);
    TestFigureTables test;
    QTEST_SET_MAIN_SOURCE_PATH
    return QTest::qExec(&test, argc, argv);
}
#include "tst_figure_tables.moc"
