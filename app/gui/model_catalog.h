#pragma once
// GUI thread (QSettings); listing folders is quick (a few stat calls).

#include "input_request.h"
#include "inspection_snapshot.h"

#include <QString>
#include <QVector>

namespace outlierlens {

struct ModelEntry
{
    QString name; ///< shown in the model picker
    QString dir;
};

/// Where the app starts on a model it opens: the head it shows first and the model's own sample input.
struct StartPoint
{
    int layer = 0, head = 0; ///< 0-based
    QString sample;  ///< decoders and pair models: their own sample input (sample_inputs.txt), or empty
    QString ignored; ///< showcase.json was there but unreadable: why (the defaults stand)
};

/// The input the app runs first on a model it opens.
struct FirstInput
{
    enum class Action {
        None,       ///< nothing to run (a text model and no pairs loaded yet)
        Run,        ///< run `input`
        RunAsText,  ///< put `input.text` into the text box and run it
        SelectPair, ///< select (and so run) the first pair of the input table
    };
    Action action = Action::None;
    InputRequest input;
    bool isSample = false; ///< `input` is the model's own sample input (StartPoint::sample)
};

/// The models the app offers: the demo models shipped in sample_data/models, the placeholder
/// model written by scripts/setup, and the recently opened folders.
class ModelCatalog
{
public:
    /// The bundled demo models by name, those models/catalog.json calls contrasts last and labelled so,
    /// then the placeholder, then the recent models.
    static QVector<ModelEntry> knownModels();
    /// The model the app opens by default: the backcopy decoder demo (vanilla) if shipped, else the BERT
    /// MNLI demo, else the placeholder random-weight model, else empty.
    static QString defaultModel();
    /// The model the app opens when none is given: the last one opened (the first of the recent models that
    /// is still a model folder), else defaultModel().
    static QString startModel();
    /// The vanilla / clipped / gated demo models of a kind ("bert-mnli", "vit-fmnist",
    /// "synthetic", "backcopy"), those that exist.
    static QVector<ModelEntry> demoTrio(const QString& kind);
    /// The demo kind a model folder belongs to, e.g. "bert-mnli" for .../bert-mnli-gated; empty otherwise.
    static QString demoKindOf(const QString& dir);
    /// Line `index` (0-based) of <dir>/sample_inputs.txt (the held-out sequences `outlierlens train`
    /// writes for generated tasks such as Bigram-Backcopy); empty when there is none.
    static QString sampleInput(const QString& dir, int index = 0);
    /// Where `model` starts: the layer, head and sample input stored with it (showcase.json, written
    /// when it was trained), else the second-to-last layer, head 1, where the paper's figures look.
    static StartPoint startPoint(const ModelInfo& model);
    /// The input `model` runs first, given the input that ran last (on the model before) and whether it
    /// was that model's own sample (such a sample does not follow the user to other models). A
    /// model reruns the last input if it takes its kind, else starts on its own kind of input.
    static FirstInput firstInput(const ModelInfo& model, const StartPoint& start, const InputRequest& last,
                                 bool lastWasSample, bool havePairs, const QString& galleryDir);
    /// The demo kind compared with `model`: its own, or for a model of one's own that of its family.
    static QString compareKind(const ModelInfo& model);
    /// The images `model` is shown with: its own <dir>/sample_images (written by `train` for tasks whose
    /// images the bundled gallery cannot stand for, such as the canvas task) if it has them, else
    /// `galleryDir`.
    static QString imageGallery(const ModelInfo& model, const QString& galleryDir);
    /// The data set offered for statistics of `model` ("text:", "mnli:" or "images:" source; images: its
    /// imageGallery()).
    static QString statisticsData(const ModelInfo& model, const QString& galleryDir);
    static void addRecent(const QString& dir);
    static QString modelsDir();
};

} // namespace outlierlens
