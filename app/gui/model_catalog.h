#pragma once
// GUI thread (QSettings); listing folders is quick (a few stat calls).

#include <QString>
#include <QVector>

namespace outlierlens {

struct ModelEntry
{
    QString name; ///< shown in the model picker
    QString dir;
};

/// The models the app offers: the demo models shipped in sample_data/models, the placeholder
/// model written by scripts/setup, and the recently opened folders.
class ModelCatalog
{
public:
    static QVector<ModelEntry> knownModels();
    /// The model the app opens by default: the BERT MNLI demo (vanilla) if shipped, else the
    /// placeholder random-weight model, else empty.
    static QString defaultModel();
    /// The vanilla / clipped / gated demo models of a kind ("bert-mnli", "vit-fmnist",
    /// "synthetic", "backcopy"), those that exist.
    static QVector<ModelEntry> demoTrio(const QString& kind);
    /// The demo kind a model folder belongs to, e.g. "bert-mnli" for .../bert-mnli-gated; empty otherwise.
    static QString demoKindOf(const QString& dir);
    /// Line `index` (0-based) of <dir>/sample_inputs.txt (the held-out sequences `outlierlens train`
    /// writes for generated tasks such as Bigram-Backcopy); empty when there is none.
    static QString sampleInput(const QString& dir, int index = 0);
    static void addRecent(const QString& dir);
    static QString modelsDir();
};

} // namespace outlierlens
