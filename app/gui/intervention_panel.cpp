#include "intervention_panel.h"

#include "inspection_controller.h"
#include "job_manager.h"
#include "paper_tables.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <numeric>
#include <set>

namespace outlierlens {

namespace {

QString joinedPositions(const std::vector<std::int64_t>& values, int base = 0)
{
    QStringList parts;
    for (std::int64_t v : values)
        parts << QString::number(v + base);
    return parts.join(QLatin1Char(','));
}

/// `outlierlens intervene`'s options for `i` (layers and heads 1-based, as the command takes them).
QStringList interveneArguments(const Intervention& i)
{
    QStringList a{QStringLiteral("--layer"), QString::number(i.layer + 1), QStringLiteral("--tensor"),
                  QString::fromStdString(i.tensor)};
    if (!i.dims.empty()) a << QStringLiteral("--dims") << joinedPositions(i.dims);
    if (!i.tokens.empty()) a << QStringLiteral("--tokens") << joinedPositions(i.tokens);
    if (!i.keys.empty()) a << QStringLiteral("--keys") << joinedPositions(i.keys);
    if (!i.heads.empty()) a << QStringLiteral("--heads") << joinedPositions(i.heads, 1);
    if (i.tensor == "attn_probs" && !i.renormalize) a << QStringLiteral("--no-renormalize");
    a << QStringLiteral("--set")
      << (i.value == Intervention::Value::Zero   ? QStringLiteral("zero")
          : i.value == Intervention::Value::Mean ? QStringLiteral("mean")
                                                 : QString::number(i.constant, 'g', 17));
    return a;
}

/// "</s> (0), . (7)": tokens by label and 0-based position.
QString tokenLabels(const InspectionSnapshot& s, const std::vector<std::int64_t>& positions)
{
    QStringList labels;
    for (std::int64_t t : positions)
        labels << QStringLiteral("%1 (%2)").arg(s.tokens.value(int(t))).arg(t);
    return labels.join(QStringLiteral(", "));
}

} // namespace

bool interventionTakesDimensions(const QString& tensor)
{
    return tensor == QLatin1String("attn_out") || tensor == QLatin1String("ffn_out") ||
           tensor == QLatin1String("out");
}

InterventionPanel::InterventionPanel(InspectionController* controller, JobManager* jobs, QWidget* parent)
    : QFrame(parent)
    , m_controller(controller)
    , m_jobs(jobs)
{
    setObjectName(QStringLiteral("interventionPanel"));
    setFrameShape(QFrame::StyledPanel);
    m_title = new QLabel;
    m_title->setWordWrap(true);
    m_input = new QLabel;
    m_input->setWordWrap(true);
    m_data = new QLabel;
    m_data->setWordWrap(true);
    auto* clearButton = new QPushButton(tr("&Clear the intervention"));
    clearButton->setToolTip(tr("Run the input again as the model computes it (Ctrl+Shift+X)"));
    m_table = new QTableWidget;
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 6);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);

    auto* top = new QHBoxLayout;
    top->addWidget(m_title, 1);
    top->addWidget(clearButton);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 4, 6, 4);
    layout->addLayout(top);
    layout->addWidget(m_input);
    layout->addWidget(m_data);
    layout->addWidget(m_table);
    hide();

    connect(clearButton, &QPushButton::clicked, this, &InterventionPanel::clear);
    connect(m_jobs, &JobManager::jobsChanged, this, [this] {
        if (m_jobId.isEmpty()) return;
        const JobInfo* j = m_jobs->job(m_jobId);
        if (!j) return;
        if (j->state == QLatin1String("failed") || j->state == QLatin1String("stopped")) {
            m_jobError = j->message.isEmpty() ? j->state : j->message;
            m_jobId.clear();
            redraw();
        } else if (j->state == QLatin1String("finished")) {
            jobFinished(m_jobId);
        }
    });
    connect(m_jobs, &JobManager::jobFinished, this, &InterventionPanel::jobFinished);
}

QString InterventionPanel::resultPrefix(const Intervention& intervention) const
{
    // One file per model folder and intervention: asking again reuses it.
    const QByteArray key = (QFileInfo(m_model.dir).absoluteFilePath() + QLatin1Char('\n') +
                            interveneArguments(intervention).join(QLatin1Char(' ')))
                               .toUtf8();
    return m_jobs->jobsDir() +
           QStringLiteral("/intervene/%1-%2")
               .arg(m_model.name,
                    QString::fromLatin1(
                        QCryptographicHash::hash(key, QCryptographicHash::Sha256).toHex().left(16)));
}

