// Golden parity (issue #42) with Hugging Face's Dinov2WithRegistersModel (v4.51.3) and CLIPVisionModel
// (v4.47.1), and timm's VisionTransformer (v0.9.16: vit_small_patch14_reg4_dinov2,
// vit_base_patch16_clip_quickgelu_224) on the same weights: every capture point, the outputs, for both
// namings, at the checkpoint's size and (DINOv2) at a non-square size that interpolates the positions.
// Fixtures: tests/fixtures/families/{dinov2-reg,clip-vision} (README there).

#include "../common/expect_error.h"
#include "../common/tensor_compare.h"

#include "analysis/recording_sink.h"
#include "common/error.h"
#include "io/hdf5_store.h"
#include "io/safetensors.h"
#include "io/state_dict.h"
#include "model/model_family.h"
#include "model/runtime.h"
#include "model/vit_network.h"

#include <nlohmann/json.hpp>

#include <QtTest>

#include <filesystem>
#include <fstream>

using namespace outlierlens;
using outlierlens::test::expectError;
using outlierlens::test::fixture;
namespace fs = std::filesystem;

namespace {

constexpr double kTolerance = 1e-4;
constexpr double kProbabilityTolerance = 1e-5;

/// [B, T, n*d] of layer `layer` -> [B, n, T, d]
torch::Tensor headsOf(const torch::Tensor& ref, int layer, int heads)
{
    const torch::Tensor x = ref[layer];
    return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).permute({0, 2, 1, 3});
}

/// A copy of a fixture folder whose config.json is edited by `edit` (the weights are linked).
void copyWithConfig(const std::string& from, const QString& to,
                    const std::function<void(nlohmann::json&)>& edit)
{
    nlohmann::json j = nlohmann::json::parse(std::ifstream(fixture(from) + "/config.json"));
    edit(j);
    std::ofstream(to.toStdString() + "/config.json") << j.dump(2);
    fs::create_symlink(fixture(from) + "/model.safetensors", to.toStdString() + "/model.safetensors");
}

} // namespace

/// OL_COMPARE_TENSORS, also recording the largest difference in `worst` for the log.
#define COMPARE_AND_TRACK(name, actual, expected, tolerance, worst)                                          \
    do {                                                                                                     \
        OL_COMPARE_TENSORS(name, actual, expected, tolerance);                                               \
        worst = std::max(worst, outlierlens::test::maxAbsDiff(actual, expected));                            \
    } while (false)

