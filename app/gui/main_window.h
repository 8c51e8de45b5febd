#pragma once
// GUI thread. The main window only wires pages together; computing happens in the controllers'
// worker threads and in the pure view builders.

#include "input_request.h"
#include "page.h"

#include <QMainWindow>

#include <functional>

class QAction;
class QComboBox;
class QLabel;
class QMenu;
class QSpinBox;
class QTabWidget;
class QProgressBar;
class QToolButton;

namespace outlierlens {

class ComparePage;
class Figure;
class FiguresPage;
struct FigureView;
class HeadView;
class ImageView;
class TokenNormView;
class InputPanel;
class InspectionController;
class InterventionPanel;
class JobManager;
class JobsPage;
class LayerPage;
class OutliersPage;
class OverviewGrid;
class SweepsPage;
class QuantizationPage;
class SystematicPage;
class TeachingPage;

class MainWindow : public QMainWindow
{
    Q_OBJECT
public:
    /// Opens `modelDir` (the bundled default if empty) and `pairsFile` in the input table.
    MainWindow(const QString& modelDir, const QString& pairsFile, const QString& galleryDir, JobManager* jobs,
               QWidget* parent = nullptr);
    ~MainWindow() override;

    // For tests and scripted screenshots.
    InspectionController* controller() const { return m_controller; }
    InputPanel* inputPanel() const { return m_input; }
    QTabWidget* pages() const { return m_pages; }
    HeadView* headView() const { return m_headView; }
    LayerPage* layerPage() const { return m_layerPage; }
    OverviewGrid* overview() const { return m_overview; }
    OutliersPage* outliersPage() const { return m_outliers; }
    InterventionPanel* interventionPanel() const { return m_interventionPanel; }
    ImageView* imageView() const { return m_imageView; }
    TokenNormView* tokenNormsView() const { return m_tokenNorms; }
    ComparePage* comparePage() const { return m_compare; }
    TeachingPage* teachingPage() const { return m_teaching; }
    SystematicPage* systematicPage() const { return m_systematic; }
    JobsPage* jobsPage() const { return m_jobs; }
    SweepsPage* sweepsPage() const { return m_sweeps; }
    FiguresPage* figuresPage() const { return m_figures; }
    QSpinBox* layerBox() const { return m_layerBox; }
    QLabel* modelLabel() const { return m_modelLabel; }
    QLabel* predictionLabel() const { return m_predictionLabel; }
    QLabel* pairProgressLabel() const { return m_pairProgress; }
    QToolButton* stopPredictionsButton() const { return m_stopPredictions; }
    QSpinBox* headBox() const { return m_headBox; }
    int layer() const { return m_state.layer; }
    int head() const { return m_state.head; }
    void setSelection(int layer, int head);
    /// View > Fast mode (bf16); remembered, off by default.
    QAction* fastModeAction() const { return m_fastMode; }
    /// "bf16 (fast mode)" while the shown input was computed in bf16, else empty.
    QLabel* precisionLabel() const { return m_precisionLabel; }
    void openModel(const QString& dir);
    /// Runs `input` as the current input, as the input dock does: every page follows it.
    void runInput(const InputRequest& input) { request(input); }
    /// The Figure of the visible page (for export), or null.
    const Figure* currentFigure() const;
    /// Exports the visible page without a dialog (tests, scripts).
    bool exportCurrent(const QString& path, QSize size, int dpi, QString* error) const;

protected:
    void closeEvent(QCloseEvent* event) override;

private:
    void buildActions();
    void modelLoaded(const ModelInfo& info);
    /// "name: head, L layers, H heads, hidden d; variant" (the label above the pages).
    QString modelDescription(const ModelInfo& info) const;
    void snapshotReady(const SnapshotPtr& snapshot);
    void refreshCurrentPage();
    /// Calls `f` with every tab that is a Page and its tab index.
    void forEachPage(const std::function<void(Page& page, int tab)>& f);
    void request(const InputRequest& input);
    void dimensionClicked(int dimension);
    /// The Systematic outliers page: a channel of h leads to the head of the next layer that reads it,
    /// a key or a head to the head view of the layer shown, with the tokens marked.
    void systematicChannelClicked(int channel);
    /// A figure of the Figures page: its tab, layer, head and input (and statistics file).
    void openFigureView(const FigureView& view);
    void showHeadWithTokens(int head, const QVector<int>& tokens, const QString& message);
    /// View > Outlier rule: 6σ or τ × mean|X| (and τ), remembered, applied to every page.
    void addOutlierRuleMenu(QMenu* view);
    /// Asks for a data set and queues `stats` over it for the open model.
    void requestStatistics();
    void showError(const QString& message);
    void exportDialog();

    InspectionController* m_controller = nullptr;
    JobManager* m_jobManager = nullptr;
    InputPanel* m_input = nullptr;
    QTabWidget* m_pages = nullptr;
    HeadView* m_headView = nullptr;
    OverviewGrid* m_overview = nullptr;
    OutliersPage* m_outliers = nullptr;
    ImageView* m_imageView = nullptr;
    TokenNormView* m_tokenNorms = nullptr;
    ComparePage* m_compare = nullptr;
    TeachingPage* m_teaching = nullptr;
    SystematicPage* m_systematic = nullptr;
    LayerPage* m_layerPage = nullptr;
    SweepsPage* m_sweeps = nullptr;
    QuantizationPage* m_quantization = nullptr;
    FiguresPage* m_figures = nullptr;
    JobsPage* m_jobs = nullptr;
    QComboBox* m_modelBox = nullptr;
    QSpinBox* m_layerBox = nullptr;
    QSpinBox* m_headBox = nullptr;
    QLabel* m_modelLabel = nullptr;
    QLabel* m_predictionLabel = nullptr;
    QLabel* m_precisionLabel = nullptr;
    QAction* m_fastMode = nullptr;
    bool m_precisionNoticeShown = false; // the bf16 fallback is said once
    QString m_shownGallery;              // the folder the input panel's gallery shows
    QProgressBar* m_busy = nullptr;
    QLabel* m_pairProgress = nullptr; ///< "Predicting pairs: N of M" while the table fills
    QToolButton* m_stopPredictions = nullptr;
    InputRequest m_lastInput; ///< the input the shown snapshot was computed from (the last that ran)
    InputRequest m_requested; ///< the newest input asked for, until its snapshot arrives (or it fails)
    QString m_sampleShown;    ///< the current model's sample input, when that is what the app ran
    PageState m_state;        ///< the snapshot shown, the chosen head and the tokens marked on it
    QString m_galleryDir;
    bool m_quietRerun = false; ///< a transform or intervention reset by a model load reruns nothing
    InterventionPanel* m_interventionPanel = nullptr;
};

} // namespace outlierlens
