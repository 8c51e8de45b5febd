#include "main_window.h"

#include "analysis/showcase.h"
#include "build_info.h"

#include "colormap.h"

#include "compare_page.h"
#include "export_dialog.h"
#include "figure_export.h"
#include "head_view.h"
#include "image_view.h"
#include "input_panel.h"
#include "inspection_controller.h"
#include "job_manager.h"
#include "jobs_page.h"
#include "mnli_table_model.h"
#include "model_catalog.h"
#include "outliers_page.h"
#include "overview_grid.h"
#include "paths.h"
#include "sweeps_page.h"
#include "teaching_page.h"
#include "view_builders.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QIcon>
#include <QInputDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QSettings>
#include <QSpinBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QToolBar>
#include <QToolButton>
#include <QUrl>

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
    m_headView = new HeadView;
    m_overview = new OverviewGrid;
    m_outliers = new OutliersPage(m_controller);
    m_imageView = new ImageView;
    m_compare = new ComparePage;
    m_teaching = new TeachingPage;
    m_sweeps = new SweepsPage;
    m_jobs = new JobsPage(jobs);
    m_pages->addTab(m_headView, tr("&Head"));
    m_pages->addTab(m_overview, tr("O&verview"));
    m_pages->addTab(m_outliers, tr("&Outliers"));
    m_pages->addTab(m_imageView, tr("&Image"));
    m_pages->addTab(m_compare, tr("&Compare"));
    m_pages->addTab(m_teaching, tr("&Teaching"));
    m_pages->addTab(m_sweeps, tr("&Sweeps"));
    m_pages->addTab(m_jobs, tr("&Jobs"));
    setCentralWidget(m_pages);

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
        const bool pairModel = m.takesText() && !m.isDecoder() && !m.synthetic; // reads sentence pairs
        if (pairModel && m_lastInput.kind == InputRequest::Kind::None &&
            m_requested.kind == InputRequest::Kind::None)
            m_input->selectPair(0);
        if (m.takesText() && !m.isDecoder() && !m.classNames.isEmpty())
            m_controller->predictPairs(m_input->pairsModel()->premises(),
                                       m_input->pairsModel()->hypotheses());
    });
    connect(m_input, &InputPanel::failed, this, &MainWindow::showError);
    connect(m_imageView, &ImageView::imageDropped, this, [this](const QString& path) {
        request({InputRequest::Kind::Image, {}, {}, path, {}, 0});
    });
    connect(m_overview, &OverviewGrid::headActivated, this, [this](int layer, int head) {
        setSelection(layer, head);
        m_pages->setCurrentWidget(m_headView);
    });
    connect(m_outliers, &OutliersPage::dimensionClicked, this, &MainWindow::dimensionClicked);
    connect(m_outliers, &OutliersPage::statisticsRequested, this, [this] {
        const ModelInfo& m = m_controller->model();
        if (m.dir.isEmpty()) return;
        bool ok = false;
        const QString data =
            m.isDecoder()
                ? QStringLiteral("text:") + QString::fromStdString(sampleDataFile("text/wiki_en_valid.txt")) +
                      QStringLiteral(":100")
            : m.takesText() ? QStringLiteral("mnli:") +
                                  QString::fromStdString(sampleDataFile("mnli/mnli_dev_matched.jsonl")) +
                                  QStringLiteral(":1000")
                            : QStringLiteral("images:") + m_galleryDir;
        const QString chosen =
            QInputDialog::getText(this, tr("Statistics over a data set"),
                                  tr("Data (mnli:FILE[:N], images:DIR[:N] or text:FILE[:N] chunks):"),
                                  QLineEdit::Normal, data, &ok);
        if (ok && !chosen.isEmpty()) {
            m_jobs->queueStatistics(m.dir, chosen);
            m_pages->setCurrentWidget(m_jobs);
        }
    });
    connect(m_jobs, &JobsPage::openModel, this, &MainWindow::openModel);
    connect(m_jobs, &JobsPage::openStatistics, this, [this](const QString& path) {
        m_controller->loadStatistics(path);
        m_pages->setCurrentWidget(m_outliers);
    });
    connect(m_jobs, &JobsPage::failed, this, &MainWindow::showError);
    connect(m_compare, &ComparePage::failed, this, &MainWindow::showError);
    connect(m_teaching, &TeachingPage::failed, this, &MainWindow::showError);
    connect(m_sweeps, &SweepsPage::failed, this, &MainWindow::showError);
    connect(m_pages, &QTabWidget::currentChanged, this, &MainWindow::refreshCurrentPage);
    connect(m_controller, &InspectionController::statisticsReady, this, [this] { refreshCurrentPage(); });

    QSettings settings;
    restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
    restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
    if (!settings.contains(QStringLiteral("window/geometry"))) resize(1400, 900);

    m_input->loadGallery(galleryDir);
    m_input->loadPairs(pairsFile);
    openModel(modelDir.isEmpty() ? ModelCatalog::defaultModel() : modelDir);
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
        const QString dir =
            QFileDialog::getExistingDirectory(this, tr("Open a model folder (config.json + weights)"));
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
    connect(m_layerBox, &QSpinBox::valueChanged, this, [this](int v) { setSelection(v - 1, m_head); });
    connect(m_headBox, &QSpinBox::valueChanged, this, [this](int v) { setSelection(m_layer, v - 1); });

    auto step = [this](int dl, int dh) {
        return [this, dl, dh] {
            const int L = std::max(1, m_controller->model().layers),
                      H = std::max(1, m_controller->model().heads);
            setSelection((m_layer + dl + L) % L, (m_head + dh + H) % H);
        };
    };
    auto addShortcut = [this](const QString& text, const QKeySequence& key, std::function<void()> f) {
        auto* a = new QAction(text, this);
        a->setShortcut(key);
        connect(a, &QAction::triggered, this, f);
        addAction(a);
        return a;
    };
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
    view->addSeparator();
    // Colour maps: remembered, applied before any view draws.
    QMenu* palettes = view->addMenu(tr("&Colour maps"));
    const auto addPalettes = [this, palettes](const QString& key,
                                              std::initializer_list<ColorMap::Palette> choices,
                                              ColorMap::Palette current) {
        ColorMap::Palette saved = current;
        if (ColorMap::parsePalette(QSettings().value(key).toString(), &saved)) ColorMap::setPalette(saved);
        auto* group = new QActionGroup(this);
        for (ColorMap::Palette p : choices) {
            QAction* a = palettes->addAction(ColorMap::paletteName(p));
            a->setCheckable(true);
            a->setChecked(p == saved);
            group->addAction(a);
            connect(a, &QAction::triggered, this, [this, key, p] {
                ColorMap::setPalette(p);
                QSettings().setValue(key, ColorMap::paletteName(p));
                setSelection(m_layer, m_head); // redraws every page with the new palette
            });
        }
        palettes->addSeparator();
    };
    addPalettes(QStringLiteral("view/sequentialColormap"),
                {ColorMap::Palette::Viridis, ColorMap::Palette::Grayscale}, ColorMap::sequentialPalette());
    addPalettes(QStringLiteral("view/divergingColormap"),
                {ColorMap::Palette::BlueRed, ColorMap::Palette::PurpleGreen}, ColorMap::divergingPalette());

    auto* exportAction = new QAction(tr("&Export view…"), this);
    exportAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
    connect(exportAction, &QAction::triggered, this, &MainWindow::exportDialog);
    toolbar->addSeparator();
    toolbar->addAction(exportAction);

    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(open);
    file->addAction(exportAction);
    auto* openStats = new QAction(tr("Open &statistics file…"), this);
    connect(openStats, &QAction::triggered, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Open statistics file"), QString(),
                                                          tr("Statistics (*.h5)"));
        if (!path.isEmpty()) m_controller->loadStatistics(path);
    });
    file->addAction(openStats);
    auto* quit = new QAction(tr("&Quit"), this);
    quit->setShortcut(QKeySequence::Quit);
    connect(quit, &QAction::triggered, this, &QWidget::close);
    file->addSeparator();
    file->addAction(quit);
    menuBar()->addMenu(tr("&Help"))->addAction(tr("&About OutlierLens"), this, [this] { showAbout(); });
}