class TstVisionFamilyParity : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { configureTorchThreads(); }

    void captures_data()
    {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("naming");
        QTest::addColumn<QString>("prefix");     // the reference's input set: "" or "interp/"
        QTest::addColumn<QString>("lastHidden"); // the dataset our lastHiddenState must equal
        QTest::addColumn<int>("tokens");         // 1 + registers + patches
        for (const char* naming : {"hf", "timm"}) {
            QTest::newRow(qPrintable(QStringLiteral("dinov2-reg %1 56x56").arg(naming)))
                << "dinov2-reg" << naming << ""
                << "outputs/last_hidden_state" << 1 + 4 + 16;
            QTest::newRow(qPrintable(QStringLiteral("dinov2-reg %1 70x98 interpolated").arg(naming)))
                << "dinov2-reg" << naming << "interp/"
                << "outputs/last_hidden_state" << 1 + 4 + 35;
        }
        // HF CLIP's last_hidden_state has no final norm; timm's forward_features is post_layernorm on all
        // tokens.
        QTest::newRow("clip-vision hf 32x32") << "clip-vision"
                                              << "hf"
                                              << ""
                                              << "outputs/last_hidden_state" << 17;
        QTest::newRow("clip-vision timm 32x32") << "clip-vision"
                                                << "timm"
                                                << ""
                                                << "outputs/post_layernorm_all_tokens" << 17;
    }

    void captures()
    {
        QFETCH(QString, family);
        QFETCH(QString, naming);
        QFETCH(QString, prefix);
        QFETCH(QString, lastHidden);
        QFETCH(int, tokens);
        const std::string dir = "families/" + family.toStdString();
        const std::string p = prefix.toStdString();
        VitNetwork net = VitNetwork::load(fixture(dir + "/" + naming.toStdString()));
        QCOMPARE(modelFamilyOfDir(fixture(dir + "/" + naming.toStdString())).engine, FamilyEngine::Vit);

        const Hdf5Reader ref(fixture(dir + "/reference.h5"));
        RecordingSink sink;
        c10::InferenceMode guard;
        const VitOutputs out = net.forward(ref.readTensor(p + "inputs/pixel_values"), &sink);
        QCOMPARE(out.sequence.size(1), std::int64_t(tokens));

        double worstActivation = 0.0, worstProbability = 0.0;
        const int H = net.config().numHeads;
        COMPARE_AND_TRACK("embeddings", sink.at("embeddings"), ref.readTensor(p + "embeddings"), kTolerance,
                          worstActivation);
        const torch::Tensor v = ref.readTensor(p + "layers/v"),
                            context = ref.readTensor(p + "layers/context");
        const torch::Tensor scores = ref.readTensor(p + "layers/attn_scores"),
                            attentions = ref.readTensor(p + "attentions");
        const torch::Tensor attnProj = ref.readTensor(p + "layers/attn_proj"),
                            xDown = ref.readTensor(p + "layers/x_down"),
                            ffnOut = ref.readTensor(p + "layers/ffn_out"),
                            hidden = ref.readTensor(p + "hidden_states");
        for (int i = 0; i < net.config().numLayers; ++i) {
            const QString l = QStringLiteral("layer%1/").arg(i);
            auto at = [&](const char* point) { return sink.at((l + point).toStdString()); };
            COMPARE_AND_TRACK(l + "attn_scores", at("attn_scores"), scores[i], kTolerance, worstActivation);
            COMPARE_AND_TRACK(l + "attn_probs", at("attn_probs"), attentions[i], kProbabilityTolerance,
                              worstProbability);
            COMPARE_AND_TRACK(l + "attn_values", at("attn_values"), headsOf(v, i, H), kTolerance,
                              worstActivation);
            COMPARE_AND_TRACK(l + "attn_context", at("attn_context"), headsOf(context, i, H), kTolerance,
                              worstActivation);
            COMPARE_AND_TRACK(l + "attn_out", at("attn_out"), attnProj[i], kTolerance,
                              worstActivation); // before LayerScale
            COMPARE_AND_TRACK(l + "down_in", at("down_in"), xDown[i], kTolerance, worstActivation);
            COMPARE_AND_TRACK(l + "ffn_out", at("ffn_out"), ffnOut[i], kTolerance,
                              worstActivation); // before LayerScale
            COMPARE_AND_TRACK(l + "residual", at("residual"), hidden[i + 1], kTolerance, worstActivation);
            COMPARE_AND_TRACK(l + "out", at("out"), hidden[i + 1], kTolerance, worstActivation);
        }
        QVERIFY(!sink.contains("logits")); // no classifier
        double worstOutput = 0.0;
        COMPARE_AND_TRACK("last hidden state", out.lastHiddenState,
                          ref.readTensor(p + lastHidden.toStdString()), kTolerance, worstOutput);
        COMPARE_AND_TRACK("pooler_output", out.pooled, ref.readTensor(p + "outputs/pooler_output"),
                          kTolerance, worstOutput);
        if (ref.exists(p + "outputs/post_layernorm_all_tokens")) {
            COMPARE_AND_TRACK("post_layernorm_all_tokens", out.normed,
                              ref.readTensor(p + "outputs/post_layernorm_all_tokens"), kTolerance,
                              worstOutput);
            COMPARE_AND_TRACK("last block output", out.sequence,
                              ref.readTensor(p + "outputs/last_hidden_state"), kTolerance, worstOutput);
        }
        qInfo("max |diff|: activations %.3g, probabilities %.3g, outputs %.3g", worstActivation,
              worstProbability, worstOutput);
    }

    void configsRead_data()
    {
        QTest::addColumn<QString>("dir");
        QTest::addColumn<QString>("family");
        QTest::addColumn<int>("registers");
        QTest::addColumn<bool>("layerScale");
        QTest::addColumn<bool>("preNorm");
        QTest::addColumn<QString>("act");
        QTest::addColumn<int>("interpolation");
        QTest::newRow("dinov2-reg hf")
            << "dinov2-reg/hf"
            << "dinov2" << 4 << true << false << "gelu" << int(PosInterpolation::BicubicAntialias);
        QTest::newRow("dinov2-reg timm")
            << "dinov2-reg/timm"
            << "vit" << 4 << true << false << "gelu" << int(PosInterpolation::BicubicAntialias);
        QTest::newRow("clip-vision hf")
            << "clip-vision/hf"
            << "clip_vision" << 0 << false << true << "quick_gelu" << int(PosInterpolation::Bicubic);
        QTest::newRow("clip-vision timm")
            << "clip-vision/timm"
            << "vit" << 0 << false << true << "quick_gelu" << int(PosInterpolation::None);
    }

    void configsRead()
    {
        QFETCH(QString, dir);
        QFETCH(QString, family);
        QFETCH(int, registers);
        QFETCH(bool, layerScale);
        QFETCH(bool, preNorm);
        QFETCH(QString, act);
        QFETCH(int, interpolation);
        const std::string path = fixture("families/" + dir.toStdString());
        QCOMPARE(QString::fromStdString(modelFamilyOfDir(path).id), family);
        const VitConfig c = VitConfig::fromModelDir(path);
        QCOMPARE(c.numRegisters, registers);
        QCOMPARE(c.layerScale, layerScale);
        QCOMPARE(c.preNorm, preNorm);
        QCOMPARE(c.patchBias, !preNorm);
        QCOMPARE(QString::fromStdString(c.hiddenAct), act);
        QCOMPARE(int(c.posInterpolation), interpolation);
        QCOMPARE(c.numClasses, 0);
        QCOMPARE(c.numLayers, 2);
        QCOMPARE(c.intermediateSize, 128);
        // HF's DINOv2 table has a class row, timm's reg4 one has none; CLIP's eps is torch's 1e-5.
        QCOMPARE(c.posClsRow, !(dir == QStringLiteral("dinov2-reg/timm")));
        QCOMPARE(c.layerNormEps, preNorm ? 1e-5 : 1e-6);
    }

    void huggingFaceNamesMapOntoTimms_data()
    {
        QTest::addColumn<QString>("family");
        QTest::newRow("dinov2-reg") << "dinov2-reg";
        QTest::newRow("clip-vision") << "clip-vision";
    }

    void huggingFaceNamesMapOntoTimms()
    {
        // The same weights under both namings: the mapped HF tensors equal timm's, name by name (q/k/v
        // concatenated in timm's order, LayerScale, CLIP's reshaped class and position embeddings). HF's
        // DINOv2 table has a (zero) class row that timm's has not.
        QFETCH(QString, family);
        const std::string dir = "families/" + family.toStdString();
        const VitConfig c = VitConfig::fromModelDir(fixture(dir + "/hf"));
        LoadReport report;
        StateDict mapped = mapHuggingFaceVisionKeys(readStateDict(fixture(dir + "/hf/model.safetensors")),
                                                    c.naming, c.numLayers, "hf", report);
        const StateDict timm = readStateDict(fixture(dir + "/timm/model.safetensors"));
        QCOMPARE(mapped.size(), timm.size());
        for (const auto& [name, tensor] : timm) {
            QVERIFY2(mapped.count(name), name.c_str());
            torch::Tensor ours = mapped.at(name);
            if (name == "pos_embed" && !VitConfig::fromModelDir(fixture(dir + "/timm")).posClsRow) {
                QVERIFY(torch::equal(ours.narrow(1, 0, 1), torch::zeros({1, 1, c.hiddenSize})));
                ours = ours.narrow(1, 1, ours.size(1) - 1);
            }
            QVERIFY2(torch::equal(ours, tensor), name.c_str());
        }
        if (c.naming == VitNaming::Dinov2) {
            QCOMPARE(report.ignored.size(), std::size_t(1)); // the mask token
            QVERIFY(QString::fromStdString(report.ignored[0]).startsWith("embeddings.mask_token"));
        }
    }

    void wholeClipConfigRunsItsVisionTower()
    {
        // A CLIPModel folder: config.json with vision_config, weights with a text tower beside the vision
        // one.
        QTemporaryDir tmp;
        const std::string src = fixture("families/clip-vision/hf");
        nlohmann::json vision = nlohmann::json::parse(std::ifstream(src + "/config.json"));
        nlohmann::json j = {{"architectures", {"CLIPModel"}},
                            {"model_type", "clip"},
                            {"vision_config", vision},
                            {"text_config", {{"num_hidden_layers", 3}}}};
        std::ofstream(tmp.path().toStdString() + "/config.json") << j.dump(2);
        StateDict tensors = readStateDict(src + "/model.safetensors");
        tensors.emplace("text_model.encoder.layers.2.mlp.fc1.weight", torch::ones({4, 4}));
        tensors.emplace("visual_projection.weight", torch::ones({8, 64}));
        tensors.emplace("logit_scale", torch::ones({}));
        writeSafetensors(tmp.path().toStdString() + "/model.safetensors", tensors, SafetensorsDtype::Float32,
                         {});
        QCOMPARE(QString::fromStdString(modelFamilyOfDir(tmp.path().toStdString()).id),
                 QStringLiteral("clip_vision"));
        VitNetwork net = VitNetwork::load(tmp.path().toStdString());
        QCOMPARE(net.loadReport().ignored.size(), std::size_t(3));
        const Hdf5Reader ref(fixture("families/clip-vision/reference.h5"));
        c10::InferenceMode guard;
        const VitOutputs out = net.forward(ref.readTensor("inputs/pixel_values"));
        OL_COMPARE_TENSORS("pooler_output", out.pooled, ref.readTensor("outputs/pooler_output"), kTolerance);
    }

    void contradictingConfigIsOneClearError_data()
    {
        QTest::addColumn<QString>("from");
        QTest::addColumn<QString>("key"); // "model_args.x" edits timm's model_args
        QTest::addColumn<int>("value");
        QTest::addColumn<QStringList>("parts");
        QTest::newRow("hf registers") << "families/dinov2-reg/hf"
                                      << "num_register_tokens" << 2
                                      << QStringList{"num_register_tokens", "embeddings.register_tokens",
                                                     "[1, 2, 64]", "[1, 4, 64]", "model.safetensors"};
        QTest::newRow("hf patch size")
            << "families/dinov2-reg/hf"
            << "patch_size" << 7
            << QStringList{"patch_size", "embeddings.patch_embeddings.projection.weight", "[64, 3, 7, 7]",
                           "[64, 3, 14, 14]"};
        QTest::newRow("timm registers") << "families/dinov2-reg/timm"
                                        << "model_args.reg_tokens" << 1
                                        << QStringList{"reg_tokens", "reg_token", "[1, 1, 64]", "[1, 4, 64]"};
        QTest::newRow("timm no registers")
            << "families/dinov2-reg/timm"
            << "model_args.reg_tokens" << 0
            << QStringList{"reg_tokens", "reg_token", "[1, 0, 64]", "[1, 4, 64]"};
        QTest::newRow("timm patch size")
            << "families/dinov2-reg/timm"
            << "model_args.patch_size" << 7
            << QStringList{"patch_size", "patch_embed.proj.weight", "[64, 3, 7, 7]"};
        QTest::newRow("clip patch size") << "families/clip-vision/hf"
                                         << "patch_size" << 4
                                         << QStringList{"patch_size", "embeddings.patch_embedding.weight",
                                                        "[64, 3, 4, 4]", "[64, 3, 8, 8]"};
    }

    void contradictingConfigIsOneClearError()
    {
        QFETCH(QString, from);
        QFETCH(QString, key);
        QFETCH(int, value);
        QFETCH(QStringList, parts);
        QTemporaryDir tmp;
        copyWithConfig(from.toStdString(), tmp.path(), [&](nlohmann::json& j) {
            if (key.startsWith(QStringLiteral("model_args.")))
                j["model_args"][key.mid(11).toStdString()] = value;
            else
                j[key.toStdString()] = value;
        });
        expectError([&] { VitNetwork::load(tmp.path().toStdString()); }, parts << "config.json");
    }

    void missingRegistersAreNamed()
    {
        // The config asks for registers the weights lack: named before the strict loader's generic message.
        QTemporaryDir tmp;
        StateDict tensors = readStateDict(fixture("families/dinov2-reg/hf/model.safetensors"));
        tensors.erase("embeddings.register_tokens");
        writeSafetensors(tmp.path().toStdString() + "/model.safetensors", tensors, SafetensorsDtype::Float32,
                         {});
        fs::copy_file(fixture("families/dinov2-reg/hf/config.json"),
                      tmp.path().toStdString() + "/config.json");
        expectError([&] { VitNetwork::load(tmp.path().toStdString()); },
                    {"num_register_tokens 4", "embeddings.register_tokens", "holds no"});
    }

    void sizeWithoutInterpolationIsAnError()
    {
        // timm without dynamic_img_size runs only its img_size (as timm asserts); the others need multiples
        // of the patch size.
        VitNetwork clip = VitNetwork::load(fixture("families/clip-vision/timm"));
        VitNetwork dino = VitNetwork::load(fixture("families/dinov2-reg/hf"));
        c10::InferenceMode guard;
        expectError(
            [&] {
                clip.forward(torch::zeros({1, 3, 40, 40}));
            },
            {"[B, 3, 32, 32]", "[1, 3, 40, 40]"});
        expectError([&] { dino.forward(torch::zeros({1, 3, 56, 60})); }, {"multiples of the patch size 14"});
        QCOMPARE(dino.forward(torch::zeros({2, 3, 28, 42})).sequence.sizes(),
                 (c10::IntArrayRef{2, 1 + 4 + 6, 64}));
    }
};

QTEST_APPLESS_MAIN(TstVisionFamilyParity)
#include "tst_vision_family_parity.moc"
