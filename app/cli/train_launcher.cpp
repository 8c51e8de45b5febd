#include "cli/train_launcher.h"

#include "cli/command_line.h"
#include "common/error.h"
#include "train/distributed.h"

#include <QCoreApplication>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <memory>
#include <optional>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace outlierlens::cli {
namespace {

constexpr auto kKillGrace = std::chrono::seconds(5);

struct Worker
{
    int rank = 0;
    pid_t pid = -1;
    int out = -1, err = -1; ///< read ends of its stdout and stderr pipes
    std::string outLine, errLine, lastError;
    std::optional<int> status; ///< waitpid status once it ended
    bool stoppedByUs = false;  ///< signalled because another rank failed
};

std::string describeExit(int status)
{
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        const char* name = sigabbrev_np(sig);
        return "was killed by signal " + std::to_string(sig) +
               (name ? std::string(" (SIG") + name + ")" : "");
    }
    return "exited with code " + std::to_string(WEXITSTATUS(status));
}

bool failed(int status)
{
    return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

/// Starts this executable as `train` worker `setup.rank`; its stdout and stderr come back through pipes.
Worker startWorker(const DistributedSetup& setup, const QStringList& trainArguments)
{
    const std::string program = QCoreApplication::applicationFilePath().toStdString();
    std::vector<std::string> args = {program, "train"};
    for (const QString& a : trainArguments)
        args.push_back(a.toStdString());
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e)
        if (std::strncmp(*e, "OUTLIERLENS_RANK=", 17) != 0) env.emplace_back(*e);
    for (const auto& [name, value] : workerEnvironment(setup))
        env.push_back(name + "=" + value);

    int outPipe[2], errPipe[2];
    if (::pipe2(outPipe, O_CLOEXEC) != 0 || ::pipe2(errPipe, O_CLOEXEC) != 0)
        throw Error(std::string("cannot create a pipe for a worker: ") + std::strerror(errno));
    std::vector<char*> argv, envp;
    for (std::string& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    for (std::string& e : env)
        envp.push_back(e.data());
    envp.push_back(nullptr);

    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw Error(std::string("cannot start a worker process: ") + std::strerror(errno));
    if (pid == 0) {
        // Only async-signal-safe calls from here on. A worker outlives no launcher: if the launcher dies
        // (even by SIGKILL) the worker gets SIGTERM and the group stops together.
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (::getppid() != parent) ::_exit(127);
        // Its own process group: a Ctrl-C in the terminal reaches the launcher only, which forwards it once.
        ::setpgid(0, 0);
        ::signal(SIGINT, SIG_DFL);
        ::signal(SIGTERM, SIG_DFL);
        unblockInterruptsInChild(); // the worker takes them on its own watcher thread
        // Without its launcher nobody reads the pipes: a write must fail, not kill the worker before
        // rank 0 has saved its checkpoint.
        ::signal(SIGPIPE, SIG_IGN);
        ::dup2(outPipe[1], STDOUT_FILENO);
        ::dup2(errPipe[1], STDERR_FILENO);
        ::execve(argv[0], argv.data(), envp.data());
        ::_exit(127);
    }
    ::close(outPipe[1]);
    ::close(errPipe[1]);
    Worker w;
    w.rank = setup.rank;
    w.pid = pid;
    w.out = outPipe[0];
    w.err = errPipe[0];
    return w;
}

/// Reads what is available; complete lines go to `sink`. False at end of file.
template<class Sink>
bool drain(int fd, std::string& partial, Sink&& sink)
{
    char buffer[65536];
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) {
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
        if (!partial.empty()) sink(partial);
        partial.clear();
        return false;
    }
    partial.append(buffer, std::size_t(n));
    std::size_t newline;
    while ((newline = partial.find('\n')) != std::string::npos) {
        sink(partial.substr(0, newline));
        partial.erase(0, newline + 1);
    }
    return true;
}

void signalAll(std::vector<Worker>& workers, int sig, bool markStopped)
{
    for (Worker& w : workers)
        if (!w.status) {
            ::kill(w.pid, sig);
            if (markStopped) w.stoppedByUs = true;
        }
}

/// The rank to blame: one that failed on its own (not stopped by us, not a peer failure) first.
const Worker* culprit(const std::vector<const Worker*>& endedInOrder)
{
    for (const Worker* w : endedInOrder)
        if (failed(*w->status) && !w->stoppedByUs &&
            !(WIFEXITED(*w->status) && WEXITSTATUS(*w->status) == kPeerFailureExitCode))
            return w;
    for (const Worker* w : endedInOrder)
        if (failed(*w->status) && !w->stoppedByUs) return w;
    for (const Worker* w : endedInOrder)
        if (failed(*w->status)) return w;
    return nullptr;
}

} // namespace

