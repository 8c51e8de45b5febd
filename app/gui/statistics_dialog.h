#pragma once
// GUI thread.

#include <QDialog>

class QLabel;
class QLineEdit;
class QPushButton;

namespace outlierlens {

/// Asks for the data of a statistics job: the `stats --data` text (mnli:FILE[:N], images:DIR[:N],
/// text:FILE[:N]), with a Browse button per data kind that fills it in, and says which outlier rule the
/// job will count with (View > Outlier rule). An empty data text cannot be started.
class StatisticsDialog : public QDialog
{
    Q_OBJECT
public:
    enum class DataKind { Mnli, Images, Text };

    /// `data`: the suggested data text; `rule`: the rule in words (OutlierCriterion::describe()).
    StatisticsDialog(const QString& data, const QString& rule, QWidget* parent = nullptr);

    /// The data text as typed or chosen (trimmed).
    QString data() const;
    /// Sets the data text to `kind`'s prefix and `path` (what a Browse button does after its file dialog;
    /// an empty path, a cancelled dialog, changes nothing).
    void choose(DataKind kind, const QString& path);
    QPushButton* browseButton(DataKind kind) const;
    QString ruleText() const;

private:
    void browse(DataKind kind);
    void updateStart();

    QLineEdit* m_data = nullptr;
    QLabel* m_rule = nullptr;
    QPushButton* m_start = nullptr;
    QPushButton* m_browse[3] = {};
};

} // namespace outlierlens
