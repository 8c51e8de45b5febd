#pragma once
// GUI thread.

#include <QObject>
#include <QSize>
#include <QStringList>

namespace outlierlens {

class MainWindow;

/// Saves a screenshot of each named page of the main window into a folder, waiting for the
/// window to be idle before each, then quits. Drives `outlierlens --screenshots DIR` (the
/// README's and docs' pictures are made this way under Xvfb: scripts/screenshots).
class ScreenshotTour : public QObject
{
    Q_OBJECT
public:
    ScreenshotTour(MainWindow* window, QString folder, QStringList pages, QString prefix,
                   QSize windowSize = QSize(1500, 920));
    void start();

private:
    void next();
    bool idle() const;

    MainWindow* m_window;
    QString m_folder;
    QStringList m_pages;
    QString m_prefix;
    QSize m_windowSize;
    int m_index = 0;
    int m_waited = 0;
};

} // namespace outlierlens
