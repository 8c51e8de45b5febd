// An et al.'s Figures 10 and 11 from `outlierlens figures --compare` as a user makes them: one panel per
// trained attention variant, each number against what other commands give for that model alone (`inspect`
// for Figure 10's |h|, `stats` for Figure 11's per-layer magnitudes), and the refusals.

#include "../common/app_runner.h"
#include "../common/csv_rows.h"

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
#include <map>

using namespace outlierlens;
using outlierlens::test::readCsvRows;
using outlierlens::test::runApp;

namespace {

QString sample(const QString& relative)
{
    return QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/") + relative;
}

QJsonObject readIndex(const QString& dir)
{
    QFile f(dir + QStringLiteral("/index.json"));
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

QJsonObject figureOf(const QJsonObject& index, const QString& id)
{
    for (const auto& f : index[QStringLiteral("figures")].toArray())
        if (f.toObject()[QStringLiteral("id")].toString() == id) return f.toObject();
    return {};
}

bool notBlank(const QString& path)
{
    const QImage image(path);
    if (image.isNull() || image.width() < 100 || image.height() < 100) return false;
    const QRgb first = image.pixel(0, 0);
    int other = 0;
    for (int y = 0; y < image.height(); y += 5)
        for (int x = 0; x < image.width(); x += 5)
            other += image.pixel(x, y) != first ? 1 : 0;
    return other > 50;
}

bool near(double a, double b, double relative)
{
    return std::abs(a - b) <= relative * std::max(1.0, std::max(std::abs(a), std::abs(b)));
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
        const QJsonObject f = figureOf(m_index, QStringLiteral("an10"));
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
        const QJsonObject f = figureOf(m_index, QStringLiteral("an11"));
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
                const QString reason = figureOf(index, id)[QStringLiteral("reason")].toString();
                QVERIFY2(reason.contains(c.reason), qPrintable(id + QStringLiteral(": ") + reason));
                QVERIFY(
                    !QFile::exists(out.path() + QStringLiteral("/figure-") + id + QStringLiteral(".png")));
            }
        }
    }

private:
    QTemporaryDir m_out;
    QString m_data;
    QJsonObject m_index;
};

QTEST_GUILESS_MAIN(TestFigureVariants)
#include "tst_figure_variants.moc"
