#include "train/distributed.h"

#include "common/error.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

// Debian's libtorch-dev ships c10d's headers and exports its symbols from libtorch_cpu, but reducer.hpp
// includes a distributed-autograd header it does not ship: c10d_compat/ stands in for it (see there).
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>
#include <unistd.h>

namespace outlierlens {
namespace {

constexpr const char* kRankKey = "outlierlens/joined/";
constexpr const char* kFailureKey = "outlierlens/failed/";

std::chrono::milliseconds millis(double seconds)
{
    return std::chrono::milliseconds(std::int64_t(seconds * 1000.0));
}

std::string secondsText(double seconds)
{
    std::string text = std::to_string(seconds);
    text.erase(text.find_last_not_of('0') + 1);
    if (!text.empty() && text.back() == '.') text.pop_back();
    return text + " s";
}

/// The first line of an exception's message, without c10's backtrace.
std::string reason(const std::exception& e)
{
    const auto* c10Error = dynamic_cast<const c10::Error*>(&e);
    std::string text = c10Error ? c10Error->what_without_backtrace() : e.what();
    const std::size_t newline = text.find('\n');
    if (newline != std::string::npos) text.erase(newline);
    return text;
}

int envInt(const char* name, int fallback, int min, bool required)
{
    const char* text = std::getenv(name);
    if (!text || !*text) {
        if (required)
            throw Error(std::string(name) + ": not set (it is set by `outlierlens train --nproc-per-node`)");
        return fallback;
    }
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (*end != '\0' || value < min || value > 1000000)
        throw Error(std::string(name) + ": expected an integer >= " + std::to_string(min) + ", found '" +
                    text + "'");
    return int(value);
}

bool isLoopback(const std::string& host)
{
    return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

std::string hostName()
{
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    return name;
}

/// Drops the reducer's advice to turn find_unused_parameters off (we keep it on deliberately: see
/// attachReducer()) and passes every other warning on.
class ReducerWarningFilter : public c10::WarningHandler
{
public:
    explicit ReducerWarningFilter(c10::WarningHandler* next)
        : m_next(next)
    {}
    void process(const c10::SourceLocation& where, const std::string& message, const bool verbatim) override
    {
        if (message.find("find_unused_parameters=True was specified") != std::string::npos) return;
        if (m_next) m_next->process(where, message, verbatim);
    }

private:
    c10::WarningHandler* m_next;
};

} // namespace

std::vector<std::pair<std::string, std::string>> workerEnvironment(const DistributedSetup& s)
{
    return {{"OUTLIERLENS_RANK", std::to_string(s.rank)},
            {"OUTLIERLENS_WORLD_SIZE", std::to_string(s.worldSize)},
            {"OUTLIERLENS_LOCAL_RANK", std::to_string(s.localRank)},
            {"OUTLIERLENS_LOCAL_WORLD_SIZE", std::to_string(s.localWorldSize)},
            {"OUTLIERLENS_MASTER_ADDR", s.masterHost},
            {"OUTLIERLENS_MASTER_PORT", std::to_string(s.masterPort)},
            {"OUTLIERLENS_DIST_TIMEOUT", std::to_string(s.timeoutSeconds)}};
}

std::optional<DistributedSetup> distributedSetupFromEnvironment()
{
    const char* rank = std::getenv("OUTLIERLENS_RANK");
    if (!rank || !*rank) return std::nullopt;
    DistributedSetup s;
    s.rank = envInt("OUTLIERLENS_RANK", 0, 0, true);
    s.worldSize = envInt("OUTLIERLENS_WORLD_SIZE", 1, 1, true);
    s.localRank = envInt("OUTLIERLENS_LOCAL_RANK", s.rank, 0, false);
    s.localWorldSize = envInt("OUTLIERLENS_LOCAL_WORLD_SIZE", s.worldSize, 1, false);
    s.masterPort = envInt("OUTLIERLENS_MASTER_PORT", 0, 1, true);
    if (const char* host = std::getenv("OUTLIERLENS_MASTER_ADDR"); host && *host) s.masterHost = host;
    if (const char* timeout = std::getenv("OUTLIERLENS_DIST_TIMEOUT"); timeout && *timeout) {
        char* end = nullptr;
        s.timeoutSeconds = std::strtod(timeout, &end);
        if (*end != '\0' || !(s.timeoutSeconds > 0))
            throw Error(std::string("OUTLIERLENS_DIST_TIMEOUT: expected seconds > 0, found '") + timeout +
                        "'");
    }
    if (s.rank >= s.worldSize)
        throw Error("OUTLIERLENS_RANK: rank " + std::to_string(s.rank) + " is outside the world of " +
                    std::to_string(s.worldSize) + " processes");
    if (s.localRank >= s.localWorldSize)
        throw Error("OUTLIERLENS_LOCAL_RANK: local rank " + std::to_string(s.localRank) + " is outside the " +
                    std::to_string(s.localWorldSize) + " processes of this machine");
    return s;
}

std::string workerScratchFolder(int rank, long pid)
{
    return (std::filesystem::temp_directory_path() /
            ("outlierlens-rank" + std::to_string(rank) + "-" + std::to_string(pid)))
        .string();
}

std::pair<std::string, int> parseHostPort(const std::string& text, const std::string& what)
{
    const std::size_t colon = text.rfind(':');
    const std::string host = colon == std::string::npos ? std::string() : text.substr(0, colon);
    const std::string port = colon == std::string::npos ? std::string() : text.substr(colon + 1);
    char* end = nullptr;
    const long number = port.empty() ? -1 : std::strtol(port.c_str(), &end, 10);
    if (host.empty() || number < 0 || number > 65535 || *end != '\0')
        throw Error(what + ": expected HOST:PORT (e.g. 10.0.0.1:29500), found '" + text + "'");
    return {host, int(number)};
}

// ---- RendezvousServer ------------------------------------------------------------------------

struct RendezvousServer::Impl
{
    c10::intrusive_ptr<c10d::TCPStore> store;
};

RendezvousServer::RendezvousServer(int port, double timeoutSeconds)
    : m_impl(std::make_unique<Impl>())
{
    c10d::TCPStoreOptions options;
    options.port = std::uint16_t(port);
    options.isServer = true;
    options.waitWorkers = false; // workers come and go; the server only answers them
    options.timeout = millis(timeoutSeconds);
    try {
        m_impl->store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
    } catch (const std::exception& e) {
        throw Error("cannot host the rendezvous on port " + std::to_string(port) + ": " + reason(e));
    }
}

RendezvousServer::~RendezvousServer() = default;

int RendezvousServer::port() const
{
    return int(m_impl->store->getPort());
}

// ---- TrainingGroup ---------------------------------------------------------------------------

struct TrainingGroup::Impl
{
    DistributedSetup setup;
    std::int64_t step = 0;
    std::int64_t exchanges = 0; ///< numbers the store keys of broadcastText() and broadcastTensors()
    std::unique_ptr<ReducerWarningFilter> warningFilter; // installed while the reducer exists
    std::unique_ptr<c10::Warning::WarningHandlerGuard> warningGuard;
    // Destroyed in reverse order: the reducer's hooks and work before the group, the group before the store.
    c10::intrusive_ptr<c10d::TCPStore> store;
    c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
    std::shared_ptr<c10d::Reducer> reducer;

