#include "main_window.h"

#include "about_box.h"
#include "colormap_menu.h"
#include "compare_page.h"
#include "export_dialog.h"
#include "figure_export.h"
#include "figures_page.h"
#include "head_page.h"
#include "image_page.h"
#include "input_panel.h"
#include "inspection_controller.h"
#include "intervention_panel.h"
#include "job_manager.h"
#include "jobs_page.h"
#include "last_folder.h"
#include "layer_page.h"
#include "mnli_table_model.h"
#include "model_catalog.h"
#include "outliers_page.h"
#include "overview_page.h"
#include "quantization_page.h"
#include "statistics_dialog.h"
#include "sweeps_page.h"
#include "systematic_page.h"
#include "teaching_page.h"
#include "token_norms_page.h"
#include "view_builders.h"

#include <QAction>
#include <QActionGroup>
#include <QCloseEvent>
#include <QComboBox>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QScopedValueRollback>
#include <QScreen>
#include <QSettings>
#include <QSpinBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>

namespace outlierlens {

MainWindow::MainWindow(const QString& modelDir, const QString& pairsFile, const QString& galleryDir,
                       JobManager* jobs, QWidget* parent)
    : QMainWindow(parent)
    , m_jobManager(jobs)
    , m_galleryDir(galleryDir)
{
    setWindowTitle(tr("OutlierLens"));
    m_controller = new InspectionController(this);

    // Input dock.
    m_input = new InputPanel;
    auto* dock = new QDockWidget(tr("Input"), this);
    dock->setObjectName(QStringLiteral("inputDock"));
    dock->setWidget(m_input);
    addDockWidget(Qt::LeftDockWidgetArea, dock);
    resizeDocks({dock}, {470}, Qt::Horizontal);

    // Pages.
    m_pages = new QTabWidget;
    m_headView = new HeadPage;
    m_layerPage = new LayerPage;
    m_overview = new OverviewPage;
    m_outliers = new OutliersPage(m_controller);
    m_imageView = new ImagePage(m_controller);
    m_tokenNorms = new TokenNormsPage(m_controller);
    m_compare = new ComparePage;
    m_teaching = new TeachingPage;
    m_systematic = new SystematicPage(m_controller);
    m_sweeps = new SweepsPage;
    m_figures = new FiguresPage(jobs);
    m_quantization = new QuantizationPage(jobs);
    m_jobs = new JobsPage(jobs);
    m_pages->addTab(m_headView, tr("H&ead"));
    m_pages->addTab(m_layerPage, tr("&Layer"));
    m_pages->addTab(m_overview, tr("Ove&rview"));
    m_pages->addTab(m_outliers, tr("&Outliers"));
    m_pages->addTab(m_systematic, tr("S&ystematic outliers"));
    m_pages->addTab(m_imageView, tr("&Image"));
    m_pages->addTab(m_tokenNorms, tr("Token &norms"));
    m_pages->addTab(m_compare, tr("&Compare"));
    m_pages->addTab(m_teaching, tr("&Teaching"));
    m_pages->addTab(m_sweeps, tr("&Sweeps"));
    m_pages->addTab(m_quantization, tr("&Quantization"));
    m_pages->addTab(m_figures, tr("Fi&gures"));
    m_pages->addTab(m_jobs, tr("&Jobs"));
    // The intervention that is on, if any, above every page.
    m_interventionPanel = new InterventionPanel(m_controller, jobs);
    auto* central = new QWidget;
    auto* centralLayout = new QVBoxLayout(central);
    centralLayout->setContentsMargins(0, 0, 0, 0);
    centralLayout->setSpacing(2);
    centralLayout->addWidget(m_interventionPanel);
    centralLayout->addWidget(m_pages, 1);
    setCentralWidget(central);

    m_precisionLabel = new QLabel;
    buildActions();

    // Status bar: the indexing convention, said once, and what is loaded.
    m_modelLabel = new QLabel;
    m_predictionLabel = new QLabel;
    m_busy = new QProgressBar;
    m_busy->setMaximumWidth(160);
    m_busy->setTextVisible(false);
    m_busy->hide();
    statusBar()->addWidget(m_modelLabel, 1);
    statusBar()->addWidget(m_predictionLabel, 1);
    // The pair table's predictions: progress, and a way to stop them (they compete for the CPU).
    m_pairProgress = new QLabel;
    m_stopPredictions = new QToolButton;
    m_stopPredictions->setText(tr("Stop"));
    m_stopPredictions->setToolTip(tr("Stop predicting the table's pairs (rows not done stay empty)"));
    m_pairProgress->hide();
    m_stopPredictions->hide();
    statusBar()->addPermanentWidget(m_precisionLabel);
    statusBar()->addPermanentWidget(m_pairProgress);
    statusBar()->addPermanentWidget(m_stopPredictions);
    statusBar()->addPermanentWidget(m_busy);
    statusBar()->addPermanentWidget(new QLabel(Provenance::indexingNote()));

    connect(m_controller, &InspectionController::modelLoaded, this, &MainWindow::modelLoaded);
    connect(m_controller, &InspectionController::snapshotReady, this, &MainWindow::snapshotReady);
    // "Seen through" changed on a page: the input runs again through the transformed model.
    const auto rerun = [this] {
        if (!m_quietRerun && m_lastInput.kind != InputRequest::Kind::None) m_lastInput.sendTo(*m_controller);
    };
    connect(m_controller, &InspectionController::transformChanged, this, [this, rerun] {
        // An intervention names the dimensions of the model it was set on: another view of it ends it.
        if (m_controller->intervention()) {
            const QScopedValueRollback<bool> quiet(m_quietRerun, true);
            m_interventionPanel->clear();
        }
        rerun();
    });
    // An intervention set or cleared: the input runs again with or without it.
    connect(m_controller, &InspectionController::interventionChanged, this, rerun);
    connect(m_controller, &InspectionController::snapshotReady, m_interventionPanel,
            &InterventionPanel::showSnapshot);
    connect(m_outliers, &OutliersPage::dimensionMenuRequested, this,
            [this](int layer, const QString& tensor, int dimension, const QPoint& at) {
                const SnapshotPtr s = m_controller->snapshot();
                if (!s) return;
                std::unique_ptr<QMenu> menu(
                    m_interventionPanel->dimensionMenu(*s, layer, tensor, dimension, this));
                menu->exec(at);
            });
    connect(m_headView, &HeadView::cellContextMenuRequested, this,
            [this](int panel, int row, int col, const QPoint& at) {
                const SnapshotPtr s = m_controller->snapshot();
                if (!s) return;
                // The attention's columns are keys; other panels' rows are tokens.
                const int key = panel == HeadView::ProbabilitiesPanel ? col : row;
                std::unique_ptr<QMenu> menu(
                    m_interventionPanel->headMenu(*s, m_state.layer, m_state.head, key, this));
                menu->exec(at);
            });
    connect(m_controller, &InspectionController::failed, this, &MainWindow::showError);
    connect(m_controller, &InspectionController::modelLoadFailed, this,
            [this] { m_modelLabel->setText(modelDescription(m_controller->model())); });
    // A failed input is forgotten: the next snapshot (a rerun of the last good input) is not its.
    connect(m_controller, &InspectionController::inspectFailed, this, [this] { m_requested = {}; });
    connect(m_controller, &InspectionController::busyChanged, this, [this](bool busy) {
        m_busy->setRange(0, 0);
        m_busy->setVisible(busy);
    });
    connect(m_controller, &InspectionController::predictionsReady, this,
            [this](int first, const QVector<int>& labels) {
                m_input->pairsModel()->setPredictions(first, labels, m_controller->model().classNames);
            });
    connect(m_controller, &InspectionController::progress, this, [this](qint64 done, qint64 total) {
        const bool running = done < total;
        m_pairProgress->setText(tr("Predicting pairs: %L1 of %L2").arg(done).arg(total));
        m_pairProgress->setVisible(running);
        m_stopPredictions->setVisible(running);
    });
    connect(m_stopPredictions, &QToolButton::clicked, this, [this] {
        m_controller->stopPredictions();
        m_pairProgress->hide();
        m_stopPredictions->hide();
        statusBar()->showMessage(tr("Stopped predicting the pairs; %1")
                                     .arg(m_pairProgress->text().section(QLatin1String(": "), 1)),
                                 10000);
    });
    connect(m_input, &InputPanel::firstVisiblePairChanged, m_controller,
            &InspectionController::preferPairRow);
    connect(m_input, &InputPanel::textRequested, this, [this](const QString& text, const QString& pair) {
        request({InputRequest::Kind::Text, text, pair, {}, {}, 0});
    });
    connect(m_input, &InputPanel::imageRequested, this, [this](const QString& path, const QString& credit) {
        request({InputRequest::Kind::Image, {}, {}, path, credit, 0});
    });
    connect(m_input, &InputPanel::syntheticRequested, this, [this](quint64 seed) {
        request({InputRequest::Kind::Synthetic, {}, {}, {}, {}, seed});
    });
    connect(m_input, &InputPanel::pairsLoaded, this, [this] {
        const ModelInfo& m = m_controller->model();
        const bool bert = m.takesPairs();
        if (bert && !m.synthetic && m_lastInput.kind == InputRequest::Kind::None && // reads sentence pairs
            m_requested.kind == InputRequest::Kind::None)
            m_input->selectPair(0);
        if (bert && !m.classNames.isEmpty())
            m_controller->predictPairs(m_input->pairsModel()->premises(),
                                       m_input->pairsModel()->hypotheses());
    });
    connect(m_input, &InputPanel::failed, this, &MainWindow::showError);
    connect(m_imageView, &ImageView::imageDropped, this, [this](const QString& path) {
        request({InputRequest::Kind::Image, {}, {}, path, {}, 0});
    });
    connect(m_layerPage, &LayerPage::headActivated, this, [this](int layer, int head) {
        setSelection(layer, head);
        m_pages->setCurrentWidget(m_headView);
    });
    connect(m_overview, &OverviewGrid::headActivated, this, [this](int layer, int head) {
        setSelection(layer, head);
        m_pages->setCurrentWidget(m_headView);
    });
    connect(m_outliers, &OutliersPage::dimensionClicked, this, &MainWindow::dimensionClicked);
    connect(m_outliers, &OutliersPage::statisticsRequested, this, &MainWindow::requestStatistics);
    connect(m_systematic, &SystematicPage::statisticsRequested, this, &MainWindow::requestStatistics);
    connect(m_systematic, &SystematicPage::channelClicked, this, &MainWindow::systematicChannelClicked);
    connect(m_systematic, &SystematicPage::keyClicked, this, [this](int key) {
        const SnapshotPtr s = m_state.snapshot;
        if (!s || key < 0 || key >= s->T) return;
        showHeadWithTokens(
            m_state.head, {key},
            tr("Key %1 (%2) of layer %3").arg(key).arg(s->tokens.value(key)).arg(m_state.layer + 1));
    });
    connect(m_systematic, &SystematicPage::headClicked, this,
            [this](int head) { showHeadWithTokens(head, {}, {}); });
    connect(m_jobs, &JobsPage::openModel, this, &MainWindow::openModel);
    connect(m_jobs, &JobsPage::openStatistics, this, [this](const QString& path) {
        m_controller->loadStatistics(path);
        m_pages->setCurrentWidget(m_outliers);
    });
    connect(m_jobs, &JobsPage::failed, this, &MainWindow::showError);
    connect(m_figures, &FiguresPage::openView, this, &MainWindow::openFigureView);
    connect(m_compare, &ComparePage::failed, this, &MainWindow::showError);
    connect(m_teaching, &TeachingPage::failed, this, &MainWindow::showError);
    connect(m_sweeps, &SweepsPage::failed, this, &MainWindow::showError);
    connect(m_pages, &QTabWidget::currentChanged, this, &MainWindow::refreshCurrentPage);
    connect(m_controller, &InspectionController::statisticsReady, this, [this] { refreshCurrentPage(); });

    QSettings settings;
    restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
    restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
    // A new window fits the screen (1400 x 900 where there is room; a 1280 x 800 laptop gets its whole
    // available area), and a remembered one never comes back larger than the screen it is on now.
    const QRect available = screen() ? screen()->availableGeometry() : QRect(0, 0, 1400, 900);
    if (!settings.contains(QStringLiteral("window/geometry")))
        resize(std::min(1400, available.width()), std::min(900, available.height()));
    else if (width() > available.width() || height() > available.height())
        resize(std::min(width(), available.width()), std::min(height(), available.height()));

    m_input->loadGallery(galleryDir);
    m_shownGallery = galleryDir;
    m_input->loadPairs(pairsFile);
    openModel(modelDir.isEmpty() ? ModelCatalog::startModel() : modelDir);
}

MainWindow::~MainWindow() = default;

void MainWindow::buildActions()
{
    auto* toolbar = addToolBar(tr("Model"));
    toolbar->setObjectName(QStringLiteral("modelToolbar"));
    m_modelBox = new QComboBox;
    m_modelBox->setMinimumContentsLength(28);
    m_modelBox->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_modelBox->setToolTip(tr("Model (Ctrl+O opens a folder)"));
    toolbar->addWidget(new QLabel(tr(" Model ")));
    toolbar->addWidget(m_modelBox);
    connect(m_modelBox, &QComboBox::activated, this,
            [this] { openModel(m_modelBox->currentData().toString()); });

    auto* open = new QAction(tr("&Open model folder…"), this);
    open->setShortcut(QKeySequence::Open);
    connect(open, &QAction::triggered, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(
            this, tr("Open a model folder (config.json + weights)"), lastFolder(QStringLiteral("model")));
        rememberFolder(QStringLiteral("model"), dir);
        if (!dir.isEmpty()) openModel(dir);
    });
    toolbar->addAction(open);