void MainWindow::showAbout()
{
    const BuildInfo b = buildInfo();
    const QString sources = QDir(b.dataDir).filePath(QStringLiteral("SOURCES.md"));
    QMessageBox box(this);
    box.setWindowTitle(tr("About OutlierLens"));
    box.setIconPixmap(QIcon(QStringLiteral(":/outlierlens/outlierlens.svg")).pixmap(64, 64));
    box.setTextFormat(Qt::RichText);
    box.setText(tr("<p><b>OutlierLens %1</b></p>"
                   "<p>Why transformers grow activation outliers: attention heads that want to do nothing "
                   "(Bondarenko, Nagel and Blankevoort, 2023; An et al., 2025).</p><p>%2</p>"
                   "<p><b>Bundled data and models</b>: the MultiNLI validation pairs (OANC; fiction parts "
                   "CC BY-SA 3.0), English Wikipedia text (CC BY-SA 3.0), the BERT vocabulary (Apache-2.0), "
                   "the GPT-2 BPE vocabulary (MIT), sample images (CC0, public domain, two CC BY 2.0 with "
                   "their credit shown), Fashion-MNIST images (MIT); the demo models were trained by this "
                   "project on that data (each model folder's README.md). Sources and licences, file by "
                   "file: <a href=\"%3\">%4</a>.</p>"
                   "<p>Built with LibTorch %5 and Qt %6 (running Qt %7).</p>")
                    .arg(b.version.toHtmlEscaped(), Provenance::indexingNote().toHtmlEscaped(),
                         QUrl::fromLocalFile(sources).toString().toHtmlEscaped(), sources.toHtmlEscaped(),
                         b.torch.toHtmlEscaped(), b.qtBuilt.toHtmlEscaped(), b.qtRuntime.toHtmlEscaped()));
    box.setTextInteractionFlags(Qt::TextBrowserInteraction);
    box.exec();
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
    m_snapshot.reset();
    // The Image page is for models that take images: a text model does not invite a drop.
    m_pages->setTabVisible(m_pages->indexOf(m_imageView), !info.takesText());
    m_input->setModelKind(info.family, info.synthetic, info.isDecoder());
    m_input->pairsModel()->clearPredictions();
    m_pairProgress->hide(); // a new prediction, if this model makes one, reports its own progress
    m_stopPredictions->hide();
    const QString kind = ModelCatalog::demoKindOf(info.dir);
    // A model of one's own is compared with the demo trio of its family.
    const QString familyKind = info.isDecoder()   ? QStringLiteral("backcopy")
                               : info.takesText() ? QStringLiteral("bert-mnli")
                                                  : QStringLiteral("vit-fmnist");
    m_compare->setInput({}); // the new model's first input follows once it has run
    m_teaching->setInput({});
    m_compare->setCandidates(kind.isEmpty() ? familyKind : kind);
    m_teaching->setCandidates(kind, info.dir);
    // Where the model shows its sink best, as stored with it (showcase.json, written when it was
    // trained); else the second-to-last layer, head 1, where paper figures look.
    std::optional<Showcase> showcase;
    try {
        if (info.isDecoder()) showcase = readShowcase(info.dir.toStdString());
    } catch (const std::exception& e) {
        statusBar()->showMessage(tr("Ignored: %1").arg(QString::fromStdString(e.what())), 15000);
    }
    setSelection(showcase ? showcase->layer : std::max(0, info.layers - 2), showcase ? showcase->head : 0);
    // Rerun the last input if it fits this model, else show a first one.
    const bool text = info.takesText();
    // A model's own sample input is not the user's text: it does not follow them to other models.
    const bool userText = m_lastInput.kind == InputRequest::Kind::Text && m_lastInput.text != m_sampleShown;
    const QString sample =
        info.isDecoder() ? ModelCatalog::sampleInput(info.dir, showcase ? showcase->input : 0) : QString();
    m_sampleShown.clear();
    if (m_lastInput.kind == InputRequest::Kind::Synthetic && info.synthetic)
        request(m_lastInput);
    else if (info.synthetic)
        request({InputRequest::Kind::Synthetic, {}, {}, {}, {}, 1});
    else if (info.isDecoder() && userText && m_lastInput.pair.isEmpty())
        m_input->runText(m_lastInput.text); // free text carries over between decoders
    else if (!sample.isEmpty()) {
        m_sampleShown = sample;
        m_input->runText(sample); // the model's own kind of input
    } else if (info.isDecoder())
        // An et al.'s probe sentence: short, two strong delimiters, and a first token to sink on.
        m_input->runText(QStringLiteral("Summer is warm. Winter is cold."));
    else if (text && userText)
        request(m_lastInput);
    else if (text && m_input->pairsModel()->rowCount() > 0)
        m_input->selectPair(0);
    else if (!text && m_lastInput.kind == InputRequest::Kind::Image)
        request(m_lastInput);
    else if (!text && info.classNames.contains(QStringLiteral("Ankle boot")))
        // A Fashion-MNIST model: start with one of its own kind of images.
        request({InputRequest::Kind::Image,
                 {},
                 {},
                 m_galleryDir + QStringLiteral("/fmnist_boot.png"),
                 tr("Fashion-MNIST test image 0 (Zalando Research, MIT licence)"),
                 0});
    else if (!text)
        request({InputRequest::Kind::Image,
                 {},
                 {},
                 m_galleryDir + QStringLiteral("/chelsea_cat.png"),
                 tr("Photo: Stefan van der Walt (CC0)"),
                 0});
    if (text && !info.classNames.isEmpty() && m_input->pairsModel()->rowCount() > 0)
        m_controller->predictPairs(m_input->pairsModel()->premises(), m_input->pairsModel()->hypotheses());
}

