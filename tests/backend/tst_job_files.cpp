// The files jobs leave and the app reads back, each with one backend reader and writer: a run
// folder's metrics.jsonl (RunFolder::readMetrics), progress lines (train/job_progress.h) and a
// sweep's summary.json / summary.csv (train/sweep_summary.h). Expected values are written out here
// by hand, and files are parsed here with plain loops, not with the code under test.

#include "common/error.h"
#include "train/job_progress.h"
#include "train/run_folder.h"
#include "train/sweep_summary.h"

#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace outlierlens;

namespace {

std::string readAll(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

/// RFC 4180 fields of one CSV line, written out plainly.
std::vector<std::string> csvFields(const std::string& line)
{
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
            fields.back() += '"';
            ++i;
        } else if (c == '"') {
            quoted = !quoted;
        } else if (c == ',' && !quoted) {
            fields.emplace_back();
        } else {
            fields.back() += c;
        }
    }
    return fields;
}

/// Same double, NaN equal to NaN.
bool same(double a, double b)
{
    return (std::isnan(a) && std::isnan(b)) || a == b;
}

} // namespace

class TstJobFiles : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void metricsLinesOfARunFolder()
    {
        QTemporaryDir dir;
        const RunFolder run(dir.path().toStdString());
        QVERIFY(run.readMetrics().empty()); // no file yet
        // What the trainer writes: an evaluation at step 0 (loss NaN, written as null), training
        // lines, an evaluation; then a line torn by a kill.
        std::ofstream(run.path("metrics.jsonl"))
            << R"({"eval":{"perplexity":812.5},"kurtosis":{"ffn_out":[3.5,40.25],"out":[3.0,null]},)"
               R"("loss":null,"lr":0.0,"max_inf_norm":{"ffn_out":[1.5,2.5]},"step":0,"type":"eval"})"
            << "\n"
            << R"({"loss":6.5,"lr":0.001,"step":10})"
            << "\n"
            << R"({"checkpoint":"ignored: neither training nor evaluation","step":10})"
            << "\n"
            << R"({"loss":5.25,"lr":0.002,"step":20})"
            << "\n"
            << R"({"eval":{"accuracy":0.75},"kurtosis":{},"loss":5.0,"lr":0.002,"max_inf_norm":{"out":[9.0]},)"
               R"("step":20,"type":"eval"})"
            << "\n"
            << R"({"loss":4.)";
        const std::vector<MetricsLine> lines = run.readMetrics();
        QCOMPARE(lines.size(), std::size_t(4));
        QVERIFY(lines[0].eval);
        QCOMPARE(lines[0].step, std::int64_t(0));
        QVERIFY(std::isnan(lines[0].loss));
        QCOMPARE(lines[0].metricName, std::string("perplexity"));
        QCOMPARE(lines[0].metric, 812.5);
        QCOMPARE(lines[0].maxInfNorm.at("ffn_out"), (std::vector<double>{1.5, 2.5}));
        QCOMPARE(lines[0].kurtosis.at("ffn_out"), (std::vector<double>{3.5, 40.25}));
        QCOMPARE(lines[0].kurtosis.at("out").size(), std::size_t(2));
        QVERIFY(std::isnan(lines[0].kurtosis.at("out")[1]));
        QVERIFY(!lines[1].eval);
        QCOMPARE(lines[1].step, std::int64_t(10));
        QCOMPARE(lines[1].loss, 6.5);
        QCOMPARE(lines[1].lr, 0.001);
        QCOMPARE(lines[2].step, std::int64_t(20));
        QCOMPARE(lines[2].loss, 5.25);
        QVERIFY(lines[3].eval);
        QCOMPARE(lines[3].metricName, std::string("accuracy"));
        QCOMPARE(lines[3].metric, 0.75);
        QVERIFY(lines[3].kurtosis.empty());
        QCOMPARE(lines[3].maxInfNorm.at("out"), std::vector<double>{9.0});
    }

    void progressLines()
    {
        // A line as the trainer prints it (keys sorted), and one as progressJsonLine writes it.
        const auto train = parseProgressLine(
            R"({"elapsed":12.5,"eta":37.5,"loss":2.25,"lr":0.001,"step":100,"total":400,"type":"progress"})");
        QVERIFY(train.has_value());
        QCOMPARE(train->step, std::int64_t(100));
        QCOMPARE(train->total, std::int64_t(400));
        QCOMPARE(train->elapsed, 12.5);
        QCOMPARE(train->eta, 37.5);
        JobProgress p;
        p.step = 40;
        p.total = 1000;
        p.elapsed = 2.0;
        const std::string written = progressJsonLine(p, "pairs");
        QCOMPARE(written,
                 std::string(R"({"elapsed":2.0,"step":40,"total":1000,"type":"progress","unit":"pairs"})"));
        const auto read = parseProgressLine(written);
        QVERIFY(read && read->step == 40 && read->total == 1000 && read->elapsed == 2.0 &&
                std::isnan(read->eta));
        // Not progress lines.
        for (const char* line :
             {R"({"step":100,"total":400,"type":"eval"})", R"({"step":1.5,"total":4,"type":"progress"})",
              R"({"total":4,"type":"progress"})", "{\"step\":1,\"total\":4,\"type\":\"progr",
              "stats: 40/1000 pairs (4%), 11.8/s, ETA 1m23s", "wrote stats.h5: 10 inputs", ""})
            QVERIFY2(!parseProgressLine(line).has_value(), line);

        // The last progress line of a log, past other lines; none in a log without one.
        QTemporaryDir dir;
        const std::string log = dir.path().toStdString() + "/job.log";
        QVERIFY(!lastProgressIn(log).has_value()); // no file
        {
            std::ofstream out(log);
            out << R"({"step":1,"total":9,"type":"progress"})"
                << "\n";
            for (int i = 0; i < 200; ++i) // more than the 8 KiB read first
                out << "{\"type\":\"eval\",\"note\":\"" << std::string(100, 'x') << "\"}\n";
            out << "wrote out.h5\n";
        }
        const auto last = lastProgressIn(log);
        QVERIFY(last && last->step == 1 && last->total == 9);
        std::ofstream(log, std::ios::app) << R"({"step":7,"total":9,"type":"progress","eta":1.5})"
                                          << "\r\n"
                                          << "wrote out.h5\n";
        QCOMPARE(lastProgressIn(log)->step, std::int64_t(7));
        std::ofstream(log) << "only text\n";
        QVERIFY(!lastProgressIn(log).has_value());
    }

    void sweepSummaryRoundTrip()
    {
        std::vector<SweepSummaryRow> rows(4);
        rows[0].name = "baseline";
        rows[0].settings = {{"softmax", "vanilla"}};
        rows[0].state = "finished";
        rows[0].step = 300;
        rows[0].metricName = "perplexity";
        rows[0].metric = 20.0;
        rows[0].maxInfNorm = 85.5;
        rows[0].avgKurtosis = 1234.25;
        rows[1].name = "alpha=4,max_seq_length=64"; // a comma: quoted in the CSV
        rows[1].settings = {{"alpha", "4"}, {"max_seq_length", "64"}};
        rows[1].state = "finished";
        rows[1].step = 300;
        rows[1].metricName = "perplexity";
        rows[1].metric = 12.0;
        rows[1].maxInfNorm = 20.125;
        rows[1].avgKurtosis = 9.5;
        rows[2].name = "odd \"name\"";
        rows[2].settings = {{"gate", "linear"}};
        rows[2].state = "missing"; // never ran: every number NaN
        rows[3].name = "accuracy point";
        rows[3].state = "stopped";
        rows[3].step = 100;
        rows[3].metricName = "accuracy";
        rows[3].metric = 0.5;
        setRelativeMetrics(rows);
        // Against the first row: the log-perplexity ratio, the plain ratio for other metrics.
        QCOMPARE(rows[0].relativeMetric, 1.0);
        QCOMPARE(rows[1].relativeMetric, std::log(12.0) / std::log(20.0));
        QVERIFY(std::isnan(rows[2].relativeMetric));
        QCOMPARE(rows[3].relativeMetric, 0.5 / 20.0);

        QTemporaryDir dir;
        const std::string folder = dir.path().toStdString();
        writeSweepSummary(folder, rows);
        for (const std::string& given : {folder, folder + "/summary.json"}) {
            const std::vector<SweepSummaryRow> back = readSweepSummary(given);
            QCOMPARE(back.size(), rows.size());
            for (std::size_t i = 0; i < rows.size(); ++i) {
                QCOMPARE(back[i].name, rows[i].name);
                QCOMPARE(back[i].state, rows[i].state);
                QCOMPARE(back[i].step, rows[i].step);
                QCOMPARE(back[i].metricName, rows[i].metricName);
                QVERIFY(same(back[i].metric, rows[i].metric));
                QVERIFY(same(back[i].relativeMetric, rows[i].relativeMetric));
                QVERIFY(same(back[i].maxInfNorm, rows[i].maxInfNorm));
                QVERIFY(same(back[i].avgKurtosis, rows[i].avgKurtosis));
                QCOMPARE(back[i].settings, rows[i].settings); // already in key order
            }
        }
        // NaN is written as null (JSON has no NaN).
        QVERIFY(readAll(folder + "/summary.json").find("\"metric\": null") != std::string::npos);

        // The CSV: the header and one row a point, fields as written.
        std::istringstream csv(readAll(folder + "/summary.csv"));
        std::vector<std::vector<std::string>> table;
        for (std::string line; std::getline(csv, line);)
            table.push_back(csvFields(line));
        QCOMPARE(table.size(), rows.size() + 1);
        QCOMPARE(table[0], (std::vector<std::string>{"name", "state", "step", "metric_name", "metric",
                                                     "relative_metric", "max_inf_norm", "avg_kurtosis"}));
        QCOMPARE(table[2], (std::vector<std::string>{"alpha=4,max_seq_length=64", "finished", "300",
                                                     "perplexity", "12", "0.829482", "20.125", "9.5"}));
        QCOMPARE(table[3][0], std::string("odd \"name\""));
        QCOMPARE(table[3][4], std::string("nan"));
        QCOMPARE(table[4][5], std::string("0.025"));
    }

    void sweepSummaryErrorsNameTheFile()
    {
        QTemporaryDir dir;
        const std::string path = dir.path().toStdString() + "/summary.json";
        const auto error = [](const std::string& p) -> std::string {
            try {
                readSweepSummary(p);
            } catch (const Error& e) {
                return e.what();
            }
            return "no error";
        };
        QVERIFY(error(dir.path().toStdString()).find("summary.json: cannot open") != std::string::npos);
        std::ofstream(path) << R"({"name": "not an array"})";
        QVERIFY(error(path).find(path + ": not a sweep summary") != std::string::npos);
        std::ofstream(path) << R"([{"name": "a"}, 3])";
        QVERIFY(error(path).find("point 2 is not a JSON object") != std::string::npos);
        std::ofstream(path) << R"([{"name": )";
        QVERIFY(error(path).find("malformed JSON") != std::string::npos);
        // Keys it does not know are settings; a number keeps its JSON text.
        std::ofstream(path) << R"([{"name": "p", "metric": 2.5, "alpha": 4, "softmax": "clipped"}])";
        const std::vector<SweepSummaryRow> rows = readSweepSummary(path);
        QCOMPARE(rows.size(), std::size_t(1));
        QCOMPARE(rows[0].metric, 2.5);
        QVERIFY(std::isnan(rows[0].maxInfNorm));
        QCOMPARE(rows[0].settings,
                 (std::vector<std::pair<std::string, std::string>>{{"alpha", "4"}, {"softmax", "clipped"}}));
    }
};

QTEST_APPLESS_MAIN(TstJobFiles)
#include "tst_job_files.moc"
