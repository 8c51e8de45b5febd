#include "jobs_page.h"

#include "common/error.h"
#include "job_manager.h"
#include "model/model_family.h"
#include "model/variant_fields.h"
#include "model_catalog.h"
#include "paths.h"
#include "tasks/config/train_config.h"
#include "training_charts.h"
#include "variant_comparison.h"

#include <QComboBox>
#include <QDesktopServices>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSpinBox>
#include <QSplitter>
#include <QStandardItemModel>
#include <QStandardPaths>
#include <QTableWidget>
#include <QUrl>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace outlierlens {
namespace {

struct TaskChoice
{
    const char* label;
    const char* preset; ///< training preset it starts from
    QStringList sizes;  ///< model sizes offered
};

const std::vector<TaskChoice>& taskChoices()
{
    static const std::vector<TaskChoice> choices = {
        {"Synthetic no-op task (minutes)", "demo-synthetic", {"bert-tiny", "bert-mini"}},
        {"ViT on Fashion-MNIST", "demo-vit-fmnist", {"vit-fmnist"}},
        {"BERT masked-LM on Wikipedia text", "demo-bert-mlm", {"bert-tiny", "bert-mini", "bert-small"}},
        {"Decoder causal LM on Wikipedia text", "demo-clm", {"gpt2-tiny", "opt-tiny", "llama-tiny"}},
    };
    return choices;
}

/// Labels and `train --attention` names of An et al.'s variants, offered for the decoder task.
const std::vector<std::pair<const char*, const char*>>& anEtAlVariants()
{
    static const std::vector<std::pair<const char*, const char*>> variants = {
        {"An et al.: fixed bias", "fixed-bias"},
        {"An et al.: context-aware bias", "context-bias"},
        {"An et al.: attention bias", "attention-bias"},
        {"An et al.: context-aware scaling", "context-scale"},
        {"An et al.: sigmoid attention", "sigmoid"},
    };
    return variants;
}

QString runsDir()
{
    return QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + QStringLiteral("/runs");
}

} // namespace

