#include "input_panel.h"

#include "inspection_snapshot.h"
#include "last_folder.h"
#include "mnli_table_model.h"
#include "text/mnli.h"

#include <QApplication>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPointer>
#include <QPushButton>
#include <QScrollBar>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QStringDecoder>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <QtConcurrent>

namespace outlierlens {

InputPanel::InputPanel(QWidget* parent)
    : QWidget(parent)
{
    m_tabs = new QTabWidget(this);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_tabs);

    // MNLI pairs: search + table.
    m_pairsTab = new QWidget;
    m_search = new QLineEdit;
    m_search->setPlaceholderText(tr("Search premise or hypothesis (Ctrl+F)"));
    m_search->setClearButtonEnabled(true);
    m_pairs = new MnliTableModel(this);
    m_filter = new QSortFilterProxyModel(this);
    m_filter->setSourceModel(m_pairs);
    m_filter->setFilterCaseSensitivity(Qt::CaseInsensitive);
    m_filter->setFilterKeyColumn(-1);
    m_table = new QTableView;
    m_table->setModel(m_filter);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->verticalHeader()->hide();
    m_table->setWordWrap(false);
    m_table->horizontalHeader()->setStretchLastSection(false);
    m_table->horizontalHeader()->setSectionResizeMode(MnliTableModel::Premise, QHeaderView::Stretch);
    m_table->horizontalHeader()->setSectionResizeMode(MnliTableModel::Hypothesis, QHeaderView::Stretch);
    for (int column : {int(MnliTableModel::Index), int(MnliTableModel::Gold), int(MnliTableModel::Predicted)})
        m_table->horizontalHeader()->setSectionResizeMode(column, QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setMinimumSectionSize(24);
    connect(m_search, &QLineEdit::textChanged, m_filter, &QSortFilterProxyModel::setFilterFixedString);
    connect(m_table, &QTableView::activated, this, &InputPanel::pairActivated);
    // Predictions start where the user looks: the first pair in view, after a scroll or a search.
    const auto firstVisible = [this] {
        const QModelIndex top = m_table->indexAt(QPoint(0, 0));
        if (top.isValid()) Q_EMIT firstVisiblePairChanged(m_filter->mapToSource(top).row());
    };
    connect(m_table->verticalScrollBar(), &QScrollBar::valueChanged, this, firstVisible);
    connect(m_filter, &QSortFilterProxyModel::layoutChanged, this, firstVisible);
    connect(m_filter, &QSortFilterProxyModel::rowsRemoved, this, firstVisible);
    connect(m_table, &QTableView::clicked, this, &InputPanel::pairActivated);
    auto* pairsLayout = new QVBoxLayout(m_pairsTab);
    pairsLayout->addWidget(m_search);
    pairsLayout->addWidget(m_table);
    m_tabs->addTab(m_pairsTab, tr("MNLI pairs"));

    // A sentence pair of one's own.
    m_textTab = new QWidget;
    m_premise = new QPlainTextEdit;
    m_premise->setPlaceholderText(tr("Premise (or any text)"));
    m_hypothesis = new QPlainTextEdit;
    m_hypothesis->setPlaceholderText(tr("Hypothesis (optional)"));
    m_runText = new QPushButton(tr("Run (Ctrl+Return)"));
    m_runText->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return));
    connect(m_runText, &QPushButton::clicked, this, [this] {
        if (!m_premise->toPlainText().trimmed().isEmpty())
            Q_EMIT textRequested(m_premise->toPlainText(),
                                 m_decoder ? QString() : m_hypothesis->toPlainText());
    });
    // Nothing to run without a text: the button says so instead of doing nothing.
    const auto updateRun = [this] {
        const bool any = !m_premise->toPlainText().trimmed().isEmpty();
        m_runText->setEnabled(any);
        m_runText->setToolTip(any ? QString() : tr("Type a text first"));
    };
    connect(m_premise, &QPlainTextEdit::textChanged, this, updateRun);
    updateRun();
    m_openText = new QPushButton(tr("Open text file…"));
    m_openText->setToolTip(tr("Run the beginning of a UTF-8 text file (the app looks at up to 512 tokens; "
                              "'outlierlens inspect' takes the model's maximum length)"));
    connect(m_openText, &QPushButton::clicked, this, &InputPanel::chooseTextFile);
    m_premiseLabel = new QLabel(tr("Premise"));
    m_premiseLabel->setWordWrap(true); // a long decoder hint must not widen the dock past its share
    m_hypothesisLabel = new QLabel(tr("Hypothesis"));
    auto* textLayout = new QVBoxLayout(m_textTab);
    textLayout->addWidget(m_premiseLabel);
    textLayout->addWidget(m_premise);
    textLayout->addWidget(m_hypothesisLabel);
    textLayout->addWidget(m_hypothesis);
    textLayout->addWidget(m_runText);
    textLayout->addWidget(m_openText);
    m_tabs->addTab(m_textTab, tr("Your text"));

    // Images: gallery, file dialog (drops go to the image view).
    m_imagesTab = new QWidget;
    m_gallery = new QListWidget;
    m_gallery->setViewMode(QListView::IconMode);
    m_gallery->setIconSize(QSize(96, 96));
    // A fixed grid: the thumbnails arrive after the items are laid out (loadGallery), and a layout made
    // for text-only items would let them overlap.
    m_gallery->setGridSize(QSize(118, 134));
    m_gallery->setUniformItemSizes(true);
    m_gallery->setWordWrap(true);
    m_gallery->setResizeMode(QListView::Adjust);
    m_gallery->setMovement(QListView::Static);
    m_galleryCredit = new QLabel;
    m_galleryCredit->setWordWrap(true);
    auto* open = new QPushButton(tr("Open image…"));
    connect(open, &QPushButton::clicked, this, &InputPanel::openImage);
    connect(m_gallery, &QListWidget::itemActivated, this, [this](QListWidgetItem* item) {
        m_galleryCredit->setText(item->data(Qt::UserRole + 1).toString());
        Q_EMIT imageRequested(item->data(Qt::UserRole).toString(), item->data(Qt::UserRole + 1).toString());
    });
    connect(m_gallery, &QListWidget::itemClicked, m_gallery, &QListWidget::itemActivated);
    auto* imagesLayout = new QVBoxLayout(m_imagesTab);
    imagesLayout->addWidget(m_gallery);
    imagesLayout->addWidget(m_galleryCredit);
    imagesLayout->addWidget(open);
    m_tabs->addTab(m_imagesTab, tr("Images"));

    // Generated examples of the synthetic no-op task.
    m_syntheticTab = new QWidget;
    auto* seed = new QSpinBox;
    seed->setRange(1, 1000000);
    seed->setPrefix(tr("example "));
    auto* generate = new QPushButton(tr("Show example"));
    auto* next = new QPushButton(tr("Next example"));
    connect(generate, &QPushButton::clicked, this,
            [this, seed] { Q_EMIT syntheticRequested(quint64(seed->value())); });
    connect(next, &QPushButton::clicked, this, [seed, generate] {
        seed->setValue(seed->value() + 1);
        generate->click();
    });
    auto* syntheticLayout = new QVBoxLayout(m_syntheticTab);
    auto* explain =
        new QLabel(tr("The synthetic task: every token must stay itself, except the token after a "
                      "<b>backK</b> operator, which must become the token K places before the "
                      "operator. [CLS], [SEP], \".\" and \",\" carry no information: heads that "
                      "have nothing to do can park their attention there."));
    explain->setWordWrap(true);
    syntheticLayout->addWidget(explain);
    syntheticLayout->addWidget(seed);
    syntheticLayout->addWidget(generate);
    syntheticLayout->addWidget(next);
    syntheticLayout->addStretch();
    m_tabs->addTab(m_syntheticTab, tr("Synthetic examples"));

    connect(&m_pairsWatcher, &QFutureWatcher<PairsData>::finished, this, [this] {
        const PairsData d = m_pairsWatcher.result();
        if (!d.error.isEmpty()) {
            Q_EMIT failed(d.error);
            return;
        }
        m_pairs->setPairs(d.premises, d.hypotheses, d.gold);
        m_table->resizeColumnToContents(MnliTableModel::Index);
        Q_EMIT pairsLoaded(int(d.premises.size()));
    });
}

