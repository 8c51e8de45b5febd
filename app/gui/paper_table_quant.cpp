// The W8A8 column of the paper tables: `quantize`'s experiment (backend/quant/evaluation.h), the one unit of
// the tables that includes torch.

#include "paper_tables.h"

#include "common/error.h"
#include "quant/evaluation.h"

#include <limits>

namespace outlierlens {

W8A8Result computeW8A8(const QString& modelDir, const QuantDataChoice& data, const std::atomic<bool>& cancel,
                       const std::function<void(const QString&)>& step)
{
    QuantExperiment e; // quantize's defaults: W8A8, 16 calibration batches of 32, running min-max
    e.modelDir = modelDir.toStdString();
    e.data = data.spec.toStdString();
    e.seqLength = data.seqLength;
    e.nliTrainPairs = data.nliTrainPairs;
    e.seeds = kPaperTableSeeds;
    QuantResult r;
    try {
        r = runQuantExperiment(
            e, [&](const std::string& message) { step(QString::fromStdString(message)); }, &cancel);
    } catch (const Error&) {
        if (cancel) throw Cancelled();
        throw;
    }
    W8A8Result w;
    w.metricName = QString::fromStdString(r.metricName);
    w.fp = r.floatMetric;
    w.mean = r.quantMean;
    w.std = e.seeds > 1 ? r.quantStd : std::numeric_limits<double>::quiet_NaN(); // no spread of one seed
    w.seeds = e.seeds;
    w.data = data.spec;
    w.source = QStringLiteral("computed");
    return w;
}

} // namespace outlierlens
