#pragma once
// GUI thread.

#include <QAbstractTableModel>
#include <QStringList>
#include <QVector>

namespace outlierlens {

/// MNLI pairs for the input table: index, premise, hypothesis, gold label and the model's
/// prediction (filled in as the background prediction proceeds).
class MnliTableModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Column { Index, Premise, Hypothesis, Gold, Predicted, ColumnCount };
    explicit MnliTableModel(QObject* parent = nullptr);

    void setPairs(QStringList premises, QStringList hypotheses, QStringList gold);
    /// Sets predictions of rows [firstRow, firstRow + labels.size()) as names from `classNames`.
    void setPredictions(int firstRow, const QVector<int>& labels, const QStringList& classNames);
    void clearPredictions();

    const QStringList& premises() const { return m_premises; }
    const QStringList& hypotheses() const { return m_hypotheses; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
    QStringList m_premises, m_hypotheses, m_gold;
    QStringList m_predicted;
};

} // namespace outlierlens
