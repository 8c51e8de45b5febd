#include "compare_page.h"

#include "compare_view.h"
#include "inspection_controller.h"
#include "model_catalog.h"
#include "token_norm_view.h"
#include "view_builders.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QStackedWidget>
#include <QVBoxLayout>

namespace outlierlens {

ComparePage::ComparePage(QWidget* parent)
    : QWidget(parent)
{
    auto* pickers = new QHBoxLayout;
    for (int i = 0; i < 3; ++i) {
        m_pickers[std::size_t(i)] = new QComboBox;
        // Long model names must not widen the window (and squeeze the input dock): they elide.
        m_pickers[std::size_t(i)]->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
        m_pickers[std::size_t(i)]->setMinimumContentsLength(10);
        pickers->addWidget(new QLabel(tr("Model %1:").arg(i + 1)));
        pickers->addWidget(m_pickers[std::size_t(i)], 1);
        connect(m_pickers[std::size_t(i)], &QComboBox::activated, this, [this, i] { modelChosen(i); });
    }
    m_view = new CompareView;
    auto* values = new QCheckBox(tr("V and &P·V"));
    values->setToolTip(tr("Show each head's values and their product next to its probabilities"));
    connect(values, &QCheckBox::toggled, m_view, &CompareView::setValuePanelsVisible);
    pickers->addWidget(values);
    auto* distribution = new QCheckBox(tr("&Distribution"));
    distribution->setObjectName(QStringLiteral("distributionCheck"));
    distribution->setToolTip(tr("Show how each query's probabilities spread over sizes, from exactly 0 to "
                                "over 0.5 (Figure 14): clipped softmax gives exact zeros where vanilla "
                                "softmax gives a tail of tiny probabilities"));
    connect(distribution, &QCheckBox::toggled, m_view, &CompareView::setDistributionPanelsVisible);
    pickers->addWidget(distribution);
    // Image models: Darcet et al.'s token norms of each model instead of one head (a model with
    // registers beside one without).
    m_norms = new TokenNormView;
    m_normsCheck = new QCheckBox(tr("Token nor&ms"));
    m_normsCheck->setObjectName(QStringLiteral("tokenNormsCheck"));
    m_normsCheck->setToolTip(tr("Show each model's token norms of the chosen layer, its high-norm tokens and "
                                "the class token's attention in the last layer (Darcet et al. 2024), e.g. a "
                                "DINOv2 with registers beside one without"));
    m_normsCheck->hide();
    pickers->addWidget(m_normsCheck);
    m_stack = new QStackedWidget;
    m_stack->addWidget(m_view);
    m_stack->addWidget(m_norms);
    connect(m_normsCheck, &QCheckBox::toggled, this, [this](bool on) {
        m_stack->setCurrentWidget(on ? static_cast<QWidget*>(m_norms) : m_view);
        rebuild(); // the norms are computed only while shown
    });
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(pickers);
    layout->addWidget(m_stack, 1);
}

void ComparePage::setModel(const ModelInfo& model)
{
    setInput({});
    setCandidates(ModelCatalog::compareKind(model));
    m_normsCheck->setVisible(model.takesImages());
    if (!model.takesImages()) m_normsCheck->setChecked(false);
}

ComparePage::~ComparePage() = default;

const Figure* ComparePage::figure() const
{
    if (m_stack->currentWidget() == m_norms) return m_norms;
    return m_view;
}

void ComparePage::setCandidates(const QString& demoKind)
{
    const QVector<ModelEntry> all = ModelCatalog::knownModels();
    const QVector<ModelEntry> trio = ModelCatalog::demoTrio(demoKind);
    for (int i = 0; i < 3; ++i) {
        QComboBox* picker = m_pickers[std::size_t(i)];
        const QString previous = picker->currentData().toString();
        picker->clear();
        picker->addItem(tr("(none)"), QString());
        for (const ModelEntry& e : all)
            picker->addItem(e.name, e.dir);
        const QString wanted = i < trio.size() ? trio[i].dir : previous;
        const int index = picker->findData(wanted);
        picker->setCurrentIndex(index >= 0 ? index : 0);
        modelChosen(i);
    }
}

void ComparePage::modelChosen(int slot)
{
    const QString dir = m_pickers[std::size_t(slot)]->currentData().toString();
    auto& controller = m_controllers[std::size_t(slot)];
    m_snapshots[std::size_t(slot)].reset();
    if (dir.isEmpty()) {
        controller.reset();
        rebuild();
        return;
    }
    if (!controller) {
        controller = std::make_unique<InspectionController>();
        controller->setOutlierRule(m_outlierRule);
        connect(controller.get(), &InspectionController::snapshotReady, this,
                [this, slot](const SnapshotPtr& s) {
                    m_snapshots[std::size_t(slot)] = s;
                    rebuild();
                });
        connect(controller.get(), &InspectionController::modelLoaded, this, [this, slot] {
            if (m_input.kind != InputRequest::Kind::None) m_input.sendTo(*m_controllers[std::size_t(slot)]);
        });
        connect(controller.get(), &InspectionController::failed, this, &ComparePage::failed);
    }
    // The requested model, not the loaded one: a load still running (the page's previous model) must
    // not be taken for this one.
    if (controller->requestedModelDir() != dir)
        controller->loadModel(dir);
    else if (m_input.kind != InputRequest::Kind::None)
        m_input.sendTo(*controller);
}

void ComparePage::setInput(const InputRequest& input)
{
    m_input = input;
    if (!isVisible()) {
        m_inputPending = true;
        return;
    }
    m_inputPending = false;
    for (auto& controller : m_controllers)
        if (controller && !controller->model().dir.isEmpty()) input.sendTo(*controller);
}

void ComparePage::setOutlierRule(const OutlierCriterion& rule)
{
    m_outlierRule = rule;
    for (auto& controller : m_controllers)
        if (controller) controller->setOutlierRule(rule);
    setInput(m_input); // counted again by the new rule
}

void ComparePage::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    if (m_inputPending) setInput(m_input);
}

void ComparePage::setSelection(int layer, int head)
{
    m_layer = layer;
    m_head = head;
    rebuild();
}

void ComparePage::rebuild()
{
    QVector<CompareEntry> entries;
    QVector<TokenNormData> norms;
    for (std::size_t i = 0; i < 3; ++i) {
        const SnapshotPtr& s = m_snapshots[i];
        if (m_normsCheck->isChecked() && s && s->model.takesImages() && m_layer < s->L()) {
            norms << buildTokenNorms(*s, m_layer);
            norms.back().model = m_pickers[i]->currentText();
        }
        if (!s || m_layer >= s->L() || m_head >= s->H()) continue;
        entries << CompareEntry{m_pickers[i]->currentText(), compareCaptionLines(*s, m_layer, m_head),
                                buildHeadView(*s, m_layer, m_head)};
    }
    m_view->setEntries(entries);
    m_norms->setRows(norms);
}

} // namespace outlierlens
