// `outlierlens train` and `sweep` as a user and the GUI's job runner use them: the loss goes down,
// a killed or stopped run resumes onto exactly the same curve, a checkpoint loads in `inspect`
// with the outputs training saw, and bad configurations fail with one clear line.

#include "../common/app_runner.h"
#include "../common/train_runs.h"

#include "analysis/metrics.h"
#include "analysis/recording_sink.h"
#include "common/json_util.h"
#include "io/image.h"
#include "io/safetensors.h"
#include "model/bert_network.h"
#include "model/decoder_network.h"
#include "model/precision.h"
#include "model/vit_network.h"
#include "tasks/config/train_config.h"
#include "tasks/data/canvas_data.h"
#include "tasks/data/mlm_data.h"
#include "tasks/task_common.h"
#include "text/wordpiece.h"
#include "train/run_folder.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <csignal>
#include <filesystem>
#include <fstream>

using namespace outlierlens;
using outlierlens::test::Run;
using outlierlens::test::runApp;
namespace fs = std::filesystem;

using outlierlens::test::kTrain;
using outlierlens::test::kValid;
using outlierlens::test::kVocab;
using outlierlens::test::losses;

namespace {

const QString kApp = QStringLiteral(OUTLIERLENS_BINARY_DIR "/app/outlierlens");
constexpr int kSteps = 150;

/// A tiny masked-LM run: BERT with 2 layers of 32 units on 60 kB of Wikipedia text.
nlohmann::json tinyMlm(const QString& output, int steps)
{
    return {{"task", "mlm"},     {"output", output.toStdString()},
            {"corpus", kTrain},  {"valid_corpus", kValid},
            {"vocab", kVocab},   {"preset", "bert-tiny"},
            {"hidden_size", 32}, {"num_layers", 2},
            {"num_heads", 2},    {"intermediate_size", 64},
            {"seq_length", 32},  {"batch_size", 16},
            {"steps", steps},    {"lr", 2e-3},
            {"warmup_steps", 5}, {"log_every", 1},
            {"eval_every", 20},  {"checkpoint_every", 10},
            {"eval_batches", 2}, {"threads", 1},
            {"seed", 3}};
}

QString writeConfig(const QString& path, const nlohmann::json& config)
{
    std::ofstream(path.toStdString()) << config.dump(2);
    return path;
}

nlohmann::json status(const QString& runDir)
{
    std::ifstream in((runDir + "/status.json").toStdString());
    if (!in) return nlohmann::json::object();
    try {
        return nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception&) {
        return nlohmann::json::object();
    }
}

std::string readAll(const QString& path)
{
    std::ifstream in(path.toStdString(), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// How many threads of process `pid` have neither SIGINT nor SIGTERM blocked (/proc's SigBlk mask);
/// -1 when fewer than two threads are listed (the count would prove nothing).
int threadsTakingInterrupts(qint64 pid)
{
    const std::uint64_t interrupts = (std::uint64_t(1) << (SIGINT - 1)) | (std::uint64_t(1) << (SIGTERM - 1));
    int threads = 0;
    int taking = 0;
    for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
        std::ifstream in(task.path() / "status");
        for (std::string line; std::getline(in, line);) {
            if (line.rfind("SigBlk:", 0) != 0) continue;
            ++threads;
            if ((std::stoull(line.substr(7), nullptr, 16) & interrupts) == 0) ++taking;
        }
    }
    return threads >= 2 ? taking : -1;
}

} // namespace

class TstTrain : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_dir;
    QString m_reference; // an uninterrupted run, shared by several tests

