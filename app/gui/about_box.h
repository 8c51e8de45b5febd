#pragma once
// GUI thread.

class QWidget;

namespace outlierlens {

/// Help > About: the version, the paper, the licences of the bundled data and models, and the
/// LibTorch and Qt versions of this build. Modal; returns when closed.
void showAboutBox(QWidget* parent);

} // namespace outlierlens
