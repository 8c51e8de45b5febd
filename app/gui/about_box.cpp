#include "about_box.h"

#include "build_info.h"
#include "view_data.h"

#include <QCoreApplication>
#include <QDir>
#include <QIcon>
#include <QMessageBox>
#include <QUrl>

namespace outlierlens {

void showAboutBox(QWidget* parent)
{
    const BuildInfo b = buildInfo();
    const QString sources = QDir(b.dataDir).filePath(QStringLiteral("SOURCES.md"));
    QMessageBox box(parent);
    box.setWindowTitle(QCoreApplication::translate("AboutBox", "About OutlierLens"));
    box.setIconPixmap(QIcon(QStringLiteral(":/outlierlens/outlierlens.svg")).pixmap(64, 64));
    box.setTextFormat(Qt::RichText);
    box.setText(QCoreApplication::translate(
                    "AboutBox",
                    "<p><b>OutlierLens %1</b></p>"
                    "<p>Why transformers grow activation outliers: attention heads that want to do nothing "
                    "(Bondarenko, Nagel and Blankevoort, 2023; An et al., 2025).</p><p>%2</p>"
                    "<p><b>Bundled data and models</b>: the MultiNLI validation pairs (OANC; fiction parts "
                    "CC BY-SA 3.0), English Wikipedia text (CC BY-SA 3.0), the BERT vocabulary (Apache-2.0), "
                    "the GPT-2 BPE vocabulary (MIT), sample images (CC0, public domain, two CC BY 2.0 with "
                    "their credit shown), Fashion-MNIST images (MIT); the demo models were trained by this "
                    "project on that data (each model folder's README.md). Sources and licences, file by "
                    "file: <a href=\"%3\">%4</a>.</p>"
                    "<p>Built with LibTorch %5 and Qt %6 (running Qt %7).</p>")
                    .arg(b.version.toHtmlEscaped(), Provenance::indexingNote().toHtmlEscaped(),
                         QUrl::fromLocalFile(sources).toString().toHtmlEscaped(), sources.toHtmlEscaped(),
                         b.torch.toHtmlEscaped(), b.qtBuilt.toHtmlEscaped(), b.qtRuntime.toHtmlEscaped()));
    box.setTextInteractionFlags(Qt::TextBrowserInteraction);
    box.exec();
}

} // namespace outlierlens