    /// A run stopped by a signal: state "stopped", a checkpoint with its optimizer state, and --resume
    /// continues it onto exactly the reference run's losses.
    void checkStoppedRunResumes(const QString& run)
    {
        const nlohmann::json s = status(run);
        QCOMPARE(s["state"].get<std::string>(), std::string("stopped"));
        QVERIFY(fs::exists((run + "/" + QString::fromStdString(s["last_checkpoint"].get<std::string>()) +
                            "/optimizer.safetensors")
                               .toStdString()));
        const Run r = runApp({"train", "--resume", "--output", run});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY(losses(run) == losses(m_reference));
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        m_reference = m_dir.path() + "/reference";
        const Run r = runApp(
            {"train", "--config", writeConfig(m_dir.path() + "/ref.json", tinyMlm(m_reference, kSteps))});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    }

    void lossGoesDownAndProgressIsJson()
    {
        const std::map<std::int64_t, double> l = losses(m_reference);
        QCOMPARE(l.size(), std::size_t(kSteps));
        double first = 0, last = 0;
        for (std::int64_t s = 1; s <= 5; ++s)
            first += l.at(s) / 5;
        for (std::int64_t s = kSteps - 4; s <= kSteps; ++s)
            last += l.at(s) / 5;
        QVERIFY2(last < first - 1.0, qPrintable(QString("loss %1 -> %2").arg(first).arg(last)));
        QCOMPARE(status(m_reference)["state"].get<std::string>(), std::string("finished"));
        QVERIFY(fs::exists((m_reference + "/final/model.safetensors").toStdString()));
        QVERIFY(fs::exists((m_reference + "/final/README.md").toStdString()));
    }

    void killedRunResumesOntoTheSameCurve()
    {
        const QString run = m_dir.path() + "/killed";
        const QString config = writeConfig(m_dir.path() + "/killed.json", tinyMlm(run, kSteps));
        QProcess p;
        p.start(kApp, {"train", "--config", config});
        QVERIFY(p.waitForStarted());
        // Kill -9 somewhere after the first checkpoint, while it is still running.
        QTRY_VERIFY_WITH_TIMEOUT(status(run).value("step", 0) >= 15 || p.state() == QProcess::NotRunning,
                                 120000);
        QVERIFY2(p.state() == QProcess::Running, "the run finished before it could be killed");
        ::kill(pid_t(p.processId()), SIGKILL);
        p.waitForFinished();
        const std::int64_t killedAt = status(run).value("step", 0);
        QVERIFY(killedAt < kSteps);
        // A kill can land in the middle of a metrics line: the torn line must not stop the resume.
        {
            std::ofstream metrics((run + "/metrics.jsonl").toStdString(), std::ios::app | std::ios::binary);
            metrics << "{\"step\": " << killedAt + 1 << ", \"lo";
        }

        const Run r = runApp({"train", "--resume", "--output", run});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const auto a = losses(m_reference), b = losses(run);
        QCOMPARE(b.size(), a.size());
        for (const auto& [step, loss] : a)
            QVERIFY2(b.at(step) == loss,
                     qPrintable(QString("step %1: %2 vs %3").arg(step).arg(b.at(step)).arg(loss)));
    }

