#include "figures_page.h"

#include "job_manager.h"
#include "model_catalog.h"

#include <QDesktopServices>
#include <QDir>
#include <QFile>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QListWidget>
#include <QPainter>
#include <QPushButton>
#include <QStandardPaths>
#include <QUrl>
#include <QVBoxLayout>
#include <QtConcurrent>

namespace outlierlens {
namespace {

constexpr int kThumbnailWidth = 240;
constexpr int kThumbnailHeight = 180;

/// A card for the list: the figure scaled into it (or `text` when there is none), framed so that a
/// white figure stands out from the white list. Any thread.
QImage thumbnail(const QImage& figure, const QString& text)
{
    QImage card(kThumbnailWidth, kThumbnailHeight, QImage::Format_ARGB32_Premultiplied);
    card.fill(QColor(0xf2, 0xf2, 0xf2));
    QPainter p(&card);
    if (!figure.isNull()) {
        const QImage scaled = figure.scaled(kThumbnailWidth - 8, kThumbnailHeight - 8, Qt::KeepAspectRatio,
                                            Qt::SmoothTransformation);
        p.drawImage((kThumbnailWidth - scaled.width()) / 2, (kThumbnailHeight - scaled.height()) / 2, scaled);
    } else {
        p.setPen(QColor(0x88, 0x88, 0x88));
        p.drawText(card.rect(), Qt::AlignCenter, text);
    }
    p.setPen(QColor(0xbb, 0xbb, 0xbb));
    p.drawRect(card.rect().adjusted(0, 0, -1, -1));
    return card;
}

InputRequest inputOf(const QJsonObject& o)
{
    InputRequest r;
    const QString kind = o[QStringLiteral("kind")].toString();
    if (kind == QLatin1String("pair") || kind == QLatin1String("text")) {
        r.kind = InputRequest::Kind::Text;
        r.text = o[QStringLiteral("first")].toString();
        r.pair = o[QStringLiteral("second")].toString();
    } else if (kind == QLatin1String("image")) {
        r.kind = InputRequest::Kind::Image;
        r.path = o[QStringLiteral("first")].toString();
    } else if (kind == QLatin1String("synthetic")) {
        r.kind = InputRequest::Kind::Synthetic;
        r.seed = o[QStringLiteral("seed")].toString().toULongLong();
    }
    return r;
}

} // namespace

FiguresPage::FiguresPage(JobManager* jobs, QWidget* parent)
    : QWidget(parent)
    , m_jobs(jobs)
{
    m_status = new QLabel;
    m_status->setWordWrap(true);
    m_make = new QPushButton(tr("Export &all figures"));
    m_make->setToolTip(
        tr("Runs `outlierlens figures` for this model as a job (Jobs page): every figure of the "
           "papers that the model allows, with CSVs, index.html and index.pdf"));
    m_openIndex = new QPushButton(tr("Open &index"));
    m_openIndex->setToolTip(tr("index.html, with every figure and its caption, in your browser"));
    auto* openFolder = new QPushButton(tr("Open fol&der"));
    m_list = new QListWidget;
    m_list->setViewMode(QListView::IconMode);
    m_list->setIconSize(QSize(kThumbnailWidth, kThumbnailHeight));
    m_list->setResizeMode(QListView::Adjust);
    m_list->setMovement(QListView::Static);
    m_list->setWordWrap(true);
    m_list->setGridSize(QSize(kThumbnailWidth + 24, kThumbnailHeight + 40));

    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_make);
    buttons->addWidget(m_openIndex);
    buttons->addWidget(openFolder);
    buttons->addStretch();
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(m_status);
    layout->addLayout(buttons);
    layout->addWidget(m_list, 1);

