// An et al.'s Figures 7-11 from `outlierlens figures` as a user makes them. 10 and 11 (`--compare`): one
// panel per trained attention variant, each number against what other commands give for that model alone
// (`inspect` for Figure 10's |h|, `stats` for Figure 11's per-layer magnitudes), and the refusals. 7-9 (a
// massive activation's lifecycle): the layers the rule chooses, recomputed from an `inspect` dump, and
// every panel against the dump and against the model's own arithmetic between the panels.

#include "../common/app_runner.h"
#include "../common/csv_rows.h"
#include "../common/figure_set_files.h"

#include "analysis/statistics_file.h"
#include "io/hdf5_store.h"

#include <QFile>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <map>

using namespace outlierlens;
using outlierlens::test::figureEntry;
using outlierlens::test::near;
using outlierlens::test::notBlank;
using outlierlens::test::readCsvRows;
using outlierlens::test::readIndex;
using outlierlens::test::runApp;

namespace {

QString sample(const QString& relative)
{
    return QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/") + relative;
}

/// A heatmap figure's CSV: sub-figure label -> (row, col) -> value (masked cells left out).
std::map<QString, std::map<std::pair<int, int>, double>> heatmapCells(const QString& path)
{
    std::map<QString, std::map<std::pair<int, int>, double>> cells;
    const QVector<QStringList> rows = readCsvRows(path);
    for (const QStringList& row : rows.mid(1))
        if (row.size() == 6 && !row[5].isEmpty())
            cells[row[0]][{row[1].toInt(), row[2].toInt()}] = row[5].toDouble();
    return cells;
}

/// The cells of the sub-figure whose label starts with `prefix` ("(c)").
const std::map<std::pair<int, int>, double>&
panelOf(const std::map<QString, std::map<std::pair<int, int>, double>>& cells, const QString& prefix,
        QString* label = nullptr)
{
    static const std::map<std::pair<int, int>, double> none;
    for (const auto& [name, values] : cells)
        if (name.startsWith(prefix)) {
            if (label) *label = name;
            return values;
        }
    return none;
}

double maxDifference(const std::map<std::pair<int, int>, double>& a, const std::function<double(int, int)>& b)
{
    double worst = a.empty() ? INFINITY : 0;
    for (const auto& [rc, v] : a)
        worst = std::max(worst, std::abs(v - b(rc.first, rc.second)));
    return worst;
}

const QStringList kModels{QStringLiteral("backcopy-vanilla"), QStringLiteral("backcopy-gated"),
                          QStringLiteral("backcopy-sigmoid")};
const QStringList kLabels{QStringLiteral("(a) backcopy-vanilla: vanilla"),
                          QStringLiteral("(b) backcopy-gated: gated attention"),
                          QStringLiteral("(c) backcopy-sigmoid: sigmoid attention")};

} // namespace

