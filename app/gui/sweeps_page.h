#pragma once
// GUI thread; the summary file is read on a worker thread.

#include "view_data.h"

#include <QFutureWatcher>
#include <QWidget>

class QLabel;

namespace outlierlens {

class SweepView;
class Figure;

/// Charts of a finished sweep (`outlierlens sweep`), like the paper's Figures 6 and 7.
class SweepsPage : public QWidget
{
    Q_OBJECT
public:
    explicit SweepsPage(QWidget* parent = nullptr);
    ~SweepsPage() override;
    /// Reads <folder>/summary.json (or a summary.json path) in the background and shows it.
    void openSummary(const QString& path);
    const Figure* figure() const;

Q_SIGNALS:
    void failed(const QString& message);

private:
    struct Loaded
    {
        QVector<SweepPointData> points;
        QString error;
    };
    QLabel* m_source = nullptr;
    SweepView* m_view = nullptr;
    QFutureWatcher<Loaded> m_watcher;
};

/// Parses a sweep's summary.json (any thread).
QVector<SweepPointData> readSweepSummary(const QString& path, QString* error);

} // namespace outlierlens
