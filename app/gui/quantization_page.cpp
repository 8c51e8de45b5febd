#include "quantization_page.h"

#include "chart_support.h"
#include "job_manager.h"
#include "paper_tables.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLabel>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QValueAxis>

#include <cmath>

namespace outlierlens {
namespace {

enum Column { Setting, Fp, Quantized, FpAfter, MaxInfNorm, Kurtosis, State, Columns };

} // namespace

const QVector<QuantizationPage::Row>& QuantizationPage::rows()
{
    static const QVector<Row> all = {
        {tr("W8A8 per tensor (the paper's)"), {QStringLiteral("--sensitivity")}},
        {tr("W8A8 per token"), {QStringLiteral("--act-granularity"), QStringLiteral("token")}},
        {tr("W8A8 after SmoothQuant 0.5"), {QStringLiteral("--smoothquant"), QStringLiteral("0.5")}},
        {tr("W8A8 after the Hadamard rotation"), {QStringLiteral("--rotate"), QStringLiteral("hadamard")}},
        {tr("W4A4 per token"),
         {QStringLiteral("--bits-w"), QStringLiteral("4"), QStringLiteral("--bits-a"), QStringLiteral("4"),
          QStringLiteral("--per-channel"), QStringLiteral("--act-granularity"), QStringLiteral("token")}},
        {tr("W4A4 per token, rotated"),
         {QStringLiteral("--bits-w"), QStringLiteral("4"), QStringLiteral("--bits-a"), QStringLiteral("4"),
          QStringLiteral("--per-channel"), QStringLiteral("--act-granularity"), QStringLiteral("token"),
          QStringLiteral("--rotate"), QStringLiteral("hadamard")}},
        {tr("W4A4 per token, first token in FP"),
         {QStringLiteral("--bits-w"), QStringLiteral("4"), QStringLiteral("--bits-a"), QStringLiteral("4"),
          QStringLiteral("--per-channel"), QStringLiteral("--act-granularity"), QStringLiteral("token"),
          QStringLiteral("--keep-fp"), QStringLiteral("1")}},
    };
    return all;
}

QuantizationPage::QuantizationPage(JobManager* jobs, QWidget* parent)
    : QWidget(parent)
    , m_jobs(jobs)
{
    m_caption = new QLabel(tr("Open a model to quantize it."));
    m_caption->setWordWrap(true);
    m_caption->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_compute = new QPushButton(tr("Co&mpute the rows"));
    m_compute->setToolTip(
        tr("Queue one `outlierlens quantize` job per row without a result (Jobs page); each "
           "calibrates on the model's training data and evaluates on its held-out data."));
    m_compute->setEnabled(false);
    m_table = new QTableWidget(int(rows().size()), Columns);
    m_table->setObjectName(QStringLiteral("quantizationTable"));
    m_table->setHorizontalHeaderLabels({tr("Setting"), tr("FP"), tr("Quantized"), tr("FP after transform"),
                                        tr("Max inf norm"), tr("Avg kurtosis"), tr("State")});
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setStretchLastSection(true);
    for (int r = 0; r < rows().size(); ++r) {
        m_table->setItem(r, Setting, new QTableWidgetItem(rows()[r].name));
        for (int c = Fp; c < Columns; ++c)
            m_table->setItem(r, c, new QTableWidgetItem());
    }
    QChart* chart = charts::makeChart(tr("Per-layer sensitivity (W8A8, one layer's activations at a time)"));
    m_sensitivity = charts::makeChartView(chart, QStringLiteral("quantizationSensitivity"), this);
    m_sensitivity->setMinimumHeight(220);

    auto* top = new QHBoxLayout;
    top->addWidget(m_caption, 1);
    top->addWidget(m_compute);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(m_table, 1);
    layout->addWidget(m_sensitivity, 1);

    connect(m_compute, &QPushButton::clicked, this, &QuantizationPage::compute);
    connect(m_jobs, &JobManager::jobsChanged, this, &QuantizationPage::jobsChanged);
}

QString QuantizationPage::resultFile(int row) const
{
    // One file per model folder and row, in the jobs folder: reopening the model shows it again.
    const QString key =
        QString::fromLatin1(QCryptographicHash::hash(QFileInfo(m_model.dir).absoluteFilePath().toUtf8(),
                                                     QCryptographicHash::Sha256)
                                .toHex()
                                .left(12));
    return m_jobs->jobsDir() +
           QStringLiteral("/quantize/%1-%2-row%3.json").arg(m_model.name, key).arg(row + 1);
}

void QuantizationPage::setModel(const ModelInfo& model)
{
    m_model = model;
    m_jobOfRow.clear();
    QString why;
    const std::optional<QuantDataChoice> data = quantDataFor(model.dir, QString(), &why);
    m_dataArguments.clear();
    if (data) {
        m_dataArguments = {QStringLiteral("--data"),
                           data->spec,
                           QStringLiteral("--seq-length"),
                           QString::number(data->seqLength),
                           QStringLiteral("--nli-train-pairs"),
                           QString::number(data->nliTrainPairs)};
        m_caption->setText(
            tr("<b>%1</b>: <i>outlierlens quantize</i> on %2 (%3). Weights 8 bits per tensor unless the "
               "row says otherwise (W4A4: 4-bit weights per output channel); activations at the paper's "
               "sites "
               "(docs/quantization.md); 3 seeds.")
                .arg(model.name.toHtmlEscaped(), data->spec.toHtmlEscaped(), data->source.toHtmlEscaped()));
    } else {
        m_caption->setText(tr("<b>%1</b>: no data to quantize it on (%2).")
                               .arg(model.name.toHtmlEscaped(), why.toHtmlEscaped()));
    }
    m_compute->setEnabled(data.has_value());
    for (int r = 0; r < rows().size(); ++r)
        showRow(r);
}

void QuantizationPage::compute()
{
    if (m_dataArguments.isEmpty()) return;
    QDir().mkpath(m_jobs->jobsDir() + QStringLiteral("/quantize"));
    for (int r = 0; r < rows().size(); ++r) {
        if (QFileInfo::exists(resultFile(r)) || m_jobOfRow.contains(r)) continue;
        QString prefix = resultFile(r);
        prefix.chop(5); // ".json"
        const QStringList arguments = QStringList{QStringLiteral("--model"), m_model.dir} + m_dataArguments +
                                      rows()[r].arguments + m_extraArguments;
        m_jobOfRow.insert(r, m_jobs->queueQuantize(m_model.name + QStringLiteral(": ") + rows()[r].name,
                                                   arguments, prefix));
        showRow(r);
    }
}

void QuantizationPage::jobsChanged()
{
    for (auto it = m_jobOfRow.begin(); it != m_jobOfRow.end(); ++it)
        showRow(it.key());
}

void QuantizationPage::showRow(int row)
{
    const auto set = [&](int column, const QString& text) { m_table->item(row, column)->setText(text); };
    const QJsonObject result = readJobResult(resultFile(row));
    if (!result.isEmpty()) {
        const QString metric = result[QStringLiteral("metric")].toString();
        // The metric and the tracked tensor name the columns; the cells hold numbers.
        m_table->horizontalHeaderItem(Fp)->setText(tr("FP %1").arg(metric));
        set(Fp, metricText(result[QStringLiteral("fp")].toDouble(), metric));
        m_table->horizontalHeaderItem(Quantized)->setToolTip(tr("Mean ± sample std over the seeds"));
        set(Quantized,
            tr("%1 ± %2").arg(metricText(result[QStringLiteral("quantized_mean")].toDouble(), metric),
                              metricText(result[QStringLiteral("quantized_std")].toDouble(), metric)));
        const bool transformed = !result[QStringLiteral("transform")].toString().isEmpty();
        set(FpAfter, transformed ? metricText(result[QStringLiteral("fp_after_transform")].toDouble(), metric)
                                 : QStringLiteral("–"));
        const QString tensor = result[QStringLiteral("outlier_tensor")].toString();
        m_table->horizontalHeaderItem(MaxInfNorm)->setText(tr("Max inf norm (%1)").arg(tensor));
        m_table->horizontalHeaderItem(Kurtosis)->setText(tr("Avg kurtosis (%1)").arg(tensor));
        const auto pair = [&](const char* key, const char* after) {
            const QString before = QString::number(result[QLatin1String(key)].toDouble(), 'f', 2);
            return transformed ? before + QStringLiteral(" → ") +
                                     QString::number(result[QLatin1String(after)].toDouble(), 'f', 2)
                               : before;
        };
        set(MaxInfNorm, pair("max_inf_norm", "max_inf_norm_after_transform"));
        set(Kurtosis, pair("avg_kurtosis", "avg_kurtosis_after_transform"));
        set(State, tr("done (%1 s)").arg(result[QStringLiteral("seconds")].toDouble(), 0, 'f', 0));
        if (row == 0) showSensitivity(result);
        return;
    }
    for (int c = Fp; c < State; ++c)
        set(c, QString());
    const JobInfo* job = m_jobOfRow.contains(row) ? m_jobs->job(m_jobOfRow.value(row)) : nullptr;
    if (!job) {
        set(State, tr("not computed"));
    } else if (job->state == QLatin1String("running") && job->total > 0) {
        set(State, tr("running (%1 of %2 stages)").arg(job->step).arg(job->total));
    } else if (job->state == QLatin1String("failed")) {
        // quantize's own message: a transform refused with its reason, bad data, ...
        QString message = job->message;
        message.remove(QStringLiteral("outlierlens quantize: error: "));
        set(State, tr("failed: %1").arg(message));
        m_table->item(row, State)->setToolTip(message);
    } else {
        set(State, job->state);
    }
    if (row == 0) showSensitivity({});
}

void QuantizationPage::showSensitivity(const QJsonObject& result)
{
    QChart* chart = m_sensitivity->chart();
    chart->removeAllSeries();
    for (QAbstractAxis* axis : chart->axes())
        chart->removeAxis(axis);
    const QJsonArray rows = result[QStringLiteral("sensitivity")].toArray();
    if (rows.isEmpty()) return;
    // In layer order (the file ranks them): embeddings and head first.
    QVector<QPair<int, double>> damage;
    for (const QJsonValue& v : rows) {
        const QJsonObject o = v.toObject();
        const int layer = o[QStringLiteral("layer")].isString() ? 0 : o[QStringLiteral("layer")].toInt();
        damage.append({layer, o[QStringLiteral("damage")].toDouble()});
    }
    std::sort(damage.begin(), damage.end());
    const QString metric = result[QStringLiteral("metric")].toString();
    auto* set = new QBarSet(metric == QLatin1String("accuracy") ? tr("accuracy points lost")
                                                                : tr("%1 gained").arg(metric));
    QStringList categories;
    double lo = 0, hi = 0;
    for (const auto& [layer, d] : damage) {
        const double shown = metric == QLatin1String("accuracy") ? 100.0 * d : d;
        *set << shown;
        lo = std::min(lo, shown), hi = std::max(hi, shown);
        categories << (layer == 0 ? tr("embeddings + head") : tr("layer %1").arg(layer));
    }
    auto* series = new QBarSeries;
    series->append(set);
    chart->addSeries(series);
    auto* x = new QBarCategoryAxis;
    x->append(categories);
    auto* y = new QValueAxis;
    charts::setNiceRange(y, lo, hi);
    charts::setAxisTitle(y, set->label());
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    series->attachAxis(x);
    series->attachAxis(y);
}

} // namespace outlierlens
