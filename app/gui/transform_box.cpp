#include "transform_box.h"

#include "inspection_controller.h"

#include <QSignalBlocker>
#include <QStandardItemModel>

namespace outlierlens {

namespace {

constexpr double kSmoothQuantAlpha = 0.5; // SmoothQuant's default migration strength

ModelTransform transformAt(int index)
{
    ModelTransform t;
    if (index == 1 || index == 3) t.smoothQuantAlpha = kSmoothQuantAlpha;
    if (index == 2 || index == 3) t.rotate = true;
    return t;
}

} // namespace

const QStringList& seenThroughNames()
{
    static const QStringList names = {QStringLiteral("none"), QStringLiteral("smoothquant"),
                                      QStringLiteral("rotation"), QStringLiteral("smoothquant+rotation")};
    return names;
}

std::optional<ModelTransform> parseSeenThrough(const QString& name)
{
    const int index = int(seenThroughNames().indexOf(name));
    if (index < 0) return std::nullopt;
    return transformAt(index);
}

TransformBox::TransformBox(InspectionController* controller, QWidget* parent)
    : QComboBox(parent)
    , m_controller(controller)
{
    addItem(tr("the model as trained"));
    addItem(tr("SmoothQuant (α %1)").arg(kSmoothQuantAlpha));
    addItem(tr("Hadamard rotation (QuaRot)"));
    addItem(tr("SmoothQuant, then rotation"));
    setToolTip(tr("Show the activations of the model after a transform that keeps its function: "
                  "SmoothQuant moves each channel's range of the normed inputs (attn_in) into the weights, "
                  "with scales from the input shown; the rotation turns the residual stream (attn_out, "
                  "ffn_out, out) by a randomized Hadamard matrix, as QuaRot does before quantizing."));
    showControllerTransform();
    connect(this, &QComboBox::activated, this,
            [this](int index) { m_controller->setTransform(transformAt(index)); });
    connect(m_controller, &InspectionController::transformChanged, this,
            &TransformBox::showControllerTransform);
}

void TransformBox::showControllerTransform()
{
    const ModelTransform& t = m_controller->transform();
    const QSignalBlocker block(this);
    setCurrentIndex((t.smoothQuantAlpha ? 1 : 0) + (t.rotate ? 2 : 0));
}

void TransformBox::setModel(const ModelInfo& model)
{
    auto* items = qobject_cast<QStandardItemModel*>(this->model());
    for (int i = 0; i < count(); ++i) {
        const ModelTransform t = transformAt(i);
        const QString refusal = model.transformRefusal(t.smoothQuantAlpha.has_value(), t.rotate);
        QStandardItem* item = items->item(i);
        item->setEnabled(refusal.isEmpty());
        item->setToolTip(refusal);
    }
}

QString transformNote(const QString& transform)
{
    if (transform.isEmpty()) return {};
    return QObject::tr(
               "Seen through %1: the same function (predictions unchanged), the activations of the "
               "transformed model. A rotation turns the residual stream (attn_out, ffn_out, residual, "
               "out, and the FFN's down_in by its own rotation); SmoothQuant rescales the normed "
               "inputs (attn_in) and leaves the stream as it was.")
        .arg(transform);
}

} // namespace outlierlens
