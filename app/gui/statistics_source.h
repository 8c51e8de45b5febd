#pragma once
// GUI thread. What the pages that show the current input or a statistics file (Outliers, Systematic
// outliers) share about their source list.

class QComboBox;
class QPushButton;
class QWidget;

namespace outlierlens {

class InspectionController;

/// Item 0 "Current input", item 1 "Statistics file: NAME" while `controller` has a file for its model
/// (removed when it has none); signals of `source` are blocked meanwhile.
void showStatisticsSource(QComboBox* source, const InspectionController& controller);
/// Page::showSource() of a page with such a box: the current input (item 0) or the statistics file (item
/// 1, once loaded; a file still loading switches the page itself when it is ready).
void chooseStatisticsSource(QComboBox* source, bool statisticsFile);

/// "Open statistics file…": a file dialog whose choice `controller` loads.
QPushButton* makeOpenStatisticsButton(InspectionController* controller, QWidget* dialogParent);

} // namespace outlierlens
