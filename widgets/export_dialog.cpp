#include "export_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScreen>
#include <QSettings>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace outlierlens {
namespace {
constexpr char kLastFolderKey[] = "export/lastFolder";
constexpr char kCsvKey[] = "export/alsoCsv";
} // namespace

ExportDialog::ExportDialog(const Figure& figure, QWidget* parent)
    : QDialog(parent)
    , m_figure(figure)
{
    setWindowTitle(tr("Export figure"));
    auto* layout = new QVBoxLayout(this);
    auto* form = new QFormLayout;
    layout->addLayout(form);

    auto* pathRow = new QHBoxLayout;
    m_path = new QLineEdit(this);
    auto* browseButton = new QPushButton(tr("Browse\u2026"), this);
    pathRow->addWidget(m_path, 1);
    pathRow->addWidget(browseButton);
    // A label with a mnemonic needs a buddy widget, which a row holding a layout does not get.
    auto* fileLabel = new QLabel(tr("&File:"), this);
    fileLabel->setBuddy(m_path);
    form->addRow(fileLabel, pathRow);

    m_format = new QComboBox(this);
    m_format->addItem(tr("PNG image"), int(ExportFormat::Png));
    m_format->addItem(tr("SVG drawing"), int(ExportFormat::Svg));
    m_format->addItem(tr("PDF document"), int(ExportFormat::Pdf));
    form->addRow(tr("F&ormat:"), m_format);

    const QSize preferred = figure.preferredFigureSize();
    m_width = new QSpinBox(this);
    m_width->setRange(16, 20000);
    m_width->setSuffix(tr(" px"));
    m_width->setValue(preferred.width());
    m_height = new QSpinBox(this);
    m_height->setRange(16, 20000);
    m_height->setSuffix(tr(" px"));
    m_height->setValue(preferred.height());
    auto* sizeRow = new QHBoxLayout;
    sizeRow->addWidget(m_width);
    sizeRow->addWidget(new QLabel(QStringLiteral("\u00d7"), this));
    sizeRow->addWidget(m_height);
    sizeRow->addStretch(1);
    auto* sizeLabel = new QLabel(tr("&Size:"), this);
    sizeLabel->setBuddy(m_width);
    form->addRow(sizeLabel, sizeRow);

    m_dpi = new QSpinBox(this);
    m_dpi->setRange(72, 1200);
    m_dpi->setValue(96);
    m_dpi->setToolTip(tr("PNG only. Changing the DPI scales the pixel size so the printed size stays."));
    form->addRow(tr("&DPI:"), m_dpi);
    m_physical = new QLabel(this);
    form->addRow(QString(), m_physical);

    m_csv = new QCheckBox(tr("Also write the numbers as &CSV"), this);
    m_csv->setChecked(QSettings().value(QLatin1String(kCsvKey), false).toBool()); // as last exported
    layout->addWidget(m_csv);
    m_error = new QLabel(this);
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("color: #c62828"));
    m_error->hide();
    layout->addWidget(m_error);
    m_path->setObjectName(QStringLiteral("path"));
    m_format->setObjectName(QStringLiteral("format"));
    m_width->setObjectName(QStringLiteral("width"));
    m_height->setObjectName(QStringLiteral("height"));
    m_dpi->setObjectName(QStringLiteral("dpi"));
    m_csv->setObjectName(QStringLiteral("csv"));
    m_error->setObjectName(QStringLiteral("error"));

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Export"));
    layout->addWidget(buttons);

    connect(browseButton, &QPushButton::clicked, this, &ExportDialog::browse);
    connect(m_path, &QLineEdit::textEdited, this, &ExportDialog::onPathEdited);
    connect(m_format, &QComboBox::currentIndexChanged, this, &ExportDialog::onFormatChanged);
    connect(m_dpi, &QSpinBox::valueChanged, this, &ExportDialog::onDpiChanged);
    connect(m_width, &QSpinBox::valueChanged, this, &ExportDialog::updatePhysicalSize);
    connect(m_height, &QSpinBox::valueChanged, this, &ExportDialog::updatePhysicalSize);
    connect(buttons, &QDialogButtonBox::accepted, this, &ExportDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &ExportDialog::reject);

    // The folder of the last export (remembered across sessions), else the home folder.
    const QString folder = QSettings().value(QLatin1String(kLastFolderKey), QDir::homePath()).toString();
    setPath(QDir(QDir(folder).exists() ? folder : QDir::homePath())
                .filePath(figure.figureName() + QStringLiteral(".png")));
    updatePhysicalSize();
}

