// The desktop app on decoders, offscreen: a folder without tokenizer files takes token ids, the demo
// decoders open with causal attention on their own inputs and the head view shows the backend's numbers,
// and fast mode (bf16) reruns the input, or says once that this CPU cannot.

#include "../common/gui_window_fixture.h"

#include "analysis/decoder_inspection.h"
#include "analysis/recording_sink.h"
#include "head_view.h"
#include "heatmap_view.h"
#include "io/safetensors.h"
#include "model/decoder_network.h"
#include "model/precision.h"
#include "outlier_dashboard.h"
#include "outliers_page.h"
#include "text/decoder_tokenizer.h"

#include <QApplication>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QtTest>

#include <cmath>
#include <filesystem>
#include <limits>

using namespace outlierlens;
using outlierlens::test::fixture;

class TstGuiDecoders : public QObject, public test::MainWindowFixture
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { openWindow(QStringLiteral("tst_gui_decoders")); }

    /// Issue #38: a decoder folder without tokenizer files opens; its input is token ids, run as given,
    /// and the head view shows the backend's numbers on them.
    void decoderWithoutTokenizerTakesIds()
    {
        const QString dir = QString::fromStdString(fixture("families/qwen3/hf"));
        m_window->openModel(dir);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, dir, 60000);
        QVERIFY(m_window->controller()->model().takesTokenIds());
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() &&
                                     m_window->controller()->snapshot()->model.dir == dir,
                                 60000);
        const SnapshotPtr s = m_window->controller()->snapshot();
        const std::vector<std::int64_t> ids = parseTokenIds(s->input.toStdString());
        QCOMPARE(s->T, int(ids.size()));
        for (int t = 0; t < s->T; ++t)
            QCOMPARE(s->tokens[t], QString::number(ids[std::size_t(t)]));
        QVERIFY2(s->prediction.value(0).startsWith(QLatin1Char('#')), qPrintable(s->prediction.join(", ")));
        m_window->pages()->setCurrentWidget(m_window->headView());
        m_window->setSelection(1, 3);
        const HeadViewData shown = m_window->headView()->data();
        DecoderNetwork net = DecoderNetwork::load(dir.toStdString());
        RecordingSink sink;
        {
            c10::InferenceMode guard;
            const auto T = std::int64_t(ids.size());
            net.forward(torch::tensor(ids, torch::kLong).view({1, T}), {}, &sink);
        }
        const torch::Tensor probs = sink.at("layer1/attn_probs")[0][3].contiguous();
        const torch::Tensor shownProbs =
            torch::from_blob(const_cast<float*>(shown.probabilities.values.constData()), {s->T, s->T},
                             torch::kFloat)
                .clone();
        OL_COMPARE_TENSORS("qwen3 without tokenizer", shownProbs, probs, 1e-6);
        // Text that is not ids is an error that says what to type, and the last snapshot stays.
        m_window->inputPanel()->runText(QStringLiteral("Summer is warm."));
        QTRY_VERIFY_WITH_TIMEOUT(!m_window->controller()->loadingOrInspecting(), 60000);
        QCOMPARE(m_window->controller()->snapshot()->input, s->input);
    }

    void decoderModelsOpenWithCausalAttention()
    {
        // The newer families (issue #38), GPT-2, OPT and LLaMA 2 as a user's folder holds them: the family
        // fixtures' weights with the 384-token tokenizer made for them.
        QTemporaryDir families;
        QStringList dirs;
        for (const char* family : {"qwen2", "qwen3", "mistral", "llama3", "gemma2", "phi", "gpt-neox",
                                   "falcon-7b", "falcon-40b"}) {
            const std::filesystem::path dir = std::filesystem::path(families.path().toStdString()) / family;
            std::filesystem::create_directories(dir);
            const std::filesystem::path model = fixture(std::string("families/") + family + "/hf");
            const std::filesystem::path tokenizer = fixture("tokenizers/bytelevel-384");
            for (const std::filesystem::path& file : {model / "config.json", model / "model.safetensors",
                                                      tokenizer / "vocab.json", tokenizer / "merges.txt"})
                std::filesystem::copy_file(file, dir / file.filename());
            dirs << QString::fromStdString(dir.string());
        }
        // LLaMA 2 last: the text-file checks below expect its 64 positions.
        for (const char* name : {"gpt2-seed0", "opt-seed0", "llama-seed0"})
            dirs << QString::fromStdString(fixture(std::string("decoders/") + name + "/hf"));
        for (const QString& dir : dirs) {
            const QByteArray nameBytes = QFileInfo(dir).fileName() == QStringLiteral("hf")
                                             ? QFileInfo(QFileInfo(dir).path()).fileName().toUtf8()
                                             : QFileInfo(dir).fileName().toUtf8();
            const char* name = nameBytes.constData();
            m_window->openModel(dir);
            QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, dir, 60000);
            QVERIFY(m_window->controller()->model().isDecoder());
            // A decoder starts on free text (An et al.'s probe sentence): no MNLI table.
            QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() &&
                                         m_window->controller()->snapshot()->model.dir == dir,
                                     60000);
            const SnapshotPtr s = m_window->controller()->snapshot();
            QVERIFY2(s->input.contains(QStringLiteral("Summer is warm")), qPrintable(s->input));
            QVERIFY(!m_window->inputPanel()->pairsView()->isVisible());
            QVERIFY(!s->prediction.isEmpty()); // the most likely next tokens

            // The head view shows the backend's numbers, with the future keys masked.
            m_window->pages()->setCurrentWidget(m_window->headView());
            m_window->setSelection(1, 2);
            const HeadViewData shown = m_window->headView()->data();
            QCOMPARE(shown.layer, 1);
            QCOMPARE(shown.head, 2);
            QVERIFY(shown.probabilities.causal);
            DecoderNetwork net = DecoderNetwork::load(dir.toStdString());
            const auto tokenizer = DecoderTokenizer::fromModelDir(dir.toStdString());
            const Encoding e = tokenizer->encode(s->input.toStdString());
            const auto T = std::int64_t(e.inputIds.size());
            QCOMPARE(s->T, int(T));
            qInfo("%s (%s): %d tokens, head view = backend", name, qPrintable(s->model.head), int(T));
            RecordingSink sink;
            {
                c10::InferenceMode guard;
                net.forward(torch::tensor(e.inputIds, torch::kLong).view({1, T}), {}, &sink);
            }
            const torch::Tensor probs = sink.at("layer1/attn_probs")[0][2].contiguous();
            const torch::Tensor shownProbs =
                torch::from_blob(const_cast<float*>(shown.probabilities.values.constData()), {T, T},
                                 torch::kFloat)
                    .clone();
            OL_COMPARE_TENSORS(name, shownProbs, probs, 1e-6);
            QVERIFY(shown.probabilities.isMasked(0, 1));
            QVERIFY(!shown.probabilities.isMasked(1, 0));
            // Layer 1 (odd): Mistral's window applies, Gemma 2's does not (its even layers slide).
            const DecoderConfig& dc = net.config();
            const int window = dc.slidingWindow > 0 && !dc.slidingWindowAlternates ? dc.slidingWindow : 0;
            QCOMPARE(shown.probabilities.window, window);
            if (window > 0) {
                QVERIFY(T > window);
                QVERIFY(shown.probabilities.isMasked(int(T) - 1, 0));
                QCOMPARE(probs[T - 1][0].item<float>(), 0.0f);
                QVERIFY(!shown.probabilities.isMasked(int(T) - 1, int(T) - window));
            }
            HeatmapView* panel = m_window->headView()->panel(HeadView::ProbabilitiesPanel);
            QVERIFY(panel);
            QVERIFY2(panel->cellToolTip(0, int(T) - 1).contains(QStringLiteral("masked")),
                     qPrintable(panel->cellToolTip(0, int(T) - 1)));
            if (window > 0)
                QVERIFY2(panel->cellToolTip(int(T) - 1, 0).contains(QStringLiteral("sliding window")),
                         qPrintable(panel->cellToolTip(int(T) - 1, 0)));

            // Every page opens with it and draws.
            for (int i = 0; i < m_window->pages()->count(); ++i) {
                m_window->pages()->setCurrentIndex(i);
                QWidget* page = m_window->pages()->currentWidget();
                QVERIFY2(page && !page->grab().isNull(), qPrintable(m_window->pages()->tabText(i)));
            }
            m_window->pages()->setCurrentWidget(m_window->outliersPage());
            QTRY_VERIFY(!m_window->outliersPage()->dashboard()->data().perDimension.values.isEmpty());
        }

        // A text file of one's own runs as the input.
        QTemporaryDir dir;
        const QString path = dir.path() + QStringLiteral("/note.txt");
        {
            QFile file(path);
            QVERIFY(file.open(QIODevice::WriteOnly));
            file.write("Attention sinks live on the first token.\nThe rest is text.\n");
        }
        m_window->inputPanel()->openTextFile(path);
        waitForInput(QStringLiteral("Attention sinks"));
        // A long file is cut to what the model (here 64 positions) and the app (512 tokens) allow.
        const QString longPath = dir.path() + QStringLiteral("/long.txt");
        {
            QFile file(longPath);
            QVERIFY(file.open(QIODevice::WriteOnly));
            for (int i = 0; i < 200; ++i)
                file.write("Summer follows spring, and the days grow long. ");
        }
        m_window->inputPanel()->openTextFile(longPath);
        waitForInput(QStringLiteral("first 64 tokens"));
        QCOMPARE(m_window->controller()->snapshot()->T, 64);
        m_window->inputPanel()->openTextFile(path);
        waitForInput(QStringLiteral("Attention sinks"));
        // A binary file is refused with one message, and the last input stays.
        const QString binary = dir.path() + QStringLiteral("/blob.txt");
        {
            QFile file(binary);
            QVERIFY(file.open(QIODevice::WriteOnly));
            file.write(QByteArray::fromHex("fffe0001") + QByteArray("binary"));
        }
        QSignalSpy failed(m_window->inputPanel(), &InputPanel::failed);
        m_window->inputPanel()->openTextFile(binary);
        QCOMPARE(failed.size(), 1);
        QVERIFY2(failed.first().first().toString().contains(QStringLiteral("not UTF-8")),
                 qPrintable(failed.first().first().toString()));
        QVERIFY(m_window->controller()->snapshot()->input.contains(QStringLiteral("Attention sinks")));
        if (auto* box = m_window->findChild<QMessageBox*>(QStringLiteral("errorMessage"))) box->close();

        // A BERT model opened on the decoder's text runs that text, and the panel shows it: the text
        // tab with the text in its box, no MNLI row selected.
        m_window->openModel(kModel);
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, kModel, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() &&
                                     m_window->controller()->snapshot()->model.dir == kModel,
                                 60000);
        QVERIFY(m_window->controller()->snapshot()->input.contains(QStringLiteral("Attention sinks")));
        QCOMPARE(m_window->inputPanel()->currentTab(), m_window->inputPanel()->textTab());
        QVERIFY(!m_window->inputPanel()->pairsView()->selectionModel()->hasSelection());
        const QString shownText = m_window->inputPanel()->premiseEdit()->toPlainText();
        QVERIFY2(shownText.contains(QStringLiteral("Attention sinks")), qPrintable(shownText));
    }

    void fastModeRerunsInBf16()
    {
        qunsetenv("OUTLIERLENS_NO_BF16");
        QAction* fast = m_window->fastModeAction();
        QVERIFY(fast);
        QVERIFY(fast->isCheckable());
        QVERIFY(!fast->isChecked()); // off by default
        QVERIFY2(fast->toolTip().contains(QStringLiteral("third significant digit")),
                 qPrintable(fast->toolTip()));
        const SnapshotPtr fp32 = openBertOnText();
        QCOMPARE(fp32->precision, QStringLiteral("fp32"));
        QVERIFY(m_window->precisionLabel()->text().isEmpty());

        const SnapshotPtr bf16 = toggleFastMode(true); // the input runs again by itself
        QVERIFY(QSettings().value(QStringLiteral("view/fastMode")).toBool());
        QCOMPARE(bf16->input, fp32->input);
        QCOMPARE(bf16->T, fp32->T);
        const bool supported = cpuSupportsBf16();
        QCOMPARE(bf16->precision, supported ? QStringLiteral("bf16") : QStringLiteral("fp32"));
        QCOMPARE(m_window->precisionLabel()->text().contains(QStringLiteral("bf16")), supported);
        // Within bf16's tolerance of float32 (8 significant bits: relative error ~0.4% per rounding,
        // a few roundings deep), and, where bf16 runs, not identical.
        double changed = 0;
        const auto compare = [&](const char* what, const float* a, const float* b, qsizetype n,
                                 double tolerance) {
            double largest = 0, diff = 0;
            for (qsizetype i = 0; i < n; ++i) {
                largest = std::max(largest, double(std::abs(a[i])));
                diff = std::max(diff, double(std::abs(a[i] - b[i])));
            }
            QVERIFY2(
                diff <= tolerance * largest,
                qPrintable(
                    QStringLiteral("%1: max |bf16 - fp32| %2 of max %3").arg(what).arg(diff).arg(largest)));
            changed += diff;
        };
        for (int l = 0; l < fp32->L(); ++l)
            for (int h = 0; h < fp32->H(); ++h) {
                compare("probabilities", fp32->probsOf(l, h), bf16->probsOf(l, h),
                        qsizetype(fp32->T) * fp32->T, 0.05);
                compare("P.V", fp32->contextOf(l, h), bf16->contextOf(l, h), qsizetype(fp32->T) * fp32->dh(),
                        0.05);
            }
        compare("block outputs", fp32->out.constData(), bf16->out.constData(), fp32->out.size(), 0.05);
        if (supported)
            QVERIFY(changed > 0);
        else
            QCOMPARE(changed, 0.0);
        // The head view shows the bf16 numbers, as float32.
        m_window->pages()->setCurrentWidget(m_window->headView());
        m_window->setSelection(1, 1);
        const MatrixData shown = m_window->headView()->data().probabilities;
        QCOMPARE(shown.values, bf16->probsVector(1, 1));

        // Off again: float32 numbers as before.
        const SnapshotPtr again = toggleFastMode(false);
        QCOMPARE(again->precision, QStringLiteral("fp32"));
        QVERIFY(!QSettings().value(QStringLiteral("view/fastMode")).toBool());
        QVERIFY(m_window->precisionLabel()->text().isEmpty());
        compare("probabilities again", fp32->probsOf(1, 1), again->probsOf(1, 1),
                qsizetype(fp32->T) * fp32->T, 1e-6);
    }

    void fastModeFallsBackOnceWithoutBf16()
    {
        qputenv("OUTLIERLENS_NO_BF16", "1"); // a CPU without bf16 instructions
        // A new window: on a CPU without bf16 the earlier tests' fast mode has already said it once in the
        // old one (it is said once per window).
        m_window = std::make_unique<MainWindow>(kModel, kPairs, kImages, m_jobs.get());
        m_window->resize(1300, 850);
        m_window->show();
        QVERIFY(QTest::qWaitForWindowExposed(m_window.get()));
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, kModel, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() != nullptr, 60000);
        openBertOnText();
        m_window->statusBar()->clearMessage();
        const SnapshotPtr first = toggleFastMode(true);
        QCOMPARE(first->precision, QStringLiteral("fp32"));
        QVERIFY(!first->precisionNotice.isEmpty());
        const QString message = m_window->statusBar()->currentMessage();
        QVERIFY2(message.contains(QStringLiteral("bfloat16")) && message.contains(QStringLiteral("fp32")),
                 qPrintable(message));
        QVERIFY(m_window->precisionLabel()->text().isEmpty()); // not in effect
        // Said once: the next runs in fast mode stay quiet.
        m_window->statusBar()->clearMessage();
        toggleFastMode(false);
        const SnapshotPtr second = toggleFastMode(true);
        QCOMPARE(second->precision, QStringLiteral("fp32"));
        QVERIFY2(!m_window->statusBar()->currentMessage().contains(QStringLiteral("bfloat16")),
                 qPrintable(m_window->statusBar()->currentMessage()));
        toggleFastMode(false);
        qunsetenv("OUTLIERLENS_NO_BF16");
    }
};

QTEST_MAIN(TstGuiDecoders)
#include "tst_gui_decoders.moc"
