// Issue #42 in the app: a DINOv2 with registers (the timm fixture of tests/fixtures/families) opens on a
// photo; the head view labels the registers, the Image page keeps them out of the patch grid, and the
// Token norms page shows the norms of the backend's own forward pass (recomputed here with torch).

#include "../common/gui_test_home.h"

#include "analysis/vit_inspection.h"
#include "compare_page.h"
#include "head_view.h"
#include "image_view.h"
#include "inspection_controller.h"
#include "io/image.h"
#include "main_window.h"
#include "model/capture.h"
#include "model/vit_network.h"
#include "model_catalog.h"
#include "token_norm_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <torch/torch.h>

#include <algorithm>

using namespace outlierlens;

namespace {

const QString kDinoReg = QStringLiteral(OUTLIERLENS_TEST_DATA "/families/dinov2-reg/timm");
const QString kClip = QStringLiteral(OUTLIERLENS_TEST_DATA "/families/clip-vision/timm");
const QString kImages = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/images");
const QString kPairs = QStringLiteral(OUTLIERLENS_TEST_DATA "/text/mnli_sample.jsonl");
constexpr int kRegisters = 4;

} // namespace

class TstVisionGui : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_home;
    std::unique_ptr<JobManager> m_jobs;
    std::unique_ptr<MainWindow> m_window;

    SnapshotPtr snapshot() const { return m_window->controller()->snapshot(); }