    m_layerBox = new QSpinBox;
    m_layerBox->setPrefix(tr("Layer "));
    m_headBox = new QSpinBox;
    m_headBox->setPrefix(tr("Head "));
    m_layerBox->setToolTip(tr("Layer, 1-based (Alt+Up / Alt+Down)"));
    m_headBox->setToolTip(tr("Head, 1-based (Alt+Left / Alt+Right)"));
    toolbar->addSeparator();
    toolbar->addWidget(m_layerBox);
    toolbar->addWidget(m_headBox);
    connect(m_layerBox, &QSpinBox::valueChanged, this, [this](int v) { setSelection(v - 1, m_state.head); });
    connect(m_headBox, &QSpinBox::valueChanged, this, [this](int v) { setSelection(m_state.layer, v - 1); });

    auto step = [this](int dl, int dh) {
        return [this, dl, dh] {
            const int L = std::max(1, m_controller->model().layers),
                      H = std::max(1, m_controller->model().heads);
            setSelection((m_state.layer + dl + L) % L, (m_state.head + dh + H) % H);
        };
    };
    auto addShortcut = [this](const QString& text, const QKeySequence& key, std::function<void()> f) {
        auto* a = new QAction(text, this);
        a->setShortcut(key);
        connect(a, &QAction::triggered, this, f);
        addAction(a);
        return a;
    };
    // File, View, Help: the order of every desktop program. The File menu is filled below.
    QMenu* file = menuBar()->addMenu(tr("&File"));
    QMenu* view = menuBar()->addMenu(tr("&View"));
    view->addAction(addShortcut(tr("Next layer"), QKeySequence(Qt::ALT | Qt::Key_Down), step(1, 0)));
    view->addAction(addShortcut(tr("Previous layer"), QKeySequence(Qt::ALT | Qt::Key_Up), step(-1, 0)));
    view->addAction(addShortcut(tr("Next head"), QKeySequence(Qt::ALT | Qt::Key_Right), step(0, 1)));
    view->addAction(addShortcut(tr("Previous head"), QKeySequence(Qt::ALT | Qt::Key_Left), step(0, -1)));
    view->addSeparator();
    m_fastMode = view->addAction(tr("&Fast mode (bf16)"));
    m_fastMode->setCheckable(true);
    m_fastMode->setToolTip(tr("Run the model in bfloat16 (bf16 matrix products) where the CPU supports "
                              "it: faster, but the numbers then differ from float32 in about the "
                              "third significant digit."));
    m_fastMode->setStatusTip(m_fastMode->toolTip());
    view->setToolTipsVisible(true);
    m_fastMode->setChecked(QSettings().value(QStringLiteral("view/fastMode"), false).toBool());
    m_controller->setFastMode(m_fastMode->isChecked());
    connect(m_fastMode, &QAction::toggled, this, [this](bool on) {
        QSettings().setValue(QStringLiteral("view/fastMode"), on);
        m_controller->setFastMode(on);
        if (m_lastInput.kind != InputRequest::Kind::None) m_lastInput.sendTo(*m_controller); // rerun
    });
    addOutlierRuleMenu(view);
    QAction* clearIntervention = view->addAction(tr("Clear the &intervention"));
    clearIntervention->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_X));
    clearIntervention->setStatusTip(
        tr("Run the input again without the intervention set from a right-click menu"));
    connect(clearIntervention, &QAction::triggered, m_interventionPanel, &InterventionPanel::clear);
    view->addSeparator();
    // Redraws every page with the new palette.
    addColourMapMenu(view, [this] { setSelection(m_state.layer, m_state.head); });

    auto* exportAction = new QAction(tr("&Export view…"), this);
    exportAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
    connect(exportAction, &QAction::triggered, this, &MainWindow::exportDialog);
    toolbar->addSeparator();
    toolbar->addAction(exportAction);

    file->addAction(open);
    file->addAction(exportAction);
    auto* openStats = new QAction(tr("Open &statistics file…"), this);
    connect(openStats, &QAction::triggered, this, [this] {
        const QString path =
            QFileDialog::getOpenFileName(this, tr("Open statistics file"),
                                         lastFolder(QStringLiteral("statistics")), tr("Statistics (*.h5)"));
        rememberFolder(QStringLiteral("statistics"), path);
        if (!path.isEmpty()) m_controller->loadStatistics(path);
    });
    file->addAction(openStats);
    auto* quit = new QAction(tr("&Quit"), this);
    quit->setShortcut(QKeySequence::Quit);
    connect(quit, &QAction::triggered, this, &QWidget::close);
    file->addSeparator();
    file->addAction(quit);
    menuBar()->addMenu(tr("&Help"))->addAction(tr("&About OutlierLens"), this, [this] {
        showAboutBox(this);
    });
    // F10 opens the menu bar at its first menu, as on Windows and GNOME.
    addShortcut(tr("Menu bar"), QKeySequence(Qt::Key_F10), [this] {
        if (QAction* first = menuBar()->actions().value(0)) {
            menuBar()->setActiveAction(first);
            menuBar()->setFocus(Qt::MenuBarFocusReason);
        }
    });
}