void InterventionPanel::apply(const Intervention& intervention)
{
    m_intervention = intervention;
    m_intervention->means.clear();
    m_result = {};
    m_jobError.clear();
    m_jobId.clear();
    m_prefix = resultPrefix(*m_intervention);
    const QString transform = QString::fromStdString(m_controller->transform().describe());
    if (!transform.isEmpty()) {
        // Its dimensions are the transformed model's; `intervene` runs the model as trained.
        m_jobError = tr("the intervene job runs the model as trained, not seen through %1").arg(transform);
    } else if (QFileInfo::exists(m_prefix + QStringLiteral(".json"))) {
        readResult();
    } else if (m_taskData) {
        QDir().mkpath(QFileInfo(m_prefix).absolutePath());
        const QStringList arguments = QStringList{QStringLiteral("--model"),
                                                  m_model.dir,
                                                  QStringLiteral("--data"),
                                                  m_taskData->spec,
                                                  QStringLiteral("--seq-length"),
                                                  QString::number(m_taskData->seqLength),
                                                  QStringLiteral("--nli-train-pairs"),
                                                  QString::number(m_taskData->nliTrainPairs)} +
                                      interveneArguments(*m_intervention);
        m_jobId = m_jobs->queueIntervene(m_model.name + QStringLiteral(": ") +
                                             QString::fromStdString(m_intervention->describe()),
                                         arguments, m_prefix);
        Q_EMIT jobQueued(m_jobId);
    } else {
        m_jobError = tr("no data to measure it over (%1)").arg(m_taskDataWhy);
    }
    // A mean is the data's: the input reruns with it once the job has collected it, and as the model
    // computes it until then (not with an intervention set before).
    if (m_intervention->value != Intervention::Value::Mean || !m_intervention->means.empty())
        m_controller->setIntervention(m_intervention);
    else if (m_controller->intervention())
        m_controller->setIntervention(std::nullopt);
    show();
    redraw();
}

void InterventionPanel::clear()
{
    const bool wasOn = m_controller->intervention().has_value();
    m_intervention.reset();
    m_jobId.clear();
    hide();
    if (wasOn) m_controller->setIntervention(std::nullopt);
}

void InterventionPanel::setModel(const ModelInfo& model)
{
    m_model = model;
    m_taskDataWhy.clear();
    m_taskData = quantDataFor(model.dir, QString(), &m_taskDataWhy); // read once per model, not per menu
    m_intervention.reset();
    m_jobId.clear();
    hide();
}

void InterventionPanel::jobFinished(const QString& id)
{
    if (id != m_jobId) return;
    m_jobId.clear();
    readResult();
    // The data's means: the input reruns with them.
    if (m_intervention && m_intervention->value == Intervention::Value::Mean &&
        !m_intervention->means.empty())
        m_controller->setIntervention(m_intervention);
    redraw();
}

void InterventionPanel::readResult()
{
    m_result = readJobResult(m_prefix + QStringLiteral(".json"));
    if (m_result.isEmpty()) {
        m_jobError = tr("the job wrote no result (%1.json)").arg(m_prefix);
        return;
    }
    if (m_intervention && m_intervention->value == Intervention::Value::Mean) {
        m_intervention->means.clear();
        for (const QJsonValue& v : m_result[QStringLiteral("means")].toArray())
            m_intervention->means.push_back(v.toDouble());
        if (m_intervention->means.empty()) m_jobError = tr("the job collected no means");
    }
}

void InterventionPanel::showSnapshot(const SnapshotPtr& snapshot)
{
    m_snapshot = snapshot;
    if (m_intervention) redraw();
}

QString InterventionPanel::text() const
{
    return QStringList{m_title->text(), m_input->text(), m_data->text()}.join(QLatin1Char('\n'));
}