void MainWindow::request(const InputRequest& input)
{
    m_requested = input;
    m_highlightTokens.clear();
    // Compare and Teaching follow once this model has run the input: an input that fails (say, a
    // file that is no image) is reported once, here, and every page stays on the last good input.
    input.sendTo(*m_controller);
}

void MainWindow::snapshotReady(const SnapshotPtr& snapshot)
{
    m_snapshot = snapshot;
    if (m_requested.kind != InputRequest::Kind::None) {
        m_lastInput = m_requested;
        m_requested = {};
        m_compare->setInput(m_lastInput);
        m_teaching->setInput(m_lastInput);
    }
    const bool bf16 = snapshot->precision == QLatin1String("bf16");
    m_precisionLabel->setText(bf16 ? tr("bf16 (fast mode)") : QString());
    m_precisionLabel->setToolTip(bf16 ? m_fastMode->toolTip() : QString());
    if (!snapshot->inputNotice.isEmpty())
        statusBar()->showMessage(tr("Input cut: %1.").arg(snapshot->inputNotice), 30000);
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
    const bool changed = layer != m_layer || head != m_head;
    m_layer = layer;
    m_head = head;
    {
        const QSignalBlocker a(m_layerBox), b(m_headBox);
        m_layerBox->setValue(layer + 1);
        m_headBox->setValue(head + 1);
    }
    if (changed) m_highlightTokens.clear();
    m_compare->setSelection(layer, head);
    m_teaching->setSelection(layer, head);
    refreshCurrentPage();
}