QString MainWindow::modelDescription(const ModelInfo& info) const
{
    if (info.dir.isEmpty()) return tr("No model open");
    return tr("%1: %2, %3 layers, %4 heads, hidden %5; %6")
        .arg(info.name, info.head)
        .arg(info.layers)
        .arg(info.heads)
        .arg(info.hidden)
        .arg(info.variant);
}

void MainWindow::openModel(const QString& dir)
{
    if (dir.isEmpty()) {
        showError(tr("No model to open: run scripts/setup, or open a model folder (Ctrl+O)."));
        return;
    }
    m_modelLabel->setText(tr("Loading %1…").arg(QFileInfo(dir).fileName()));
    m_controller->loadModel(dir);
}

void MainWindow::modelLoaded(const ModelInfo& info)
{
    ModelCatalog::addRecent(info.dir);
    {
        const QSignalBlocker block(m_modelBox);
        m_modelBox->clear();
        for (const ModelEntry& e : ModelCatalog::knownModels())
            m_modelBox->addItem(e.name, e.dir);
        int index = m_modelBox->findData(info.dir);
        if (index < 0) {
            m_modelBox->addItem(info.dir, info.dir);
            index = m_modelBox->count() - 1;
        }
        m_modelBox->setCurrentIndex(index);
        const QSignalBlocker blockLayer(m_layerBox), blockHead(m_headBox);
        m_layerBox->setRange(1, info.layers);
        m_headBox->setRange(1, info.heads);
    }
    m_modelLabel->setText(modelDescription(info));
    m_modelLabel->setToolTip(info.card);
    const ModelTransform& seenThrough = m_controller->transform();
    const QString refusal =
        info.transformRefusal(seenThrough.smoothQuantAlpha.has_value(), seenThrough.rotate);
    if (!refusal.isEmpty()) { // this model is seen as trained (before its first input runs)
        const QScopedValueRollback<bool> quiet(m_quietRerun, true);
        m_controller->setTransform({});
        statusBar()->showMessage(tr("%1 is shown as trained: %2").arg(info.name, refusal), 15000);
    }
    {
        // An intervention names the previous model's layers and dimensions: it ends here.
        const QScopedValueRollback<bool> quiet(m_quietRerun, true);
        m_interventionPanel->setModel(info);
        if (m_controller->intervention()) m_controller->setIntervention(std::nullopt);
    }
    m_state.snapshot.reset();
    m_input->setModelKind(info);
    m_input->pairsModel()->clearPredictions();
    m_pairProgress->hide(); // a new prediction, if this model makes one, reports its own progress
    m_stopPredictions->hide();
    forEachPage([&](Page& page, int tab) {
        m_pages->setTabVisible(tab, page.showsModel(info));
        page.setModel(info);
    });
    const StartPoint start = ModelCatalog::startPoint(info);
    if (!start.ignored.isEmpty()) statusBar()->showMessage(tr("Ignored: %1").arg(start.ignored), 15000);
    setSelection(start.layer, start.head);
    // Rerun the last input if it fits this model, else show a first one.
    // A model with images of its own (sample_images/) shows them in the gallery; others the bundled photos.
    const QString gallery = ModelCatalog::imageGallery(info, m_galleryDir);
    if (gallery != m_shownGallery) {
        m_input->loadGallery(gallery);
        m_shownGallery = gallery;
    }
    const FirstInput first =
        ModelCatalog::firstInput(info, start, m_lastInput, m_lastInput.text == m_sampleShown,
                                 m_input->pairsModel()->rowCount() > 0, gallery);
    m_sampleShown = first.isSample ? first.input.text : QString();
    switch (first.action) {
    case FirstInput::Action::None:
        break;
    case FirstInput::Action::Run:
        // The user's text carries over to a BERT model: its tab shows it, not the pair table's row.
        if (first.input.kind == InputRequest::Kind::Text)
            m_input->showText(first.input.text, first.input.pair);
        request(first.input);
        break;
    case FirstInput::Action::RunAsText:
        m_input->runText(first.input.text);
        break;
    case FirstInput::Action::SelectPair:
        m_input->selectPair(0);
        break;
    }
    if (info.takesText() && !info.classNames.isEmpty() && m_input->pairsModel()->rowCount() > 0)
        m_controller->predictPairs(m_input->pairsModel()->premises(), m_input->pairsModel()->hypotheses());
}

