#include "statistics_source.h"

#include "inspection_controller.h"
#include "last_folder.h"

#include <QComboBox>
#include <QCoreApplication>
#include <QFileDialog>
#include <QFileInfo>
#include <QPushButton>
#include <QSignalBlocker>

namespace outlierlens {

void showStatisticsSource(QComboBox* source, const InspectionController& controller)
{
    const QSignalBlocker block(source);
    if (!controller.statistics()) {
        if (source->count() > 1) source->removeItem(1);
        return;
    }
    const QString label = QCoreApplication::translate("StatisticsSource", "Statistics file: %1")
                              .arg(QFileInfo(controller.statisticsPath()).fileName());
    if (source->count() < 2)
        source->addItem(label);
    else
        source->setItemText(1, label);
}

void chooseStatisticsSource(QComboBox* source, bool statisticsFile)
{
    if (!statisticsFile || source->count() > 1) source->setCurrentIndex(statisticsFile ? 1 : 0);
}

QPushButton* makeOpenStatisticsButton(InspectionController* controller, QWidget* dialogParent)
{
    auto* open = new QPushButton(QCoreApplication::translate("StatisticsSource", "Open statistics file…"));
    QObject::connect(open, &QPushButton::clicked, dialogParent, [controller, dialogParent] {
        const QString path = QFileDialog::getOpenFileName(
            dialogParent, QCoreApplication::translate("StatisticsSource", "Open statistics file"),
            lastFolder(QStringLiteral("statistics")),
            QCoreApplication::translate("StatisticsSource", "Statistics (*.h5 *.hdf5)"));
        rememberFolder(QStringLiteral("statistics"), path);
        if (!path.isEmpty()) controller->loadStatistics(path);
    });
    return open;
}

} // namespace outlierlens
