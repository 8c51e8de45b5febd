// `outlierlens train --nproc-per-node 2` on loopback: two processes sharing each batch train the same
// model as one process with the same global batch (losses and final weights within 1e-5 relative),
// a group stopped by SIGTERM resumes onto the same curve, and a group that loses a rank, or never
// gets all of them, ends with an error naming the rank within --dist-timeout instead of hanging.
//
// Dropout is 0: each rank draws dropout masks for its own rows from the step's generator, so with
// dropout the masks (not the samples) differ from a one-process run and the curves only agree
// statistically. The test's runs are tiny (about a second each) so CI can afford them.

#include "../common/app_runner.h"
#include "../common/train_runs.h"

#include "io/safetensors.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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
constexpr double kTolerance = 1e-5;

/// BERT masked LM with 2 layers of 32 units: ranks see different numbers of masked tokens, so this
/// checks that each rank's loss is its share of the whole batch's mean.
nlohmann::json tinyMlm(int steps)
{
    return {{"task", "mlm"},     {"corpus", kTrain},      {"valid_corpus", kValid},
            {"vocab", kVocab},   {"preset", "bert-tiny"}, {"hidden_size", 32},
            {"num_layers", 2},   {"num_heads", 2},        {"intermediate_size", 64},
            {"seq_length", 32},  {"batch_size", 16},      {"steps", steps},
            {"lr", 2e-3},        {"warmup_steps", 5},     {"dropout", 0.0},
            {"log_every", 1},    {"eval_every", steps},   {"checkpoint_every", 1000},
            {"eval_batches", 2}, {"threads", 1},          {"seed", 3}};
}

/// The demo-backcopy decoder (OPT shape, fresh bigram-backcopy sequences every step), shrunk.
nlohmann::json tinyBackcopy(int steps)
{
    return {{"task", "clm"},
            {"clm_data", "bigram-backcopy"},
            {"corpus", OUTLIERLENS_SOURCE_DIR "/sample_data/text/wiki_en_train.txt"},
            {"tokenizer", OUTLIERLENS_SOURCE_DIR "/sample_data/tokenizers/bytes"},
            {"preset", "opt-tiny"},
            {"hidden_size", 32},
            {"num_layers", 1},
            {"num_heads", 2},
            {"intermediate_size", 64},
            {"seq_length", 32},
            {"batch_size", 16},
            {"steps", steps},
            {"lr", 1e-3},
            {"warmup_steps", 5},
            {"log_every", 1},
            {"eval_every", steps},
            {"checkpoint_every", 1000},
            {"eval_batches", 2},
            {"threads", 1},
            {"seed", 5}};
}

QString writeConfig(const QString& path, nlohmann::json config, const QString& output)
{
    config["output"] = output.toStdString();
    std::ofstream(path.toStdString()) << config.dump(2);
    return path;
}

double relativeDifference(double a, double b)
{
    return std::abs(a - b) / std::max(std::abs(b), 1e-12);
}

/// A TCP port nobody listens on right now (bound and released), for a rendezvous that never completes.
int unusedPort()
{
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t length = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
    ::close(fd);
    return ntohs(addr.sin_port);
}

/// The pid of the worker with OUTLIERLENS_RANK=rank among the children of `launcher`, or 0.
pid_t workerPid(qint64 launcher, int rank)
{
    const std::string wanted = "OUTLIERLENS_RANK=" + std::to_string(rank);
    for (const auto& entry : fs::directory_iterator("/proc")) {
        const std::string name = entry.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream stat(entry.path() / "stat");
        std::string text((std::istreambuf_iterator<char>(stat)), {});
        const std::size_t close = text.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream rest(text.substr(close + 2));
        std::string state;
        long ppid = 0;
        rest >> state >> ppid;
        if (ppid != launcher) continue;
        std::ifstream environ(entry.path() / "environ");
        std::string env((std::istreambuf_iterator<char>(environ)), {});
        std::size_t at = 0;
        while (at < env.size()) {
            const std::size_t end = env.find('\0', at);
            if (env.compare(at, (end == std::string::npos ? env.size() : end) - at, wanted) == 0)
                return pid_t(std::stol(name));
            if (end == std::string::npos) break;
            at = end + 1;
        }
    }
    return 0;
}

/// The final held-out metric (perplexity) of a run.
double finalEval(const QString& runDir)
{
    std::ifstream in((runDir + "/metrics.jsonl").toStdString());
    std::string line;
    double value = 0;
    while (std::getline(in, line)) {
        const nlohmann::json j = nlohmann::json::parse(line);
        if (j.value("type", "") == "eval") value = j["eval"].begin().value().get<double>();
    }
    return value;
}

} // namespace

