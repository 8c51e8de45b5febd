#pragma once
// `outlierlens train --nproc-per-node N`: the launcher that starts and supervises the worker
// processes of one machine, like torchrun. Main thread of the command-line process only.

#include <QStringList>

#include <string>

namespace outlierlens::cli {

/// What a worker returns when the training group failed around it (a peer died, did not arrive or
/// did not answer) rather than its own work: the launcher then blames another rank if it can.
constexpr int kPeerFailureExitCode = 3;

struct LaunchOptions
{
    int nprocPerNode = 1;        ///< worker processes on this machine
    int nnodes = 1;              ///< machines
    int nodeRank = 0;            ///< this machine, 0-based; machine 0 hosts the rendezvous
    std::string masterHost;      ///< empty: this machine (loopback), one machine only
    int masterPort = 0;          ///< 0: a free port (one machine only)
    double timeoutSeconds = 300; ///< --dist-timeout
    QStringList trainArguments;  ///< the `train` arguments, given to every worker as they are
};

/// Hosts the rendezvous on machine 0, starts this machine's workers (this executable, `train` and
/// the same arguments, with OUTLIERLENS_RANK, ... in the environment: train/distributed.h), relays
/// rank 0's JSON lines to stdout and every worker's stderr with a "rank R: " prefix, forwards
/// SIGINT/SIGTERM to the workers (they stop together at the next step, rank 0 checkpoints), and
/// returns when all have ended: 0 if all finished, rank 0's code after an interrupt, otherwise 1 after
/// printing which rank failed and how (the other workers are then stopped: SIGTERM, SIGKILL 5 s
/// later). Throws Error if the rendezvous cannot be hosted or a worker cannot be started.
int launchTrainingGroup(const LaunchOptions& options);

} // namespace outlierlens::cli