int launchTrainingGroup(const LaunchOptions& o)
{
    const int worldSize = o.nprocPerNode * o.nnodes;
    std::unique_ptr<RendezvousServer> server;
    std::string host = o.masterHost.empty() ? std::string("127.0.0.1") : o.masterHost;
    int port = o.masterPort;
    if (o.nodeRank == 0) {
        server = std::make_unique<RendezvousServer>(port, o.timeoutSeconds);
        port = server->port();
    }
    std::fprintf(stderr, "outlierlens train: %d processes (%d on this machine), rendezvous at %s:%d\n",
                 worldSize, o.nprocPerNode, host.c_str(), port);

    std::vector<Worker> workers;
    for (int local = 0; local < o.nprocPerNode; ++local) {
        DistributedSetup setup;
        setup.rank = o.nodeRank * o.nprocPerNode + local;
        setup.worldSize = worldSize;
        setup.localRank = local;
        setup.localWorldSize = o.nprocPerNode;
        setup.masterHost = host;
        setup.masterPort = port;
        setup.timeoutSeconds = o.timeoutSeconds;
        try {
            workers.push_back(startWorker(setup, o.trainArguments));
        } catch (...) {
            signalAll(workers, SIGKILL, true);
            for (Worker& w : workers)
                ::waitpid(w.pid, nullptr, 0);
            throw;
        }
    }

    bool forwardedInterrupt = false;
    std::optional<std::chrono::steady_clock::time_point> killAt;
    std::vector<const Worker*> ended;
    while (ended.size() < workers.size()) {
        std::vector<pollfd> fds;
        std::vector<std::pair<Worker*, bool>> owners; // (worker, is stdout)
        for (Worker& w : workers) {
            if (w.out >= 0) {
                fds.push_back({w.out, POLLIN, 0});
                owners.emplace_back(&w, true);
            }
            if (w.err >= 0) {
                fds.push_back({w.err, POLLIN, 0});
                owners.emplace_back(&w, false);
            }
        }
        if (::poll(fds.data(), fds.size(), 100) > 0) {
            for (std::size_t i = 0; i < fds.size(); ++i) {
                if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                Worker& w = *owners[i].first;
                bool open;
                if (owners[i].second) {
                    open = drain(w.out, w.outLine, [&](const std::string& line) {
                        if (w.rank != 0) return; // only rank 0 speaks for the group
                        std::printf("%s\n", line.c_str());
                        std::fflush(stdout);
                    });
                } else {
                    open = drain(w.err, w.errLine, [&](const std::string& line) {
                        if (!line.empty()) w.lastError = line;
                        std::fprintf(stderr, "rank %d: %s\n", w.rank, line.c_str());
                    });
                }
                if (!open) {
                    ::close(fds[i].fd);
                    (owners[i].second ? w.out : w.err) = -1;
                }
            }
        }
        if (interruptFlag() && !forwardedInterrupt) {
            forwardedInterrupt = true; // they stop together at the next step; rank 0 checkpoints
            signalAll(workers, SIGTERM, false);
        }
        for (Worker& w : workers) {
            int status = 0;
            if (w.status || ::waitpid(w.pid, &status, WNOHANG) != w.pid) continue;
            w.status = status;
            ended.push_back(&w);
            std::error_code ignored; // a killed worker could not remove its scratch folder itself
            std::filesystem::remove_all(workerScratchFolder(w.rank, long(w.pid)), ignored);
            if (failed(status) && !killAt && !forwardedInterrupt) {
                signalAll(workers, SIGTERM, true);
                killAt = std::chrono::steady_clock::now() + kKillGrace;
            }
        }
        if (killAt && std::chrono::steady_clock::now() >= *killAt) signalAll(workers, SIGKILL, true);
    }
    for (Worker& w : workers) { // pipes of workers that ended with output still buffered
        for (int* fd : {&w.out, &w.err})
            if (*fd >= 0) ::close(*fd);
    }

    if (forwardedInterrupt) {
        const Worker& leader = workers.front();
        if (o.nodeRank == 0 && WIFEXITED(*leader.status)) return WEXITSTATUS(*leader.status);
        return interruptedExitCode();
    }
    if (const Worker* w = culprit(ended)) {
        const bool lostTheGroup = WIFEXITED(*w->status) && WEXITSTATUS(*w->status) == kPeerFailureExitCode;
        std::string hung; // ranks of this machine still running when the others had lost the group
        for (const Worker& other : workers)
            if (other.stoppedByUs && &other != w)
                hung += (hung.empty() ? "" : ", ") + std::to_string(other.rank);
        std::string message;
        if (lostTheGroup && !hung.empty())
            message = "rank" + std::string(hung.find(',') == std::string::npos ? " " : "s ") + hung +
                      " stopped answering and had to be stopped; rank " + std::to_string(w->rank) +
                      " lost the group waiting for it";
        else if (lostTheGroup) // a rank on another machine failed or vanished; its launcher names it too
            message = "rank " + std::to_string(w->rank) + " lost the training group";
        else
            message = "rank " + std::to_string(w->rank) + " " + describeExit(*w->status);
        // Its own last word, if it said one (a killed process says nothing; earlier lines are warnings).
        if (WIFEXITED(*w->status) && w->lastError.rfind("outlierlens", 0) == 0)
            message += " (" + w->lastError + ")";
        if (workers.size() > 1 && !(lostTheGroup && !hung.empty()))
            message += "; the other ranks were stopped";
        std::fprintf(stderr, "outlierlens train: error: %s\n", message.c_str());
        return Failure;
    }
    return Ok;
}

} // namespace outlierlens::cli
