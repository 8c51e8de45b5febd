#include "cli/command_line.h"

#include "common/error.h"

#include "common/atomic_file.h"
#include "model/config.h"
#include "model/variant_fields.h"

#include <cmath>
#include <csignal>
#include <cstdio>
#include <pthread.h>
#include <thread>
#include <unistd.h>

namespace outlierlens::cli {

Command::Command(const QString& name, const QString& summary)
    : m_name(name)
    , m_summary(summary)
{
    m_parser.setApplicationDescription(summary);
    m_parser.addHelpOption();
    m_parser.setSingleDashWordOptionMode(QCommandLineParser::ParseAsLongOptions);
}

std::optional<int> Command::parse(const QStringList& args)
{
    QStringList argv = args;
    argv.prepend(QStringLiteral("outlierlens ") + m_name);
    if (!m_parser.parse(argv)) {
        std::fprintf(stderr, "outlierlens %s: %s\nTry 'outlierlens %s --help'.\n", qPrintable(m_name),
                     qPrintable(m_parser.errorText()), qPrintable(m_name));
        return UsageError;
    }
    if (m_parser.isSet(QStringLiteral("help"))) {
        QString help = m_parser.helpText();
        const qsizetype end = help.indexOf(QLatin1Char('\n'));
        help.replace(0, end, QStringLiteral("Usage: outlierlens ") + m_name + QStringLiteral(" [options]"));
        std::fputs(qPrintable(help), stdout);
        return Ok;
    }
    if (!m_parser.positionalArguments().isEmpty()) {
        std::fprintf(stderr, "outlierlens %s: unexpected argument '%s'\nTry 'outlierlens %s --help'.\n",
                     qPrintable(m_name), qPrintable(m_parser.positionalArguments().first()),
                     qPrintable(m_name));
        return UsageError;
    }
    return std::nullopt;
}

int Command::fail(const std::string& message, int code) const
{
    // One line: LibTorch's errors (a failed allocation, a bad argument deep in an operator) carry
    // their C++ backtrace after the first line, which says nothing to a user.
    const std::string line = message.substr(0, message.find('\n'));
    std::fprintf(stderr, "outlierlens %s: error: %s\n", qPrintable(m_name), line.c_str());
    return code;
}

int Command::guarded(const std::function<int()>& body) const
{
    const auto interrupted = [this] {
        // On a terminal the progress line may be half written: end it first.
        std::fprintf(stderr, "%soutlierlens %s: interrupted; nothing half-written is left\n",
                     isatty(STDERR_FILENO) ? "\n" : "", qPrintable(m_name));
        return interruptedExitCode();
    };
    try {
        return body();
    } catch (const UsageException& e) {
        return fail(e.message, UsageError);
    } catch (const Cancelled&) {
        return interrupted();
    } catch (const std::exception& e) {
        if (interruptFlag()) return interrupted();
        return fail(e.what());
    }
}

std::optional<std::string> Command::optionalText(const QString& option) const
{
    if (!m_parser.isSet(option)) return std::nullopt;
    const QString text = m_parser.value(option);
    if (text.contains(QChar::ReplacementCharacter))
        throw UsageException{"--" + option.toStdString() +
                             " is not valid UTF-8 (or holds U+FFFD); give the text in UTF-8"};
    return text.toStdString();
}

std::string Command::requiredText(const QString& option) const
{
    if (const auto text = optionalText(option)) return *text;
    throw UsageException{"--" + option.toStdString() + " is required"};
}

std::string Command::required(const QString& option) const
{
    if (!m_parser.isSet(option) || m_parser.value(option).isEmpty())
        throw UsageException{"--" + option.toStdString() + " is required"};
    return m_parser.value(option).toStdString();
}

int Command::intValue(const QString& option, int fallback, int min, int max) const
{
    if (!m_parser.isSet(option)) return fallback;
    bool ok = false;
    const long long v = m_parser.value(option).toLongLong(&ok);
    if (!ok || v < min || v > max)
        throw UsageException{"--" + option.toStdString() + " must be an integer in [" + std::to_string(min) +
                             ", " + std::to_string(max) + "], found '" +
                             m_parser.value(option).toStdString() + "'"};
    return int(v);
}

double Command::doubleValue(const QString& option, double fallback) const
{
    if (!m_parser.isSet(option)) return fallback;
    bool ok = false;
    const double v = m_parser.value(option).toDouble(&ok);
    if (!ok || !std::isfinite(v)) // no option means nan or inf: they would print nan as a result
        throw UsageException{"--" + option.toStdString() + " must be a finite number, found '" +
                             m_parser.value(option).toStdString() + "'"};
    return v;
}

void Command::addPrecisionOption(const QString& help)
{
    m_parser.addOption({"precision", help, "fp32|bf16"});
}

Precision Command::precision() const
{
    if (!isSet("precision")) return Precision::Fp32;
    Precision requested = Precision::Fp32;
    try {
        requested = parsePrecision(value("precision"));
    } catch (const std::exception&) {
        throw UsageException{"--precision must be fp32 or bf16, not '" + value("precision") + "'"};
    }
    std::string notice;
    const Precision p = effectivePrecision(requested, &notice);
    if (!notice.empty())
        std::fprintf(stderr, "outlierlens %s: --precision bf16: %s\n", qPrintable(m_name), notice.c_str());
    return p;
}

void Command::addOutlierRuleOptions(const QString& ruleHelp)
{
    m_parser.addOptions({
        {"rule", ruleHelp, "sigma|tau"},
        {"k", QStringLiteral("k of the sigma rule (default %1).").arg(kDefaultSigmaK), "k"},
        {"tau", QStringLiteral("tau of the tau rule (default %1).").arg(kDefaultTau), "tau"},
        {"attention-fraction",
         QStringLiteral(
             "A key is an attention outlier when the attention it receives, summed over queries, is "
             "at least this fraction of the sequence length T (An et al.'s code: %1, the default).")
             .arg(kDefaultAttentionFraction),
         "F"},
    });
}

OutlierCriterion Command::outlierRule() const
{
    OutlierCriterion rule;
    if (isSet("rule")) {
        try {
            rule.rule = parseOutlierRule(value("rule"));
        } catch (const std::exception&) {
            throw UsageException{"--rule must be sigma or tau (or An et al.'s so-paper, so-code), not '" +
                                 value("rule") + "'"};
        }
    }
    rule.k = doubleValue("k", kDefaultSigmaK);
    rule.tau = doubleValue("tau", kDefaultTau);
    rule.attentionFraction = doubleValue("attention-fraction", kDefaultAttentionFraction);
    const auto positive = [](double v) { return std::isfinite(v) && v > 0; };
    if (!positive(rule.k)) throw UsageException{"--k must be a positive number, not '" + value("k") + "'"};
    if (!positive(rule.tau))
        throw UsageException{"--tau must be a positive number, not '" + value("tau") + "'"};
    // A key receives at most T (one from each of the T queries): a fraction above 1 selects no key.
    if (!positive(rule.attentionFraction) || rule.attentionFraction > 1)
        throw UsageException{"--attention-fraction must be in (0, 1], not '" + value("attention-fraction") +
                             "'"};
    return rule;
}

namespace {

/// "max_seq_length" -> "max-seq-length": the variant table's keys as options.
QString variantOption(const char* key)
{
    return QString::fromLatin1(key).replace('_', '-');
}

} // namespace

void Command::addVariantOptions()
{
    for (const VariantField& f : variantFields()) {
        QString help = QString::fromUtf8(f.help) + '.';
        help[0] = help[0].toUpper();
        m_parser.addOption({variantOption(f.key), help, QStringLiteral("value")});
    }
}

VariantOverride Command::variantOverride() const
{
    VariantOverride o;
    for (const VariantField& f : variantFields()) {
        const QString option = variantOption(f.key);
        if (!isSet(option)) continue;
        try {
            o.set(f.key, value(option));
        } catch (const Error& e) {
            throw UsageException{"--" + option.toStdString() + ": " + e.what()};
        }
    }
    return o;
}

std::atomic<bool>& interruptFlag()
{
    static std::atomic<bool> flag{false};
    return flag;
}

namespace {

std::atomic<int> g_signal{SIGINT};
std::atomic<bool> g_workerMode{false};
std::atomic<bool> g_finishFirst{false};

sigset_t interruptSignals()
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    return set;
}

/// The one thread that takes SIGINT and SIGTERM (every other thread has them blocked).
void watchInterrupts()
{
    const sigset_t set = interruptSignals();
    for (;;) {
        int signal = 0;
        if (sigwait(&set, &signal) != 0) continue;
        if (!interruptFlag().exchange(true)) {
            g_signal.store(signal);
        } else if (g_finishFirst.load()) {
            // timeout(1) and a cgroup stop signal the process and its group ~50 ms apart: a repeat must not
            // abandon the checkpoint being written.
            static const char kNotice[] =
                "outlierlens: stopping once the checkpoint is saved (SIGKILL stops at once)\n";
            (void)!::write(STDERR_FILENO, kNotice, sizeof kNotice - 1);
        } else if (!g_workerMode.load()) {
            // Second signal: the user insists. Leave nothing half-written and go.
            removeUncommittedTempFiles();
            _exit(128 + signal);
        }
    }
}

} // namespace

int interruptedExitCode()
{
    return 128 + g_signal.load();
}

void installInterruptHandlers()
{
    // No signal handler runs on a computing thread: a handler's frame goes below the interrupted
    // thread's stack pointer, and oneDNN's sgemm corrupted the heap when SIGTERM arrived during a
    // product (a training job stopped from the GUI; docs/performance.md). The signals are blocked
    // here, before any worker thread exists (threads inherit the mask), and one thread waits for them.
    static const bool started = [] {
        const sigset_t set = interruptSignals();
        pthread_sigmask(SIG_BLOCK, &set, nullptr);
        std::thread(watchInterrupts).detach();
        return true;
    }();
    (void)started;
}

void finishBeforeRepeatedInterrupts()
{
    g_finishFirst.store(true);
}

void installWorkerInterruptHandlers()
{
    g_workerMode.store(true);
    installInterruptHandlers();
}

void unblockInterruptsInChild()
{
    const sigset_t set = interruptSignals();
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
}

} // namespace outlierlens::cli
