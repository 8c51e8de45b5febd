#include "statistics_dialog.h"

#include "last_folder.h"

#include <QDialogButtonBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

#include <algorithm>

namespace outlierlens {

StatisticsDialog::StatisticsDialog(const QString& data, const QString& rule, QWidget* parent)
    : QDialog(parent)
{
    setWindowTitle(tr("Statistics over a data set"));
    auto* layout = new QVBoxLayout(this);
    auto* label = new QLabel(tr("&Data: mnli:FILE, images:FOLDER or text:FILE, optionally :N for the first N "
                                "samples (N pairs, images or chunks)"),
                             this);
    label->setWordWrap(true);
    m_data = new QLineEdit(data, this);
    m_data->setObjectName(QStringLiteral("data"));
    m_data->setMinimumWidth(std::clamp(m_data->fontMetrics().horizontalAdvance(data) + 24, 480, 900));
    label->setBuddy(m_data);
    layout->addWidget(label);
    layout->addWidget(m_data);

    auto* browseRow = new QHBoxLayout;
    const QString texts[] = {tr("&MNLI file\u2026"), tr("&Image folder\u2026"), tr("&Text file\u2026")};
    const char* names[] = {"browseMnli", "browseImages", "browseText"};
    for (int i = 0; i < 3; ++i) {
        m_browse[i] = new QPushButton(texts[i], this);
        m_browse[i]->setObjectName(QLatin1String(names[i]));
        m_browse[i]->setAutoDefault(false);
        browseRow->addWidget(m_browse[i]);
        connect(m_browse[i], &QPushButton::clicked, this, [this, i] { browse(DataKind(i)); });
    }
    browseRow->addStretch(1);
    layout->addLayout(browseRow);

    m_rule = new QLabel(tr("Outliers are counted by %1 (View \u203a Outlier rule).").arg(rule), this);
    m_rule->setObjectName(QStringLiteral("rule"));
    m_rule->setWordWrap(true);
    layout->addWidget(m_rule);

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    m_start = buttons->button(QDialogButtonBox::Ok);
    m_start->setText(tr("&Start"));
    layout->addWidget(buttons);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(m_data, &QLineEdit::textChanged, this, &StatisticsDialog::updateStart);
    updateStart();
}

QString StatisticsDialog::data() const
{
    return m_data->text().trimmed();
}

QString StatisticsDialog::ruleText() const
{
    return m_rule->text();
}

QPushButton* StatisticsDialog::browseButton(DataKind kind) const
{
    return m_browse[int(kind)];
}

void StatisticsDialog::choose(DataKind kind, const QString& path)
{
    if (path.isEmpty()) return;
    static const char* const kPrefixes[] = {"mnli:", "images:", "text:"};
    m_data->setText(QLatin1String(kPrefixes[int(kind)]) + path);
}

void StatisticsDialog::browse(DataKind kind)
{
    const QString start = lastFolder(QStringLiteral("statisticsData"));
    QString path;
    switch (kind) {
    case DataKind::Mnli:
        path = QFileDialog::getOpenFileName(this, tr("MNLI pairs (GLUE's TSV)"), start,
                                            tr("MNLI TSV (*.tsv *.txt);;All files (*)"));
        break;
    case DataKind::Images:
        path = QFileDialog::getExistingDirectory(this, tr("A folder of images"), start);
        break;
    case DataKind::Text:
        path = QFileDialog::getOpenFileName(this, tr("A text file"), start,
                                            tr("Text (*.txt *.md *.raw);;All files (*)"));
        break;
    }
    rememberFolder(QStringLiteral("statisticsData"), path);
    choose(kind, path);
}

void StatisticsDialog::updateStart()
{
    m_start->setEnabled(!data().isEmpty());
}

} // namespace outlierlens
