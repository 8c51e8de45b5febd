#pragma once
// GUI thread.

#include <QObject>
#include <QString>

namespace outlierlens {

class MainWindow;
class JobManager;

/// `outlierlens --bench-gui`: measures what a user feels, printing one JSON line:
/// - the longest stall of the GUI thread (a 2 ms timer's worst lateness) while a forward pass runs
///   and while a statistics job runs;
/// - the time to show the next head (view data built, widget repainted) stepping through every
///   layer and head of the current input.
class GuiBenchmark : public QObject
{
    Q_OBJECT
public:
    GuiBenchmark(MainWindow* window, JobManager* jobs, QString imagePath, QString statsData);
    void start();

private:
    void measureForward();
    void measureStatistics();
    void measureHeads();
    void finish();

    MainWindow* m_window;
    JobManager* m_jobs;
    QString m_imagePath;
    QString m_statsData;
    double m_forwardStall = 0, m_statsStall = 0, m_forwardMs = 0;
    int m_tokens = 0;
    QString m_headJson;
};

} // namespace outlierlens
