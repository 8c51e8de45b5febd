// Training task on ViT: the canvas task (tasks/data/canvas_data.h), where a ViT's no-op heads park their
// attention on background patches. The saved model is a plain timm-named ViT classifier; the small
// reconstruction head that only training needs is kept beside it in reconstruction_head.safetensors.

#include "common/error.h"
#include "io/image_writer.h"
#include "io/safetensors.h"
#include "io/state_dict.h"
#include "model/bert.h" // layerNormOf
#include "model/vit_network.h"
#include "tasks/data/canvas_data.h"
#include "tasks/task_common.h"
#include "tasks/training_task.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cctype>
#include <cstdio>
#include <filesystem>

namespace outlierlens {
namespace fs = std::filesystem;

namespace {

constexpr const char* kHeadFile = "reconstruction_head.safetensors";
/// The reconstruction loss's weight against the classification loss (the probe's 20).
constexpr double kReconstructionWeight = 20.0;

/// What the optimizer trains: the ViT and the reconstruction head (Linear(d, P * P) on the final
/// LayerNorm's output of every patch token).
class CanvasModelImpl : public torch::nn::Module
{
public:
    CanvasModelImpl(VisionTransformer vit, int hidden, int patchPixels, std::uint64_t seed)
        : vit(register_module("vit", std::move(vit)))
        , reconstruction(register_module("reconstruction", torch::nn::Linear(hidden, patchPixels)))
    {
        torch::NoGradGuard noGrad;
        at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed ^ 0x5eedull);
        reconstruction->weight.normal_(0.0, 0.02, gen); // timm's initialisation, as the ViT's
        reconstruction->bias.zero_();
    }
    VisionTransformer vit;
    torch::nn::Linear reconstruction;
};
TORCH_MODULE(CanvasModel);

class CanvasTask : public TrainingTask
{
public:
    explicit CanvasTask(const TrainConfig& t)
        : m_config(t)
        , m_train(ImageDataset::fashionMnist(kDebianFashionMnistDir, true))
        , m_eval(ImageDataset::fashionMnist(kDebianFashionMnistDir, false))
    {
        TrainConfig sized = t;
        if (sized.preset.empty()) sized.preset = "vit-canvas"; // the image task's default is 28 px
        VitConfig c = trainVitConfig(sized);                   // the preset with the run's size overrides
        m_options.canvasSize = c.imageSize;
        m_options.patchSize = c.patchSize;
        m_options.validate(m_train.imageSize());
        c.numClasses = m_train.numClasses();
        c.id2label = m_train.classNames();
        c.architecture = "vit_custom";
        c.validate("training config");
        m_net = std::make_unique<VitNetwork>(VitNetwork::create(c, t.seed));
        if (t.clipWarmupSteps > 0) m_net->setClipStrength(0.0); // step 0's evaluation: not yet clipped
        m_model = CanvasModel(m_net->module(), c.hiddenSize, c.patchSize * c.patchSize, t.seed);
    }

    torch::nn::Module& module() override { return *m_model; }

    torch::Tensor trainLoss(std::int64_t step, at::Generator& gen) override
    {
        // clip_warmup_steps: the clipping grows with the step; evaluations see the last step's strength.
        if (m_config.clipWarmupSteps > 0)
            m_net->setClipStrength(double(step + 1) / double(m_config.clipWarmupSteps));
        const std::vector<std::int64_t> indices =
            batchIndices(m_train.size(), m_config.batchSize, step, m_config.seed);
        // The whole batch is drawn on every rank, so a shard's canvases are exactly a one-process run's.
        const CanvasBatch b = canvasBatch(m_train, indices, m_options, true, gen);
        const auto rows = [&](const torch::Tensor& x) { return shardRows(x, m_shard); };
        const VitOutputs out = m_net->forward(rows(b.pixels));
        // Classification: the shard's share of the batch mean.
        const torch::Tensor ce =
            torch::nn::functional::cross_entropy(
                out.logits.to(torch::kFloat), rows(b.labels),
                torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)) /
            double(b.labels.size(0));
        // Reconstruction: squared error of every scored patch's P * P pixels, mean over the batch's scored
        // values.
        const torch::Tensor patches =
            layerNormOf(m_net->module()->norm, out.sequence).narrow(1, 1, m_options.numPatches());
        const torch::Tensor predicted = m_model->reconstruction->forward(patches.to(torch::kFloat));
        const torch::Tensor scored = rows(b.scored).unsqueeze(-1).to(torch::kFloat);
        const double scoredValues =
            std::max(1.0, b.scored.sum().item<double>() * double(m_options.patchSize * m_options.patchSize));
        const torch::Tensor mse = ((predicted - rows(b.targets)).pow(2) * scored).sum() / scoredValues;
        return ce + kReconstructionWeight * mse;
    }

