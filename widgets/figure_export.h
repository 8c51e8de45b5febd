#pragma once
// GUI thread (figures paint with fonts).

#include "figure.h"

#include <QPair>
#include <QSize>
#include <QString>
#include <QVector>

namespace outlierlens {

enum class ExportFormat { Png, Svg, Pdf };

/// Renders `figure` at `size` pixels (PNG: at `dpi`, recorded in the file; SVG/PDF: size in points at 96 DPI)
/// with provenance in the file's metadata: PNG text chunks ("Title", "Software", "Source" = model +
/// checkpoint hash, "Comment" = input, selection and Provenance::indexingNote()), SVG <title>/<desc>, PDF
/// title/creator and XMP description, plus a small provenance footer line drawn under the figure in every
/// format. The whole file is `size`; the footer takes its bottom line. A PNG at more than 96 DPI draws the
/// same figure with everything scaled by dpi / 96, so text keeps its printed size. Writes atomically (temp +
/// rename); on failure returns false, leaves no file and sets `error` (naming the path) when given.
bool exportFigure(const Figure& figure, const QString& path, ExportFormat format, QSize size, int dpi,
                  QString* error);
/// The figure's CSV with provenance as leading "# key: value" comment lines (then `extra`'s, e.g. the
/// data set and the outlier rule). Atomic like exportFigure().
bool exportFigureCsv(const Figure& figure, const QString& path, QString* error,
                     const QVector<QPair<QString, QString>>& extra = {});
/// Draws `figure` into (0, 0, size) of `painter` as exportFigure() draws it: background, the figure, and
/// the provenance footer on its bottom line. For documents of several figures (the figure set's index).
void paintFigureWithFooter(const Figure& figure, QPainter& painter, const QSizeF& size);
/// By suffix (case-insensitive): .svg, .pdf, anything else PNG.
ExportFormat exportFormatForPath(const QString& path);
/// "png", "svg" or "pdf".
QString exportSuffix(ExportFormat format);
/// The one-line provenance footer drawn under exported figures.
QString provenanceFooter(const Provenance& provenance);

} // namespace outlierlens
