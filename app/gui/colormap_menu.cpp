#include "colormap_menu.h"

#include "colormap.h"

#include <QAction>
#include <QActionGroup>
#include <QCoreApplication>
#include <QMenu>
#include <QSettings>

namespace outlierlens {

void addColourMapMenu(QMenu* view, const std::function<void()>& redraw)
{
    QMenu* palettes = view->addMenu(QCoreApplication::translate("MainWindow", "&Colour maps"));
    const auto addPalettes = [&](const QString& key, std::initializer_list<ColorMap::Palette> choices,
                                 ColorMap::Palette current) {
        ColorMap::Palette saved = current;
        if (ColorMap::parsePalette(QSettings().value(key).toString(), &saved)) ColorMap::setPalette(saved);
        auto* group = new QActionGroup(palettes);
        for (ColorMap::Palette p : choices) {
            QAction* a = palettes->addAction(ColorMap::paletteName(p));
            a->setCheckable(true);
            a->setChecked(p == saved);
            group->addAction(a);
            QObject::connect(a, &QAction::triggered, palettes, [key, p, redraw] {
                ColorMap::setPalette(p);
                QSettings().setValue(key, ColorMap::paletteName(p));
                redraw();
            });
        }
        palettes->addSeparator();
    };
    addPalettes(QStringLiteral("view/sequentialColormap"),
                {ColorMap::Palette::Viridis, ColorMap::Palette::Grayscale}, ColorMap::sequentialPalette());
    addPalettes(QStringLiteral("view/divergingColormap"),
                {ColorMap::Palette::BlueRed, ColorMap::Palette::PurpleGreen}, ColorMap::divergingPalette());
}

} // namespace outlierlens