void MainWindow::refreshCurrentPage()
{
    QWidget* page = m_pages->currentWidget();
    if (page == m_outliers) {
        m_outliers->refresh(m_snapshot, m_layer);
        return;
    }
    if (!m_snapshot || m_layer >= m_snapshot->L() || m_head >= m_snapshot->H()) return;
    if (page == m_headView) {
        m_headView->setData(buildHeadView(*m_snapshot, m_layer, m_head));
        m_headView->setHighlightedTokens(m_highlightTokens);
    } else if (page == m_overview) {
        m_overview->setData(buildOverview(*m_snapshot));
        m_overview->setCurrent(m_layer, m_head);
    } else if (page == m_imageView && !m_snapshot->model.takesText()) {
        ImageViewData data = buildImageView(*m_snapshot, m_layer, m_head);
        const StatisticsPtr stats = m_controller->statistics();
        if (stats && m_controller->statisticsDescribeModel(*stats)) addDatasetPatches(data, *stats, m_layer);
        m_imageView->setData(data);
    }
}

void MainWindow::dimensionClicked(int dimension)
{
    if (!m_snapshot || m_snapshot->dh() == 0) return;
    // The dimension belongs to head dim / d_head of the next layer's attention input.
    m_highlightTokens = tokensWithOutliersIn(*m_snapshot, m_layer, m_outliers->tensor(), dimension);
    const int tokensLayer = m_layer;
    QStringList names;
    for (int t : m_highlightTokens)
        names << m_snapshot->tokens.value(t);
    statusBar()->showMessage(tr("Dimension %1 of layer %2: head %3 of layer %4; outliers on %5")
                                 .arg(dimension)
                                 .arg(tokensLayer + 1)
                                 .arg(dimension / m_snapshot->dh() + 1)
                                 .arg(std::min(m_layer + 1, m_snapshot->L() - 1) + 1)
                                 .arg(names.isEmpty() ? tr("no token") : names.join(QStringLiteral(", "))),
                             10000);
    const QVector<int> keep = m_highlightTokens;
    setSelection(std::min(m_layer + 1, m_snapshot->L() - 1), dimension / m_snapshot->dh());
    m_highlightTokens = keep;
    m_pages->setCurrentWidget(m_snapshot->model.takesText() ? m_headView
                                                            : static_cast<QWidget*>(m_imageView));
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
    QWidget* page = m_pages->currentWidget();
    if (page == m_headView) return m_headView;
    if (page == m_overview) return m_overview;
    if (page == m_outliers) return m_outliers->figure();
    if (page == m_imageView) return m_imageView;
    if (page == m_compare) return m_compare->figure();
    if (page == m_teaching) return m_teaching->figure();
    if (page == m_sweeps) return m_sweeps->figure();
    if (page == m_jobs) return m_jobs->figure();
    return nullptr;
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
    QSettings settings;
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("window/state"), saveState());
    QMainWindow::closeEvent(event); // running jobs are separate processes: they go on
}

} // namespace outlierlens