class TestDistributedTrain : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void twoProcessesTrainLikeOne_data()
    {
        QTest::addColumn<QString>("task");
        QTest::newRow("bert-mlm") << "mlm";
        QTest::newRow("opt-backcopy") << "clm";
    }

    void twoProcessesTrainLikeOne()
    {
        QFETCH(QString, task);
        constexpr int kSteps = 50;
        QTemporaryDir dir;
        const nlohmann::json config = task == QLatin1String("mlm") ? tinyMlm(kSteps) : tinyBackcopy(kSteps);
        const QString one = dir.filePath("one"), two = dir.filePath("two");

        const Run single =
            runApp({"train", "--config", writeConfig(dir.filePath("one.json"), config, one)}, 120000);
        QVERIFY2(single.exitCode == 0, qPrintable(single.err));
        const Run pair = runApp({"train", "--config", writeConfig(dir.filePath("two.json"), config, two),
                                 "--nproc-per-node", "2", "--dist-timeout", "30"},
                                120000);
        QVERIFY2(pair.exitCode == 0, qPrintable(pair.err));

        // The launcher relays rank 0's progress lines, once each, and run.json records the group.
        QCOMPARE(pair.out.count(QStringLiteral("\"type\":\"progress\"")), kSteps);
        QVERIFY(pair.out.contains(QStringLiteral("\"outcome\":\"finished\"")));
        std::ifstream runJson((two + "/run.json").toStdString());
        QCOMPARE(nlohmann::json::parse(runJson)["world_size"].get<int>(), 2);

        const std::map<std::int64_t, double> a = losses(one), b = losses(two);
        QCOMPARE(int(a.size()), kSteps);
        QCOMPARE(int(b.size()), kSteps);
        double worstLoss = 0;
        for (const auto& [step, loss] : a)
            worstLoss = std::max(worstLoss, relativeDifference(b.at(step), loss));
        QVERIFY2(worstLoss <= kTolerance,
                 qPrintable(QStringLiteral("loss differs by %1 (relative)").arg(worstLoss)));
        QVERIFY2(a.at(kSteps) < a.at(1), "the loss did not go down: the comparison would prove little");

        // Final weights, tensor by tensor: max |difference| relative to the tensor's largest value.
        // Except the key projection's bias: q.b_k adds the same number to every score of a query, which
        // softmax ignores, so its exact gradient is zero and what it gets is rounding noise that Adam
        // scales up to full-size steps. Two runs whose sums round differently (here: two half-batch
        // gradients added vs one whole-batch gradient) end with different key biases (0.75-1.9
        // relative) and the same function: the held-out perplexity below is checked too.
        const auto weightsOne = readSafetensors((one + "/final/model.safetensors").toStdString());
        const auto weightsTwo = readSafetensors((two + "/final/model.safetensors").toStdString());
        QCOMPARE(weightsTwo.size(), weightsOne.size());
        double worstWeight = 0;
        std::string worstName;
        int compared = 0;
        for (const auto& [name, tensor] : weightsOne) {
            const bool keyBias = QString::fromStdString(name).endsWith(QLatin1String("key.bias")) ||
                                 QString::fromStdString(name).endsWith(QLatin1String("k_proj.bias"));
            if (keyBias) continue;
            ++compared;
            const torch::Tensor other = weightsTwo.at(name).to(torch::kFloat64);
            const torch::Tensor mine = tensor.to(torch::kFloat64);
            const double scale = std::max(mine.abs().max().item<double>(), 1e-12);
            const double diff = (other - mine).abs().max().item<double>() / scale;
            if (diff > worstWeight) {
                worstWeight = diff;
                worstName = name;
            }
        }
        QVERIFY(compared >= int(weightsOne.size()) - 2);
        const double evalOne = finalEval(one), evalTwo = finalEval(two);
        QVERIFY2(evalOne > 0 && relativeDifference(evalTwo, evalOne) <= kTolerance,
                 qPrintable(QStringLiteral("held-out metric %1 vs %2").arg(evalTwo).arg(evalOne)));
        qInfo("%s: worst loss difference %.3g, worst weight difference %.3g (%s)", qPrintable(task),
              worstLoss, worstWeight, worstName.c_str());
        QVERIFY2(worstWeight <= kTolerance, qPrintable(QStringLiteral("%1 differs by %2 (relative)")
                                                           .arg(QString::fromStdString(worstName))
                                                           .arg(worstWeight)));
    }

    /// SIGKILL of rank 1 mid-run: the launcher reports it by rank and exits 1 well within the
    /// timeout; rank 0 leaves only complete checkpoints.
    void killedRankEndsTheRun()
    {
        QTemporaryDir dir;
        nlohmann::json config = tinyBackcopy(100000);
        config["checkpoint_every"] = 20;
        config["log_every"] = 10;
        config["eval_every"] = 100000;
        const QString run = dir.filePath("run");
        QProcess launcher;
        launcher.start(kApp, {"train", "--config", writeConfig(dir.filePath("run.json"), config, run),
                              "--nproc-per-node", "2", "--dist-timeout", "10"});
        QVERIFY(launcher.waitForStarted());
        // Kill once rank 0 has relayed a checkpoint, so there is one to check afterwards.
        QByteArray out;
        QTRY_VERIFY_WITH_TIMEOUT(
            (out += launcher.readAllStandardOutput()).contains("\"type\":\"checkpoint\""), 60000);
        const pid_t victim = workerPid(launcher.processId(), 1);
        QVERIFY(victim > 0);
        const auto killed = std::chrono::steady_clock::now();
        ::kill(victim, SIGKILL);
        QVERIFY(launcher.waitForFinished(30000));
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
        const QString err = QString::fromUtf8(launcher.readAllStandardError());
        QCOMPARE(launcher.exitStatus(), QProcess::NormalExit);
        QCOMPARE(launcher.exitCode(), 1);
        QVERIFY2(err.contains(QStringLiteral("outlierlens train: error: rank 1 was killed by signal 9")),
                 qPrintable(err));
        QVERIFY2(seconds < 10, qPrintable(QStringLiteral("took %1 s").arg(seconds)));
        for (const auto& entry : fs::directory_iterator((run + "/checkpoints").toStdString()))
            if (entry.path().extension() != ".tmp")
                QVERIFY2(fs::exists(entry.path() / "trainer_state.json") &&
                             fs::exists(entry.path() / "model.safetensors"),
                         entry.path().c_str());
        QVERIFY(!fs::exists((run + "/final").toStdString()));
    }

    /// SIGTERM to the launcher (the Jobs page's Cancel): the ranks stop at the same step, rank 0
    /// checkpoints, and `--resume` with two processes continues onto the curve of an unbroken run.
    void sigtermStopsTheGroupAndResumeContinues()
    {
        constexpr int kSteps = 120;
        QTemporaryDir dir;
        nlohmann::json config = tinyBackcopy(kSteps);
        config["checkpoint_every"] = 1000;
        const QString whole = dir.filePath("whole"), broken = dir.filePath("broken");
        const Run unbroken =
            runApp({"train", "--config", writeConfig(dir.filePath("whole.json"), config, whole),
                    "--nproc-per-node", "2", "--dist-timeout", "30"},
                   120000);
        QVERIFY2(unbroken.exitCode == 0, qPrintable(unbroken.err));

        QProcess launcher;
        launcher.start(kApp, {"train", "--config", writeConfig(dir.filePath("broken.json"), config, broken),
                              "--nproc-per-node", "2", "--dist-timeout", "30"});
        QVERIFY(launcher.waitForStarted());
        QByteArray out;
        QTRY_VERIFY_WITH_TIMEOUT((out += launcher.readAllStandardOutput()).contains("\"step\":20,"), 60000);
        ::kill(pid_t(launcher.processId()), SIGTERM);
        QVERIFY(launcher.waitForFinished(30000));
        out += launcher.readAllStandardOutput();
        QCOMPARE(launcher.exitCode(), 128 + SIGTERM);
        QVERIFY2(out.contains("\"outcome\":\"stopped\""), out.constData());
        QVERIFY(!fs::exists((broken + "/final").toStdString()));

        const Run resumed =
            runApp({"train", "--resume", "--output", broken, "--nproc-per-node", "2", "--dist-timeout", "30"},
                   120000);
        QVERIFY2(resumed.exitCode == 0, qPrintable(resumed.err));
        const std::map<std::int64_t, double> a = losses(whole), b = losses(broken);
        QCOMPARE(int(b.size()), kSteps);
        for (const auto& [step, loss] : a)
            QVERIFY2(relativeDifference(b.at(step), loss) <= 1e-6,
                     qPrintable(QStringLiteral("step %1: %2 vs %3").arg(step).arg(b.at(step)).arg(loss)));
    }

    /// Machine 1 of two never comes: the run ends after --dist-timeout naming the missing rank.
    void missingPeerEndsTheRun()
    {
        QTemporaryDir dir;
        const QString master = QStringLiteral("127.0.0.1:%1").arg(unusedPort());
        const auto started = std::chrono::steady_clock::now();
        const Run r = runApp({"train", "--config",
                              writeConfig(dir.filePath("run.json"), tinyBackcopy(10), dir.filePath("run")),
                              "--nproc-per-node", "1", "--nnodes", "2", "--node-rank", "0", "--master",
                              master, "--dist-timeout", "2"},
                             60000);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(QStringLiteral("rank 1 did not join the group")), qPrintable(r.err));
        QVERIFY2(seconds < 15, qPrintable(QStringLiteral("took %1 s").arg(seconds)));
    }

    void batchMustDivide()
    {
        QTemporaryDir dir;
        nlohmann::json config = tinyBackcopy(10);
        config["batch_size"] = 15;
        const Run r =
            runApp({"train", "--config", writeConfig(dir.filePath("run.json"), config, dir.filePath("run")),
                    "--nproc-per-node", "2"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(QStringLiteral("batch_size: 15")) &&
                     r.err.contains(QStringLiteral("divisible")),
                 qPrintable(r.err));
        QVERIFY(!fs::exists(dir.filePath("run").toStdString()));
    }
};

QTEST_GUILESS_MAIN(TestDistributedTrain)
#include "tst_distributed_train.moc"
