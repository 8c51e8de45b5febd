#include "screenshot_tour.h"

#include "inspection_controller.h"
#include "main_window.h"

#include <QApplication>
#include <QDir>
#include <QDockWidget>
#include <QTabWidget>
#include <QTimer>

#include <cstdio>

namespace outlierlens {

ScreenshotTour::ScreenshotTour(MainWindow* window, QString folder, QStringList pages, QString prefix,
                               QSize windowSize)
    : QObject(window)
    , m_window(window)
    , m_folder(std::move(folder))
    , m_pages(std::move(pages))
    , m_prefix(std::move(prefix))
    , m_windowSize(windowSize)
{}

void ScreenshotTour::start()
{
    // The same window for every screenshot, whatever layout the settings remember.
    m_window->showNormal();
    m_window->resize(m_windowSize);
    if (auto* dock = m_window->findChild<QDockWidget*>(QStringLiteral("inputDock")))
        m_window->resizeDocks({dock}, {m_windowSize.width() * 470 / 1500}, Qt::Horizontal);
    QDir().mkpath(m_folder);
    QTimer::singleShot(500, this, &ScreenshotTour::next);
}

bool ScreenshotTour::idle() const
{
    return m_window->controller()->snapshot() && !m_window->controller()->busy();
}

void ScreenshotTour::next()
{
    if (m_index >= m_pages.size()) {
        QApplication::quit();
        return;
    }
    // Other pages (compare, teaching) load their own models: give them time to settle too.
    if (!idle() && m_waited < 240) {
        ++m_waited;
        QTimer::singleShot(500, this, &ScreenshotTour::next);
        return;
    }
    QTabWidget* pages = m_window->pages();
    const QString name = m_pages[m_index];
    for (int i = 0; i < pages->count(); ++i)
        if (pages->tabText(i).remove(QLatin1Char('&')).compare(name, Qt::CaseInsensitive) == 0)
            pages->setCurrentIndex(i);
    QTimer::singleShot(m_waited == -1 ? 0 : 4000, this, [this, name] {
        const QString path = m_folder + QStringLiteral("/") + m_prefix +
                             name.toLower().replace(QLatin1Char(' '), QLatin1Char('-')) +
                             QStringLiteral(".png");
        const bool ok = m_window->grab().save(path);
        std::fprintf(stderr, "screenshot %s: %s\n", qPrintable(path), ok ? "saved" : "FAILED");
        ++m_index;
        m_waited = 0;
        next();
    });
}

} // namespace outlierlens
