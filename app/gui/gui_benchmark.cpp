#include "gui_benchmark.h"

#include "head_view.h"
#include "input_request.h"
#include "inspection_controller.h"
#include "job_manager.h"
#include "main_window.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFileInfo>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTimer>

#include <algorithm>
#include <cstdio>
#include <functional>

namespace outlierlens {
namespace {

/// Runs the event loop until `done` is true (or `timeoutMs`), recording the worst lateness of a
/// 2 ms timer: the longest time the GUI thread could not react.
double worstStall(const std::function<bool()>& done, int timeoutMs)
{
    QEventLoop loop;
    QElapsedTimer clock, total;
    double worst = 0;
    QTimer probe;
    probe.setTimerType(Qt::PreciseTimer);
    probe.setInterval(2);
    QObject::connect(&probe, &QTimer::timeout, &loop, [&] {
        worst = std::max(worst, double(clock.nsecsElapsed()) / 1e6 - 2.0);
        clock.restart();
        if (done() || total.elapsed() > timeoutMs) loop.quit();
    });
    clock.start();
    total.start();
    probe.start();
    loop.exec();
    return worst;
}

/// A text of about `tokens` wordpieces with the bert-base-uncased vocabulary.
QString longText(int words)
{
    const QStringList pool = {"the",       "model", "reads", "a",  "sentence", "and",   "its",
                              "attention", "heads", "look",  "at", "every",    "token", "before",
                              "deciding",  "what",  "to",    "do", "."};
    QStringList out;
    for (int i = 0; i < words; ++i)
        out << pool[i % pool.size()];
    return out.join(QLatin1Char(' '));
}

} // namespace

GuiBenchmark::GuiBenchmark(MainWindow* window, JobManager* jobs, QString imagePath, QString statsData)
    : QObject(window)
    , m_window(window)
    , m_jobs(jobs)
    , m_imagePath(std::move(imagePath))
    , m_statsData(std::move(statsData))
{}

void GuiBenchmark::start()
{
    connect(m_window->controller(), &InspectionController::failed, this, [](const QString& message) {
        std::fprintf(stderr, "outlierlens --bench-gui: %s\n", qPrintable(message));
        QCoreApplication::exit(1);
    });
    QTimer::singleShot(0, this, [this] {
        // Wait for the model and the first input.
        // Wait for the model (and the first input, if the window runs one).
        worstStall(
            [this] {
                return !m_window->controller()->model().dir.isEmpty() &&
                       !m_window->controller()->loadingOrInspecting();
            },
            120000);
        if (m_window->controller()->model().dir.isEmpty()) {
            std::fprintf(stderr, "outlierlens --bench-gui: no model was loaded\n");
            QCoreApplication::exit(1);
            return;
        }
        measureForward();
        measureStatistics();
        measureHeads();
        finish();
    });
}

void GuiBenchmark::measureForward()
{
    m_window->pages()->setCurrentWidget(m_window->headView());
    const SnapshotPtr before = m_window->controller()->snapshot();
    QElapsedTimer clock;
    clock.start();
    InputRequest input;
    if (m_imagePath.isEmpty()) {
        input.kind = InputRequest::Kind::Text;
        input.text = longText(126); // [CLS] + 126 + [SEP] = 128 tokens
    } else {
        input.kind = InputRequest::Kind::Image;
        input.path = m_imagePath;
    }
    input.sendTo(*m_window->controller());
    m_forwardStall = worstStall(
        [&] {
            return m_window->controller()->snapshot() != before &&
                   !m_window->controller()->loadingOrInspecting();
        },
        120000);
    m_forwardMs = double(clock.nsecsElapsed()) / 1e6;
    m_tokens = m_window->controller()->snapshot()->T;
}

void GuiBenchmark::measureStatistics()
{
    if (m_statsData.isEmpty()) return;
    const QString out = QStandardPaths::writableLocation(QStandardPaths::TempLocation) +
                        QStringLiteral("/outlierlens-bench-stats.h5");
    QFile::remove(out);
    const QString id =
        m_jobs->queueStatistics(QStringLiteral("benchmark statistics"),
                                {QStringLiteral("--model"), m_window->controller()->model().dir,
                                 QStringLiteral("--data"), m_statsData},
                                out);
    m_statsStall = worstStall(
        [&] {
            const JobInfo* j = m_jobs->job(id);
            return j && j->state != QLatin1String("running") && j->state != QLatin1String("queued");
        },
        120000);
    m_jobs->remove(id);
    QFile::remove(out);
}

void GuiBenchmark::measureHeads()
{
    const SnapshotPtr s = m_window->controller()->snapshot();
    std::vector<double> ms;
    for (int l = 0; l < s->L(); ++l)
        for (int h = 0; h < s->H(); ++h) {
            QElapsedTimer clock;
            clock.start();
            m_window->setSelection(l, h);    // builds the head's data, hands it to the view
            m_window->headView()->repaint(); // and paints it, synchronously
            ms.push_back(double(clock.nsecsElapsed()) / 1e6);
            if (qEnvironmentVariableIsSet("OUTLIERLENS_BENCH_VERBOSE"))
                std::fprintf(stderr, "head %d.%d: %.2f ms\n", l + 1, h + 1, ms.back());
        }
    // The first head after the new input lays the view out anew; the others are the stepping.
    const double first = ms.front();
    const double maxAfterFirst = ms.size() > 1 ? *std::max_element(ms.begin() + 1, ms.end()) : first;
    std::sort(ms.begin(), ms.end());
    m_headJson = QStringLiteral("{\"heads\":%1,\"first\":%2,\"median\":%3,\"max\":%4,\"max_after_first\":%5}")
                     .arg(ms.size())
                     .arg(first, 0, 'f', 2)
                     .arg(ms[ms.size() / 2], 0, 'f', 2)
                     .arg(ms.back(), 0, 'f', 2)
                     .arg(maxAfterFirst, 0, 'f', 2);
}

void GuiBenchmark::finish()
{
    std::printf(
        "{\"model\":\"%s\",\"tokens\":%d,\"forward_ms\":%.1f,\"max_gui_stall_ms_during_forward\":%.2f,"
        "\"max_gui_stall_ms_during_statistics_job\":%.2f,\"head_redraw_ms\":%s}\n",
        qPrintable(QFileInfo(m_window->controller()->model().dir).fileName()), m_tokens, m_forwardMs,
        m_forwardStall, m_statsStall, qPrintable(m_headJson));
    std::fflush(stdout);
    QApplication::quit();
}

} // namespace outlierlens
