#include "gui_benchmark.h"

#include "compare_page.h"
#include "compare_view.h"
#include "head_view.h"
#include "heatmap_view.h"
#include "input_request.h"
#include "inspection_controller.h"
#include "job_manager.h"
#include "main_window.h"
#include "model_catalog.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFileInfo>
#include <QSpinBox>
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

/// Counts the paint events a widget receives.
class PaintCounter : public QObject
{
public:
    explicit PaintCounter(QObject* watched)
        : QObject(watched)
    {
        watched->installEventFilter(this);
    }
    int count = 0;

protected:
    bool eventFilter(QObject*, QEvent* event) override
    {
        if (event->type() == QEvent::Paint) ++count;
        return false;
    }
};

/// `words` words, each one wordpiece of the bert-base-uncased vocabulary.
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

GuiBenchmark::GuiBenchmark(MainWindow* window, JobManager* jobs, QString imagePath, QString statsData,
                           int tokens)
    : QObject(window)
    , m_window(window)
    , m_jobs(jobs)
    , m_imagePath(std::move(imagePath))
    , m_statsData(std::move(statsData))
    , m_requestedTokens(std::max(tokens, 3))
{}

void GuiBenchmark::start()
{
    connect(m_window->controller(), &InspectionController::failed, this, [](const QString& message) {
        std::fprintf(stderr, "outlierlens --bench-gui: %s\n", qPrintable(message));
        QCoreApplication::exit(1);
    });
    m_window->resize(1600, 1000); // the size the speed targets are stated for
    QTimer::singleShot(0, this, [this] {
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
        measureCompare();
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
        // BERT: [CLS] + words + [SEP]; a decoder cuts the text to its limit.
        input.text =
            longText(m_window->controller()->model().isDecoder() ? m_requestedTokens : m_requestedTokens - 2);
    } else {
        input.kind = InputRequest::Kind::Image;
        input.path = m_imagePath;
    }
    m_window->runInput(input); // as the input dock does: the Compare page follows it
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
    m_window->pages()->setCurrentWidget(m_window->headView());
    QSpinBox* layerBox = m_window->layerBox();
    QSpinBox* headBox = m_window->headBox();
    const auto* counter =
        new PaintCounter(m_window->headView()->panel(HeadView::ProbabilitiesPanel)->viewport());
    // Start on layer 1, head 1 and let that first layout settle: not timed.
    m_window->setSelection(0, 0);
    worstStall([] { return true; }, 1000);
    std::vector<double> ms;
    const int switches = std::max(12, s->L() * s->H());
    int layer = 0, head = 0;
    for (int i = 0; i < switches; ++i) {
        // Through the heads of a layer with the head box (up, then down in the next layer), then to
        // the next layer with the layer box: one value change (one click) per switch.
        const int direction = layer % 2 == 0 ? 1 : -1;
        const bool nextLayer = head + direction < 0 || head + direction >= s->H();
        if (nextLayer)
            layer = (layer + 1) % s->L();
        else
            head += direction;
        const int painted = counter->count;
        QElapsedTimer clock;
        clock.start();
        (nextLayer ? layerBox : headBox)->setValue((nextLayer ? layer : head) + 1);
        // The handler of the click blocks the event loop: a stall too.
        const double handler = double(clock.nsecsElapsed()) / 1e6;
        double elapsed = 0;
        const double stall = worstStall(
            [&] {
                if (counter->count == painted) return false;
                elapsed = double(clock.nsecsElapsed()) / 1e6;
                return true;
            },
            10000);
        m_headStall = std::max({m_headStall, stall, handler});
        ms.push_back(elapsed > 0 ? elapsed : double(clock.nsecsElapsed()) / 1e6);
        if (qEnvironmentVariableIsSet("OUTLIERLENS_BENCH_VERBOSE"))
            std::fprintf(stderr, "layer %d head %d: %.2f ms (click handler %.2f ms, later stall %.2f ms)\n",
                         layer + 1, head + 1, ms.back(), handler, stall);
    }
    delete counter;
    const double first = ms.front();
    std::sort(ms.begin(), ms.end());
    m_headJson = QStringLiteral("{\"switches\":%1,\"first\":%2,\"median\":%3,\"max\":%4}")
                     .arg(ms.size())
                     .arg(first, 0, 'f', 2)
                     .arg(ms[ms.size() / 2], 0, 'f', 2)
                     .arg(ms.back(), 0, 'f', 2);
}

void GuiBenchmark::measureCompare()
{
    ComparePage* page = m_window->comparePage();
    const auto* view = dynamic_cast<const CompareView*>(page->figure());
    const SnapshotPtr s = m_window->controller()->snapshot();
    const int models =
        int(ModelCatalog::demoTrio(ModelCatalog::compareKind(m_window->controller()->model())).size());
    if (!view || !s || models == 0) return;
    QElapsedTimer clock;
    clock.start();
    m_window->pages()->setCurrentWidget(page); // the page runs the input on each of its models
    // Done when every compared model shows this input (T tokens) and the event loop is free.
    m_compareStall = worstStall(
        [&] {
            if (view->entries().size() < models) return false;
            for (const CompareEntry& e : view->entries())
                if (e.head.tokens.size() != s->T) return false;
            return true;
        },
        180000);
    m_compareMs = double(clock.nsecsElapsed()) / 1e6;
    m_compareModels = int(view->entries().size());
}

void GuiBenchmark::finish()
{
    std::printf(
        "{\"model\":\"%s\",\"tokens\":%d,\"forward_ms\":%.1f,\"max_gui_stall_ms_during_forward\":%.2f,"
        "\"max_gui_stall_ms_during_statistics_job\":%.2f,\"window\":\"%dx%d\",\"head_switch_ms\":%s,"
        "\"max_gui_stall_ms_during_head_switches\":%.2f,\"compare_models\":%d,\"compare_ms\":%.1f,"
        "\"max_gui_stall_ms_during_compare\":%.2f}\n",
        qPrintable(QFileInfo(m_window->controller()->model().dir).fileName()), m_tokens, m_forwardMs,
        m_forwardStall, m_statsStall, m_window->width(), m_window->height(), qPrintable(m_headJson),
        m_headStall, m_compareModels, m_compareMs, m_compareStall);
    std::fflush(stdout);
    QApplication::quit();
}

} // namespace outlierlens
