#pragma once
// Main thread of the command-line process.

#include "train/job_progress.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace outlierlens::cli {

/// Progress of a long command ("<command>: 12/100 pairs (12%), ...") on stderr for a person: one redrawn line
/// on a terminal, a line per 10% otherwise; at most ~10 updates a second. With `json`, progress lines on
/// stdout for the app instead (train/job_progress.h: the protocol of `outlierlens train`), at most one a
/// second and always the last.
class ProgressPrinter
{
public:
    ProgressPrinter(std::string command, std::string unit, bool json)
        : m_command(std::move(command))
        , m_unit(std::move(unit))
        , m_json(json)
        , m_tty(isatty(STDERR_FILENO))
    {}

    void update(std::int64_t done, std::int64_t total)
    {
        const auto now = std::chrono::steady_clock::now();
        const double elapsed = std::chrono::duration<double>(now - m_start).count();
        const bool last = done >= total;
        if (m_json) {
            // The runner may report the end twice (its last batch, then done): one line each.
            if (done == m_lastDone || (!last && now - m_lastPrint < std::chrono::seconds(1))) return;
            m_lastDone = done;
        } else if (m_tty) {
            if (!last && now - m_lastPrint < std::chrono::milliseconds(100)) return;
        } else if (!last && done * 10 / total == m_lastDecile) {
            return;
        }
        m_lastPrint = now;
        m_lastDecile = done * 10 / total;
        const double rate = elapsed > 0 ? double(done) / elapsed : 0.0;
        const double eta = rate > 0 ? double(total - done) / rate : 0.0;
        if (m_json) {
            JobProgress p;
            p.step = done;
            p.total = total;
            p.elapsed = elapsed;
            if (rate > 0) p.eta = eta; // unknown before the first input is done
            std::printf("%s\n", progressJsonLine(p, m_unit).c_str());
            std::fflush(stdout);
            return;
        }
        // Before the first input is done there is no rate to estimate from: "ETA unknown", not 0 s.
        char when[32];
        if (!last && rate <= 0)
            std::snprintf(when, sizeof when, "ETA unknown");
        else
            std::snprintf(when, sizeof when, "%s %dm%02ds", last ? "took" : "ETA",
                          int((last ? elapsed : eta) / 60), int(last ? elapsed : eta) % 60);
        std::fprintf(stderr, "%s%s: %lld/%lld %s (%.0f%%), %.1f/s, %s%s", m_tty ? "\r" : "",
                     m_command.c_str(), static_cast<long long>(done), static_cast<long long>(total),
                     m_unit.c_str(), 100.0 * double(done) / double(total), rate, when,
                     m_tty && !last ? "" : "\n");
        std::fflush(stderr);
    }

private:
    std::string m_command;
    std::string m_unit;
    bool m_json;
    bool m_tty;
    std::chrono::steady_clock::time_point m_start = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point m_lastPrint{};
    std::int64_t m_lastDecile = -1;
    std::int64_t m_lastDone = -1;
};

} // namespace outlierlens::cli
