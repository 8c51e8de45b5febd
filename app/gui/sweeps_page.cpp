#include "sweeps_page.h"

#include "sweep_view.h"

#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>
#include <QtConcurrent>

namespace outlierlens {

QVector<SweepPointData> readSweepSummary(const QString& pathText, QString* error)
{
    const QString path = QFileInfo(pathText).isDir() ? pathText + QStringLiteral("/summary.json") : pathText;
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        *error = path + QStringLiteral(": cannot open (run `outlierlens sweep` to make one)");
        return {};
    }
    QJsonParseError parse;
    const QJsonDocument doc = QJsonDocument::fromJson(file.readAll(), &parse);
    if (!doc.isArray()) {
        *error = path + QStringLiteral(": not a sweep summary (%1)").arg(parse.errorString());
        return {};
    }
    static const QStringList fixed = {"name",   "state",           "step",         "metric_name",
                                      "metric", "relative_metric", "max_inf_norm", "avg_kurtosis"};
    QVector<SweepPointData> points;
    for (const auto& value : doc.array()) {
        const QJsonObject o = value.toObject();
        SweepPointData p;
        p.name = o["name"].toString();
        p.metricName = o["metric_name"].toString();
        p.metric = o["metric"].toDouble(qQNaN());
        p.relativeMetric = o["relative_metric"].toDouble(qQNaN());
        p.maxInfNorm = o["max_inf_norm"].toDouble(qQNaN());
        p.avgKurtosis = o["avg_kurtosis"].toDouble(qQNaN());
        for (auto it = o.begin(); it != o.end(); ++it)
            if (!fixed.contains(it.key()))
                p.settings.append({it.key(), it.value().isString() ? it.value().toString()
                                                                   : QString::number(it.value().toDouble())});
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
        const QString path = QFileDialog::getOpenFileName(this, tr("Open sweep summary"), QString(),
                                                          tr("Sweep summary (summary.json)"));
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
        loaded.points = readSweepSummary(path, &loaded.error);
        return loaded;
    }));
}

} // namespace outlierlens
