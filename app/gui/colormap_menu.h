#pragma once
// GUI thread.

#include <functional>

class QMenu;

namespace outlierlens {

/// Fills View > Colour maps: the sequential and the diverging palettes, each remembered in QSettings
/// and applied here, before any view draws; `redraw` is called after the user picks one.
void addColourMapMenu(QMenu* view, const std::function<void()>& redraw);

} // namespace outlierlens