    std::pair<std::string, double> evaluate(ActivationSink* sink = nullptr) override
    {
        at::Generator gen = evaluationGenerator(m_config);
        c10::InferenceMode guard;
        const std::int64_t count =
            std::min<std::int64_t>(m_eval.size(), std::int64_t(m_config.evalBatches) * m_config.batchSize);
        std::int64_t correct = 0;
        for (std::int64_t start = 0; start < count; start += m_config.batchSize) {
            std::vector<std::int64_t> indices;
            for (std::int64_t i = start; i < std::min(count, start + m_config.batchSize); ++i)
                indices.push_back(i);
            const CanvasBatch b = canvasBatch(m_eval, indices, m_options, false, gen);
            correct +=
                (m_net->forward(b.pixels, sink).logits.argmax(-1) == b.labels).sum().item<std::int64_t>();
        }
        return {"accuracy", double(correct) / double(std::max<std::int64_t>(count, 1))};
    }

    void calibrationForward(std::int64_t index, at::Generator& gen, ActivationSink& sink) override
    {
        const std::vector<std::int64_t> indices =
            batchIndices(m_train.size(), m_config.batchSize, index, m_config.seed + 1);
        const CanvasBatch b = canvasBatch(m_train, indices, m_options, false, gen);
        c10::InferenceMode guard;
        m_net->forward(b.pixels, &sink);
    }

    std::vector<std::int64_t> probe(ActivationSink& sink) override
    {
        at::Generator gen = evaluationGenerator(m_config);
        const CanvasBatch b = canvasBatch(m_eval, {0, 1, 2, 3, 4, 5, 6, 7}, m_options, false, gen);
        c10::InferenceMode guard;
        m_net->forward(b.pixels, &sink);
        return std::vector<std::int64_t>(8, m_net->config().numTokens());
    }

    std::vector<CapturePoint> trackedPoints() const override
    {
        return {CapturePoint::FfnOut, CapturePoint::Out};
    }
    int numLayers() const override { return m_net->config().numLayers; }

    void loadWeights(const std::string& dir) override
    {
        loadWeightsInto(*m_net->module(), dir);
        const std::string file = (fs::path(dir) / kHeadFile).string();
        StateDict head = readStateDict(file);
        torch::NoGradGuard noGrad;
        for (auto& item : m_model->reconstruction->named_parameters()) {
            const std::string& name = item.key();
            torch::Tensor& param = item.value();
            const auto it = head.find(name);
            if (it == head.end()) throw Error(file + ": no tensor '" + name + "'");
            if (it->second.sizes() != param.sizes())
                throw Error(file + ": tensor '" + name + "' has the wrong shape");
            param.copy_(it->second);
        }
    }

    void saveModel(const std::string& dir, const std::string& card) const override
    {
        const VitConfig& c = m_net->config();
        m_net->save(dir, m_train.pretrainedCfgJson(c.imageSize));
        StateDict head;
        for (const auto& item : m_model->reconstruction->named_parameters())
            head[item.key()] = item.value().detach().to(torch::kFloat).contiguous();
        writeSafetensors((fs::path(dir) / kHeadFile).string(), head);
        writeSampleImages(dir);
        writeModelCard(dir, card);
    }

    std::string describe() const override
    {
        const VitConfig& c = m_net->config();
        return "ViT (" + std::to_string(c.numLayers) + " layers, hidden " + std::to_string(c.hiddenSize) +
               ", " + std::to_string(c.numHeads) + " heads, " + std::to_string(c.imageSize) + " px, patch " +
               std::to_string(c.patchSize) + ") on the canvas task (Fashion-MNIST items on a black " +
               std::to_string(m_options.canvasSize) + " px canvas, " +
               std::to_string(int(m_options.maskRate * 100)) +
               "% of the patches masked, item and masked patches reconstruct their pixels), " +
               c.variant.describe();
    }

private:
    /// The model's own inputs (issue #37): kSampleImages held-out canvases, unmasked, placed by the
    /// evaluation generator, as sample_images/NN-<class>.png; the app, `figures` and `stats` default to them.
    void writeSampleImages(const std::string& dir) const
    {
        at::Generator gen = evaluationGenerator(m_config);
        std::vector<std::int64_t> indices;
        for (std::int64_t i = 0; i < kSampleImages; ++i)
            indices.push_back(i);
        const CanvasBatch b = canvasBatch(m_eval, indices, m_options, false, gen);
        const fs::path folder = fs::path(dir) / "sample_images";
        fs::create_directories(folder);
        for (std::int64_t i = 0; i < kSampleImages; ++i) {
            std::string name = m_eval.classNames()[std::size_t(b.labels[i].item<std::int64_t>())];
            for (char& ch : name)
                if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '-'; // "T-shirt/top" -> "T-shirt-top"
            char number[8];
            std::snprintf(number, sizeof number, "%02lld", static_cast<long long>(i + 1));
            writePngFile((folder / (std::string(number) + "-" + name + ".png")).string(), canvasImage(b, i));
        }
    }

    static constexpr std::int64_t kSampleImages = 16;
    TrainConfig m_config;
    CanvasOptions m_options;
    ImageDataset m_train, m_eval;
    std::unique_ptr<VitNetwork> m_net;
    CanvasModel m_model{nullptr};
};

} // namespace

std::unique_ptr<TrainingTask> makeCanvasTask(const TrainConfig& config)
{
    return std::make_unique<CanvasTask>(config);
}

} // namespace outlierlens