    void bf16TrainingTracksFloat32()
    {
        // The reference run again with --precision bf16 (autocast: bf16 matrix products, float32
        // weights, softmax, LayerNorm and loss): the same curve within bf16's rounding, not the same
        // numbers (which would mean autocast did nothing).
        const QString run = m_dir.path() + "/bf16";
        const Run r =
            runApp({"train", "--config", writeConfig(m_dir.path() + "/bf16.json", tinyMlm(run, kSteps)),
                    "--precision", "bf16"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QCOMPARE(jsonutil::parseFile((run + "/run.json").toStdString())["precision"].get<std::string>(),
                 std::string("bf16"));
        const auto a = losses(m_reference), b = losses(run);
        QCOMPARE(b.size(), a.size());
        if (!cpuSupportsBf16()) {
            QVERIFY(r.err.contains("no bfloat16 instructions"));
            QVERIFY(a == b);
            return;
        }
        QVERIFY2(!r.err.contains("no bfloat16"), qPrintable(r.err));
        int differing = 0;
        double worst = 0;
        for (std::int64_t from = 1; from <= kSteps; from += 10) { // 10-step means of the loss
            double ma = 0, mb = 0;
            for (std::int64_t s = from; s < from + 10; ++s) {
                ma += a.at(s) / 10;
                mb += b.at(s) / 10;
                differing += a.at(s) != b.at(s);
            }
            worst = std::max(worst, std::abs(mb - ma) / ma);
        }
        qInfo("bf16 vs fp32: %d of %d losses differ, 10-step means within %.4f", differing, kSteps, worst);
        QVERIFY2(differing > kSteps / 2, qPrintable(QString("only %1 losses differ").arg(differing)));
        QVERIFY2(worst < 0.01, qPrintable(QString("10-step mean loss differs by %1").arg(worst)));
    }

    void bf16FallsBackInWordsWithoutTheInstructions()
    {
        // OUTLIERLENS_NO_BF16 simulates a CPU without bf16: one sentence says so, and the run is
        // exactly the float32 run.
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("OUTLIERLENS_NO_BF16", "1");
        const QString fp32 = m_dir.path() + "/short-fp32", bf16 = m_dir.path() + "/short-bf16";
        const Run a = runApp({"train", "--config", writeConfig(m_dir.path() + "/a.json", tinyMlm(fp32, 6))});
        const Run b = runApp({"train", "--config", writeConfig(m_dir.path() + "/b.json", tinyMlm(bf16, 6)),
                              "--precision", "bf16"},
                             600000, env);
        QVERIFY2(a.exitCode == 0 && b.exitCode == 0, qPrintable(a.err + b.err));
        QCOMPARE(b.err.count("no bfloat16 instructions"), 1);
        QCOMPARE(b.out.count("\"notice\""), 1);
        QVERIFY(!a.err.contains("bfloat16"));
        QVERIFY(losses(fp32) == losses(bf16));
        const Run bad = runApp({"train", "--config", writeConfig(m_dir.path() + "/c.json", tinyMlm(bf16, 6)),
                                "--precision", "fp8"});
        QVERIFY(bad.exitCode == 1 || bad.exitCode == 2);
        QVERIFY2(bad.err.contains("precision") && bad.err.contains("bf16"), qPrintable(bad.err));
    }

    void sigtermSavesAndStops()
    {
        const QString run = m_dir.path() + "/stopped";
        QProcess p;
        p.start(kApp,
                {"train", "--config", writeConfig(m_dir.path() + "/stopped.json", tinyMlm(run, kSteps))});
        QVERIFY(p.waitForStarted());
        QTRY_VERIFY_WITH_TIMEOUT(status(run).value("step", 0) >= 3 || p.state() == QProcess::NotRunning,
                                 120000);
        QVERIFY(p.state() == QProcess::Running);
        // One writer per run folder: a second trainer is refused, naming the first, and changes nothing.
        const std::string metricsBefore = readAll(run + "/metrics.jsonl");
        const Run second = runApp({"train", "--resume", "--output", run});
        QCOMPARE(second.exitCode, 1);
        QVERIFY2(second.err.contains(QStringLiteral("another training process (pid %1)").arg(p.processId())),
                 qPrintable(second.err));
        QVERIFY(readAll(run + "/metrics.jsonl").rfind(metricsBefore, 0) == 0); // only appended to
        QCOMPARE(runFolderOwner(run.toStdString()), std::int64_t(p.processId()));
        // Signals reach one thread only, never a computing one: oneDNN's sgemm corrupts the heap when
        // a signal handler runs on the thread inside it (docs/performance.md).
        QCOMPARE(threadsTakingInterrupts(p.processId()), 1);
        p.terminate();
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 128 + SIGTERM);                        // as shells report it, not Ctrl-C's 130
        QCOMPARE(runFolderOwner(run.toStdString()), std::int64_t(0)); // released with the process
        checkStoppedRunResumes(run);
    }

    /// Issue #41.3: two SIGTERMs ~50 ms apart (what timeout(1) and a cgroup stop send: to the process and to
    /// its group) still leave a checkpoint and the "stopped at step N" line, and the run resumes onto the
    /// reference curve.
    void doubleSigtermStillSavesACheckpoint()
    {
        const QString run = m_dir.path() + "/twice";
        QProcess p;
        p.start(kApp, {"train", "--config", writeConfig(m_dir.path() + "/twice.json", tinyMlm(run, kSteps))});
        QVERIFY(p.waitForStarted());
        QTRY_VERIFY_WITH_TIMEOUT(status(run).value("step", 0) >= 3 || p.state() == QProcess::NotRunning,
                                 120000);
        QVERIFY(p.state() == QProcess::Running);
        ::kill(pid_t(p.processId()), SIGTERM);
        QThread::msleep(50);
        ::kill(pid_t(p.processId()), SIGTERM);
        QVERIFY(p.waitForFinished(60000));
        const QString err = QString::fromUtf8(p.readAllStandardError());
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 128 + SIGTERM);
        QVERIFY2(err.contains(QStringLiteral("stopped at step")), qPrintable(err));
        checkStoppedRunResumes(run);
    }