class TestFigureVariants : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_out.isValid());
        m_data = QStringLiteral("text:") + sample(QStringLiteral("text/wiki_en_valid.txt:6"));
        const auto r =
            runApp({QStringLiteral("figures"), QStringLiteral("--model"),
                    sample(QStringLiteral("models/backcopy-vanilla")), QStringLiteral("--compare"),
                    sample(QStringLiteral("models/backcopy-gated,")) +
                        sample(QStringLiteral("models/backcopy-sigmoid")),
                    QStringLiteral("--data"), m_data, QStringLiteral("--only"), QStringLiteral("an10,an11"),
                    QStringLiteral("--format"), QStringLiteral("png"), QStringLiteral("--dpi"),
                    QStringLiteral("96"), QStringLiteral("--out"), m_out.path()});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        m_index = readIndex(m_out.path());
    }

    /// Figure 10: each model's |h| of the chosen layer on input #1, as `inspect` dumps it for that model.
    void figure10IsEachModelsLayerOutput()
    {
        const QJsonObject f = figureEntry(m_index, QStringLiteral("an10"));
        QVERIFY2(f[QStringLiteral("reason")].toString().isEmpty(),
                 qPrintable(f[QStringLiteral("reason")].toString()));
        QVERIFY(notBlank(m_out.path() + QStringLiteral("/figure-an10.png")));
        // Fits an A4 landscape page (1123 x 794 px at 96 DPI).
        const QImage png(m_out.path() + QStringLiteral("/figure-an10.png"));
        QVERIFY2(png.width() <= 1123 && png.height() <= 794,
                 qPrintable(QStringLiteral("%1 x %2").arg(png.width()).arg(png.height())));
        const int layer = f[QStringLiteral("layers")].toArray().at(0).toInt(-1);
        QVERIFY(layer >= 0);
        const QString text =
            m_index[QStringLiteral("inputs")].toArray()[0].toObject()[QStringLiteral("first")].toString();
        QVERIFY(!text.isEmpty());
        // subfigure -> (row, col) -> value
        std::map<QString, std::map<std::pair<int, int>, double>> cells;
        const QVector<QStringList> rows = readCsvRows(m_out.path() + QStringLiteral("/figure-an10.csv"));
        QCOMPARE(rows.value(0).join(QLatin1Char(',')),
                 QStringLiteral("subfigure,row,col,row_label,col_label,value"));
        for (const QStringList& row : rows.mid(1)) {
            QCOMPARE(row.size(), 6);
            cells[row[0]][{row[1].toInt(), row[2].toInt()}] = row[5].toDouble();
        }
        QCOMPARE(int(cells.size()), 3);
        for (int i = 0; i < kModels.size(); ++i) {
            QVERIFY2(cells.count(kLabels[i]), qPrintable(kLabels[i]));
            const QString dump = m_out.path() + QStringLiteral("/%1.h5").arg(kModels[i]);
            const auto r = runApp({QStringLiteral("inspect"), QStringLiteral("--model"),
                                   sample(QStringLiteral("models/") + kModels[i]), QStringLiteral("--text"),
                                   text, QStringLiteral("--dump"), dump});
            QVERIFY2(r.exitCode == 0, qPrintable(r.err));
            const torch::Tensor h = Hdf5Reader(dump.toStdString())
                                        .readTensor("layer" + std::to_string(layer) + "/out")
                                        .abs()
                                        .to(torch::kDouble);
            const auto& got = cells[kLabels[i]];
            QCOMPARE(std::int64_t(got.size()), h.numel());
            const auto a = h.accessor<double, 2>();
            for (const auto& [rc, value] : got)
                QVERIFY2(near(value, a[rc.first][rc.second], 1e-5),
                         qPrintable(QStringLiteral("%1 (%2, %3): %4 vs %5")
                                        .arg(kModels[i])
                                        .arg(rc.first)
                                        .arg(rc.second)
                                        .arg(value)
                                        .arg(a[rc.first][rc.second])));
        }
        // The story it tells on these models: vanilla's layer has a far larger |h| than the gated one's.
        double vanilla = 0, gated = 0;
        for (const auto& [rc, v] : cells[kLabels[0]])
            vanilla = std::max(vanilla, v);
        for (const auto& [rc, v] : cells[kLabels[1]])
            gated = std::max(gated, v);
        QVERIFY2(vanilla > 3 * gated, qPrintable(QStringLiteral("%1 vs %2").arg(vanilla).arg(gated)));
    }

    /// Figure 11: per layer, each model's top-3 and median |h| over the data: its own `stats` file.
    void figure11IsEachModelsStatistics()
    {
        const QJsonObject f = figureEntry(m_index, QStringLiteral("an11"));
        QVERIFY2(f[QStringLiteral("reason")].toString().isEmpty(),
                 qPrintable(f[QStringLiteral("reason")].toString()));
        QVERIFY(notBlank(m_out.path() + QStringLiteral("/figure-an11.png")));
        const QVector<QStringList> rows = readCsvRows(m_out.path() + QStringLiteral("/figure-an11.csv"));
        QCOMPARE(rows.value(0).join(QLatin1Char(',')),
                 QStringLiteral("subfigure,layer (1-based),top 1,top 2,top 3,median"));
        std::map<QString, std::map<int, QStringList>> byModel;
        for (const QStringList& row : rows.mid(1))
            byModel[row.value(0)][row.value(1).toInt() - 1] = row.mid(2);
        QCOMPARE(int(byModel.size()), 3);
        for (int i = 0; i < kModels.size(); ++i) {
            const QString out = m_out.path() + QStringLiteral("/stats-%1.h5").arg(kModels[i]);
            const auto r = runApp({QStringLiteral("stats"), QStringLiteral("--model"),
                                   sample(QStringLiteral("models/") + kModels[i]), QStringLiteral("--data"),
                                   m_data, QStringLiteral("--out"), out});
            QVERIFY2(r.exitCode == 0, qPrintable(r.err));
            const StatisticsFile s = readStatisticsFile(out.toStdString());
            QVERIFY(s.systematic);
            const auto& got = byModel[kLabels[i]];
            QCOMPARE(int(got.size()), int(s.systematic->layers.size()));
            for (const SystematicLayerData& l : s.systematic->layers) {
                const QStringList v = got.at(l.layer);
                for (int k = 0; k < 3; ++k)
                    QVERIFY2(near(v.value(k).toDouble(), l.out.meanTop[std::size_t(k)], 1e-6),
                             qPrintable(QStringLiteral("%1 layer %2 top %3: %4 vs %5")
                                            .arg(kModels[i])
                                            .arg(l.layer + 1)
                                            .arg(k + 1)
                                            .arg(v.value(k))
                                            .arg(l.out.meanTop[std::size_t(k)])));
                QVERIFY(near(v.value(3).toDouble(), l.out.meanMedian, 1e-6));
            }
        }
    }

    /// Without variants, with a model that is not a decoder, or with a variant of another shape, both are
    /// listed as not drawn, with the reason, and nothing else fails.
    void refusedWithTheReason()
    {
        struct Case
        {
            QStringList args;
            QString reason;
        };
        const QString fixture =
            QStringLiteral(OUTLIERLENS_SOURCE_DIR "/tests/fixtures/decoders/llama-seed0/hf");
        const QVector<Case> cases{
            {{QStringLiteral("--model"), sample(QStringLiteral("models/backcopy-vanilla"))},
             QStringLiteral("--compare")},
            {{QStringLiteral("--model"), sample(QStringLiteral("models/synthetic-vanilla"))},
             QStringLiteral("not a decoder")},
            {{QStringLiteral("--model"), sample(QStringLiteral("models/backcopy-vanilla")),
              QStringLiteral("--compare"), fixture},
             QStringLiteral("is not a decoder of this model's shape")},
        };
        for (const Case& c : cases) {
            QTemporaryDir out;
            const auto r = runApp(QStringList{QStringLiteral("figures")} + c.args +
                                  QStringList{QStringLiteral("--only"), QStringLiteral("an10,an11"),
                                              QStringLiteral("--format"), QStringLiteral("png"),
                                              QStringLiteral("--out"), out.path()});
            QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
            const QJsonObject index = readIndex(out.path());
            for (const QString id : {"an10", "an11"}) {
                const QString reason = figureEntry(index, id)[QStringLiteral("reason")].toString();
                QVERIFY2(reason.contains(c.reason), qPrintable(id + QStringLiteral(": ") + reason));
                QVERIFY(
                    !QFile::exists(out.path() + QStringLiteral("/figure-") + id + QStringLiteral(".png")));
            }
        }
    }

    /// Figures 7-9 on backcopy-vanilla (OPT layout, ReLU FFN, no rotary embedding).
    void lifecycleOfTheDemoDecoder()
    {
        QTemporaryDir out;
        const QString model = sample(QStringLiteral("models/backcopy-vanilla"));
        const auto r =
            runApp({QStringLiteral("figures"), QStringLiteral("--model"), model, QStringLiteral("--only"),
                    QStringLiteral("an7,an8,an9"), QStringLiteral("--format"), QStringLiteral("png"),
                    QStringLiteral("--dpi"), QStringLiteral("96"), QStringLiteral("--out"), out.path()});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const QJsonObject index = readIndex(out.path());
        const QString text =
            index[QStringLiteral("inputs")].toArray()[0].toObject()[QStringLiteral("first")].toString();
        const QString dump = out.path() + QStringLiteral("/dump.h5");
        const auto inspected = runApp({QStringLiteral("inspect"), QStringLiteral("--model"), model,
                                       QStringLiteral("--text"), text, QStringLiteral("--dump"), dump});
        QVERIFY2(inspected.exitCode == 0, qPrintable(inspected.err));
        Hdf5Reader reader(dump.toStdString());
        const auto tensor = [&](const std::string& name) {
            return reader.readTensor(name).to(torch::kDouble);
        };
        // The emergence layer: the first whose output has a value over 6 sigma; the token: the one holding
        // the largest |h| among those values; its channels: where they are.
        int emergence = -1, token = -1;
        QStringList channels;
        for (int l = 0; emergence < 0; ++l) {
            const torch::Tensor h = tensor("layer" + std::to_string(l) + "/out");
            const torch::Tensor over = (h - h.mean()).abs() > 6 * h.std(/*unbiased=*/false);
            if (!over.any().item<bool>()) continue;
            emergence = l;
            token = int(std::get<0>((h.abs() * over).max(1)).argmax().item<std::int64_t>());
            for (std::int64_t c = 0; c < h.size(1); ++c)
                if (over[token][c].item<bool>()) channels << QString::number(c);
        }
        const QJsonObject an7 = figureEntry(index, QStringLiteral("an7"));
        QCOMPARE(an7[QStringLiteral("layers")].toArray().at(0).toInt(), emergence);
        const QString chosen = QStringLiteral("token %1 ").arg(token) + QStringLiteral("\"");
        QVERIFY2(an7[QStringLiteral("caption")].toString().contains(chosen),
                 qPrintable(an7[QStringLiteral("caption")].toString()));
        QVERIFY2(an7[QStringLiteral("caption")].toString().contains(QStringLiteral("channels ") +
                                                                    channels.join(QStringLiteral(", "))),
                 qPrintable(channels.join(QLatin1Char(','))));
        // Figure 7's panels: h and x_down as inspect dumps them; the ReLU of the first linear is x_down; the
        // norm's input plus the FFN output is h.
        const auto ffn = heatmapCells(out.path() + QStringLiteral("/figure-an7.csv"));
        const auto& normIn = panelOf(ffn, QStringLiteral("(a)"));
        const auto& first = panelOf(ffn, QStringLiteral("(c)"));
        const auto& down = panelOf(ffn, QStringLiteral("(d)"));
        const auto& ffnOut = panelOf(ffn, QStringLiteral("(e)"));
        QString hLabel;
        const auto& h = panelOf(ffn, QStringLiteral("(f)"), &hLabel);
        QVERIFY(hLabel.contains(QStringLiteral("layer output h")));
        const std::string at = "layer" + std::to_string(emergence) + "/";
        const torch::Tensor hDump = tensor(at + "out"), downDump = tensor(at + "down_in");
        QCOMPARE(std::int64_t(h.size()), hDump.numel());
        QCOMPARE(std::int64_t(down.size()), downDump.numel());
        QVERIFY(maxDifference(h, [&](int t, int c) { return hDump[t][c].item<double>(); }) < 1e-4);
        QVERIFY(maxDifference(down, [&](int t, int c) { return downDump[t][c].item<double>(); }) < 1e-4);
        QVERIFY(maxDifference(down, [&](int t, int c) { return std::max(0.0, first.at({t, c})); }) < 1e-5);
        QVERIFY(maxDifference(h, [&](int t, int c) { return normIn.at({t, c}) + ffnOut.at({t, c}); }) < 1e-3);
        // Figure 8: the probabilities as inspect dumps them for its head; the softmax of its scores over the
        // keys a query sees; the scores are q . k / sqrt(d_head) of its q and k panels.
        const QJsonObject an8 = figureEntry(index, QStringLiteral("an8"));
        const int layer = an8[QStringLiteral("layers")].toArray().at(0).toInt(),
                  head = an8[QStringLiteral("heads")].toArray().at(0).toInt();
        QVERIFY(layer > emergence);
        const auto attention = heatmapCells(out.path() + QStringLiteral("/figure-an8.csv"));
        const auto& q = panelOf(attention, QStringLiteral("(c)"));
        const auto& k = panelOf(attention, QStringLiteral("(d)"));
        const auto& scores = panelOf(attention, QStringLiteral("(f)"));
        const auto& probs = panelOf(attention, QStringLiteral("(g)"));
        const torch::Tensor p = tensor("layer" + std::to_string(layer) + "/attn_probs")[head];
        const std::int64_t T = p.size(0), dh = 64;
        QCOMPARE(std::int64_t(probs.size()), T * (T + 1) / 2); // the keys each query sees
        QVERIFY(maxDifference(probs, [&](int a, int b) { return p[a][b].item<double>(); }) < 1e-5);
        for (std::int64_t a = 0; a < T; ++a) {
            double sum = 0;
            for (std::int64_t b = 0; b <= a; ++b)
                sum += std::exp(scores.at({int(a), int(b)}));
            for (std::int64_t b = 0; b <= a; ++b)
                QVERIFY(std::abs(std::exp(scores.at({int(a), int(b)})) / sum - probs.at({int(a), int(b)})) <
                        1e-5);
        }
        QVERIFY(maxDifference(scores, [&](int a, int b) {
                    double dot = 0;
                    for (int c = 0; c < dh; ++c)
                        dot += q.at({a, c}) * k.at({b, c});
                    return dot / std::sqrt(double(dh));
                }) < 1e-3);
    }

    /// A LLaMA layer's gated FFN in Figure 7: the activation panel is SiLU of the gate panel, and x_down is
    /// it times the up panel.
    void lifecycleOfAGatedFfn()
    {
        QTemporaryDir out;
        const auto r = runApp({QStringLiteral("figures"), QStringLiteral("--model"),
                               QStringLiteral(OUTLIERLENS_TEST_DATA "/decoders/llama-seed0/hf"),
                               QStringLiteral("--data"),
                               QStringLiteral("text:") + sample(QStringLiteral("text/wiki_en_valid.txt:4")),
                               QStringLiteral("--only"), QStringLiteral("an7"), QStringLiteral("--format"),
                               QStringLiteral("png"), QStringLiteral("--out"), out.path()});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const auto ffn = heatmapCells(out.path() + QStringLiteral("/figure-an7.csv"));
        QString gateLabel, upLabel, actLabel, downLabel;
        const auto& gate = panelOf(ffn, QStringLiteral("(c)"), &gateLabel);
        const auto& up = panelOf(ffn, QStringLiteral("(d)"), &upLabel);
        const auto& act = panelOf(ffn, QStringLiteral("(e)"), &actLabel);
        const auto& down = panelOf(ffn, QStringLiteral("(f)"), &downLabel);
        QVERIFY(gateLabel.contains(QStringLiteral("gate projection")));
        QVERIFY(upLabel.contains(QStringLiteral("up projection")));
        QVERIFY(actLabel.contains(QStringLiteral("activation of the gate")));
        QVERIFY(downLabel.contains(QStringLiteral("x_down")));
        QVERIFY(!gate.empty() && gate.size() == act.size() && act.size() == down.size());
        QVERIFY(maxDifference(act, [&](int t, int c) {
                    const double g = gate.at({t, c});
                    return g / (1 + std::exp(-g));
                }) < 1e-5);
        QVERIFY(maxDifference(down, [&](int t, int c) { return act.at({t, c}) * up.at({t, c}); }) < 1e-5);
    }

    /// A rule nothing passes: Figure 7 says how it chose without outliers, and Figure 9 is not drawn.
    void lifecycleWithoutOutliers()
    {
        QTemporaryDir out;
        const auto r =
            runApp({QStringLiteral("figures"), QStringLiteral("--model"),
                    sample(QStringLiteral("models/backcopy-vanilla")), QStringLiteral("--rule"),
                    QStringLiteral("tau"), QStringLiteral("--tau"), QStringLiteral("1000000"),
                    QStringLiteral("--only"), QStringLiteral("an7,an9"), QStringLiteral("--format"),
                    QStringLiteral("png"), QStringLiteral("--out"), out.path()});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        const QJsonObject index = readIndex(out.path());
        const QString caption =
            figureEntry(index, QStringLiteral("an7"))[QStringLiteral("caption")].toString();
        QVERIFY2(caption.contains(QStringLiteral("no output has outlier values")), qPrintable(caption));
        const QString reason = figureEntry(index, QStringLiteral("an9"))[QStringLiteral("reason")].toString();
        QVERIFY2(reason.contains(QStringLiteral("no massive activation to follow")), qPrintable(reason));
    }

    /// Not a decoder: listed, with the reason.
    void lifecycleRefusedForAnEncoder()
    {
        QTemporaryDir out;
        const auto r = runApp({QStringLiteral("figures"), QStringLiteral("--model"),
                               sample(QStringLiteral("models/synthetic-vanilla")), QStringLiteral("--only"),
                               QStringLiteral("an7,an8,an9"), QStringLiteral("--out"), out.path()});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
        for (const QString id : {"an7", "an8", "an9"})
            QVERIFY(figureEntry(readIndex(out.path()), id)[QStringLiteral("reason")].toString().contains(
                QStringLiteral("not a decoder")));
    }

private:
    QTemporaryDir m_out;
    QString m_data;
    QJsonObject m_index;
};

QTEST_GUILESS_MAIN(TestFigureVariants)
#include "tst_figure_variants.moc"