    /// Runs a collective; a failure of the group becomes a GroupError saying what, where and why.
    template<class F>
    auto guarded(const char* what, F&& f) -> decltype(f())
    {
        try {
            return f();
        } catch (const GroupError&) {
            throw;
        } catch (const std::exception& e) {
            const std::string reported = reportedFailures();
            if (!reported.empty())
                throw GroupError("rank " + std::to_string(setup.rank) + ": the training group failed in " +
                                 what + " at step " + std::to_string(step) + ": " + reported);
            throw GroupError("rank " + std::to_string(setup.rank) + ": the training group failed in " + what +
                             " at step " + std::to_string(step) +
                             " (a peer stopped, died or did not answer within " +
                             secondsText(setup.timeoutSeconds) + "): " + reason(e));
        }
    }

    /// "rank R failed: <its message>" for every peer that left a note (reportFailure()), waiting up to
    /// a second for notes still on their way; "" if none did or the store is gone.
    std::string reportedFailures()
    {
        if (!store) return {};
        try {
            for (int attempt = 0; attempt < 10; ++attempt) {
                std::string out;
                for (int r = 0; r < setup.worldSize; ++r) {
                    const std::string key = kFailureKey + std::to_string(r);
                    if (r == setup.rank || !store->check({key})) continue;
                    const std::vector<std::uint8_t> bytes = store->get(key);
                    out += (out.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
                           " failed: " + std::string(bytes.begin(), bytes.end());
                }
                if (!out.empty()) return out;
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
        } catch (const std::exception&) {
            // the rendezvous went away with its launcher: nothing more to learn
        }
        return {};
    }

    at::Tensor allReduce(at::Tensor t, c10d::ReduceOp op)
    {
        std::vector<at::Tensor> tensors = {t};
        c10d::AllreduceOptions options;
        options.reduceOp = op;
        group->allreduce(tensors, options)->wait();
        return tensors[0];
    }

    void joinStore()
    {
        c10d::TCPStoreOptions options;
        options.port = std::uint16_t(setup.masterPort);
        options.isServer = false;
        options.waitWorkers = false;
        options.timeout = millis(setup.timeoutSeconds);
        const std::string where = setup.masterHost + ":" + std::to_string(setup.masterPort);
        try {
            store = c10::make_intrusive<c10d::TCPStore>(setup.masterHost, options);
        } catch (const std::exception& e) {
            throw GroupError("rank " + std::to_string(setup.rank) + ": cannot reach the rendezvous at " +
                             where + " within " + secondsText(setup.timeoutSeconds) + ": " + reason(e));
        }
        const std::string me = hostName() + " pid " + std::to_string(::getpid());
        std::vector<std::string> keys;
        for (int r = 0; r < setup.worldSize; ++r)
            keys.push_back(kRankKey + std::to_string(r));
        try {
            store->set(keys[std::size_t(setup.rank)], std::vector<std::uint8_t>(me.begin(), me.end()));
            store->wait(keys, millis(setup.timeoutSeconds));
        } catch (const std::exception& e) {
            std::string missing;
            try {
                for (int r = 0; r < setup.worldSize; ++r)
                    if (!store->check({keys[std::size_t(r)]}))
                        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
            } catch (const std::exception&) {
                missing.clear(); // the store itself went away: say what we know
            }
            if (!missing.empty())
                throw GroupError("rank " + std::to_string(setup.rank) + ": rank" +
                                 (missing.find(',') == std::string::npos ? " " : "s ") + missing +
                                 " did not join the group at " + where + " within " +
                                 secondsText(setup.timeoutSeconds) + " (--dist-timeout)");
            throw GroupError("rank " + std::to_string(setup.rank) + ": the rendezvous at " + where +
                             " failed: " + reason(e));
        }
    }

    void createGroup()
    {
        auto options = c10d::ProcessGroupGloo::Options::create(millis(setup.timeoutSeconds));
        // Gloo talks over the interface that reaches the peers: loopback for a group on one machine,
        // GLOO_SOCKET_IFNAME if set (as in PyTorch), else the address this machine's name resolves to.
        const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
        if (ifname && *ifname)
            options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
        else if (isLoopback(setup.masterHost))
            options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        else
            options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
        options->threads = 2;
        group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, setup.rank, setup.worldSize, options);
    }
};

TrainingGroup::TrainingGroup(const DistributedSetup& setup)
    : m_impl(std::make_unique<Impl>())
{
    m_impl->setup = setup;
    m_impl->joinStore();
    m_impl->guarded("building the Gloo process group", [&] {
        m_impl->createGroup();
        return 0;
    });
}

TrainingGroup::~TrainingGroup() = default;

int TrainingGroup::rank() const
{
    return m_impl->setup.rank;
}

int TrainingGroup::worldSize() const
{
    return m_impl->setup.worldSize;
}

void TrainingGroup::setStep(std::int64_t step)
{
    m_impl->step = step;
}

std::int64_t TrainingGroup::broadcast(std::int64_t value)
{
    return m_impl->guarded("a broadcast", [&] {
        std::vector<at::Tensor> tensors = {torch::tensor({value}, torch::kInt64)};
        m_impl->group->broadcast(tensors)->wait();
        return tensors[0].item<std::int64_t>();
    });
}

double TrainingGroup::sum(double value)
{
    return m_impl->guarded("summing the loss", [&] {
        return m_impl->allReduce(torch::tensor({value}, torch::kFloat64), c10d::ReduceOp::SUM).item<double>();
    });
}

bool TrainingGroup::any(bool value)
{
    return m_impl->guarded("agreeing on a stop", [&] {
        return m_impl->allReduce(torch::tensor({value ? 1 : 0}, torch::kInt64), c10d::ReduceOp::MAX)
                   .item<std::int64_t>() != 0;
    });
}

void TrainingGroup::reportFailure(const std::string& message) noexcept
{
    try {
        const std::string key = kFailureKey + std::to_string(m_impl->setup.rank);
        m_impl->store->set(key, std::vector<std::uint8_t>(message.begin(), message.end()));
    } catch (...) {
        // best effort: the launcher still names this rank from its exit status
    }
}

std::string TrainingGroup::broadcastText(const std::string& text)
{
    const std::string key = "outlierlens/text/" + std::to_string(m_impl->exchanges++);
    return m_impl->guarded("receiving rank 0's settings", [&] {
        if (m_impl->setup.rank == 0) {
            m_impl->store->set(key, std::vector<std::uint8_t>(text.begin(), text.end()));
            return text;
        }
        const std::vector<std::uint8_t> bytes = m_impl->store->get(key);
        return std::string(bytes.begin(), bytes.end());
    });
}

void TrainingGroup::broadcastModule(torch::nn::Module& module)
{
    std::vector<at::Tensor> tensors;
    for (const auto& p : module.named_parameters(true))
        tensors.push_back(p.value().detach());
    for (const auto& b : module.named_buffers(true))
        tensors.push_back(b.value().detach());
    m_impl->guarded("broadcasting rank 0's weights", [&] {
        torch::NoGradGuard noGrad;
        c10d::broadcast_coalesced(m_impl->group, tensors, 64u << 20, 0);
        return 0;
    });
}

std::map<std::string, at::Tensor>
TrainingGroup::broadcastTensors(const std::map<std::string, at::Tensor>& tensors)
{
    // Names, shapes and dtypes go through the store, the data through one coalesced broadcast.
    const std::string key = "outlierlens/tensors/" + std::to_string(m_impl->exchanges++);
    return m_impl->guarded("broadcasting rank 0's optimizer state", [&] {
        nlohmann::json meta = nlohmann::json::array();
        if (m_impl->setup.rank == 0) {
            for (const auto& [name, t] : tensors)
                meta.push_back({{"name", name}, {"dtype", int(t.scalar_type())}, {"shape", t.sizes().vec()}});
            const std::string text = meta.dump();
            m_impl->store->set(key, std::vector<std::uint8_t>(text.begin(), text.end()));
        } else {
            const std::vector<std::uint8_t> bytes = m_impl->store->get(key);
            meta = nlohmann::json::parse(std::string(bytes.begin(), bytes.end()));
        }
        std::map<std::string, at::Tensor> out;
        std::vector<at::Tensor> flat;
        for (const nlohmann::json& item : meta) {
            const std::string name = item.at("name").get<std::string>();
            at::Tensor t = m_impl->setup.rank == 0
                               ? tensors.at(name).contiguous().clone()
                               : torch::empty(item.at("shape").get<std::vector<std::int64_t>>(),
                                              torch::TensorOptions().dtype(
                                                  c10::ScalarType(item.at("dtype").get<int>())));
            out[name] = t;
            flat.push_back(t);
        }
        c10d::broadcast_coalesced(m_impl->group, flat, 64u << 20, 0);
        return out;
    });
}

void TrainingGroup::attachReducer(torch::nn::Module& module)
{
    std::vector<at::Tensor> params;
    std::unordered_map<std::size_t, std::string> names;
    std::set<const void*> seen; // a tied weight is one parameter
    for (const auto& p : module.named_parameters(true)) {
        if (!p.value().requires_grad() || !seen.insert(p.value().unsafeGetTensorImpl()).second) continue;
        names[params.size()] = p.key();
        params.push_back(p.value());
    }
    if (params.empty()) throw Error("distributed training: the model has no trainable parameters");
    const std::vector<bool> sparse(params.size(), false);
    auto [buckets, limits] = c10d::compute_bucket_assignment_by_size(
        params, {std::size_t(c10d::kDefaultFirstBucketBytes), std::size_t(c10d::kDefaultBucketBytesCap)},
        sparse);
    // Gradients arrive roughly in reverse order of the parameters, as DistributedDataParallel assumes.
    std::reverse(buckets.begin(), buckets.end());
    std::reverse(limits.begin(), limits.end());
    // find_unused_parameters: a step may leave parameters without a gradient (an unused head, a gate
    // that is off); the reducer then marks them ready itself instead of waiting for them forever. It
    // costs one walk over the autograd graph per step, small next to the step, and the reducer's
    // warning that it found every parameter used is filtered out.
    m_impl->warningFilter = std::make_unique<ReducerWarningFilter>(c10::Warning::get_warning_handler());
    m_impl->warningGuard = std::make_unique<c10::Warning::WarningHandlerGuard>(m_impl->warningFilter.get());
    m_impl->reducer = std::make_shared<c10d::Reducer>(
        params, buckets, limits, m_impl->group, sparse, c10d::kDefaultBucketBytesCap,
        /*find_unused_parameters=*/true,
        /*gradient_as_bucket_view=*/false, names, c10d::kDefaultFirstBucketBytes);
}

void TrainingGroup::beginStep()
{
    if (!m_impl->reducer) return;
    m_impl->guarded("rebuilding the gradient buckets", [&] { return m_impl->reducer->rebuild_buckets(); });
}

void TrainingGroup::backward(const at::Tensor& loss)
{
    if (!m_impl->reducer) throw Error("TrainingGroup::backward: no reducer attached");
    m_impl->guarded("averaging the gradients", [&] {
        m_impl->reducer->prepare_for_backward({loss});
        loss.backward();
        return 0;
    });
}

} // namespace outlierlens