    connect(m_make, &QPushButton::clicked, this, &FiguresPage::makeFigures);
    connect(m_openIndex, &QPushButton::clicked, this, [this] {
        QDesktopServices::openUrl(QUrl::fromLocalFile(m_folder + QStringLiteral("/index.html")));
    });
    connect(openFolder, &QPushButton::clicked, this,
            [this] { QDesktopServices::openUrl(QUrl::fromLocalFile(m_folder)); });
    connect(m_list, &QListWidget::itemActivated, this, &FiguresPage::activated);
    connect(&m_watcher, &QFutureWatcher<Index>::finished, this, [this] {
        const Index index = m_watcher.result();
        if (index.folder == m_folder && !m_reloadPending) {
            showIndex(index);
        } else { // the model or the folder changed meanwhile
            m_reloadPending = false;
            reload();
        }
    });
    if (m_jobs)
        connect(m_jobs, &JobManager::jobFinished, this, [this](const QString& id) {
            if (id != m_jobId) return;
            const JobInfo* job = m_jobs->job(id);
            if (job && job->state != QLatin1String("finished")) {
                // Said here, not only on the Jobs page: the list would otherwise wait for it forever.
                m_jobId.clear();
                m_status->setText(tr("Making the figures of %1 %2: %3")
                                      .arg(m_model.name, job->state,
                                           job->message.isEmpty() ? tr("see the Jobs page") : job->message));
                return;
            }
            reload();
        });
    setModel({});
}

FiguresPage::~FiguresPage()
{
    m_watcher.waitForFinished();
}

void FiguresPage::setModel(const ModelInfo& model)
{
    m_model = model;
    m_folder = model.dir.isEmpty() ? QString()
                                   : QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) +
                                         QStringLiteral("/figures/") + QFileInfo(model.dir).fileName() +
                                         QLatin1Char('-') + model.sha256.left(12);
    m_jobId.clear();
    reload();
}

void FiguresPage::makeFigures()
{
    if (!m_jobs || m_model.dir.isEmpty()) return;
    QStringList arguments{QStringLiteral("--model"), m_model.dir};
    // A demo model is drawn with its siblings (Figures 5, 14 and 15 compare the variants).
    QStringList compare;
    for (const ModelEntry& e : ModelCatalog::demoTrio(ModelCatalog::demoKindOf(m_model.dir)))
        if (QFileInfo(e.dir).canonicalFilePath() != QFileInfo(m_model.dir).canonicalFilePath())
            compare << e.dir;
    if (!compare.isEmpty()) arguments << QStringLiteral("--compare") << compare.join(QLatin1Char(','));
    for (const std::string& a : m_rule.arguments()) // the rule every page counts with
        arguments << QString::fromStdString(a);
    m_jobId = m_jobs->queueFigures(tr("Figures of %1").arg(m_model.name), arguments, m_folder);
    m_status->setText(tr("Making the figures of %1 (Jobs page); they appear here when the job has finished.")
                          .arg(m_model.name));
}

void FiguresPage::setOutlierRule(const OutlierCriterion& rule)
{
    const bool changed = rule != m_rule;
    m_rule = rule;
    if (changed && !m_folder.isEmpty()) reload(); // the label of figures made with another rule
}

void FiguresPage::reload()
{
    if (m_watcher.isRunning()) { // what it reads may be stale: read again when it is done
        m_reloadPending = true;
        return;
    }
    m_list->clear();
    m_views.clear();
    m_openIndex->setEnabled(false);
    m_make->setEnabled(!m_model.dir.isEmpty() && m_jobs);
    if (m_folder.isEmpty()) {
        m_status->setText(tr("Open a model to make its figures."));
        return;
    }
    m_watcher.setFuture(QtConcurrent::run(&FiguresPage::readIndex, m_folder));
}

