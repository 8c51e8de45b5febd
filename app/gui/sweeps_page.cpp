#include "sweeps_page.h"

#include "last_folder.h"
#include "sweep_view.h"
#include "train/sweep_summary.h"

#include <QFile>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>
#include <QtConcurrent>

namespace outlierlens {

QVector<SweepPointData> readSweepPoints(const QString& path, QString* error)
{
    std::vector<SweepSummaryRow> rows;
    try {
        rows = readSweepSummary(QFile::encodeName(path).toStdString());
    } catch (const std::exception& e) {
        *error = QString::fromStdString(e.what());
        return {};
    }
    QVector<SweepPointData> points;
    for (const SweepSummaryRow& row : rows) {
        SweepPointData p;
        p.name = QString::fromStdString(row.name);
        p.metricName = QString::fromStdString(row.metricName);
        p.metric = row.metric;
        p.relativeMetric = row.relativeMetric;
        p.maxInfNorm = row.maxInfNorm;
        p.avgKurtosis = row.avgKurtosis;
        for (const auto& [key, value] : row.settings)
            p.settings.append({QString::fromStdString(key), QString::fromStdString(value)});
        points << p;
    }
    return points;
}

SweepsPage::SweepsPage(QWidget* parent)
    : QWidget(parent)
{
    auto* open = new QPushButton(tr("Open sweep…"));
    m_source = new QLabel(tr("No sweep opened. Run one with `outlierlens sweep --config sweep.json`."));
    m_view = new SweepView;
    auto* controls = new QHBoxLayout;
    controls->addWidget(open);
    controls->addWidget(m_source, 1);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(controls);
    layout->addWidget(m_view, 1);
    connect(open, &QPushButton::clicked, this, [this] {
        const QString path =
            QFileDialog::getOpenFileName(this, tr("Open sweep summary"), lastFolder(QStringLiteral("sweep")),
                                         tr("Sweep summary (summary.json)"));
        rememberFolder(QStringLiteral("sweep"), path);
        if (!path.isEmpty()) openSummary(path);
    });
    connect(&m_watcher, &QFutureWatcher<Loaded>::finished, this, [this] {
        const Loaded loaded = m_watcher.result();
        if (!loaded.error.isEmpty()) {
            Q_EMIT failed(loaded.error);
            return;
        }
        m_view->setPoints(loaded.points, m_source->text());
    });
}

SweepsPage::~SweepsPage()
{
    m_watcher.waitForFinished();
}

const Figure* SweepsPage::figure() const
{
    return m_view;
}

void SweepsPage::openSummary(const QString& path)
{
    m_source->setText(path);
    m_watcher.setFuture(QtConcurrent::run([path] {
        Loaded loaded;
        loaded.points = readSweepPoints(path, &loaded.error);
        return loaded;
    }));
}

} // namespace outlierlens