InputPanel::~InputPanel()
{
    m_pairsWatcher.waitForFinished();
}

void InputPanel::loadPairs(const QString& path)
{
    m_pairsWatcher.setFuture(QtConcurrent::run([path] {
        PairsData d;
        try {
            for (const NliPair& p : readNliPairs(path.toStdString())) {
                d.premises << QString::fromStdString(p.premise);
                d.hypotheses << QString::fromStdString(p.hypothesis);
                d.gold << QString::fromStdString(p.label);
            }
        } catch (const std::exception& e) {
            d.error = QString::fromStdString(e.what());
        }
        return d;
    }));
}

void InputPanel::loadGallery(const QString& folder)
{
    m_gallery->clear();
    QFile creditsFile(folder + QStringLiteral("/credits.json"));
    const QJsonObject credits = creditsFile.open(QIODevice::ReadOnly)
                                    ? QJsonDocument::fromJson(creditsFile.readAll()).object()
                                    : QJsonObject();
    const QStringList files =
        QDir(folder).entryList({QStringLiteral("*.png"), QStringLiteral("*.jpg"), QStringLiteral("*.jpeg")},
                               QDir::Files, QDir::Name);
    for (const QString& name : files) {
        auto* item = new QListWidgetItem(QFileInfo(name).completeBaseName(), m_gallery);
        item->setData(Qt::UserRole, QDir(folder).absoluteFilePath(name));
        item->setData(Qt::UserRole + 1, credits.value(name).toString());
        item->setToolTip(credits.value(name).toString());
    }
    // Thumbnails are small and few; decoding them on a worker keeps start-up smooth.
    (void)QtConcurrent::run([list = QPointer<QListWidget>(m_gallery), folder, files] {
        QVector<QImage> thumbnails;
        for (const QString& name : files)
            thumbnails << QImage(QDir(folder).absoluteFilePath(name))
                              .scaled(96, 96, Qt::KeepAspectRatio, Qt::SmoothTransformation);
        QMetaObject::invokeMethod(qApp, [list, thumbnails] {
            if (!list) return;
            for (int i = 0; i < thumbnails.size() && i < list->count(); ++i)
                list->item(i)->setIcon(QIcon(QPixmap::fromImage(thumbnails[i])));
        });
    });
}

