// Training task on ViT: image classification on Fashion-MNIST or an image folder.

#include "common/error.h"
#include "model/vit_network.h"
#include "tasks/data/canvas_data.h"
#include "tasks/data/image_data.h"
#include "tasks/task_common.h"
#include "tasks/training_task.h"

#include <torch/torch.h>

#include <filesystem>

namespace outlierlens {
namespace fs = std::filesystem;

namespace {

class ImageTask : public TrainingTask
{
public:
    explicit ImageTask(const TrainConfig& t)
        : m_config(t)
    {
        if (t.data == "fashion-mnist" || t.data.empty()) {
            m_train = std::make_unique<ImageDataset>(ImageDataset::fashionMnist(kFashionMnistDir, true));
            m_eval = std::make_unique<ImageDataset>(ImageDataset::fashionMnist(kFashionMnistDir, false));
            for (std::int64_t i = 0; i < m_train->size(); ++i)
                m_trainIndices.push_back(i);
            for (std::int64_t i = 0; i < m_eval->size(); ++i)
                m_evalIndices.push_back(i);
        } else {
            // A folder of class sub-folders: every tenth image is held out.
            const int size = !t.init.empty()   ? VitConfig::fromModelDir(t.init).imageSize
                             : t.imageSize > 0 ? t.imageSize
                                               : 32;
            m_train = std::make_unique<ImageDataset>(ImageDataset::folder(t.data, size));
            for (std::int64_t i = 0; i < m_train->size(); ++i)
                (i % 10 == 9 ? m_evalIndices : m_trainIndices).push_back(i);
        }
        if (std::int64_t(m_trainIndices.size()) < t.batchSize)
            throw Error(t.data + ": " + std::to_string(m_trainIndices.size()) +
                        " training images, fewer than one batch");

        if (!t.init.empty()) {
            m_net = std::make_unique<VitNetwork>(VitNetwork::load(t.init));
            const VitConfig& c = m_net->config();
            if (c.imageSize != m_train->imageSize() || c.numClasses != m_train->numClasses())
                throw Error(t.init + ": the model takes " + std::to_string(c.imageSize) + " px images and " +
                            std::to_string(c.numClasses) + " classes; the data has " +
                            std::to_string(m_train->imageSize()) + " px and " +
                            std::to_string(m_train->numClasses()));
            return;
        }
        VitConfig c = VitConfig::preset(t.preset.empty() ? "vit-fmnist" : t.preset);
        c.imageSize = m_train->imageSize();
        if (t.patchSize > 0) c.patchSize = t.patchSize;
        if (t.hiddenSize > 0) c.hiddenSize = t.hiddenSize;
        if (t.numLayers > 0) c.numLayers = t.numLayers;
        if (t.numHeads > 0) c.numHeads = t.numHeads;
        if (t.intermediateSize > 0) c.intermediateSize = t.intermediateSize;
        c.numClasses = m_train->numClasses();
        c.id2label = m_train->classNames();
        c.variant = t.variant.withAlphaResolved(c.numTokens());
        c.architecture = "vit_custom";
        c.validate("training config");
        m_net = std::make_unique<VitNetwork>(VitNetwork::create(c, t.seed));
        if (t.clipWarmupSteps > 0) m_net->setClipStrength(0.0); // step 0's evaluation: not yet clipped
    }

    torch::nn::Module& module() override { return *m_net->module(); }

    torch::Tensor trainLoss(std::int64_t step, at::Generator& gen) override
    {
        // clip_warmup_steps: the clipping grows with the step; evaluations see the last step's strength.
        if (m_config.clipWarmupSteps > 0)
            m_net->setClipStrength(double(step + 1) / double(m_config.clipWarmupSteps));
        std::vector<std::int64_t> indices;
        for (std::int64_t i :
             batchIndices(std::int64_t(m_trainIndices.size()), m_config.batchSize, step, m_config.seed))
            indices.push_back(m_trainIndices[std::size_t(i)]);
        // The whole batch is decoded (and augmented, drawing from `gen` image by image) on every rank,
        // so a shard's images are exactly those of a one-process run.
        const auto [pixels, labels] = m_train->batch(indices, m_config.augment, gen);
        if (m_shard.whole()) return maskedCrossEntropy(m_net->forward(pixels).logits, labels);
        return crossEntropyShare(m_net->forward(shardRows(pixels, m_shard)).logits,
                                 shardRows(labels, m_shard), labels.size(0));
    }

