#pragma once
// GUI thread; the summary file is read on a worker thread.

#include "page.h"
#include "view_data.h"

#include <QFutureWatcher>
#include <QWidget>

class QLabel;

namespace outlierlens {

class SweepView;
class Figure;

/// Charts of a finished sweep (`outlierlens sweep`), like the paper's Figures 6 and 7.
class SweepsPage : public QWidget, public Page
{
    Q_OBJECT
public:
    explicit SweepsPage(QWidget* parent = nullptr);
    ~SweepsPage() override;
    /// Reads <folder>/summary.json (or a summary.json path) in the background and shows it.
    void openSummary(const QString& path);
    const Figure* figure() const override;

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

/// A sweep's summary.json (the file or its folder) as the points the charts show, read with the
/// backend's reader (train/sweep_summary.h); empty with `error` set if it cannot be read. Any thread.
QVector<SweepPointData> readSweepPoints(const QString& path, QString* error);

} // namespace outlierlens
