#pragma once
// Training across processes on PyTorch's c10d: a TCPStore for the rendezvous, ProcessGroupGloo for
// the collectives and LibTorch's Reducer (the engine of DistributedDataParallel) for the gradients.
// DistributedSetup and its environment helpers: any thread. RendezvousServer: the launcher's main
// thread. TrainingGroup: the training thread of one worker process only (it owns the autograd hooks
// of the module it is attached to). No torch or c10d header is included here.

#include "common/error.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace at {
class Tensor;
}
namespace torch::nn {
class Module;
}

namespace outlierlens {

/// One process's place in a training group (torchrun's RANK, WORLD_SIZE, LOCAL_RANK, ...).
struct DistributedSetup
{
    int rank = 0;                         ///< 0-based, over all machines; rank 0 writes the run folder
    int worldSize = 1;                    ///< processes in the group, all machines together
    int localRank = 0;                    ///< 0-based among the processes of this machine
    int localWorldSize = 1;               ///< processes on this machine (threads default to cores / this)
    std::string masterHost = "127.0.0.1"; ///< where the group's TCPStore listens
    int masterPort = 0;                   ///< its port
    double timeoutSeconds = 300;          ///< rendezvous and every collective; then the run fails
};

/// The default for --dist-timeout, in seconds.
constexpr double kDefaultDistTimeoutSeconds = 300;

/// The environment a worker process is started with: OUTLIERLENS_RANK, OUTLIERLENS_WORLD_SIZE,
/// OUTLIERLENS_LOCAL_RANK, OUTLIERLENS_LOCAL_WORLD_SIZE, OUTLIERLENS_MASTER_ADDR,
/// OUTLIERLENS_MASTER_PORT, OUTLIERLENS_DIST_TIMEOUT (seconds), as (name, value) pairs.
std::vector<std::pair<std::string, std::string>> workerEnvironment(const DistributedSetup& setup);

/// The setup workerEnvironment() describes, read from this process's environment; nullopt when
/// OUTLIERLENS_RANK is not set (a process that is not a worker). Throws Error naming the variable
/// for a missing or malformed value or a rank outside [0, world size).
std::optional<DistributedSetup> distributedSetupFromEnvironment();

/// The private folder in which worker `rank` with process id `pid` keeps the files a task writes next
/// to its run (ranks other than 0 never touch the run folder): <temp>/outlierlens-rank<R>-<pid>. The
/// worker removes it when it ends; the launcher removes it after a worker that was killed.
std::string workerScratchFolder(int rank, long pid);

/// "host:port" -> (host, port); Error naming `what` otherwise. Port 0 is allowed (a free port).
std::pair<std::string, int> parseHostPort(const std::string& text, const std::string& what);

/// The group's TCPStore server (c10d::TCPStore with is_server), hosted by the launcher of machine 0
/// for as long as the group runs, so that port 0 can pick a free port before any worker starts.
class RendezvousServer
{
public:
    /// Listens on `port` (0: a free port) on every interface. Throws Error naming the port.
    RendezvousServer(int port, double timeoutSeconds);
    ~RendezvousServer();
    RendezvousServer(const RendezvousServer&) = delete;
    RendezvousServer& operator=(const RendezvousServer&) = delete;
    int port() const;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

/// Thrown when the group itself fails (a peer vanished or did not arrive, or a collective timed
/// out), as opposed to an error of this process's own work; the message names the ranks it can.
class GroupError : public Error
{
public:
    using Error::Error;
};

/// This process's membership of the training group.
class TrainingGroup
{
public:
    /// Joins the group: connects to the TCPStore at setup.masterHost:masterPort, announces this
    /// rank, waits for all ranks and builds a ProcessGroupGloo whose collectives time out after
    /// setup.timeoutSeconds. Throws Error naming the ranks that did not arrive within the timeout.
    explicit TrainingGroup(const DistributedSetup& setup);
    ~TrainingGroup();
    TrainingGroup(const TrainingGroup&) = delete;
    TrainingGroup& operator=(const TrainingGroup&) = delete;

    int rank() const;
    int worldSize() const;
    /// Step of the training loop, used in error messages.
    void setStep(std::int64_t step);

    /// Rank 0's value on every rank.
    std::int64_t broadcast(std::int64_t value);
    /// Sum over the ranks (float64).
    double sum(double value);
    /// True on every rank if it is true on any rank (so all ranks stop at the same step).
    bool any(bool value);

    /// Leaves `message` in the store as this rank's failure: a peer whose exchange with this rank then
    /// fails names it and quotes the message (useful across machines). Never throws.
    void reportFailure(const std::string& message) noexcept;

    /// Rank 0's `text` on every rank (through the store; `text` is read on rank 0 only).
    std::string broadcastText(const std::string& text);

    /// Copies every parameter and buffer of `module` from rank 0 to the others (the modules must
    /// have the same names and shapes on every rank).
    void broadcastModule(torch::nn::Module& module);
    /// Rank 0's named tensors (names, shapes and dtypes too) on every rank; `tensors` is read on
    /// rank 0 only. Used for the optimizer state of a resumed run.
    std::map<std::string, at::Tensor> broadcastTensors(const std::map<std::string, at::Tensor>& tensors);

    /// Attaches LibTorch's c10d::Reducer to the trainable parameters of `module`: gradients are
    /// packed into ~25 MB buckets (1 MB for the first) and each bucket's all-reduce starts
    /// asynchronously from the autograd hooks as soon as its last gradient is ready, overlapping the
    /// rest of the backward pass; when backward() returns every gradient is the mean over the ranks.
    void attachReducer(torch::nn::Module& module);
    /// Before each training step's forward pass (lets the reducer fix its bucket order once).
    void beginStep();
    /// loss.backward() through the reducer: when it returns, every gradient is the mean over the
    /// ranks of their gradients (a GroupError if a peer fails meanwhile).
    void backward(const at::Tensor& loss);

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

} // namespace outlierlens
