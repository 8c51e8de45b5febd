#pragma once
// GUI thread.

#include "quant/model_transform.h"

#include <QComboBox>
#include <QStringList>

#include <optional>

namespace outlierlens {

class InspectionController;
struct ModelInfo;

/// "Seen through": the model as trained, SmoothQuant (alpha 0.5), a Hadamard rotation of the residual
/// stream, or both (quant/transforms.h, docs/quantization.md "Transforms"). Every box shows the
/// controller's transform; choosing one sets it there (the main window reruns the input). Choices the open
/// model refuses are disabled, with the reason as their tooltip.
class TransformBox : public QComboBox
{
    Q_OBJECT
public:
    explicit TransformBox(InspectionController* controller, QWidget* parent = nullptr);
    /// Enables the choices `model` allows.
    void setModel(const ModelInfo& model);

private:
    void showControllerTransform();
    InspectionController* m_controller;
};

/// The names of the box's choices on the command line (`outlierlens --seen-through NAME`), in its order:
/// none, smoothquant, rotation, smoothquant+rotation.
const QStringList& seenThroughNames();
/// The transform of a name of seenThroughNames(); nullopt for anything else.
std::optional<ModelTransform> parseSeenThrough(const QString& name);

/// The note a page shows above activations seen through a transform ("" for none): what changed and
/// what did not.
QString transformNote(const QString& transform);

} // namespace outlierlens
