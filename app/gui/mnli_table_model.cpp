#include "mnli_table_model.h"

#include <QBrush>
#include <QColor>

namespace outlierlens {

MnliTableModel::MnliTableModel(QObject* parent)
    : QAbstractTableModel(parent)
{}

void MnliTableModel::setPairs(QStringList premises, QStringList hypotheses, QStringList gold)
{
    beginResetModel();
    m_premises = std::move(premises);
    m_hypotheses = std::move(hypotheses);
    m_gold = std::move(gold);
    m_predicted = QStringList(m_premises.size(), QString());
    endResetModel();
}

void MnliTableModel::setPredictions(int firstRow, const QVector<int>& labels, const QStringList& classNames)
{
    for (int i = 0; i < labels.size() && firstRow + i < m_predicted.size(); ++i)
        m_predicted[firstRow + i] = classNames.value(labels[i], QString::number(labels[i]));
    if (!labels.isEmpty())
        Q_EMIT dataChanged(index(firstRow, Predicted),
                           index(std::min(firstRow + int(labels.size()), rowCount()) - 1, Predicted));
}

void MnliTableModel::clearPredictions()
{
    m_predicted = QStringList(m_premises.size(), QString());
    if (rowCount() > 0) Q_EMIT dataChanged(index(0, Predicted), index(rowCount() - 1, Predicted));
}

int MnliTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_premises.size());
}

int MnliTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant MnliTableModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount()) return {};
    const int r = index.row();
    if (role == Qt::DisplayRole || role == Qt::ToolTipRole) {
        switch (index.column()) {
        case Index:
            return r;
        case Premise:
            return m_premises[r];
        case Hypothesis:
            return m_hypotheses[r];
        case Gold:
            return m_gold.value(r);
        case Predicted:
            return m_predicted.value(r);
        }
    }
    if (role == Qt::ForegroundRole && index.column() == Predicted && !m_predicted.value(r).isEmpty())
        return QBrush(m_predicted[r] == m_gold.value(r) ? QColor(0x1b, 0x7f, 0x3b)
                                                        : QColor(0xb0, 0x20, 0x20));
    return {};
}

QVariant MnliTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* names[] = {"#", "Premise", "Hypothesis", "Gold", "Predicted"};
    return section >= 0 && section < ColumnCount ? QString::fromLatin1(names[section]) : QVariant();
}

} // namespace outlierlens