void MainWindow::request(const InputRequest& input)
{
    m_requested = input;
    m_state.highlightTokens.clear();
    // Compare and Teaching follow once this model has run the input: an input that fails (say, a
    // file that is no image) is reported once, here, and every page stays on the last good input.
    input.sendTo(*m_controller);
}

void MainWindow::snapshotReady(const SnapshotPtr& snapshot)
{
    m_state.snapshot = snapshot;
    if (m_requested.kind != InputRequest::Kind::None) {
        m_lastInput = m_requested;
        m_requested = {};
        forEachPage([this](Page& page, int) { page.setInput(m_lastInput); });
    }
    const bool bf16 = snapshot->precision == QLatin1String("bf16");
    m_precisionLabel->setText(bf16 ? tr("bf16 (fast mode)") : QString());
    m_precisionLabel->setToolTip(bf16 ? m_fastMode->toolTip() : QString());
    const QString cut = tr("Input cut: %1.");
    if (!snapshot->inputNotice.isEmpty())
        statusBar()->showMessage(cut.arg(snapshot->inputNotice), 30000);
    else if (statusBar()->currentMessage().startsWith(cut.section(QLatin1Char('%'), 0, 0)))
        statusBar()
            ->clearMessage(); // an earlier input's: this one was not cut, and the prediction shows again
    if (!snapshot->precisionNotice.isEmpty() && !m_precisionNoticeShown) {
        m_precisionNoticeShown = true;
        statusBar()->showMessage(snapshot->precisionNotice, 15000);
    }
    // NaN or Inf output: said in red where the prediction would be, never a label made from it.
    const bool broken = !snapshot->outputNotice.isEmpty();
    m_predictionLabel->setStyleSheet(broken ? QStringLiteral("color: #b00020; font-weight: bold")
                                            : QString());
    m_predictionLabel->setToolTip(broken ? snapshot->outputNotice : QString());
    m_predictionLabel->setText(
        broken ? tr("No prediction: NaN or Inf in the output")
        : snapshot->prediction.isEmpty()
            ? QString()
            : (snapshot->model.isDecoder() ? tr("Next token: %1") : tr("Prediction: %1"))
                  .arg(snapshot->prediction.join(QStringLiteral(", "))));
    if (broken) statusBar()->showMessage(tr("Warning: %1.").arg(snapshot->outputNotice), 60000);
    refreshCurrentPage();
}

