#pragma once
// GUI thread. Reading the MNLI file and the image gallery happens on a worker thread
// (QtConcurrent); the panel only shows what comes back.

#include <QFutureWatcher>
#include <QWidget>

class QLabel;
class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QPushButton;
class QSortFilterProxyModel;
class QTabWidget;
class QTableView;

namespace outlierlens {

class MnliTableModel;
struct ModelInfo;

/// Where the user picks an input: an MNLI pair from a searchable table (with gold label and the
/// model's prediction), a sentence pair of their own, an image (gallery, file dialog, drop), or a
/// generated example of the synthetic task.
class InputPanel : public QWidget
{
    Q_OBJECT
public:
    explicit InputPanel(QWidget* parent = nullptr);
    ~InputPanel() override;

    /// Loads the MNLI file (JSONL or GLUE TSV) in the background into the table.
    void loadPairs(const QString& path);
    /// Fills the gallery from a folder of images (with credits.json if present).
    void loadGallery(const QString& folder);
    /// Shows the tabs that fit the loaded model: pairs and text for BERT, free text (and text files)
    /// for decoders, images for ViT, examples for synthetic-task models.
    void setModelKind(const ModelInfo& model);
    /// Puts `text` into the text box (a decoder's whole input, or BERT's premise with no
    /// hypothesis) and requests it.
    void runText(const QString& text);
    /// Shows a text input that is already requested: the text tab with `premise` and `hypothesis` in its
    /// boxes, no pair row selected (a BERT model opened while the user's own text was shown).
    void showText(const QString& premise, const QString& hypothesis);
    /// Reads a UTF-8 text file (at most maxTextFileBytes) into the text box and requests it;
    /// emits failed() for a file that cannot be read or is not UTF-8 text.
    void openTextFile(const QString& path);
    static constexpr qint64 maxTextFileBytes = 64 * 1024;

    MnliTableModel* pairsModel() const { return m_pairs; }
    QTableView* pairsView() const { return m_table; }
    /// The tab shown: the pairs, the text, the images or the synthetic inputs (for tests).
    QWidget* currentTab() const;
    QWidget* textTab() const { return m_textTab; }
    /// Selects row `row` of the (unfiltered) pair table and requests it.
    void selectPair(int row);
    QPlainTextEdit* premiseEdit() const { return m_premise; }
    QPlainTextEdit* hypothesisEdit() const { return m_hypothesis; }
    QPushButton* runTextButton() const { return m_runText; }

Q_SIGNALS:
    void textRequested(const QString& premise, const QString& hypothesis);
    void imageRequested(const QString& path, const QString& credit);
    void syntheticRequested(quint64 seed);
    void pairsLoaded(int count);
    /// The table was scrolled or filtered: `row` (in pairsModel()) is the first pair it shows.
    void firstVisiblePairChanged(int row);
    void failed(const QString& message);

private:
    struct PairsData
    {
        QStringList premises, hypotheses, gold;
        QString error;
    };
    void pairActivated(const QModelIndex& proxyIndex);
    void openImage();
    void chooseTextFile();

    QTabWidget* m_tabs = nullptr;
    QWidget* m_pairsTab = nullptr;
    QWidget* m_textTab = nullptr;
    QWidget* m_imagesTab = nullptr;
    QWidget* m_syntheticTab = nullptr;
    QLineEdit* m_search = nullptr;
    QTableView* m_table = nullptr;
    MnliTableModel* m_pairs = nullptr;
    QSortFilterProxyModel* m_filter = nullptr;
    QPlainTextEdit* m_premise = nullptr;
    QPlainTextEdit* m_hypothesis = nullptr;
    QPushButton* m_runText = nullptr;
    QPushButton* m_openText = nullptr;
    QLabel* m_premiseLabel = nullptr;
    QLabel* m_hypothesisLabel = nullptr;
    bool m_decoder = false;
    QListWidget* m_gallery = nullptr;
    QLabel* m_galleryCredit = nullptr;
    quint64 m_seed = 1;
    QFutureWatcher<PairsData> m_pairsWatcher;
};

} // namespace outlierlens