void InterventionPanel::redraw()
{
    if (!m_intervention) return;
    m_title->setText(tr("<b>Intervention</b>: %1")
                         .arg(QString::fromStdString(m_intervention->describe()).toHtmlEscaped()));
    const SnapshotPtr base = m_controller->originalOf(m_snapshot);
    const bool intervened = m_snapshot && !m_snapshot->intervention.isEmpty();
    const bool comparable = base != nullptr;
    const bool waitingForMeans =
        m_intervention->value == Intervention::Value::Mean && m_intervention->means.empty();
    if (waitingForMeans && !m_jobError.isEmpty())
        m_input->setText(tr("This input: no mean to set (see below)."));
    else if (waitingForMeans)
        m_input->setText(tr("This input: waiting for the means over the model's data (the job)."));
    else if (!intervened)
        m_input->setText(tr("This input: running…"));
    else if (comparable)
        m_input->setText(
            tr("This input: %1 → <b>%2</b>")
                .arg(base->prediction.mid(0, 3).join(QStringLiteral(", ")).toHtmlEscaped(),
                     m_snapshot->prediction.mid(0, 3).join(QStringLiteral(", ")).toHtmlEscaped()));
    else
        m_input->setText(
            tr("This input: %1").arg(m_snapshot->prediction.mid(0, 3).join(QStringLiteral(", "))));

    if (!m_result.isEmpty()) {
        const QString metric = m_result[QStringLiteral("metric")].toString();
        m_data->setText(tr("Over the model's data (%1): %2 %3 → <b>%4</b>")
                            .arg(m_result[QStringLiteral("data")].toString().toHtmlEscaped(), metric,
                                 metricText(m_result[QStringLiteral("fp")].toDouble(), metric),
                                 metricText(m_result[QStringLiteral("intervened")].toDouble(), metric)));
    } else if (!m_jobError.isEmpty()) {
        m_data->setText(tr("Over the model's data: not measured: %1").arg(m_jobError.toHtmlEscaped()));
    } else {
        m_data->setText(tr("Over the model's data: measuring (the intervene job on the Jobs page)…"));
    }

    // The intervened activations beside the original ones: the tensor intervened on (out for the
    // attention interventions), every layer from the intervention's on.
    const QString tensor = interventionTakesDimensions(QString::fromStdString(m_intervention->tensor))
                               ? QString::fromStdString(m_intervention->tensor)
                               : QStringLiteral("out");
    m_table->clear();
    m_table->setColumnCount(7);
    m_table->setHorizontalHeaderLabels({tr("layer (%1)").arg(tensor), tr("max |x| as computed"),
                                        tr("intervened"), tr("kurtosis as computed"), tr("intervened"),
                                        tr("outliers as computed"), tr("intervened")});
    m_table->setRowCount(0);
    // As tall as its rows (up to 4; more scroll), so that the pages below keep their room.
    const auto fitRows = [this] {
        const int shown = std::max(1, std::min(m_table->rowCount(), 4));
        m_table->setFixedHeight(m_table->horizontalHeader()->sizeHint().height() +
                                shown * m_table->verticalHeader()->defaultSectionSize() +
                                2 * m_table->frameWidth());
    };
    fitRows();
    if (!comparable) return;
    for (int l = m_intervention->layer; l < m_snapshot->L(); ++l) {
        const TensorOutliers& a = base->outliersOf(tensor, l);
        const TensorOutliers& b = m_snapshot->outliersOf(tensor, l);
        const auto count = [](const TensorOutliers& o) {
            return QString::number(std::accumulate(o.perDimension.begin(), o.perDimension.end(), 0));
        };
        const QStringList cells = {QString::number(l + 1),
                                   QString::number(a.maxInfNorm, 'g', 4),
                                   QString::number(b.maxInfNorm, 'g', 4),
                                   QString::number(a.kurtosis, 'f', 1),
                                   QString::number(b.kurtosis, 'f', 1),
                                   count(a),
                                   count(b)};
        const int row = m_table->rowCount();
        m_table->insertRow(row);
        for (int c = 0; c < cells.size(); ++c)
            m_table->setItem(row, c, new QTableWidgetItem(cells[c]));
    }
    fitRows();
}

QAction* InterventionPanel::addIntervention(QMenu* menu, const QString& text,
                                            const Intervention& intervention)
{
    QAction* action = menu->addAction(text);
    connect(action, &QAction::triggered, this, [this, intervention] { apply(intervention); });
    // A mean is the model's data's (an intervene job, which runs the model as trained): without data, or
    // seen through a transform, there is none.
    const QString transform = QString::fromStdString(m_controller->transform().describe());
    if (intervention.value == Intervention::Value::Mean && (!transform.isEmpty() || !m_taskData)) {
        action->setEnabled(false);
        action->setToolTip(
            transform.isEmpty()
                ? m_taskDataWhy
                : tr("the mean comes from the model as trained; this page shows it seen through %1")
                      .arg(transform));
    }
    return action;
}