void MainWindow::setSelection(int layer, int head)
{
    const ModelInfo& m = m_controller->model();
    layer = std::clamp(layer, 0, std::max(0, m.layers - 1));
    head = std::clamp(head, 0, std::max(0, m.heads - 1));
    const bool changed = layer != m_state.layer || head != m_state.head;
    m_state.layer = layer;
    m_state.head = head;
    {
        const QSignalBlocker a(m_layerBox), b(m_headBox);
        m_layerBox->setValue(layer + 1);
        m_headBox->setValue(head + 1);
    }
    if (changed) m_state.highlightTokens.clear();
    forEachPage([&](Page& page, int) { page.setSelection(layer, head); });
    refreshCurrentPage();
}

void MainWindow::refreshCurrentPage()
{
    if (auto* page = dynamic_cast<Page*>(m_pages->currentWidget())) page->refresh(m_state);
}

void MainWindow::openFigureView(const FigureView& view)
{
    if (!view.statisticsFile.isEmpty()) m_controller->loadStatistics(view.statisticsFile);
    if (view.input.kind != InputRequest::Kind::None) request(view.input);
    if (view.layer >= 0) setSelection(view.layer, view.head >= 0 ? view.head : m_state.head);
    for (int tab = 0; tab < m_pages->count(); ++tab)
        if (m_pages->isTabVisible(tab) && m_pages->tabText(tab).remove(QLatin1Char('&')) == view.page) {
            m_pages->setCurrentIndex(tab);
            if (auto* page = dynamic_cast<Page*>(m_pages->widget(tab)))
                page->showSource(!view.statisticsFile.isEmpty());
        }
}