void InputPanel::setModelKind(const ModelInfo& model)
{
    const bool synthetic = model.synthetic, decoder = model.isDecoder(), text = model.takesText();
    m_decoder = decoder;
    m_tabs->setTabVisible(m_tabs->indexOf(m_pairsTab), text && !synthetic && !decoder);
    m_tabs->setTabVisible(m_tabs->indexOf(m_textTab), text);
    m_tabs->setTabVisible(m_tabs->indexOf(m_imagesTab), !text);
    m_tabs->setTabVisible(m_tabs->indexOf(m_syntheticTab), synthetic);
    m_tabs->setTabText(m_tabs->indexOf(m_textTab), decoder ? tr("Text") : tr("Your text"));
    const bool ids = model.takesTokenIds();
    m_premiseLabel->setText(
        ids ? tr("Token ids, e.g. 1, 5, 9 (this model folder has no tokenizer files; they run as given)")
        : decoder ? tr("Text (tokenized as Hugging Face does: BOS only where the model's tokenizer adds one)")
                  : tr("Premise"));
    m_premise->setPlaceholderText(ids       ? tr("1, 5, 9")
                                  : decoder ? tr("Any text")
                                            : tr("Premise (or any text)"));
    m_hypothesisLabel->setVisible(!decoder);
    m_hypothesis->setVisible(!decoder);
    m_openText->setVisible(decoder);
    QWidget* first = synthetic ? m_syntheticTab : decoder ? m_textTab : text ? m_pairsTab : m_imagesTab;
    m_tabs->setCurrentWidget(first);
}

void InputPanel::runText(const QString& text)
{
    m_premise->setPlainText(text);
    m_hypothesis->clear();
    Q_EMIT textRequested(text, QString());
}

QWidget* InputPanel::currentTab() const
{
    return m_tabs->currentWidget();
}

void InputPanel::showText(const QString& premise, const QString& hypothesis)
{
    m_premise->setPlainText(premise);
    m_hypothesis->setPlainText(hypothesis);
    m_table->clearSelection();
    m_tabs->setCurrentWidget(m_textTab);
}

void InputPanel::chooseTextFile()
{
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Open a text file"), lastFolder(QStringLiteral("input")),
                                     tr("Text (*.txt *.md *.json *.jsonl *.csv);;All files (*)"));
    rememberFolder(QStringLiteral("input"), path);
    if (!path.isEmpty()) openTextFile(path);
}

void InputPanel::openTextFile(const QString& path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        Q_EMIT failed(tr("%1: cannot be read (%2)").arg(path, file.errorString()));
        return;
    }
    QByteArray bytes = file.read(maxTextFileBytes);
    if (file.size() > maxTextFileBytes) {
        // The last character may be cut by the size limit: drop it rather than report bad UTF-8.
        int cut = 0;
        while (cut < 3 && cut < bytes.size() && (quint8(bytes[bytes.size() - 1 - cut]) & 0xC0) == 0x80)
            ++cut;
        if (cut < bytes.size() && (quint8(bytes[bytes.size() - 1 - cut]) & 0xC0) == 0xC0) bytes.chop(cut + 1);
    }
    QStringDecoder utf8(QStringDecoder::Utf8);
    const QString text = utf8.decode(bytes);
    if (utf8.hasError() || bytes.contains('\0')) {
        Q_EMIT failed(tr("%1 is not UTF-8 text").arg(path));
        return;
    }
    if (text.trimmed().isEmpty()) {
        Q_EMIT failed(tr("%1 holds no text").arg(path));
        return;
    }
    runText(text);
}

void InputPanel::selectPair(int row)
{
    const QModelIndex index = m_filter->mapFromSource(m_pairs->index(row, MnliTableModel::Premise));
    if (!index.isValid()) return;
    m_table->selectRow(index.row());
    m_table->scrollTo(index);
    pairActivated(index);
}

void InputPanel::pairActivated(const QModelIndex& proxyIndex)
{
    const int row = m_filter->mapToSource(proxyIndex).row();
    if (row < 0) return;
    m_premise->setPlainText(m_pairs->premises()[row]);
    m_hypothesis->setPlainText(m_pairs->hypotheses()[row]);
    Q_EMIT textRequested(m_pairs->premises()[row], m_pairs->hypotheses()[row]);
}

void InputPanel::openImage()
{
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Open image"), lastFolder(QStringLiteral("input")),
                                     tr("Images (*.png *.jpg *.jpeg *.bmp *.webp)"));
    rememberFolder(QStringLiteral("input"), path);
    if (!path.isEmpty()) Q_EMIT imageRequested(path, QString());
}

} // namespace outlierlens