JobsPage::JobsPage(JobManager* jobs, QWidget* parent)
    : QWidget(parent)
    , m_jobs(jobs)
{
    // The form.
    m_task = new QComboBox;
    m_task->setObjectName(QStringLiteral("task"));
    for (const TaskChoice& c : taskChoices())
        m_task->addItem(tr(c.label));
    m_size = new QComboBox;
    m_variant = new QComboBox;
    m_variant->setObjectName(QStringLiteral("attention"));
    m_variant->addItems({tr("vanilla softmax"), tr("clipped softmax"), tr("gated attention (linear)"),
                         tr("gated attention (mlp)"), tr("gated attention (all heads linear)")});
    // An et al.'s Table-2 variants (decoders only), by the names `train --attention` takes.
    for (const auto& [label, name] : anEtAlVariants())
        m_variant->addItem(tr(label), QString::fromLatin1(name));
    m_alpha = new QDoubleSpinBox;
    m_alpha->setRange(0.0, 64.0);
    m_alpha->setValue(4.0);
    m_alpha->setToolTip(tr("clipped softmax: gamma = -alpha / T, zeta = 1"));
    m_piInit = new QDoubleSpinBox;
    m_piInit->setRange(0.01, 0.99);
    m_piInit->setSingleStep(0.05);
    m_piInit->setValue(0.25);
    m_steps = new QSpinBox;
    m_steps->setObjectName(QStringLiteral("steps"));
    m_steps->setRange(1, 10000000);
    m_steps->setValue(1000);
    m_processes = new QSpinBox;
    m_processes->setObjectName(QStringLiteral("processes"));
    m_processes->setRange(1, 256);
    m_processes->setValue(1);
    m_processes->setToolTip(
        tr("worker processes training together (outlierlens train --nproc-per-node): each takes an equal "
           "share of every batch and cores / processes threads; the batch size must be divisible by it. "
           "The group is one job (docs/training.md)"));
    m_precision = new QComboBox;
    m_precision->addItems({tr("float32"), tr("bf16 mixed precision")});
    m_precision->setToolTip(
        tr("bf16: matrix products in bfloat16 (float32 weights, optimizer, softmax, LayerNorm and loss); "
           "the demo models trained 1.3-2.5x faster with it on CPUs with bf16 instructions "
           "(docs/performance.md); on other CPUs it falls back to float32"));
    m_name = new QLineEdit;
    m_name->setPlaceholderText(tr("run name (folder under %1)").arg(runsDir()));
    m_start = new QPushButton(tr("Queue training run"));
    auto* form = new QFormLayout;
    form->addRow(tr("Task"), m_task);
    form->addRow(tr("Model size"), m_size);
    form->addRow(tr("Attention"), m_variant);
    form->addRow(tr("alpha (clipped)"), m_alpha);
    form->addRow(tr("pi_init (gated)"), m_piInit);
    form->addRow(tr("Steps"), m_steps);
    form->addRow(tr("Processes"), m_processes);
    form->addRow(tr("Precision"), m_precision);
    form->addRow(tr("Name"), m_name);
    form->addRow(m_start);
    auto* formBox = new QWidget;
    formBox->setLayout(form);

    // The queue.
    m_table = new QTableWidget(0, 5);
    m_table->setHorizontalHeaderLabels({tr("Job"), tr("Kind"), tr("State"), tr("Progress"), tr("Message")});
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->verticalHeader()->hide();
    m_cancel = new QPushButton(tr("Cancel"));
    m_resume = new QPushButton(tr("Resume"));
    m_open = new QPushButton(tr("Open result"));
    m_remove = new QPushButton(tr("Remove from list"));
    auto* compare = new QPushButton(tr("Compare variants…"));
    compare->setObjectName(QStringLiteral("compareVariants"));
    compare->setToolTip(tr("The largest and median |h| per layer of every finished decoder run (An et al.'s "
                           "Figs 10/11), from statistics over the sample text (queued here where missing)"));
    auto* buttons = new QHBoxLayout;
    for (QPushButton* b : {m_cancel, m_resume, m_open, m_remove})
        buttons->addWidget(b);
    buttons->addStretch();
    buttons->addWidget(compare);
    m_detail = new QLabel;
    m_detail->setWordWrap(true);
    m_detail->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_charts = new TrainingCharts;

    auto* queue = new QWidget;
    auto* queueLayout = new QVBoxLayout(queue);
    queueLayout->addWidget(m_table, 1);
    queueLayout->addLayout(buttons);
    queueLayout->addWidget(m_detail);
    // The form and the charts scroll when the window is short (a 1280 x 800 laptop): the page's minimum
    // height no longer adds up their heights, which pushed the window's minimum to 830 px.
    const auto scrolling = [](QWidget* content) {
        auto* area = new QScrollArea;
        area->setWidget(content);
        area->setWidgetResizable(true);
        area->setFrameShape(QFrame::NoFrame);
        // Only vertically: the content keeps its width (a form cut on the right is no form).
        area->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
        area->setMinimumWidth(content->minimumSizeHint().width() +
                              area->verticalScrollBar()->sizeHint().width());
        return area;
    };
    auto* top = new QSplitter(Qt::Horizontal);
    top->addWidget(scrolling(formBox));
    top->addWidget(queue);
    top->setStretchFactor(1, 1);
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(top);
    split->addWidget(scrolling(m_charts));
    split->setStretchFactor(1, 1);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(split);

    auto updateSizes = [this] {
        const TaskChoice& choice = taskChoices()[std::size_t(std::max(0, m_task->currentIndex()))];
        m_size->clear();
        m_size->addItems(choice.sizes);
        // An et al.'s variants exist for the decoders only.
        const bool decoder = QLatin1String(choice.preset) == QLatin1String("demo-clm");
        auto* items = qobject_cast<QStandardItemModel*>(m_variant->model());
        for (int i = 0; i < m_variant->count(); ++i)
            if (!m_variant->itemData(i).toString().isEmpty()) items->item(i)->setEnabled(decoder);
        if (!decoder && !m_variant->currentData().toString().isEmpty()) m_variant->setCurrentIndex(0);
    };
    updateSizes();
    connect(m_task, &QComboBox::currentIndexChanged, this, updateSizes);
    connect(m_start, &QPushButton::clicked, this, &JobsPage::startTraining);
    connect(m_cancel, &QPushButton::clicked, this, [this] { m_jobs->cancel(selectedId()); });
    connect(m_resume, &QPushButton::clicked, this, [this] {
        const QString refusal = m_jobs->resume(selectedId());
        if (!refusal.isEmpty()) Q_EMIT failed(refusal);
    });
    connect(m_remove, &QPushButton::clicked, this, [this] { m_jobs->remove(selectedId()); });
    connect(m_open, &QPushButton::clicked, this, [this] {
        const JobInfo* j = m_jobs->job(selectedId());
        if (!j) return;
        if (j->kind == QLatin1String("stats"))
            Q_EMIT openStatistics(j->output);
        else if (j->kind == QLatin1String("figures") || j->kind == QLatin1String("quantize") ||
                 j->kind == QLatin1String("intervene"))
            // index.html in the user's browser; a quantize or intervene result (PREFIX.json) in their viewer
            QDesktopServices::openUrl(QUrl::fromLocalFile(j->output));
        else if (QFileInfo::exists(j->output))
            Q_EMIT openModel(j->output);
        else if (const QString checkpoint = latestCheckpoint(j->folder); !checkpoint.isEmpty())
            Q_EMIT openModel(checkpoint);
    });
    connect(compare, &QPushButton::clicked, this, [this] {
        // The runs compared are decoders: a decoder family's default data (the sample text).
        ModelInfo decoder;
        const std::vector<ModelFamily>& families = modelFamilies();
        decoder.family =
            &*std::find_if(families.begin(), families.end(), [](const ModelFamily& f) { return f.causal; });
        auto* dialog = new VariantComparisonDialog(m_jobs, ModelCatalog::statisticsData(decoder, {}), this);
        dialog->setAttribute(Qt::WA_DeleteOnClose);
        dialog->show();
    });
    connect(m_table, &QTableWidget::itemSelectionChanged, this, &JobsPage::selectionChanged);
    connect(m_jobs, &JobManager::jobsChanged, this, &JobsPage::refreshTable);
    connect(m_jobs, &JobManager::curvesChanged, this, [this](const QString& id) {
        if (id == selectedId()) m_charts->setCurves(m_jobs->curves(id));
    });
    refreshTable();
}