void MainWindow::forEachPage(const std::function<void(Page&, int)>& f)
{
    for (int tab = 0; tab < m_pages->count(); ++tab)
        if (auto* page = dynamic_cast<Page*>(m_pages->widget(tab))) f(*page, tab);
}

void MainWindow::dimensionClicked(int dimension)
{
    const SnapshotPtr s = m_state.snapshot;
    if (!s || s->dh() == 0) return;
    // The dimension belongs to head dim / d_head of the next layer's attention input.
    const OutlierTensorRef shown = resolveOutlierTensor(m_outliers->tensor(), m_state.layer);
    if (shown.layer < 0) return;
    const int layer = shown.layer;
    const QVector<int> tokens = tokensWithOutliersIn(*s, layer, shown.tensor, dimension);
    QStringList names;
    for (int t : tokens)
        names << s->tokens.value(t);
    statusBar()->showMessage(tr("Dimension %1 of layer %2: head %3 of layer %4; outliers on %5")
                                 .arg(dimension)
                                 .arg(layer + 1)
                                 .arg(dimension / s->dh() + 1)
                                 .arg(std::min(layer + 1, s->L() - 1) + 1)
                                 .arg(names.isEmpty() ? tr("no token") : names.join(QStringLiteral(", "))),
                             10000);
    m_state.highlightTokens = tokens;
    setSelection(std::min(layer + 1, s->L() - 1), dimension / s->dh()); // clears them if the head changes
    m_state.highlightTokens = tokens;
    m_pages->setCurrentWidget(s->model.takesText() ? static_cast<QWidget*>(m_headView) : m_imageView);
    refreshCurrentPage();
}

