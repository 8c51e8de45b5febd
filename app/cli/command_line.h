#pragma once
// Main thread of the command-line process.

#include "analysis/outlier_rule.h"
#include "model/precision.h"

#include <QCommandLineParser>
#include <QString>
#include <QStringList>

#include <atomic>
#include <functional>
#include <optional>
#include <string>

namespace outlierlens {
struct VariantOverride;
}

namespace outlierlens::cli {

/// Exit codes shared by every subcommand.
enum ExitCode { Ok = 0, Failure = 1, UsageError = 2 };

/// One subcommand's parser: --help, positional checks, one-line errors.
class Command
{
public:
    Command(const QString& name, const QString& summary);
    QCommandLineParser& parser() { return m_parser; }
    /// Parses args (argv without the program name and subcommand). Returns nullopt to continue,
    /// or an exit code after printing --help (Ok) or a usage error (UsageError).
    std::optional<int> parse(const QStringList& args);
    /// Prints "outlierlens <name>: error: <message>" to stderr and returns `code`.
    int fail(const std::string& message, int code = Failure) const;
    /// Runs a command's body and turns what it throws into the exit code: UsageException -> 2,
    /// Cancelled or any error after SIGINT/SIGTERM -> "interrupted; nothing half-written is left" and 128 +
    /// signal, anything else -> its one-line message and 1. Every command runs through it.
    int guarded(const std::function<int()>& body) const;
    /// The value of a required option, or a usage error naming it.
    std::string required(const QString& option) const;
    std::string value(const QString& option) const { return m_parser.value(option).toStdString(); }
    /// A text option such as --text or --pair, which may be empty (std::nullopt when not given). A
    /// usage error when the argument is not valid UTF-8: Qt has replaced its bytes with U+FFFD, which
    /// BERT's tokenizer drops without a word (Latin-1 "caf\xe9" would run as "caf").
    std::optional<std::string> optionalText(const QString& option) const;
    /// optionalText() of an option that must be given.
    std::string requiredText(const QString& option) const;
    bool isSet(const QString& option) const { return m_parser.isSet(option); }
    /// An integer option within [min, max] (usage error otherwise); fallback when unset.
    int intValue(const QString& option, int fallback, int min, int max) const;
    double doubleValue(const QString& option, double fallback) const;
    const QString& name() const { return m_name; }

    /// Adds --softmax/--gamma/--zeta/--alpha/--max-seq-length/--gate/--n-hid/--pi-init.
    void addVariantOptions();
    VariantOverride variantOverride() const;

    /// Adds --precision fp32|bf16 with `help` saying what bf16 changes for this command.
    void addPrecisionOption(const QString& help);
    /// The precision to compute in: fp32 unless --precision bf16; bf16 on a CPU without bf16
    /// instructions falls back to fp32 and says so on stderr (call once). Other values are a
    /// usage error naming the accepted ones.
    Precision precision() const;

    /// Adds --rule sigma|tau, --k, --tau and --attention-fraction (docs/metrics.md), the one outlier rule
    /// of every command that counts outliers; `ruleHelp` says what --rule changes for this command.
    void addOutlierRuleOptions(const QString& ruleHelp);
    /// The rule those options select, defaults from analysis/outlier_rule.h; a bad value is a usage
    /// error naming the option.
    OutlierCriterion outlierRule() const;

private:
    QString m_name;
    QString m_summary;
    QCommandLineParser m_parser;
};

/// Thrown by Command helpers for a bad option value; main turns it into exit code 2.
struct UsageException
{
    std::string message;
};

/// Set by SIGINT/SIGTERM; long commands check it between batches.
std::atomic<bool>& interruptFlag();
/// What a command stopped by a signal returns: 128 + the signal, as shells report it (130 after
/// Ctrl-C, 143 after SIGTERM).
int interruptedExitCode();
/// Blocks SIGINT and SIGTERM in the calling thread (and so in every thread it starts later) and starts
/// the one thread that takes them: the first sets interruptFlag(), a second removes temp files and
/// exits. Call before any other thread starts. Idempotent.
void installInterruptHandlers();
/// For a worker of `train --nproc-per-node`: SIGINT and SIGTERM only ever set interruptFlag(). Its
/// launcher may signal it more than once (and the kernel does, on the launcher's death); the group
/// must still stop together and rank 0 write its checkpoint. SIGKILL remains the launcher's last word.
void installWorkerInterruptHandlers();
/// For `train`: after the first SIGINT/SIGTERM (which stops the run with a checkpoint) repeats are only
/// reported, never obeyed: timeout(1) and cgroup stops signal the process and its group ~50 ms apart,
/// and the second signal used to abandon the checkpoint being written. SIGKILL still stops at once.
void finishBeforeRepeatedInterrupts();
/// In a child process between fork and exec (async-signal-safe): SIGINT and SIGTERM unblocked again,
/// since exec keeps the blocked set.
void unblockInterruptsInChild();

int runInspect(const QStringList& args);
int runTokenize(const QStringList& args);
int runBench(const QStringList& args);
int runCreateModel(const QStringList& args);
int runShowcase(const QStringList& args);
int runStats(const QStringList& args);
int runTrain(const QStringList& args);
int runSweep(const QStringList& args);
int runConvert(const QStringList& args);
int runQuantize(const QStringList& args);
int runIntervene(const QStringList& args);
int runWeights(const QStringList& args);

} // namespace outlierlens::cli