    std::pair<std::string, double> evaluate(ActivationSink* sink = nullptr) override
    {
        at::Generator gen = evaluationGenerator(m_config);
        c10::InferenceMode guard;
        const std::int64_t count = std::min<std::int64_t>(
            std::int64_t(m_evalIndices.size()), std::int64_t(m_config.evalBatches) * m_config.batchSize);
        std::int64_t correct = 0;
        for (std::int64_t start = 0; start < count; start += m_config.batchSize) {
            const std::vector<std::int64_t> indices(m_evalIndices.begin() + start,
                                                    m_evalIndices.begin() +
                                                        std::min(count, start + m_config.batchSize));
            const auto [pixels, labels] = evalSet().batch(indices, false, gen);
            correct += (m_net->forward(pixels, sink).logits.argmax(-1) == labels).sum().item<std::int64_t>();
        }
        return {"accuracy", double(correct) / double(std::max<std::int64_t>(count, 1))};
    }

    void calibrationForward(std::int64_t index, at::Generator& gen, ActivationSink& sink) override
    {
        std::vector<std::int64_t> indices;
        for (std::int64_t i :
             batchIndices(std::int64_t(m_trainIndices.size()), m_config.batchSize, index, m_config.seed + 1))
            indices.push_back(m_trainIndices[std::size_t(i)]);
        const auto [pixels, labels] = m_train->batch(indices, false, gen);
        c10::InferenceMode guard;
        m_net->forward(pixels, &sink);
    }

    std::vector<std::int64_t> probe(ActivationSink& sink) override
    {
        at::Generator gen = evaluationGenerator(m_config);
        const std::size_t n = std::min<std::size_t>(8, m_evalIndices.size());
        const std::vector<std::int64_t> indices(m_evalIndices.begin(), m_evalIndices.begin() + long(n));
        const auto [pixels, labels] = evalSet().batch(indices, false, gen);
        c10::InferenceMode guard;
        m_net->forward(pixels, &sink);
        return std::vector<std::int64_t>(n, m_net->config().numTokens());
    }

    std::vector<CapturePoint> trackedPoints() const override
    {
        return {CapturePoint::FfnOut, CapturePoint::Out};
    }
    int numLayers() const override { return m_net->config().numLayers; }
    void loadWeights(const std::string& dir) override { loadWeightsInto(*m_net->module(), dir); }

    void saveModel(const std::string& dir, const std::string& card) const override
    {
        const VitConfig& c = m_net->config();
        m_net->save(dir, m_train->pretrainedCfgJson(c.imageSize));
        writeModelCard(dir, card);
    }

    std::string describe() const override
    {
        const VitConfig& c = m_net->config();
        return "ViT (" + std::to_string(c.numLayers) + " layers, hidden " + std::to_string(c.hiddenSize) +
               ", " + std::to_string(c.numHeads) + " heads, " + std::to_string(c.imageSize) + " px, patch " +
               std::to_string(c.patchSize) + ") on " +
               (m_config.data.empty() ? "fashion-mnist" : m_config.data) + ", " + c.variant.describe();
    }

private:
    const ImageDataset& evalSet() const { return m_eval ? *m_eval : *m_train; }

    static constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
    TrainConfig m_config;
    std::unique_ptr<ImageDataset> m_train, m_eval;
    std::vector<std::int64_t> m_trainIndices, m_evalIndices;
    std::unique_ptr<VitNetwork> m_net;
};

} // namespace

std::unique_ptr<TrainingTask> makeCanvasTask(const TrainConfig& config); // vit_canvas_task.cpp

std::unique_ptr<TrainingTask> makeImageTask(const TrainConfig& config)
{
    if (config.data == kCanvasData) return makeCanvasTask(config);
    return std::make_unique<ImageTask>(config);
}

} // namespace outlierlens
