#include "systematic_page.h"

#include "analysis/statistics_file.h"
#include "inspection_controller.h"
#include "statistics_source.h"
#include "systematic_view.h"
#include "transform_box.h"
#include "view_builders.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

namespace outlierlens {

SystematicPage::SystematicPage(InspectionController* controller, QWidget* parent)
    : QWidget(parent)
    , m_controller(controller)
{
    m_source = new QComboBox;
    m_source->addItem(tr("Current input"));
    QPushButton* open = makeOpenStatisticsButton(m_controller, this);
    auto* compute = new QPushButton(tr("Compute over a data set…"));
    compute->setToolTip(tr("Runs `outlierlens stats` over a data set as a job; its file feeds the "
                           "per-layer, per-category and per-head charts"));
    m_transform = new TransformBox(m_controller);
    m_note = new QLabel;
    m_note->setWordWrap(true);
    m_view = new SystematicView;

    auto* controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("Source:")));
    controls->addWidget(m_source, 1);
    controls->addWidget(open);
    controls->addWidget(compute);
    controls->addWidget(new QLabel(tr("Seen through:")));
    controls->addWidget(m_transform);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(controls);
    layout->addWidget(m_note);
    layout->addWidget(m_view, 1);

    connect(compute, &QPushButton::clicked, this, &SystematicPage::statisticsRequested);
    connect(m_controller, &InspectionController::statisticsReady, this, [this] {
        showStatisticsSource(m_source, *m_controller);
        if (m_controller->statistics() && m_controller->statistics()->systematic)
            m_source->setCurrentIndex(1);
        rebuild();
    });
    connect(m_controller, &InspectionController::statisticsChanged, this, [this] {
        showStatisticsSource(m_source, *m_controller);
        rebuild();
    });
    connect(m_source, &QComboBox::currentIndexChanged, this, [this] { rebuild(); });
    connect(m_view, &SystematicView::channelClicked, this, &SystematicPage::channelClicked);
    connect(m_view, &SystematicView::keyClicked, this, &SystematicPage::keyClicked);
    connect(m_view, &SystematicView::headClicked, this, &SystematicPage::headClicked);
}

QString SystematicPage::note() const
{
    return m_note->text();
}

void SystematicPage::showSource(bool statisticsFile)
{
    chooseStatisticsSource(m_source, statisticsFile);
}

const Figure* SystematicPage::figure() const
{
    return m_view;
}

void SystematicPage::setModel(const ModelInfo& model)
{
    m_transform->setModel(model);
}

void SystematicPage::refresh(const PageState& state)
{
    m_snapshot = state.snapshot;
    m_layer = state.layer;
    showStatisticsSource(m_source, *m_controller);
    rebuild();
}

void SystematicPage::rebuild()
{
    const StatisticsPtr stats = m_controller->statistics();
    const SystematicSnapshot* weights = m_snapshot ? &m_snapshot->systematic : nullptr;
    if (m_source->currentIndex() == 1 && stats) {
        QStringList notes;
        if (!m_controller->statisticsDescribeModel(*stats))
            notes << tr("This file was computed on another checkpoint, not on the open model %1: its numbers "
                        "do not describe this model.")
                         .arg(m_controller->model().name);
        if (!stats->systematic)
            notes << tr("This file has no systematic-outlier numbers: `outlierlens stats` writes them for "
                        "decoders always and for other models only with --systematic, which Compute over a "
                        "data set… passes.");
        else if (!stats->systematic->layerData(m_layer))
            notes << tr("Layer %1 was not analysed in this file; pick another layer.").arg(m_layer + 1);
        notes << tr("Figure 1 shows the current input only.");
        if (m_controller->transform().any())
            notes << tr("The file describes the model as trained, not seen through a transform.");
        m_note->setText(notes.join(QLatin1Char(' ')));
        m_view->setData(buildSystematic(*stats, m_controller->statisticsPath(), m_layer,
                                        m_controller->statisticsDescribeModel(*stats) ? weights : nullptr));
        return;
    }
    if (!m_snapshot || m_snapshot->systematic.isEmpty()) {
        m_note->setText(tr("Run an input to see its systematic outliers."));
        m_view->setData({});
        return;
    }
    m_note->setText(transformNote(m_snapshot->transform));
    m_view->setData(buildSystematic(*m_snapshot, m_layer));
}

} // namespace outlierlens