void ExportDialog::setPath(const QString& path)
{
    m_path->setText(path);
    // Wide enough for the whole path (up to a screen's width), so that the folder shows, not only its end.
    const int wanted = m_path->fontMetrics().horizontalAdvance(path) + 24;
    const int room = screen() ? screen()->availableGeometry().width() / 2 : 800;
    m_path->setMinimumWidth(std::min(std::max(wanted, 320), room));
    onPathEdited();
}

QString ExportDialog::path() const
{
    return m_path->text().trimmed();
}

ExportFormat ExportDialog::format() const
{
    return ExportFormat(m_format->currentData().toInt());
}

QSize ExportDialog::figureSize() const
{
    return QSize(m_width->value(), m_height->value());
}

int ExportDialog::dpi() const
{
    return m_dpi->value();
}

bool ExportDialog::writesCsv() const
{
    return m_csv->isChecked();
}

void ExportDialog::setWritesCsv(bool write)
{
    m_csv->setChecked(write);
}

QString ExportDialog::csvPath() const
{
    const QFileInfo info(path());
    return info.dir().filePath(info.completeBaseName() + QStringLiteral(".csv"));
}

QString ExportDialog::errorText() const
{
    // isHidden(), not isVisible(): the dialog itself may not be shown (tests, scripted exports).
    return m_error->isHidden() ? QString() : m_error->text();
}

void ExportDialog::browse()
{
    const QString chosen =
        QFileDialog::getSaveFileName(this, tr("Export figure"), path(),
                                     tr("PNG image (*.png);;SVG drawing (*.svg);;PDF document (*.pdf)"));
    if (!chosen.isEmpty()) setPath(chosen);
}

void ExportDialog::onPathEdited()
{
    if (m_updating) return;
    const QString suffix = QFileInfo(path()).suffix().toLower();
    if (suffix != QLatin1String("png") && suffix != QLatin1String("svg") && suffix != QLatin1String("pdf"))
        return;
    const QSignalBlocker blocker(m_format);
    m_format->setCurrentIndex(m_format->findData(int(exportFormatForPath(path()))));
    m_dpi->setEnabled(format() == ExportFormat::Png);
    updatePhysicalSize();
}

void ExportDialog::onFormatChanged()
{
    // The suffix follows the chosen format.
    QString p = path();
    const QFileInfo info(p);
    const QString wanted = exportSuffix(format());
    if (!p.isEmpty() && info.suffix().toLower() != wanted) {
        const QString base = info.suffix().isEmpty() ? p : p.left(p.size() - info.suffix().size() - 1);
        m_updating = true;
        m_path->setText(base + QLatin1Char('.') + wanted);
        m_updating = false;
    }
    m_dpi->setEnabled(format() == ExportFormat::Png);
    updatePhysicalSize();
}

void ExportDialog::onDpiChanged(int dpi)
{
    // Same printed size at the new resolution.
    const double factor = double(dpi) / m_lastDpi;
    m_lastDpi = dpi;
    const QSignalBlocker w(m_width);
    const QSignalBlocker h(m_height);
    m_width->setValue(int(std::lround(m_width->value() * factor)));
    m_height->setValue(int(std::lround(m_height->value() * factor)));
    updatePhysicalSize();
}

void ExportDialog::updatePhysicalSize()
{
    const double dpi = format() == ExportFormat::Png ? m_dpi->value() : 96.0;
    m_physical->setText(tr("%1 \u00d7 %2 cm (%3 \u00d7 %4 in)")
                            .arg(m_width->value() / dpi * 2.54, 0, 'f', 1)
                            .arg(m_height->value() / dpi * 2.54, 0, 'f', 1)
                            .arg(m_width->value() / dpi, 0, 'f', 2)
                            .arg(m_height->value() / dpi, 0, 'f', 2));
}

bool ExportDialog::exportNow()
{
    m_error->hide();
    QString error;
    // The export functions name the file in their errors.
    const bool ok = !path().isEmpty() &&
                    exportFigure(m_figure, path(), format(), figureSize(), dpi(), &error) &&
                    (!writesCsv() || exportFigureCsv(m_figure, csvPath(), &error));
    if (path().isEmpty()) error = tr("Choose a file name.");
    if (ok) {
        QSettings().setValue(QLatin1String(kLastFolderKey), QFileInfo(path()).absolutePath());
        QSettings().setValue(QLatin1String(kCsvKey), writesCsv());
        return true;
    }
    m_error->setText(error);
    m_error->show();
    return false;
}

void ExportDialog::accept()
{
    if (exportNow()) QDialog::accept();
}

} // namespace outlierlens