QString JobsPage::latestCheckpoint(const QString& runFolder)
{
    // The trainer's status.json names the checkpoint it wrote last (relative to the run folder).
    QFile status(runFolder + QStringLiteral("/status.json"));
    if (status.open(QIODevice::ReadOnly)) {
        const QString last = QJsonDocument::fromJson(status.read(1 << 20))
                                 .object()[QStringLiteral("last_checkpoint")]
                                 .toString();
        if (!last.isEmpty() && QFileInfo(runFolder + QLatin1Char('/') + last).isDir())
            return QDir(runFolder).absoluteFilePath(last);
    }
    // Else the newest complete one: step-NNNNNNNNN names sort by step; a ".tmp" folder is one being written.
    QStringList steps =
        QDir(runFolder + QStringLiteral("/checkpoints"))
            .entryList({QStringLiteral("step-*")}, QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name);
    steps.erase(std::remove_if(steps.begin(), steps.end(),
                               [](const QString& s) { return s.endsWith(QLatin1String(".tmp")); }),
                steps.end());
    return steps.isEmpty() ? QString()
                           : QDir(runFolder + QStringLiteral("/checkpoints")).absoluteFilePath(steps.last());
}

const Figure* JobsPage::figure() const
{
    return m_charts;
}

void JobsPage::selectJob(const QString& id)
{
    for (int r = 0; r < m_table->rowCount(); ++r)
        if (m_table->item(r, 0) && m_table->item(r, 0)->data(Qt::UserRole).toString() == id) {
            m_table->selectRow(r);
            return;
        }
}

QString JobsPage::durationText(double seconds)
{
    if (seconds < 90) return tr("%1 s").arg(std::max(1, int(std::lround(seconds))));
    if (seconds < 90 * 60) return tr("%1 min").arg(std::lround(seconds / 60));
    const long minutes = std::lround(seconds / 60);
    return tr("%1 h %2 min").arg(minutes / 60).arg(minutes % 60);
}

QString JobsPage::selectedId() const
{
    const auto rows = m_table->selectionModel()->selectedRows();
    return rows.isEmpty() ? QString() : m_table->item(rows.first().row(), 0)->data(Qt::UserRole).toString();
}

void JobsPage::refreshTable()
{
    const QString selected = selectedId();
    const QList<JobInfo> jobs = m_jobs->jobs();
    m_table->setRowCount(int(jobs.size()));
    for (int r = 0; r < jobs.size(); ++r) {
        const JobInfo& j = jobs[r];
        QString progress =
            j.total > 0 ? QStringLiteral("%1 / %2 (%3%)").arg(j.step).arg(j.total).arg(100 * j.step / j.total)
                        : QString();
        if (j.state == QLatin1String("running") && j.secondsLeft >= 0)
            progress += tr(", about %1 left").arg(durationText(j.secondsLeft));
        const QStringList cells = {j.title, j.kind, j.state, progress, j.message};
        for (int c = 0; c < cells.size(); ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            item->setData(Qt::UserRole, j.id);
            item->setToolTip(cells[c]);
            m_table->setItem(r, c, item);
        }
        if (j.id == selected) m_table->selectRow(r);
    }
    selectionChanged();
}