void MainWindow::addOutlierRuleMenu(QMenu* view)
{
    QMenu* menu = view->addMenu(tr("Outlier &rule"));
    menu->setToolTipsVisible(true);
    auto* group = new QActionGroup(this);
    QAction* sigma = menu->addAction(tr("&6σ: |x − mean| > 6 std (Bondarenko et al.)"));
    sigma->setToolTip(tr("DESIGN.md's default: a value is an outlier when it lies more than 6 standard "
                         "deviations from the mean of the tensor's T × d values for this input"));
    QAction* tau = menu->addAction(QString());
    tau->setToolTip(tr("An et al.'s paper rule: |x| > τ × mean |X| over the tensor's T × d values; τ also "
                       "sets the heavy-token threshold of the Systematic outliers page"));
    for (QAction* a : {sigma, tau}) {
        a->setCheckable(true);
        group->addAction(a);
    }
    menu->addSeparator();
    QAction* setTau = menu->addAction(tr("Set &τ…"));
    QAction* setFraction = menu->addAction(tr("Set the attention-outlier &fraction…"));
    setFraction->setToolTip(tr("An et al.'s attention outlier keys receive at least this fraction of T "
                               "(summed over queries, head mean); 0.1 in their code"));
    QSettings settings;
    OutlierCriterion rule;
    if (settings.value(QStringLiteral("view/outlierRule")).toString() == QLatin1String("tau"))
        rule.rule = OutlierRule::Tau;
    rule.tau = settings.value(QStringLiteral("view/outlierTau"), rule.tau).toDouble();
    if (!(rule.tau > 0)) rule.tau = OutlierCriterion{}.tau;
    rule.attentionFraction =
        settings.value(QStringLiteral("view/attentionFraction"), rule.attentionFraction).toDouble();
    if (!(rule.attentionFraction > 0 && rule.attentionFraction <= 1))
        rule.attentionFraction = OutlierCriterion{}.attentionFraction;
    const auto apply = [this, tau](const OutlierCriterion& r, bool rerun) {
        tau->setText(tr("&τ × mean|X|: |x| > %1 mean|X| (An et al.'s paper)").arg(r.tau));
        QSettings().setValue(QStringLiteral("view/outlierRule"),
                             QString::fromStdString(outlierRuleName(r.rule)));
        QSettings().setValue(QStringLiteral("view/outlierTau"), r.tau);
        QSettings().setValue(QStringLiteral("view/attentionFraction"), r.attentionFraction);
        m_controller->setOutlierRule(r);
        forEachPage([&](Page& page, int) { page.setOutlierRule(r); });
        if (rerun && m_lastInput.kind != InputRequest::Kind::None) m_lastInput.sendTo(*m_controller);
    };
    (rule.rule == OutlierRule::Tau ? tau : sigma)->setChecked(true);
    apply(rule, false);
    connect(group, &QActionGroup::triggered, this, [this, tau, apply](QAction* chosen) {
        OutlierCriterion r = m_controller->outlierRule();
        r.rule = chosen == tau ? OutlierRule::Tau : OutlierRule::Sigma;
        apply(r, true);
    });
    connect(setTau, &QAction::triggered, this, [this, apply] {
        bool ok = false;
        OutlierCriterion r = m_controller->outlierRule();
        const double value = QInputDialog::getDouble(this, tr("Outlier rule"), tr("τ (|x| > τ × mean |X|):"),
                                                     r.tau, 1e-3, 1e9, 3, &ok);
        if (!ok) return;
        r.tau = value;
        apply(r, true);
    });
    connect(setFraction, &QAction::triggered, this, [this, apply] {
        bool ok = false;
        OutlierCriterion r = m_controller->outlierRule();
        const double value = QInputDialog::getDouble(
            this, tr("Attention outliers"), tr("Fraction of T a key must receive (summed over queries):"),
            r.attentionFraction, 1e-4, 1.0, 4, &ok);
        if (!ok) return;
        r.attentionFraction = value;
        apply(r, true);
    });
}