QMenu* InterventionPanel::dimensionMenu(const InspectionSnapshot& s, int layer, const QString& tensor,
                                        int dimension, QWidget* parent)
{
    auto* menu = new QMenu(parent);
    if (!interventionTakesDimensions(tensor)) {
        menu->addAction(tr("Interventions set attn_out, ffn_out or out (this page shows %1)").arg(tensor))
            ->setEnabled(false);
        return menu;
    }
    // The tokens carrying this dimension's outliers in this input.
    std::vector<std::int64_t> tokens;
    for (int p : s.outliersOf(tensor, layer).positions)
        if (p % s.d() == dimension) tokens.push_back(p / s.d());
    Intervention base;
    base.layer = layer;
    base.tensor = tensor.toStdString();
    base.dims = {dimension};
    const QString what = tr("dimension %1 of layer %2's %3").arg(dimension).arg(layer + 1).arg(tensor);
    for (bool outlierTokensOnly : {false, true}) {
        if (outlierTokensOnly && tokens.empty()) continue;
        Intervention i = base;
        if (outlierTokensOnly) i.tokens = tokens;
        const QString where = outlierTokensOnly ? tr("at its outlier tokens %1").arg(tokenLabels(s, tokens))
                                                : tr("at every token");
        addIntervention(menu, tr("Set %1 to 0 %2").arg(what, where), i);
        Intervention mean = i;
        mean.value = Intervention::Value::Mean;
        addIntervention(menu, tr("Set %1 to its mean over the model's data %2").arg(what, where), mean);
        QAction* v = menu->addAction(tr("Set %1 to a value %2…").arg(what, where));
        connect(v, &QAction::triggered, this, [this, i, what] {
            bool ok = false;
            const double value = QInputDialog::getDouble(parentWidget(), tr("Intervention"),
                                                         tr("Set %1 to:").arg(what), 0, -1e9, 1e9, 4, &ok);
            if (!ok) return;
            Intervention c = i;
            c.value = Intervention::Value::Constant;
            c.constant = value;
            apply(c);
        });
        menu->addSeparator();
    }
    // Every outlier dimension of the layer at once, at the tokens carrying them (Sun et al.'s massive
    // activations are a few dimensions of one token).
    std::set<std::int64_t> dims, rows;
    for (int p : s.outliersOf(tensor, layer).positions) {
        dims.insert(p % s.d());
        rows.insert(p / s.d());
    }
    if (dims.size() > 1) {
        Intervention all = base;
        all.dims.assign(dims.begin(), dims.end());
        all.tokens.assign(rows.begin(), rows.end());
        const QString every = tr("the %1 outlier dimensions of layer %2's %3 (%4)")
                                  .arg(dims.size())
                                  .arg(layer + 1)
                                  .arg(tensor, joinedPositions(all.dims));
        const QString where = tr("at %1").arg(tokenLabels(s, all.tokens));
        addIntervention(menu, tr("Set %1 to 0 %2").arg(every, where), all);
        Intervention mean = all;
        mean.value = Intervention::Value::Mean;
        addIntervention(menu, tr("Set %1 to their mean over the model's data %2").arg(every, where), mean);
        menu->addSeparator();
    }
    if (m_controller->intervention())
        menu->addAction(tr("Clear the intervention"), this, &InterventionPanel::clear);
    return menu;
}

QMenu* InterventionPanel::headMenu(const InspectionSnapshot& s, int layer, int head, int key, QWidget* parent)
{
    auto* menu = new QMenu(parent);
    const QString keyName = tokenLabels(s, {key});
    const auto add = [&](const QString& text, const Intervention& i) { addIntervention(menu, text, i); };
    Intervention remove;
    remove.layer = layer;
    remove.tensor = "attn_probs";
    remove.keys = {key};
    remove.heads = {head};
    add(tr("Remove key %1 from head %2's attention (rows renormalised)").arg(keyName).arg(head + 1), remove);
    Intervention raw = remove;
    raw.renormalize = false;
    add(tr("Remove key %1 from head %2's attention (not renormalised)").arg(keyName).arg(head + 1), raw);
    Intervention everyHead = remove;
    everyHead.heads.clear();
    add(tr("Remove key %1 from every head of layer %2").arg(keyName).arg(layer + 1), everyHead);
    menu->addSeparator();
    Intervention ablate;
    ablate.layer = layer;
    ablate.tensor = "attn_context";
    ablate.heads = {head};
    add(tr("Ablate head %1 of layer %2 (its output set to 0)").arg(head + 1).arg(layer + 1), ablate);
    // The token itself: its whole block output in this layer.
    menu->addSeparator();
    Intervention token;
    token.layer = layer;
    token.tensor = "out";
    token.tokens = {key};
    add(tr("Set token %1's out in layer %2 to 0 (every dimension)").arg(keyName).arg(layer + 1), token);
    Intervention tokenMean = token;
    tokenMean.value = Intervention::Value::Mean;
    add(tr("Set token %1's out in layer %2 to its mean over the model's data").arg(keyName).arg(layer + 1),
        tokenMean);
    if (s.model.gated) {
        menu->addSeparator();
        Intervention open;
        open.layer = layer;
        open.tensor = "attn_gate";
        open.heads = {head};
        open.value = Intervention::Value::Constant;
        open.constant = 1;
        add(tr("Force head %1's gates open (1)").arg(head + 1), open);
        Intervention shut = open;
        shut.value = Intervention::Value::Zero;
        shut.constant = 0;
        add(tr("Shut head %1's gates (0)").arg(head + 1), shut);
    }
    if (m_controller->intervention()) {
        menu->addSeparator();
        menu->addAction(tr("Clear the intervention"), this, &InterventionPanel::clear);
    }
    return menu;
}

} // namespace outlierlens
