#pragma once
// GUI thread only.

#include "figure.h"
#include "view_data.h"

#include <QWidget>

#include <memory>

QT_BEGIN_NAMESPACE
class QChartView;
class QCheckBox;
class QComboBox;
class QLabel;
class QTableWidget;
QT_END_NAMESPACE

namespace outlierlens {

struct SweepChartSet;

/// A finished sweep (the paper's Figures 6 and 7): the relative metric and the max inf norm
/// against one grid key (chosen in a combo box), one line per value of the other grid keys
/// (x = alpha: one line per T). Points without the x key (a baseline run) are drawn as dashed
/// reference lines. x values sit at even spacing in sorted order, labelled with their values.
/// A table below lists every point.
class SweepView : public QWidget, public Figure
{
    Q_OBJECT
public:
    explicit SweepView(QWidget* parent = nullptr);
    ~SweepView() override;

    /// Shows a sweep's points; `sourceDescription` (e.g. the summary.json path) goes into exports.
    /// Keeps the current x key if the new points still vary it.
    void setPoints(const QVector<SweepPointData>& points, const QString& sourceDescription = QString());
    const QVector<SweepPointData>& points() const { return m_points; }

    /// Keys whose value differs between points, in order of first appearance (all keys if none
    /// differ): the choices for the x axis.
    QStringList gridKeys() const { return m_gridKeys; }
    QString xKey() const { return m_xKey; }
    /// Ignored for a key that is not in gridKeys().
    void setXKey(const QString& key);
    bool logInfNorm() const { return m_logInfNorm; }
    void setLogInfNorm(bool logarithmic);

    QSize preferredFigureSize() const override;
    void paintFigure(QPainter& painter, const QRect& area) const override;
    /// Every point: name, every setting, metric name and value, relative metric, max inf norm,
    /// average kurtosis.
    QString figureCsv() const override;
    Provenance figureProvenance() const override;
    QString figureName() const override;

Q_SIGNALS:
    void xKeyChanged(const QString& key);

private:
    void refreshCharts();
    void fillTable();
    QStringList allKeys() const;

    QVector<SweepPointData> m_points;
    QString m_source;
    QStringList m_gridKeys;
    QString m_xKey;
    bool m_logInfNorm = false;
    std::unique_ptr<SweepChartSet> m_charts;
    QComboBox* m_xKeyCombo = nullptr;
    QCheckBox* m_logCheck = nullptr;
    QChartView* m_relativeView = nullptr;
    QChartView* m_infNormView = nullptr;
    QTableWidget* m_table = nullptr;
};

} // namespace outlierlens
