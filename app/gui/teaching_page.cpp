#include "teaching_page.h"

#include "inspection_controller.h"
#include "model_catalog.h"
#include "teaching_view.h"
#include "view_builders.h"

#include <QComboBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

namespace outlierlens {

TeachingPage::TeachingPage(QWidget* parent)
    : QWidget(parent)
{
    m_model = new QComboBox;
    m_token = new QComboBox;
    m_token->setToolTip(tr("The query token whose numbers the diagram shows"));
    m_view = new TeachingView;
    auto* controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("Model:")));
    controls->addWidget(m_model, 1);
    controls->addWidget(new QLabel(tr("Token:")));
    controls->addWidget(m_token, 1);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(controls);
    layout->addWidget(m_view, 1);
    connect(m_model, &QComboBox::activated, this, &TeachingPage::modelChosen);
    connect(m_token, &QComboBox::currentIndexChanged, this, &TeachingPage::rebuild);
}

TeachingPage::~TeachingPage() = default;

const Figure* TeachingPage::figure() const
{
    return m_view;
}

void TeachingPage::setCandidates(const QString& demoKind, const QString& currentModel)
{
    m_model->clear();
    for (const ModelEntry& e : ModelCatalog::demoTrio(demoKind))
        m_model->addItem(e.name, e.dir);
    if (m_model->findData(currentModel) < 0)
        m_model->addItem(QFileInfo(currentModel).fileName(), currentModel);
    m_model->setCurrentIndex(m_model->findData(currentModel));
    modelChosen();
}

void TeachingPage::modelChosen()
{
    const QString dir = m_model->currentData().toString();
    if (dir.isEmpty()) return;
    if (!m_controller) {
        m_controller = std::make_unique<InspectionController>();
        m_controller->setOutlierRule(m_outlierRule);
        connect(m_controller.get(), &InspectionController::modelLoaded, this, [this] {
            if (m_input.kind != InputRequest::Kind::None) m_input.sendTo(*m_controller);
        });
        connect(m_controller.get(), &InspectionController::snapshotReady, this, [this](const SnapshotPtr& s) {
            const int previous = m_token->currentIndex();
            m_snapshot = s;
            const QSignalBlocker block(m_token);
            m_token->clear();
            for (int t = 0; t < s->T; ++t)
                m_token->addItem(QStringLiteral("%1: %2").arg(t).arg(s->tokens[t]));
            // Keep the token; by default a content token, not [CLS]: the second in an encoder, the last
            // in a causal model (the second there sees only the first two keys, so weight on the first
            // says little; the last sees them all).
            const int fallback = s->model.isDecoder() ? s->T - 1 : std::min(1, s->T - 1);
            m_token->setCurrentIndex(previous >= 0 && previous < s->T ? previous : fallback);
            rebuild();
        });
        connect(m_controller.get(), &InspectionController::failed, this, &TeachingPage::failed);
    }
    if (m_controller->requestedModelDir() != dir) m_controller->loadModel(dir); // not the loaded one
}

void TeachingPage::setInput(const InputRequest& input)
{
    m_input = input;
    if (!isVisible()) {
        m_inputPending = true;
        return;
    }
    m_inputPending = false;
    if (m_controller && !m_controller->model().dir.isEmpty()) input.sendTo(*m_controller);
}

void TeachingPage::setOutlierRule(const OutlierCriterion& rule)
{
    m_outlierRule = rule;
    if (m_controller) m_controller->setOutlierRule(rule);
    setInput(m_input); // counted again by the new rule
}

void TeachingPage::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    if (m_inputPending) setInput(m_input);
}

void TeachingPage::setSelection(int layer, int head)
{
    m_layer = layer;
    m_head = head;
    rebuild();
}

void TeachingPage::rebuild()
{
    if (!m_snapshot || m_token->currentIndex() < 0 || m_layer >= m_snapshot->L() || m_head >= m_snapshot->H())
        return;
    m_view->setData(buildTeaching(*m_snapshot, m_token->currentIndex(), m_layer, m_head));
}

} // namespace outlierlens
