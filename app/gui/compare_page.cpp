#include "compare_page.h"

#include "compare_view.h"
#include "inspection_controller.h"
#include "model_catalog.h"
#include "view_builders.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

namespace outlierlens {
namespace {

/// Max inf norm and kurtosis of the FFN output of `layer` for one snapshot: the numbers shown under
/// each compared model.
QStringList metricsLines(const InspectionSnapshot& s, int layer)
{
    const OutlierDashboardData d = buildDashboard(s, layer, QStringLiteral("ffn_out"));
    double outliers = 0;
    for (double v : d.perDimension.values)
        outliers += v;
    return {s.model.variant,
            QStringLiteral("FFN output, layer %1: max |x| %2, kurtosis %3, %4 outlier values")
                .arg(layer + 1)
                .arg(d.maxInfNormPerLayer.value(layer), 0, 'g', 4)
                .arg(d.kurtosisPerLayer.value(layer), 0, 'g', 4)
                .arg(outliers),
            s.prediction.isEmpty() ? QString() : QStringLiteral("prediction: ") + s.prediction.first()};
}

} // namespace

ComparePage::ComparePage(QWidget* parent)
    : QWidget(parent)
{
    auto* pickers = new QHBoxLayout;
    for (int i = 0; i < 3; ++i) {
        m_pickers[std::size_t(i)] = new QComboBox;
        pickers->addWidget(new QLabel(tr("Model %1:").arg(i + 1)));
        pickers->addWidget(m_pickers[std::size_t(i)], 1);
        connect(m_pickers[std::size_t(i)], &QComboBox::activated, this, [this, i] { modelChosen(i); });
    }
    m_view = new CompareView;
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(pickers);
    layout->addWidget(m_view, 1);
}

ComparePage::~ComparePage() = default;

const Figure* ComparePage::figure() const
{
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
    if (controller->model().dir != dir)
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
    for (std::size_t i = 0; i < 3; ++i) {
        const SnapshotPtr& s = m_snapshots[i];
        if (!s || m_layer >= s->L() || m_head >= s->H()) continue;
        entries << CompareEntry{m_pickers[i]->currentText(), metricsLines(*s, m_layer),
                                buildHeadView(*s, m_layer, m_head)};
    }
    m_view->setEntries(entries);
}

} // namespace outlierlens