    /// Issue #41.3: a run killed before its first checkpoint starts over on --resume, and its metrics hold
    /// the step-0 evaluation once, not once per start.
    void resumeFromZeroWritesTheFirstEvaluationOnce()
    {
        const QString run = m_dir.path() + "/from-zero";
        nlohmann::json config = tinyMlm(run, kSteps);
        config["checkpoint_every"] = kSteps; // no checkpoint before the end
        QProcess p;
        p.start(kApp, {"train", "--config", writeConfig(m_dir.path() + "/from-zero.json", config)});
        QVERIFY(p.waitForStarted());
        QTRY_VERIFY_WITH_TIMEOUT(status(run).value("step", 0) >= 5 || p.state() == QProcess::NotRunning,
                                 120000);
        QVERIFY2(p.state() == QProcess::Running, "the run finished before it could be killed");
        ::kill(pid_t(p.processId()), SIGKILL);
        p.waitForFinished();
        const Run r = runApp({"train", "--resume", "--output", run});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        int stepZeroEvaluations = 0;
        std::ifstream in((run + "/metrics.jsonl").toStdString());
        for (std::string line; std::getline(in, line);) {
            const nlohmann::json j = nlohmann::json::parse(line);
            stepZeroEvaluations += j.value("type", "") == "eval" && j.value("step", -1) == 0;
        }
        QCOMPARE(stepZeroEvaluations, 1);
        QVERIFY(losses(run) == losses(m_reference));
    }

    void checkpointLoadsWithTheOutputsTrainingSaw()
    {
        // The final evaluation recorded per-layer max inf norms of the probe batch (the first
        // eight held-out sequences); the saved model, loaded as `inspect` loads it, must give them.
        nlohmann::json finalEval;
        std::ifstream in((m_reference + "/metrics.jsonl").toStdString());
        for (std::string line; std::getline(in, line);) {
            const nlohmann::json j = nlohmann::json::parse(line);
            if (j.value("type", "") == "eval") finalEval = j;
        }
        QCOMPARE(finalEval["step"].get<int>(), kSteps);
        BertNetwork net = BertNetwork::load((m_reference + "/final").toStdString());
        const BertTokenizer tokenizer = BertTokenizer::fromVocabFile(kVocab);
        const torch::Tensor ids =
            PackedCorpus::build(kValid, tokenizer, 32).sequences({0, 1, 2, 3, 4, 5, 6, 7});
        RecordingSink sink;
        c10::InferenceMode guard;
        net.forward(ids, torch::zeros_like(ids), torch::ones_like(ids), &sink);
        const auto expected = finalEval["max_inf_norm"]["ffn_out"].get<std::vector<double>>();
        for (int l = 0; l < 2; ++l) {
            double mean = 0;
            for (int b = 0; b < 8; ++b)
                mean += maxInfNorm(sink.at("layer" + std::to_string(l) + "/ffn_out")[b]) / 8;
            QVERIFY2(
                std::abs(mean - expected[std::size_t(l)]) < 1e-6 * std::max(1.0, mean),
                qPrintable(QString("layer %1: %2 vs %3").arg(l).arg(mean).arg(expected[std::size_t(l)])));
        }
        const Run r =
            runApp({"inspect", "--model", m_reference + "/final", "--text", "The city is [MASK] large."});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY(r.out.contains("[MASK] at 4:"));
    }

