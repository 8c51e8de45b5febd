#pragma once
// GUI thread.

#include "figure_export.h"

#include <QDialog>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace outlierlens {

/// Asks where and how to export a figure: file name (format follows the suffix and vice versa),
/// width and height in pixels (default: the figure's preferred size), DPI (PNG; changing it keeps the
/// printed size), and whether to write the CSV next to it. OK exports; an error stays in the dialog.
class ExportDialog : public QDialog
{
    Q_OBJECT
public:
    /// `figure` must outlive the dialog.
    explicit ExportDialog(const Figure& figure, QWidget* parent = nullptr);

    void setPath(const QString& path);
    QString path() const;
    ExportFormat format() const;
    QSize figureSize() const;
    int dpi() const;
    bool writesCsv() const;
    void setWritesCsv(bool write);
    /// The CSV written next to the figure: the same path with the suffix .csv.
    QString csvPath() const;
    /// The last export error shown in the dialog (empty when none).
    QString errorText() const;

    /// Exports with the current settings; on failure shows the error and returns false.
    bool exportNow();

public Q_SLOTS:
    void accept() override;

private:
    void browse();
    void onPathEdited();
    void onFormatChanged();
    void onDpiChanged(int dpi);
    void updatePhysicalSize();

    const Figure& m_figure;
    QLineEdit* m_path = nullptr;
    QComboBox* m_format = nullptr;
    QSpinBox* m_width = nullptr;
    QSpinBox* m_height = nullptr;
    QSpinBox* m_dpi = nullptr;
    QLabel* m_physical = nullptr;
    QCheckBox* m_csv = nullptr;
    QLabel* m_error = nullptr;
    int m_lastDpi = 96;
    bool m_updating = false;
};

} // namespace outlierlens