FiguresPage::Index FiguresPage::readIndex(const QString& folder)
{
    Index index;
    index.folder = folder;
    // index.html is written last: without it, the set is missing or unfinished.
    if (!QFile::exists(folder + QStringLiteral("/index.html"))) return index;
    QFile file(folder + QStringLiteral("/index.json"));
    if (!file.open(QIODevice::ReadOnly)) {
        index.error = tr("cannot read %1: %2").arg(file.fileName(), file.errorString());
        return index;
    }
    QJsonParseError parse;
    const QJsonObject json = QJsonDocument::fromJson(file.readAll(), &parse).object();
    if (parse.error != QJsonParseError::NoError) {
        index.error = tr("%1: %2").arg(file.fileName(), parse.errorString());
        return index;
    }
    const QJsonArray inputs = json[QStringLiteral("inputs")].toArray();
    const QString statistics = json[QStringLiteral("statistics")].toString();
    index.rule = json[QStringLiteral("rule")].toString();
    for (const auto& value : json[QStringLiteral("figures")].toArray()) {
        const QJsonObject f = value.toObject();
        Entry e;
        e.id = f[QStringLiteral("id")].toString();
        e.title = f[QStringLiteral("title")].toString();
        e.caption = f[QStringLiteral("caption")].toString();
        e.reason = f[QStringLiteral("reason")].toString();
        e.view.page = f[QStringLiteral("page")].toString();
        e.view.layer = f[QStringLiteral("layer")].toInt(-1);
        e.view.head = f[QStringLiteral("head")].toInt(-1);
        const int input = f[QStringLiteral("input")].toInt(-1);
        if (input >= 0 && input < inputs.size()) e.view.input = inputOf(inputs[input].toObject());
        if (f[QStringLiteral("statistics")].toBool() && !statistics.isEmpty())
            e.view.statisticsFile = QDir(folder).filePath(statistics);
        QImage image;
        for (const auto& name : f[QStringLiteral("files")].toArray())
            if (name.toString().endsWith(QLatin1String(".png")))
                image.load(QDir(folder).filePath(name.toString()));
        e.thumbnail = thumbnail(image, e.reason.isEmpty() ? tr("a table: see its CSV") : tr("not drawn"));
        index.entries << e;
    }
    return index;
}

void FiguresPage::showIndex(const Index& index)
{
    if (!index.error.isEmpty()) {
        m_status->setText(
            tr("The figures of %1 cannot be read (%2). Make them again.").arg(m_model.name, index.error));
        Q_EMIT indexLoaded(0, 0);
        return;
    }
    if (index.entries.isEmpty()) {
        if (m_jobId.isEmpty())
            m_status->setText(
                tr("No figures of %1 yet. Export all figures draws every figure of the papers that the model "
                   "allows (a job; a few seconds for the demo models, minutes for a 12-layer model).")
                    .arg(m_model.name));
        Q_EMIT indexLoaded(0, 0);
        return;
    }
    int drawn = 0;
    // The drawn figures first (in the papers' order), then those the inputs could not support.
    QVector<Entry> entries;
    for (const Entry& e : index.entries)
        if (e.reason.isEmpty()) entries << e;
    for (const Entry& e : index.entries)
        if (!e.reason.isEmpty()) entries << e;
    for (const Entry& e : entries) {
        // The number under the card; the title and caption in the tooltip.
        const QString number = e.title.section(QLatin1Char(':'), 0, 0);
        auto* item = new QListWidgetItem(QIcon(QPixmap::fromImage(e.thumbnail)), number, m_list);
        item->setTextAlignment(Qt::AlignHCenter | Qt::AlignTop);
        if (e.reason.isEmpty()) {
            ++drawn;
            item->setToolTip(e.title + QStringLiteral("\n\n") + e.caption + QStringLiteral("\n\n") +
                             tr("Double-click or Enter: open the view that made it."));
        } else {
            item->setText(number + QStringLiteral(" — ") + tr("not drawn"));
            item->setToolTip(tr("Not drawn: %1").arg(e.reason) + QStringLiteral("\n\n") + e.title);
            item->setFlags(item->flags() & ~Qt::ItemIsEnabled);
        }
        m_views << e.view;
    }
    m_openIndex->setEnabled(true);
    const QString current = QString::fromStdString(m_rule.shortText());
    const QString rule =
        index.rule == current
            ? tr("Outliers over %1.").arg(index.rule)
            : tr("Made with the outlier rule %1, not the %2 of View > Outlier rule: Export all figures again "
                 "to count with it.")
                  .arg(index.rule.isEmpty() ? tr("(not recorded)") : index.rule, current);
    m_status->setText(tr("%1 figures of %2 in %3 (%4 could not be drawn from its inputs: hover for why). "
                         "%5 Double-click one to open its view at the same layer, head and input.")
                          .arg(drawn)
                          .arg(m_model.name, QDir::toNativeSeparators(m_folder))
                          .arg(index.entries.size() - drawn)
                          .arg(rule));
    Q_EMIT indexLoaded(index.entries.size(), drawn);
}

void FiguresPage::activated(QListWidgetItem* item)
{
    const int row = m_list->row(item);
    if (row >= 0 && row < m_views.size() && !m_views[row].page.isEmpty()) Q_EMIT openView(m_views[row]);
}

} // namespace outlierlens
