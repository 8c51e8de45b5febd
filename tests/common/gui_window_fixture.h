#pragma once
// For GUI tests that drive the main window (tst_gui, tst_gui_decoders): the window on a private home,
// opened on the BERT fixture and the test MNLI pairs, and the waits every such test needs.

#include "../common/gui_test_home.h"
#include "../common/tensor_compare.h"

#include "input_panel.h"
#include "inspection_controller.h"
#include "job_manager.h"
#include "main_window.h"
#include "mnli_table_model.h"

#include <QAction>
#include <QTemporaryDir>
#include <QtTest>

#include <memory>

namespace outlierlens::test {

class MainWindowFixture
{
protected:
    const QString kModel = QString::fromStdString(fixture("bert/hf"));
    const QString kPairs = QStringLiteral(OUTLIERLENS_TEST_DATA "/text/mnli_sample.jsonl");
    const QString kImages = QStringLiteral(OUTLIERLENS_SOURCE_DIR "/sample_data/images");

    QTemporaryDir m_home;
    std::unique_ptr<JobManager> m_jobs;
    std::unique_ptr<MainWindow> m_window;

    /// The window on the BERT fixture, its pairs loaded and a first input run (call from initTestCase).
    void openWindow(const QString& testName)
    {
        m_jobs = startGuiTest(m_home.path(), testName);
        m_window = std::make_unique<MainWindow>(kModel, kPairs, kImages, m_jobs.get());
        m_window->resize(1300, 850);
        m_window->show();
        QVERIFY(QTest::qWaitForWindowExposed(m_window.get()));
        QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, kModel, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->inputPanel()->pairsModel()->rowCount() > 3, 30000);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() != nullptr, 60000);
    }

    /// Waits until the window shows a snapshot whose input contains `text`.
    void waitForInput(const QString& text)
    {
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() &&
                                     m_window->controller()->snapshot()->input.contains(text),
                                 60000);
    }

    /// Opens the BERT fixture on a sentence and returns its snapshot.
    SnapshotPtr openBertOnText()
    {
        if (m_window->controller()->model().dir != kModel) {
            m_window->openModel(kModel);
            [&] { QTRY_COMPARE_WITH_TIMEOUT(m_window->controller()->model().dir, kModel, 60000); }();
        }
        m_window->inputPanel()->runText(QStringLiteral("The sink takes the attention of the head."));
        waitForInput(QStringLiteral("The sink takes"));
        [&] { QTRY_VERIFY_WITH_TIMEOUT(!m_window->controller()->loadingOrInspecting(), 60000); }();
        return m_window->controller()->snapshot();
    }

    /// Toggles fast mode and waits for the input to have run again.
    SnapshotPtr toggleFastMode(bool on)
    {
        const SnapshotPtr before = m_window->controller()->snapshot();
        QAction* fast = m_window->fastModeAction();
        if (fast->isChecked() != on) fast->trigger();
        [&] {
            QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->snapshot() != before &&
                                         !m_window->controller()->loadingOrInspecting(),
                                     60000);
        }();
        return m_window->controller()->snapshot();
    }
};

} // namespace outlierlens::test