void MainWindow::requestStatistics()
{
    const ModelInfo& m = m_controller->model();
    if (m.dir.isEmpty()) return;
    const OutlierCriterion rule = m_controller->outlierRule();
    StatisticsDialog dialog(ModelCatalog::statisticsData(m, m_galleryDir),
                            QString::fromStdString(rule.describe()), this);
    dialog.setObjectName(QStringLiteral("statisticsDialog"));
    if (dialog.exec() == QDialog::Accepted && !dialog.data().isEmpty()) {
        m_jobs->queueStatistics(m.dir, dialog.data(), rule);
        m_pages->setCurrentWidget(m_jobs);
    }
}

void MainWindow::systematicChannelClicked(int channel)
{
    const SnapshotPtr s = m_state.snapshot;
    if (!s || s->dh() == 0 || channel < 0 || channel >= s->d()) return;
    // Channel c of h is read by head c / d_head of the next layer; its heavy tokens are marked.
    const int layer = m_state.layer;
    const QVector<int> tokens = s->systematic.heavyTokens.value(layer);
    setSelection(std::min(layer + 1, s->L() - 1), channel / s->dh());
    QStringList names;
    for (int t : tokens)
        names << s->tokens.value(t);
    showHeadWithTokens(channel / s->dh(), tokens,
                       tr("Channel %1 of layer %2: head %3 of layer %4; heavy tokens: %5")
                           .arg(channel)
                           .arg(layer + 1)
                           .arg(channel / s->dh() + 1)
                           .arg(m_state.layer + 1)
                           .arg(names.isEmpty() ? tr("none") : names.join(QStringLiteral(", "))));
}

void MainWindow::showHeadWithTokens(int head, const QVector<int>& tokens, const QString& message)
{
    if (!m_state.snapshot) return;
    setSelection(m_state.layer, head); // clears the marks if the head changes
    m_state.highlightTokens = tokens;
    if (!message.isEmpty()) statusBar()->showMessage(message, 10000);
    m_pages->setCurrentWidget(m_headView);
    refreshCurrentPage();
}

void MainWindow::showError(const QString& message)
{
    statusBar()->showMessage(message, 15000);
    // One message once: the same error from several pages or models is not stacked.
    for (QMessageBox* open : findChildren<QMessageBox*>(QStringLiteral("errorMessage")))
        if (open->isVisible() && open->text() == message) {
            open->raise();
            return;
        }
    // Not modal: the window stays usable while the message is shown.
    auto* box = new QMessageBox(QMessageBox::Warning, tr("OutlierLens"), message, QMessageBox::Ok, this);
    box->setObjectName(QStringLiteral("errorMessage"));
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->setModal(false);
    box->show();
}

const Figure* MainWindow::currentFigure() const
{
    QWidget* current = m_pages->currentWidget();
    const auto* page = dynamic_cast<const Page*>(current);
    return page ? page->figure() : nullptr;
}

bool MainWindow::exportCurrent(const QString& path, QSize size, int dpi, QString* error) const
{
    const Figure* figure = currentFigure();
    if (!figure) {
        *error = tr("this page has nothing to export");
        return false;
    }
    if (path.endsWith(QLatin1String(".csv"), Qt::CaseInsensitive))
        return exportFigureCsv(*figure, path, error);
    return exportFigure(*figure, path, exportFormatForPath(path), size, dpi, error);
}

void MainWindow::exportDialog()
{
    const Figure* figure = currentFigure();
    if (!figure) return;
    ExportDialog dialog(*figure, this);
    dialog.exec();
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    // Running jobs are separate processes and go on; queued ones start only while the app runs.
    int queued = 0;
    if (m_jobManager)
        for (const JobInfo& j : m_jobManager->jobs())
            queued += j.state == QLatin1String("queued") ? 1 : 0;
    if (queued > 0) {
        QMessageBox ask(QMessageBox::Question, tr("Quit OutlierLens"),
                        tr("%n job(s) are queued: they start only while OutlierLens runs (running jobs go on "
                           "by themselves). Quit anyway?",
                           nullptr, queued),
                        QMessageBox::Yes | QMessageBox::No, this);
        ask.setObjectName(QStringLiteral("quitWithQueuedJobs"));
        ask.setDefaultButton(QMessageBox::No);
        if (ask.exec() != QMessageBox::Yes) {
            event->ignore();
            return;
        }
    }
    QSettings settings;
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("window/state"), saveState());
    QMainWindow::closeEvent(event); // running jobs are separate processes: they go on
}

} // namespace outlierlens
