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
/// - head switches as a user makes them: the head spin box steps to the next head (as a click on its
///   arrow does) and the time runs until the attention heatmap has been repainted and the event loop
///   is free again; every layer and head of the input in turn (at least 12 switches), with the
///   longest GUI-thread stall meanwhile.
/// - the Compare page opened on that input: the time until every compared model (the demo trio of the
///   model's kind) shows it, with the longest GUI-thread stall meanwhile.
/// The window is 1600 x 1000; the input is text of `tokens` tokens (BERT: wordpieces, at most the
/// model's positions; decoders: that many words, cut to the app's limit) or an image.
class GuiBenchmark : public QObject
{
    Q_OBJECT
public:
    GuiBenchmark(MainWindow* window, JobManager* jobs, QString imagePath, QString statsData,
                 int tokens = 128);
    void start();

private:
    void measureForward();
    void measureStatistics();
    void measureHeads();
    void measureCompare();
    void finish();

    MainWindow* m_window;
    JobManager* m_jobs;
    QString m_imagePath;
    QString m_statsData;
    int m_requestedTokens = 128;
    double m_forwardStall = 0, m_statsStall = 0, m_forwardMs = 0, m_headStall = 0;
    int m_tokens = 0;
    double m_compareMs = 0, m_compareStall = 0;
    int m_compareModels = 0;
    QString m_headJson;
};

} // namespace outlierlens