    void badConfigs_data()
    {
        QTest::addColumn<QString>("key");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("mustMention");
        QTest::newRow("unknown key") << "learning_rate"
                                     << "0.1"
                                     << "learning_rate";
        QTest::newRow("missing corpus") << "corpus"
                                        << "\"/nonexistent/corpus.txt\""
                                        << "/nonexistent/corpus.txt";
        QTest::newRow("corpus too small") << "corpus"
                                          << "\"" OUTLIERLENS_TEST_DATA "/train/too_small.txt\""
                                          << "too_small.txt";
        QTest::newRow("bad steps") << "steps"
                                   << "0"
                                   << "steps";
        QTest::newRow("bad gate") << "gate"
                                  << "\"conv\""
                                  << "conv";
        QTest::newRow("bad preset") << "preset"
                                    << "\"bert-gigantic\""
                                    << "bert-gigantic";
    }
    void badConfigs()
    {
        QFETCH(QString, key);
        QFETCH(QString, value);
        QFETCH(QString, mustMention);
        nlohmann::json config = tinyMlm(m_dir.path() + "/bad-" + key, 5);
        config[key.toStdString()] = nlohmann::json::parse(value.toStdString());
        const Run r = runApp({"train", "--config", writeConfig(m_dir.path() + "/bad.json", config)});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.startsWith("outlierlens train: error: ") && r.err.count('\n') == 1, qPrintable(r.err));
        QVERIFY2(r.err.contains(mustMention), qPrintable(r.err));
        // Issue #41.4: a missing input is found before the run folder is made (no run.json and lock left).
        if (mustMention.contains(QStringLiteral("nonexistent")))
            QVERIFY(!QFileInfo::exists(m_dir.path() + "/bad-" + key));
    }

    /// Issue #41.4: a checkpoint that cannot be written (here a file-size limit, as a full disk) is one line
    /// naming the file and the reason, and leaves no half-written checkpoints/step-....tmp/ behind.
    void checkpointOnAFullDiskLeavesNoTemporaryFolder()
    {
        if (!QFileInfo::exists(QStringLiteral("/usr/bin/prlimit"))) QSKIP("needs prlimit (util-linux)");
        const QString run = m_dir.path() + "/full-disk";
        QProcess p;
        p.start(QStringLiteral("/usr/bin/prlimit"),
                {"--fsize=65536", "--", kApp, "train", "--config",
                 writeConfig(m_dir.path() + "/full-disk.json", tinyMlm(run, 20))});
        QVERIFY(p.waitForFinished(120000));
        const QString err = QString::fromUtf8(p.readAllStandardError());
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 1);
        QVERIFY2(err.contains(QStringLiteral("cannot write: File too large")), qPrintable(err));
        QVERIFY(QDir(run + "/checkpoints").entryList({QStringLiteral("*.tmp")}, QDir::Dirs).isEmpty());
    }

    /// Issue #41.2: a model to continue whose weights hold NaN is refused by name (it was evaluated, NaN,
    /// then stopped as 'diverged' at the first step).
    void nanInitIsRefusedByName()
    {
        QTemporaryDir model;
        for (const auto& entry : fs::directory_iterator(OUTLIERLENS_TEST_DATA "/decoders/gpt2-seed0/hf"))
            if (entry.path().filename() != "pytorch_model.bin")
                fs::copy_file(entry.path(), fs::path(model.path().toStdString()) / entry.path().filename());
        StateDict weights =
            readSafetensors(OUTLIERLENS_TEST_DATA "/decoders/gpt2-seed0/hf/model.safetensors");
        weights.at("transformer.ln_f.weight").fill_(std::nan(""));
        writeSafetensors((model.path() + "/model.safetensors").toStdString(), weights);
        const Run r =
            runApp({"train", "--task", "clm", "--init", model.path(), "--corpus",
                    QString::fromStdString(kTrain), "--output", m_dir.path() + "/nan-init", "--steps", "2",
                    "--warmup-steps", "0", "--batch-size", "2", "--seq-length", "32", "--threads", "1"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(model.path() + ": the model's tensor 'transformer.ln_f.weight' holds 64 NaN"),
                 qPrintable(r.err));
    }

    /// Issue #41.6: `train --output` naming a model folder is refused before anything is written into it.
    void runFilesNeverLandInAModelFolder()
    {
        QTemporaryDir model;
        QVERIFY(QFile::copy(QStringLiteral(OUTLIERLENS_TEST_DATA "/bert/hf/config.json"),
                            model.path() + "/config.json"));
        const Run r = runApp(
            {"train", "--config", writeConfig(m_dir.path() + "/into-model.json", tinyMlm(model.path(), 5))});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(model.path() + ": holds a model (config.json)"), qPrintable(r.err));
        QCOMPARE(QDir(model.path()).entryList(QDir::NoDotAndDotDot | QDir::AllEntries),
                 QStringList{"config.json"});
    }

    void divergenceStopsAndSaysSo()
    {
        nlohmann::json config = tinyMlm(m_dir.path() + "/diverged", 40);
        config["lr"] = 1e30;
        config["grad_clip"] = 0.0;
        const Run r = runApp({"train", "--config", writeConfig(m_dir.path() + "/diverged.json", config)});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("NaN") || r.err.contains("infinite"), qPrintable(r.err));
        QCOMPARE(status(m_dir.path() + "/diverged")["state"].get<std::string>(), std::string("diverged"));
    }

    /// Issue #41.5: a grid of 10^5 x 10^3 points (a 690 kB file) ran out of memory with "std::bad_alloc";
    /// the grid's size is checked first and the message names the file and the limit.
    void sweepGridHasALimit()
    {
        nlohmann::json base = tinyMlm("unused", 8);
        base.erase("output");
        std::vector<double> gammas, alphas;
        for (int i = 0; i < 101; ++i)
            gammas.push_back(-0.001 * (i + 1)), alphas.push_back(i + 1);
        const QString file = writeConfig(m_dir.path() + "/huge-sweep.json",
                                         {{"output", (m_dir.path() + "/huge-sweep").toStdString()},
                                          {"base", base},
                                          {"grid", {{"gamma", gammas}, {"zeta", alphas}}}});
        const Run r = runApp({"sweep", "--config", file});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(file + ": the grid has more than 10000 points"), qPrintable(r.err));
        QVERIFY(!QFileInfo::exists(m_dir.path() + "/huge-sweep"));
    }

    void sweepWritesASummary()
    {
        const QString output = m_dir.path() + "/sweep";
        nlohmann::json base = tinyMlm("unused", 8);
        base.erase("output");
        const nlohmann::json sweep = {{"output", output.toStdString()},
                                      {"base", base},
                                      {"grid", {{"softmax", {"clipped"}}, {"gamma", {-0.05, -0.1}}}},
                                      {"baseline", {{"softmax", "vanilla"}}}};
        const Run r = runApp({"sweep", "--config", writeConfig(m_dir.path() + "/sweep.json", sweep)});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        std::ifstream in((output + "/summary.csv").toStdString());
        std::vector<std::string> rows;
        for (std::string line; std::getline(in, line);)
            rows.push_back(line);
        QCOMPARE(rows.size(), std::size_t(4)); // header, baseline, two points
        QVERIFY(rows[1].rfind("baseline,finished,8,perplexity,", 0) == 0);
        QVERIFY2(rows[2].rfind("\"gamma=-0.05,softmax=clipped\",finished,8,perplexity,", 0) == 0,
                 rows[2].c_str());
        // Every row has the header's 8 fields (commas inside quotes do not count).
        for (const std::string& row : rows) {
            int fields = 1;
            bool quoted = false;
            for (char c : row) {
                if (c == '"') quoted = !quoted;
                if (c == ',' && !quoted) ++fields;
            }
            QVERIFY2(fields == 8, row.c_str());
        }
        // Running it again does not train again.
        const Run again = runApp({"sweep", "--config", m_dir.path() + "/sweep.json"});
        QVERIFY(again.exitCode == 0 && !again.out.contains("\"type\":\"progress\""));
    }

    void listPresets()
    {
        const Run r = runApp({"train", "--list-presets"});
        QCOMPARE(r.exitCode, 0);
        for (const char* name :
             {"demo-vit-fmnist", "demo-bert-mlm", "demo-bert-nli", "paper-bert-base-mlm", "paper-vit-s16"})
            QVERIFY2(r.out.contains(name), name);
    }

    /// The canvas task (ViT, tasks/data/canvas_data.h): a run stopped at a checkpoint and resumed gives the
    /// uninterrupted run's losses (the reconstruction head is saved and loaded with the ViT); the model it
    /// writes opens as a plain ViT, and on the probe canvases it gives the per-layer max inf norm that the
    /// final evaluation recorded; `inspect` runs it on an image.
    void canvasTaskResumesAndSavesAPlainVit()
    {
        const auto config = [&](const QString& output, int steps) {
            return QStringList{"train",
                               "--from-preset",
                               "demo-vit-canvas",
                               "--output",
                               output,
                               "--steps",
                               QString::number(steps),
                               "--batch-size",
                               "8",
                               "--hidden-size",
                               "32",
                               "--num-layers",
                               "2",
                               "--num-heads",
                               "2",
                               "--intermediate-size",
                               "64",
                               "--warmup-steps",
                               "2",
                               "--log-every",
                               "1",
                               "--eval-every",
                               "3",
                               "--checkpoint-every",
                               "3",
                               "--eval-batches",
                               "1",
                               "--threads",
                               "1",
                               "--precision",
                               "fp32"};
        };
        const QString whole = m_dir.path() + "/canvas", parts = m_dir.path() + "/canvas-parts";
        const Run a = runApp(config(whole, 6));
        QVERIFY2(a.exitCode == 0, qPrintable(a.err));
        // The same run, as if killed after its step-3 checkpoint: its final model removed.
        const Run b = runApp(config(parts, 6));
        QVERIFY2(b.exitCode == 0, qPrintable(b.err));
        QVERIFY(fs::remove_all((parts + "/final").toStdString()) > 0);
        QVERIFY(fs::exists(
            (parts + "/checkpoints/step-000000003/reconstruction_head.safetensors").toStdString()));
        const Run c = runApp(QStringList{"train", "--resume", "--output", parts});
        QVERIFY2(c.exitCode == 0, qPrintable(c.err));
        QCOMPARE(losses(parts).size(), std::size_t(6));
        QVERIFY(losses(parts) == losses(whole));

        const std::string final = (whole + "/final").toStdString();
        QVERIFY(fs::exists(final + "/reconstruction_head.safetensors"));
        VitNetwork net = VitNetwork::load(final); // strict: nothing but the ViT in model.safetensors
        QCOMPARE(net.config().imageSize, 56);
        QCOMPARE(net.config().patchSize, 7);
        nlohmann::json finalEval;
        std::ifstream in((whole + "/metrics.jsonl").toStdString());
        for (std::string line; std::getline(in, line);) {
            const nlohmann::json j = nlohmann::json::parse(line);
            if (j.value("type", "") == "eval") finalEval = j;
        }
        QCOMPARE(finalEval["step"].get<int>(), 6);
        TrainConfig tc = presetConfig("demo-vit-canvas");
        at::Generator gen = evaluationGenerator(tc);
        const CanvasBatch probe = canvasBatch(ImageDataset::fashionMnist(kDebianFashionMnistDir, false),
                                              {0, 1, 2, 3, 4, 5, 6, 7}, CanvasOptions(), false, gen);
        RecordingSink sink;
        {
            c10::InferenceMode guard;
            net.forward(probe.pixels, &sink);
        }
        const auto expected = finalEval["max_inf_norm"]["out"].get<std::vector<double>>();
        for (int l = 0; l < 2; ++l) {
            double mean = 0;
            for (int i = 0; i < 8; ++i)
                mean += maxInfNorm(sink.at("layer" + std::to_string(l) + "/out")[i]) / 8;
            QVERIFY2(
                std::abs(mean - expected[std::size_t(l)]) < 1e-5 * std::max(1.0, mean),
                qPrintable(QString("layer %1: %2 vs %3").arg(l).arg(mean).arg(expected[std::size_t(l)])));
        }
        // The model's own inputs (sample_images/): 16 held-out canvases, the first eight the probe's, read
        // back exactly (PNG is lossless); inspect runs one.
        const QStringList samples =
            QDir(whole + "/final/sample_images").entryList({"*.png"}, QDir::Files, QDir::Name);
        QCOMPARE(samples.size(), 16);
        QVERIFY2(samples.first().startsWith(QStringLiteral("01-")), qPrintable(samples.first()));
        for (int i = 0; i < 8; ++i) {
            const RgbImage expected = canvasImage(probe, i);
            const RgbImage read =
                decodeImageFile((whole + "/final/sample_images/" + samples[i]).toStdString());
            QVERIFY(read.width == 56 && read.pixels == expected.pixels);
        }
        const Run r = runApp({"inspect", "--model", whole + "/final", "--image",
                              whole + "/final/sample_images/" + samples.first()});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    }

    void causalLmRunsEndToEnd()
    {
        // task clm with the default tokenizer (sample_data/tokenizers/wiki-bpe-1k), flags only.
        const QString run = m_dir.path() + "/clm";
        const Run r = runApp({"train",
                              "--task",
                              "clm",
                              "--output",
                              run,
                              "--corpus",
                              QString::fromStdString(kTrain),
                              "--valid-corpus",
                              QString::fromStdString(kValid),
                              "--preset",
                              "gpt2-tiny",
                              "--seq-length",
                              "32",
                              "--batch-size",
                              "8",
                              "--steps",
                              "8",
                              "--warmup-steps",
                              "2",
                              "--lr",
                              "3e-3",
                              "--log-every",
                              "1",
                              "--eval-every",
                              "4",
                              "--eval-batches",
                              "2",
                              "--threads",
                              "1"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY(r.out.contains("\"perplexity\""));
        const std::map<std::int64_t, double> l = losses(run);
        QCOMPARE(l.size(), std::size_t(8));
        QVERIFY2(l.at(8) < l.at(1), qPrintable(QString("loss %1 -> %2").arg(l.at(1)).arg(l.at(8))));
        QCOMPARE(status(run)["state"].get<std::string>(), std::string("finished"));
        const std::string final = (run + "/final").toStdString();
        QVERIFY(fs::exists(final + "/vocab.json") && fs::exists(final + "/merges.txt"));
        QVERIFY(fs::exists(final + "/README.md"));
        DecoderNetwork net = DecoderNetwork::load(final);
        QVERIFY(net.config().arch == DecoderArch::Gpt2);
        QCOMPARE(net.config().vocabSize, 1257);
        c10::InferenceMode guard;
        const torch::Tensor logits = net.forward(torch::arange(10, torch::kLong).view({1, 10})).logits;
        QCOMPARE(logits.size(2), std::int64_t(1257));
        QVERIFY(torch::isfinite(logits).all().item<bool>());
    }
};

QTEST_GUILESS_MAIN(TstTrain)
#include "tst_train.moc"
