#pragma once
// GUI thread; the figure set's index and thumbnails are read on a worker thread.

#include "input_request.h"
#include "page.h"

#include <QFutureWatcher>
#include <QImage>
#include <QWidget>

QT_BEGIN_NAMESPACE
class QLabel;
class QListWidget;
class QListWidgetItem;
class QPushButton;
QT_END_NAMESPACE

namespace outlierlens {

class JobManager;

/// Where the app shows a figure of the set at the settings that made it.
struct FigureView
{
    QString page;              ///< the tab's text without '&': "Head", "Layer", "Outliers", ...
    int layer = -1, head = -1; ///< 0-based; -1: keep the current one
    InputRequest input;        ///< Kind::None: keep the current input
    QString statisticsFile;    ///< the page shows this statistics file (empty: the current input)
};

/// The paper's figures for the current model (`outlierlens figures`): "Export all figures" runs the command
/// as a job into the model's figures folder; the figures it drew are listed with thumbnails (those it could
/// not draw, with the reason), and activating one opens the view that made it at the same settings.
class FiguresPage : public QWidget, public Page
{
    Q_OBJECT
public:
    explicit FiguresPage(JobManager* jobs, QWidget* parent = nullptr);
    ~FiguresPage() override;

    void setModel(const ModelInfo& model) override;
    const Figure* figure() const override { return nullptr; }
    /// The rule Export all figures passes to the job (View > Outlier rule); figures made with another
    /// rule are labelled as such.
    void setOutlierRule(const OutlierCriterion& rule) override;

    /// The model's figures folder: <app data>/figures/<model folder name>-<first 12 of its sha256>.
    QString folder() const { return m_folder; }
    /// Queues the job (the button).
    void makeFigures();
    /// Reads the folder's index again (done when the model changes and when its job finishes).
    void reload();

    QListWidget* list() const { return m_list; }
    QLabel* status() const { return m_status; }

Q_SIGNALS:
    void openView(const outlierlens::FigureView& view);
    /// The folder's index was read (for tests): `figures` entries, `drawn` of them with files.
    void indexLoaded(int figures, int drawn);

private:
    struct Entry
    {
        QString id, title, caption, reason;
        QImage thumbnail;
        FigureView view;
    };
    struct Index
    {
        QString folder;
        QVector<Entry> entries;
        QString error; ///< the index exists but cannot be read
        QString rule;  ///< index.json's "rule": the outlier rule the figures were made with
    };
    static Index readIndex(const QString& folder);
    void showIndex(const Index& index);
    void activated(QListWidgetItem* item);

    JobManager* m_jobs = nullptr;
    ModelInfo m_model;
    OutlierCriterion m_rule;
    QString m_folder;
    QString m_jobId;
    QLabel* m_status = nullptr;
    QPushButton* m_make = nullptr;
    QPushButton* m_openIndex = nullptr;
    QListWidget* m_list = nullptr;
    QVector<FigureView> m_views; ///< per list row
    bool m_reloadPending = false;
    QFutureWatcher<Index> m_watcher;
};

} // namespace outlierlens