void JobsPage::selectionChanged()
{
    const JobInfo* j = m_jobs->job(selectedId());
    m_cancel->setEnabled(j && (j->state == QLatin1String("running") || j->state == QLatin1String("queued")));
    m_resume->setEnabled(j && j->kind == QLatin1String("train") &&
                         (j->state == QLatin1String("stopped") || j->state == QLatin1String("failed")));
    const bool busy = j && (j->state == QLatin1String("running") || j->state == QLatin1String("queued"));
    // A training run's result is its final model or, stopped or failed, its latest checkpoint; nothing while
    // it runs (a checkpoint opened then is soon replaced, and the folder is the trainer's).
    m_open->setEnabled(j && !busy &&
                       (j->state == QLatin1String("finished") ||
                        (j->kind == QLatin1String("train") && !latestCheckpoint(j->folder).isEmpty())));
    m_remove->setEnabled(j && j->state != QLatin1String("running"));
    if (!j) {
        m_detail->clear();
        return;
    }
    m_detail->setText(tr("Folder: %1\nLog: %2\nCommand: outlierlens %3")
                          .arg(j->folder, j->logFile, j->arguments.join(QLatin1Char(' '))));
    // Another job's curves never stay on screen: a queued run has none yet, a statistics job none at all.
    m_charts->setCurves(j->kind == QLatin1String("train") ? m_jobs->curves(j->id) : TrainingCurveData{});
}

void JobsPage::startTraining()
{
    try {
        const TaskChoice& choice = taskChoices()[std::size_t(std::max(0, m_task->currentIndex()))];
        TrainConfig c = presetConfig(choice.preset);
        QString name = m_name->text().trimmed();
        if (name.isEmpty())
            name = QStringLiteral("%1-%2").arg(
                QString::fromLatin1(choice.preset),
                QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss")));
        const QString folder = runsDir() + QStringLiteral("/") + name;
        c.output = folder.toStdString();
        c.preset = m_size->currentText().toStdString();
        c.steps = m_steps->value();
        c.precision = m_precision->currentIndex() == 1 ? Precision::Bf16 : Precision::Fp32;
        c.worldSize = m_processes->value(); // validated below: the batch must divide by it
        c.warmupSteps = std::min<std::int64_t>(c.warmupSteps, c.steps / 10);
        c.evalEvery = std::max<std::int64_t>(1, std::min<std::int64_t>(c.evalEvery, c.steps / 10));
        c.checkpointEvery = std::max<std::int64_t>(1, std::min<std::int64_t>(c.checkpointEvery, c.steps / 4));
        c.logEvery = std::max<std::int64_t>(1, std::min<std::int64_t>(c.logEvery, c.steps / 50));
        switch (m_variant->currentIndex()) {
        case 1:
            c.variant.softmax = SoftmaxKind::Clipped;
            c.variant.alpha = m_alpha->value();
            break;
        case 2:
        case 3:
        case 4:
            c.variant.gate = m_variant->currentIndex() == 2   ? GateKind::Linear
                             : m_variant->currentIndex() == 3 ? GateKind::Mlp
                                                              : GateKind::AllHeadsLinear;
            c.variant.piInit = m_piInit->value();
            if (c.variant.gate == GateKind::Mlp) c.variant.nHid = 16;
            break;
        default: // An et al.'s, by name
            if (!m_variant->currentData().toString().isEmpty())
                applyNamedVariant(c.variant, m_variant->currentData().toString().toStdString());
            break;
        }
        // The presets name sample data relative to the source tree; make them absolute.
        for (std::string* path : {&c.corpus, &c.validCorpus, &c.vocab, &c.tokenizer})
            if (path->rfind("sample_data/", 0) == 0) *path = sampleDataFile(path->substr(12));
        if (c.task == TrainTask::MaskedLm && c.vocab.empty()) c.vocab = sampleDataFile("bert/vocab.txt");
        validateTrainConfig(c);
        // The run's name first: the folder it writes into (the Name field, or the one made up for it).
        QString title = tr("%1: %2, %3, %4")
                            .arg(QFileInfo(folder).fileName(), tr(choice.label), m_size->currentText(),
                                 m_variant->currentText());
        if (c.worldSize > 1) title += tr(", %1 processes").arg(c.worldSize);
        selectJob(
            m_jobs->queueTraining(title, QString::fromStdString(trainConfigToJson(c)), folder, c.worldSize));
        m_name->clear();
    } catch (const std::exception& e) {
        Q_EMIT failed(QString::fromStdString(e.what()));
    }
}

void JobsPage::queueStatistics(const QString& model, const QString& data, const OutlierCriterion& rule)
{
    const QString out =
        runsDir() + QStringLiteral("/stats-%1-%2.h5")
                        .arg(QFileInfo(model).fileName(),
                             QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss")));
    QDir().mkpath(runsDir());
    QStringList arguments{QStringLiteral("--model"), model, QStringLiteral("--data"), data,
                          QStringLiteral("--systematic")}; // for the Systematic outliers page
    for (const std::string& a : rule.arguments())
        arguments << QString::fromStdString(a);
    selectJob(m_jobs->queueStatistics(
        tr("statistics of %1 over %2 (outliers over %3)")
            .arg(QFileInfo(model).fileName(), data, QString::fromStdString(rule.shortText())),
        arguments, out));
}

} // namespace outlierlens