private Q_SLOTS:
    void initTestCase()
    {
        m_jobs = test::startGuiTest(m_home.path(), QStringLiteral("tst_vision_gui"));
        m_window = std::make_unique<MainWindow>(kDinoReg, kPairs, kImages, m_jobs.get());
        m_window->resize(1300, 850);
        m_window->show();
        QVERIFY(QTest::qWaitForWindowExposed(m_window.get()));
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, kDinoReg, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(snapshot() != nullptr && !m_window->controller()->loadingOrInspecting(),
                                 60000);
    }

    void registersAreTokensOfEveryView()
    {
        const SnapshotPtr s = snapshot();
        QCOMPARE(s->model.registers, kRegisters);
        const int grid = s->model.gridSize;
        QVERIFY(grid > 1);
        QCOMPARE(s->T, 1 + kRegisters + grid * grid);
        QCOMPARE(s->tokens.value(0), QStringLiteral("[CLS]"));
        for (int r = 1; r <= kRegisters; ++r)
            QCOMPARE(s->tokens.value(r), QStringLiteral("[REG%1]").arg(r));
        QCOMPARE(s->tokens.value(1 + kRegisters), QStringLiteral("patch 0,0"));

        // The head view: the registers between CLS and the patches.
        m_window->setSelection(1, 2);
        m_window->pages()->setCurrentWidget(m_window->headView());
        QTRY_COMPARE(m_window->headView()->data().layer, 1);
        QCOMPARE(m_window->headView()->data().tokens.mid(0, 2 + kRegisters),
                 s->tokens.mid(0, 2 + kRegisters));

        // The Image page: the patch grid holds the patches only; the registers' attention is their own.
        m_window->pages()->setCurrentWidget(m_window->imageView());
        QTRY_COMPARE(m_window->imageView()->data().layer, 1);
        const ImageViewData& image = m_window->imageView()->data();
        QCOMPARE(image.patchOutliers.size(), grid * grid);
        QCOMPARE(image.registerCumulativeAttention.size(), kRegisters);
        const int next = std::min(2, s->L() - 1);
        const float* p = s->probsOf(next, 2);
        const auto column = [&](int key) {
            double sum = 0;
            for (int q = 0; q < s->T; ++q)
                sum += p[std::size_t(q) * s->T + key];
            return sum;
        };
        for (int r = 0; r < kRegisters; ++r)
            QVERIFY(qAbs(image.registerCumulativeAttention[r] - column(1 + r)) < 1e-4);
        for (int k = 0; k < grid * grid; ++k)
            QVERIFY2(qAbs(image.cumulativeAttention[k] - column(1 + kRegisters + k)) < 1e-4,
                     qPrintable(QString::number(k)));
        QVERIFY(qAbs(image.clsCumulativeAttention - column(0)) < 1e-4);
        QVERIFY(image.attention.colTitle.size() > 0);
        QVERIFY(
            m_window->imageView()->figureCsv().contains(QStringLiteral("register_cumulative_attention,3,")));
    }

    void tokenNormsAreTheBackendsNorms()
    {
        const SnapshotPtr s = snapshot();
        const int layer = s->L() - 1;
        m_window->setSelection(layer, 0);
        QTabWidget* pages = m_window->pages();
        auto* normsPage = dynamic_cast<QWidget*>(m_window->tokenNormsView());
        QVERIFY(pages->isTabVisible(pages->indexOf(normsPage)));
        pages->setCurrentWidget(normsPage);
        QTRY_COMPARE(m_window->tokenNormsView()->rows().size(), 1);
        const TokenNormData d = m_window->tokenNormsView()->rows().front();
        QCOMPARE(d.layer, layer);

        // The backend on the same image, the norms by torch.
        VitNetwork network = VitNetwork::load(kDinoReg.toStdString());
        const ImagePreprocessing preprocessing = ImagePreprocessing::fromModelDir(kDinoReg.toStdString());
        const VitInspection r = inspectVit(network, preprocessing, s->input.toStdString());
        const torch::Tensor out =
            r.activations.at(captureName(CapturePoint::Out, layer))[0].to(torch::kDouble);
        const torch::Tensor norms = out.pow(2).sum(-1).sqrt();
        const int first = 1 + kRegisters;
        QCOMPARE(d.prefixNorms.size(), first);
        QCOMPARE(d.patchNorms.size(), int(norms.size(0)) - first);
        for (int t = 0; t < norms.size(0); ++t) {
            const double want = norms[t].item<double>();
            const double got = t < first ? d.prefixNorms[t] : d.patchNorms[t - first];
            QVERIFY2(std::abs(got - want) <= 1e-4 * std::max(1.0, want),
                     qPrintable(QStringLiteral("token %1: %2 vs %3").arg(t).arg(got).arg(want)));
        }
        QCOMPARE(d.prefixLabels.value(1), QStringLiteral("[REG1]"));
        // The rule: 3 x the lower median of the patch norms.
        std::vector<double> patches;
        for (int t = first; t < norms.size(0); ++t)
            patches.push_back(norms[t].item<double>());
        std::sort(patches.begin(), patches.end());
        const double cutoff = 3.0 * patches[(patches.size() - 1) / 2];
        QVERIFY2(std::abs(d.cutoff - cutoff) <= 1e-4 * cutoff, qPrintable(QString::number(d.cutoff)));
        QCOMPARE(d.highNormPatches(),
                 int(std::count_if(patches.begin(), patches.end(), [&](double n) { return n > d.cutoff; })));
        // [CLS]'s attention in the last layer, per head, on the patches.
        const torch::Tensor probs = r.activations.at(captureName(CapturePoint::AttnProbs, s->L() - 1))[0];
        QCOMPARE(d.clsAttention.size(), s->H());
        for (int h = 0; h < s->H(); ++h)
            for (int k = 0; k < d.clsAttention[h].size(); ++k)
                QVERIFY(std::abs(d.clsAttention[h][k] - probs[h][0][first + k].item<float>()) < 1e-5);
        QVERIFY(m_window->tokenNormsView()->figureCsv().contains(QStringLiteral(",patch_norm,0,0,")));
        // [CLS]'s attention on itself and the four registers, in the export.
        QCOMPARE(d.clsPrefixAttention.value(0).size(), first);
        QVERIFY(std::abs(d.clsPrefixAttention[0][first - 1] - probs[0][0][first - 1].item<float>()) < 1e-5);
        QVERIFY(
            m_window->tokenNormsView()->figureCsv().contains(QStringLiteral(",cls_prefix_attention,0,4,")));
    }

    void textModelsHideTheTokenNormsPage()
    {
        ModelInfo text;
        QVERIFY(!dynamic_cast<Page*>(m_window->tokenNormsView())->showsModel(text));
    }

    void compareShowsARegisterModelBesideOneWithout()
    {
        ComparePage* compare = m_window->comparePage();
        m_window->pages()->setCurrentWidget(compare);
        auto* check = compare->findChild<QCheckBox*>(QStringLiteral("tokenNormsCheck"));
        QVERIFY(check);
        QVERIFY(check->isVisible());
        // Model 1: this one (registers); model 2: the CLIP tower (none), both from the recent models.
        ModelCatalog::addRecent(kClip);
        compare->setModel(m_window->controller()->model());
        const QList<QComboBox*> pickers = compare->findChildren<QComboBox*>();
        QVERIFY(pickers.size() >= 2);
        const auto choose = [&](QComboBox* picker, const QString& dir) {
            const int index = picker->findData(dir);
            QVERIFY2(index >= 0, qPrintable(dir));
            picker->setCurrentIndex(index);
            Q_EMIT picker->activated(index);
        };
        choose(pickers[0], kDinoReg);
        choose(pickers[1], kClip);
        for (int i = 2; i < pickers.size(); ++i)
            choose(pickers[i], QString());
        check->setChecked(true);
        compare->setInput(compare->input().kind == InputRequest::Kind::None
                              ? InputRequest{InputRequest::Kind::Image, {}, {}, snapshot()->input, {}, 0}
                              : compare->input());
        const auto* view = dynamic_cast<const TokenNormView*>(compare->figure());
        QVERIFY(view);
        QTRY_COMPARE_WITH_TIMEOUT(view->rows().size(), 2, 60000);
        QCOMPARE(view->rows()[0].prefixLabels.size(), 1 + kRegisters);
        QCOMPARE(view->rows()[1].prefixLabels.size(), 1);
    }
};

QTEST_MAIN(TstVisionGui)
#include "tst_vision_gui.moc"
