#include "outliers_page.h"

#include "analysis/statistics_file.h"
#include "inspection_controller.h"
#include "outlier_dashboard.h"
#include "statistics_source.h"
#include "transform_box.h"
#include "view_builders.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QVBoxLayout>

namespace outlierlens {

OutliersPage::OutliersPage(InspectionController* controller, QWidget* parent)
    : QWidget(parent)
    , m_controller(controller)
{
    m_source = new QComboBox;
    m_source->addItem(tr("Current input"));
    m_tensor = new QComboBox;
    for (const char* t : {"ffn_out", "out", "attn_out", "residual", kLayerInputChoice, "attn_in"})
        m_tensor->addItem(QString::fromLatin1(t));
    m_tensor->setToolTip(tr("ffn_out: the FFN output before the residual add (the paper's BERT figures); "
                            "out: the block output (ViT and decoder figures); in: the layer's input, the "
                            "previous layer's out, which this layer's heads read; attn_in: what the Q/K/V "
                            "projections read, the pre-norm's output (pre-LN models), which SmoothQuant "
                            "rescales. Opening a model shows its family's, or for a demo decoder the input "
                            "of the layer of its sink head."));
    m_transform = new TransformBox(m_controller);
    QPushButton* open = makeOpenStatisticsButton(m_controller, this);
    auto* compute = new QPushButton(tr("Compute over a data set…"));
    m_note = new QLabel;
    m_note->setObjectName(QStringLiteral("note"));
    m_note->setWordWrap(true);
    m_dashboard = new OutlierDashboard;

    auto* controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("Source:")));
    controls->addWidget(m_source, 1);
    controls->addWidget(new QLabel(tr("Tensor:")));
    controls->addWidget(m_tensor);
    controls->addWidget(open);
    controls->addWidget(compute);
    controls->addWidget(new QLabel(tr("Seen through:")));
    controls->addWidget(m_transform);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(controls);
    layout->addWidget(m_note);
    // Below this height the charts' axes and legends no longer fit (1280 x 800 with the intervention
    // panel open): the page scrolls instead.
    m_dashboard->setMinimumHeight(600);
    auto* scroll = new QScrollArea;
    scroll->setWidget(m_dashboard);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    layout->addWidget(scroll, 1);

    connect(compute, &QPushButton::clicked, this, &OutliersPage::statisticsRequested);
    connect(m_controller, &InspectionController::statisticsReady, this, [this] {
        showStatisticsSource(m_source, *m_controller);
        m_source->setCurrentIndex(1);
        refresh(m_snapshot, m_layer);
    });
    connect(m_controller, &InspectionController::statisticsChanged, this, [this] {
        showStatisticsSource(m_source, *m_controller);
        refresh(m_snapshot, m_layer);
    });
    connect(m_source, &QComboBox::currentIndexChanged, this, [this] { refresh(m_snapshot, m_layer); });
    connect(m_tensor, &QComboBox::currentIndexChanged, this, [this] { refresh(m_snapshot, m_layer); });
    connect(m_dashboard, &OutlierDashboard::dimensionClicked, this, &OutliersPage::dimensionClicked);
    connect(m_dashboard, &OutlierDashboard::dimensionContextMenuRequested, this,
            [this](int dimension, const QPoint& at) {
                const OutlierTensorRef shown = resolveOutlierTensor(tensor(), m_layer);
                Q_EMIT dimensionMenuRequested(shown.layer, shown.tensor, dimension, at);
            });
}

void OutliersPage::setModel(const ModelInfo& model)
{
    const QSignalBlocker block(m_tensor); // the page refreshes when the model's first input has run
    m_tensor->setCurrentText(defaultOutlierTensor(model));
    m_transform->setModel(model);
}

QString OutliersPage::tensor() const
{
    return m_tensor->currentText();
}

QString OutliersPage::note() const
{
    return m_note->text();
}

void OutliersPage::showSource(bool statisticsFile)
{
    chooseStatisticsSource(m_source, statisticsFile);
}

const Figure* OutliersPage::figure() const
{
    return m_dashboard;
}

void OutliersPage::refresh(const SnapshotPtr& snapshot, int layer)
{
    m_snapshot = snapshot;
    m_layer = layer;
    const OutlierTensorRef shown = resolveOutlierTensor(tensor(), layer);
    const QString readBy = shown.insteadOfEmbeddings ? tr("Layer 1 reads the embeddings, which this page "
                                                          "does not analyse; shown: layer 1's out, which "
                                                          "the heads of layer 2 read.")
                           : shown.layer != layer
                               ? tr("Shown: layer %1's out, which the heads of layer %2 read.")
                                     .arg(shown.layer + 1)
                                     .arg(layer + 1)
                               : QString();
    const StatisticsPtr stats = m_controller->statistics();
    if (m_source->currentIndex() == 1 && stats) {
        const bool analysed =
            std::any_of(stats->layers.begin(), stats->layers.end(),
                        [&](const LayerStatisticsData& l) { return l.layer == shown.layer; });
        QStringList notes;
        if (!m_controller->statisticsDescribeModel(*stats)) {
            const auto name = stats->provenance.find("model_name");
            notes << tr("This file was computed on another checkpoint (%1), not on the open model %2: its "
                        "numbers do not describe this model.")
                         .arg(name != stats->provenance.end() ? QString::fromStdString(name->second)
                                                              : tr("unnamed model"),
                              m_controller->model().name);
        }
        const QString fileRule = QString::fromStdString(stats->outlierRule.shortText());
        const QString chosenRule = QString::fromStdString(m_controller->outlierRule().shortText());
        if (fileRule != chosenRule)
            notes << tr("This file counted outliers over %1, not the %2 of View > Outlier rule: the counts "
                        "below are %1 counts (compute the statistics again to count with %2).")
                         .arg(fileRule, chosenRule);
        if (!analysed)
            notes << tr("Layer %1 was not analysed in this statistics file; pick another layer.")
                         .arg(shown.layer + 1);
        if (!readBy.isEmpty()) notes << readBy;
        if (m_controller->transform().any())
            notes << tr("The file describes the model as trained, not seen through a transform.");
        m_note->setText(notes.join(QLatin1Char(' ')));
        m_dashboard->setData(buildDashboard(*stats, m_controller->statisticsPath(), shown.layer, shown.tensor,
                                            snapshot ? snapshot->dh() : stats->headDim));
        return;
    }
    if (!snapshot) {
        m_note->setText(tr("Run an input to see its outliers."));
        m_dashboard->setData({}); // nothing of the model shown before
        return;
    }
    QStringList notes{transformNote(snapshot->transform), readBy};
    if (shown.tensor == QLatin1String("attn_in") && snapshot->attnIn.isEmpty())
        notes << tr(
            "attn_in is the pre-norm's output: this model normalises after the residual sum (post-LN), "
            "so its Q/K/V projections read the layer's input (choose in).");
    notes.removeAll(QString());
    m_note->setText(notes.join(QLatin1Char(' ')));
    const SnapshotPtr original = m_controller->originalOf(snapshot);
    m_dashboard->setData(buildDashboard(*snapshot, shown.layer, shown.tensor, original.get()));
}

} // namespace outlierlens
