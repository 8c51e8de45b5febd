#include "training_charts.h"

#include "chart_support.h"

#include <QChart>
#include <QChartView>
#include <QGridLayout>
#include <QLabel>
#include <QLegend>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QMap>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <limits>

namespace outlierlens {

namespace {

const QColor kLossColor(31, 119, 180);
const QColor kEvalColor(214, 39, 40);

struct Range
{
    double min = std::numeric_limits<double>::infinity();
    double max = -std::numeric_limits<double>::infinity();
    void add(double v)
    {
        if (!std::isfinite(v)) return;
        min = std::min(min, v);
        max = std::max(max, v);
    }
    bool valid() const { return min <= max; }
};

/// Points (x[i], y[i]) for the finite ones; Qt Charts draws nothing sensible through NaN.
QList<QPointF> finitePoints(const QVector<double>& x, const QVector<double>& y)
{
    QList<QPointF> points;
    const int n = int(std::min(x.size(), y.size()));
    points.reserve(n);
    for (int i = 0; i < n; ++i)
        if (std::isfinite(x[i]) && std::isfinite(y[i])) points << QPointF(x[i], y[i]);
    return points;
}

int layerCountOf(const QVector<QVector<double>>& rows)
{
    int layers = 0;
    for (const QVector<double>& row : rows)
        layers = std::max(layers, int(row.size()));
    return layers;
}

} // namespace

/// One chart of a per-layer quantity over evaluation steps.
struct LayerChart
{
    QChart* chart = nullptr;
    QValueAxis* stepAxis = nullptr;
    QValueAxis* valueAxis = nullptr;
    QVector<QLineSeries*> lines; ///< index = layer (0-based), named 1-based

    LayerChart(const QString& title, const QString& valueTitle);
    void fill(const QVector<double>& steps, const QVector<QVector<double>>& rows, double minStep,
              double maxStep);
};

/// The charts of a run (the first-token attention only when the run recorded it). The window keeps one set;
/// exports build a fresh one.
struct TrainingChartSet
{
    QChart* loss = nullptr;
    QLineSeries* lossSeries = nullptr;
    QLineSeries* evalSeries = nullptr;
    QValueAxis* lossStepAxis = nullptr;
    QValueAxis* lossAxis = nullptr;
    QAbstractAxis* evalAxis = nullptr; ///< QLogValueAxis for perplexity, QValueAxis otherwise
    LayerChart infNorm{QStringLiteral("Max inf norm per layer"), QStringLiteral("max inf norm")};
    LayerChart kurtosis{QStringLiteral("Kurtosis per layer"), QStringLiteral("kurtosis (Pearson)")};
    LayerChart firstToken{QStringLiteral("First-token attention per layer (its most sinking head)"),
                          QStringLiteral("attention on the first token")};

    TrainingChartSet();
    void fill(const TrainingCurveData& data);

private:
    void setEvalAxis(bool logarithmic, const QString& title);
};

LayerChart::LayerChart(const QString& title, const QString& valueTitle)
{
    chart = charts::makeChart(title);
    stepAxis = new QValueAxis;
    stepAxis->setLabelFormat(QStringLiteral("%d"));
    charts::setAxisTitle(stepAxis, QStringLiteral("step"));
    valueAxis = new QValueAxis;
    valueAxis->setLabelFormat(QStringLiteral("%.4g"));
    charts::setAxisTitle(valueAxis, valueTitle);
    chart->addAxis(stepAxis, Qt::AlignBottom);
    chart->addAxis(valueAxis, Qt::AlignLeft);
}

void LayerChart::fill(const QVector<double>& steps, const QVector<QVector<double>>& rows, double minStep,
                      double maxStep)
{
    const int layers = layerCountOf(rows);
    if (layers != lines.size()) {
        // Colours are spread over the layer count, so a new count recolours every line.
        for (QLineSeries* line : lines) {
            chart->removeSeries(line);
            delete line;
        }
        lines.clear();
        for (int l = 0; l < layers; ++l) {
            auto* line = new QLineSeries;
            line->setName(QStringLiteral("layer %1").arg(l + 1));
            line->setPen(QPen(charts::orderedColor(l, layers), 2));
            chart->addSeries(line);
            line->attachAxis(stepAxis);
            line->attachAxis(valueAxis);
            lines << line;
        }
    }
    Range values;
    const int n = int(std::min(steps.size(), rows.size()));
    for (int l = 0; l < layers; ++l) {
        QList<QPointF> points;
        points.reserve(n);
        for (int e = 0; e < n; ++e) {
            if (l >= rows[e].size() || !std::isfinite(rows[e][l]) || !std::isfinite(steps[e])) continue;
            points << QPointF(steps[e], rows[e][l]);
            values.add(rows[e][l]);
        }
        lines[l]->replace(points);
    }
    chart->legend()->setVisible(layers > 0);
    charts::setNiceRange(stepAxis, minStep,
                         std::max(maxStep, minStep + 10)); // integer steps: at least 10 wide
    charts::setNiceRange(valueAxis, values.valid() ? std::min(0.0, values.min) : 0.0,
                         values.valid() ? values.max : 1.0);
}

TrainingChartSet::TrainingChartSet()
{
    loss = charts::makeChart(QStringLiteral("Loss"));
    lossSeries = new QLineSeries;
    lossSeries->setName(QStringLiteral("training loss"));
    lossSeries->setPen(QPen(kLossColor, 1.5));
    evalSeries = new QLineSeries;
    evalSeries->setPen(QPen(kEvalColor, 2));
    evalSeries->setPointsVisible(true);
    loss->addSeries(lossSeries);
    loss->addSeries(evalSeries);
    lossStepAxis = new QValueAxis;
    lossStepAxis->setLabelFormat(QStringLiteral("%d"));
    charts::setAxisTitle(lossStepAxis, QStringLiteral("step"));
    lossAxis = new QValueAxis;
    lossAxis->setLabelFormat(QStringLiteral("%.3g"));
    lossAxis->setLinePenColor(kLossColor);
    charts::setAxisTitle(lossAxis, QStringLiteral("training loss"));
    loss->addAxis(lossStepAxis, Qt::AlignBottom);
    loss->addAxis(lossAxis, Qt::AlignLeft);
    lossSeries->attachAxis(lossStepAxis);
    lossSeries->attachAxis(lossAxis);
    evalSeries->attachAxis(lossStepAxis);
    setEvalAxis(false, QString());
}

void TrainingChartSet::setEvalAxis(bool logarithmic, const QString& title)
{
    const bool isLog = qobject_cast<QLogValueAxis*>(evalAxis) != nullptr;
    if (evalAxis && isLog == logarithmic) {
        charts::setAxisTitle(evalAxis, title);
        return;
    }
    if (evalAxis) {
        loss->removeAxis(evalAxis);
        delete evalAxis;
    }
    if (logarithmic) {
        auto* axis = new QLogValueAxis;
        axis->setBase(10);
        axis->setLabelFormat(QStringLiteral("%g"));
        axis->setMinorTickCount(-1);
        evalAxis = axis;
    } else {
        auto* axis = new QValueAxis;
        axis->setLabelFormat(QStringLiteral("%.3g"));
        evalAxis = axis;
    }
    evalAxis->setLinePenColor(kEvalColor);
    evalAxis->setGridLineVisible(false);
    evalAxis->setMinorGridLineVisible(false);
    charts::setAxisTitle(evalAxis, title);
    loss->addAxis(evalAxis, Qt::AlignRight);
    evalSeries->attachAxis(evalAxis);
}

void TrainingChartSet::fill(const TrainingCurveData& data)
{
    Range steps;
    for (double s : data.steps)
        steps.add(s);
    for (double s : data.evalSteps)
        steps.add(s);
    const double minStep = steps.valid() ? std::min(0.0, steps.min) : 0.0;
    const double maxStep = steps.valid() ? std::max(steps.max, 1.0) : 1.0;

    const QList<QPointF> lossPoints = finitePoints(data.steps, data.loss);
    const QList<QPointF> evalPoints = finitePoints(data.evalSteps, data.evalValue);
    Range lossRange, evalRange;
    for (const QPointF& p : lossPoints)
        lossRange.add(p.y());
    for (const QPointF& p : evalPoints)
        evalRange.add(p.y());
    // Perplexity starts near the vocabulary size and ends near ten: only a log axis shows both.
    const bool logEval =
        data.evalName == QLatin1String("perplexity") && evalRange.valid() && evalRange.min > 0;
    const QString evalName = data.evalName.isEmpty() ? QStringLiteral("evaluation") : data.evalName;
    setEvalAxis(logEval, evalName + QStringLiteral(" (eval)"));
    evalSeries->setName(evalName + QStringLiteral(" (eval)"));
    lossSeries->replace(lossPoints);
    evalSeries->replace(evalPoints);
    charts::setNiceRange(lossStepAxis, minStep, std::max(maxStep, minStep + 10));
    charts::setNiceRange(lossAxis, lossRange.valid() ? std::min(0.0, lossRange.min) : 0.0,
                         lossRange.valid() ? lossRange.max : 1.0);
    if (auto* axis = qobject_cast<QLogValueAxis*>(evalAxis)) {
        const double low = std::pow(10.0, std::floor(std::log10(evalRange.min)));
        const double high = std::pow(10.0, std::ceil(std::log10(evalRange.max)));
        axis->setRange(low, high > low ? high : low * 10);
    } else if (auto* axis = qobject_cast<QValueAxis*>(evalAxis)) {
        charts::setNiceRange(axis, evalRange.valid() ? std::min(0.0, evalRange.min) : 0.0,
                             evalRange.valid() ? evalRange.max : 1.0);
    }
    evalSeries->setVisible(!evalPoints.isEmpty());
    evalAxis->setVisible(!evalPoints.isEmpty());

    infNorm.fill(data.evalSteps, data.maxInfNorm, minStep, maxStep);
    kurtosis.fill(data.evalSteps, data.kurtosis, minStep, maxStep);
    firstToken.fill(data.evalSteps, data.firstTokenAttention, minStep, maxStep);
}

TrainingCharts::TrainingCharts(QWidget* parent)
    : QWidget(parent)
    , m_charts(std::make_unique<TrainingChartSet>())
{
    m_title = new QLabel(this);
    QFont titleFont = m_title->font();
    titleFont.setBold(true);
    m_title->setFont(titleFont);
    m_lossView = charts::makeChartView(m_charts->loss, QStringLiteral("lossChart"), this);
    m_infNormView = charts::makeChartView(m_charts->infNorm.chart, QStringLiteral("infNormChart"), this);
    m_kurtosisView = charts::makeChartView(m_charts->kurtosis.chart, QStringLiteral("kurtosisChart"), this);
    m_firstTokenView =
        charts::makeChartView(m_charts->firstToken.chart, QStringLiteral("firstTokenChart"), this);
    // Tall enough for readable axes (a short chart elides every label to "..."); a small window scrolls.
    m_lossView->setMinimumHeight(260);
    for (QWidget* view : {m_infNormView, m_kurtosisView, m_firstTokenView})
        view->setMinimumHeight(220);
    auto* layout = new QGridLayout(this);
    layout->addWidget(m_title, 0, 0, 1, 3);
    layout->addWidget(m_lossView, 1, 0, 1, 3);
    layout->addWidget(m_infNormView, 2, 0);
    layout->addWidget(m_kurtosisView, 2, 1);
    layout->addWidget(m_firstTokenView, 2, 2);
    layout->setRowStretch(1, 1);
    layout->setRowStretch(2, 1);
    setCurves(TrainingCurveData{});
}

TrainingCharts::~TrainingCharts() = default;

void TrainingCharts::setCurves(const TrainingCurveData& curves)
{
    m_curves = curves;
    m_charts->fill(m_curves);
    m_firstTokenView->setVisible(!m_curves.firstTokenAttention.isEmpty());
    const double lastStep = m_curves.steps.isEmpty() ? 0 : m_curves.steps.back();
    m_title->setText(m_curves.name.isEmpty()
                         ? tr("No training run")
                         : tr("%1: step %2").arg(m_curves.name, charts::displayNumber(lastStep)));
}

QSize TrainingCharts::preferredFigureSize() const
{
    return QSize(1400, 900);
}

void TrainingCharts::paintFigure(QPainter& painter, const QRect& area) const
{
    painter.save();
    const QString title =
        m_curves.name.isEmpty() ? tr("Training run") : tr("Training run %1").arg(m_curves.name);
    QString subtitle;
    if (!m_curves.steps.isEmpty())
        subtitle = tr("%1 steps").arg(charts::displayNumber(m_curves.steps.back()));
    if (!m_curves.evalSteps.isEmpty()) subtitle += tr(", %1 evaluations").arg(m_curves.evalSteps.size());
    const QRectF body =
        charts::paintFigureFrame(painter, area, title, subtitle, {Provenance::indexingNote()});
    const double upper = body.height() * 0.5;
    const bool firstToken = !m_curves.firstTokenAttention.isEmpty();
    const double part = body.width() / (firstToken ? 3 : 2);
    TrainingChartSet fresh;
    fresh.fill(m_curves);
    charts::renderChart(std::unique_ptr<QChart>(fresh.loss), painter,
                        QRectF(body.left(), body.top(), body.width(), upper));
    charts::renderChart(std::unique_ptr<QChart>(fresh.infNorm.chart), painter,
                        QRectF(body.left(), body.top() + upper, part, body.height() - upper));
    charts::renderChart(std::unique_ptr<QChart>(fresh.kurtosis.chart), painter,
                        QRectF(body.left() + part, body.top() + upper, part, body.height() - upper));
    if (firstToken)
        charts::renderChart(std::unique_ptr<QChart>(fresh.firstToken.chart), painter,
                            QRectF(body.left() + 2 * part, body.top() + upper, part, body.height() - upper));
    else
        delete fresh.firstToken.chart; // not drawn: the set does not own its charts
    painter.restore();
}

QString TrainingCharts::figureCsv() const
{
    const int layers = std::max(layerCountOf(m_curves.maxInfNorm), layerCountOf(m_curves.kurtosis));
    const QString evalName = m_curves.evalName.isEmpty() ? QStringLiteral("eval") : m_curves.evalName;
    QStringList header{QStringLiteral("step"), QStringLiteral("loss"), charts::csvField(evalName)};
    for (int l = 0; l < layers; ++l)
        header << QStringLiteral("max inf norm layer %1").arg(l + 1);
    for (int l = 0; l < layers; ++l)
        header << QStringLiteral("kurtosis layer %1").arg(l + 1);
    const int firstTokenLayers = layerCountOf(m_curves.firstTokenAttention);
    for (int l = 0; l < firstTokenLayers; ++l)
        header << QStringLiteral("first-token attention layer %1").arg(l + 1);

    // Columns: 0 loss, 1 eval, then layers x inf norm, layers x kurtosis, layers x first-token attention
    // (when recorded); empty where not measured.
    QMap<double, QStringList> rows;
    auto row = [&](double step) -> QStringList& {
        auto it = rows.find(step);
        if (it == rows.end()) it = rows.insert(step, QStringList(2 + 2 * layers + firstTokenLayers));
        return *it;
    };
    for (int i = 0; i < std::min(m_curves.steps.size(), m_curves.loss.size()); ++i)
        row(m_curves.steps[i])[0] = charts::csvNumber(m_curves.loss[i]);
    for (int e = 0; e < m_curves.evalSteps.size(); ++e) {
        QStringList& cells = row(m_curves.evalSteps[e]);
        if (e < m_curves.evalValue.size()) cells[1] = charts::csvNumber(m_curves.evalValue[e]);
        if (e < m_curves.maxInfNorm.size())
            for (int l = 0; l < m_curves.maxInfNorm[e].size(); ++l)
                cells[2 + l] = charts::csvNumber(m_curves.maxInfNorm[e][l]);
        if (e < m_curves.kurtosis.size())
            for (int l = 0; l < m_curves.kurtosis[e].size(); ++l)
                cells[2 + layers + l] = charts::csvNumber(m_curves.kurtosis[e][l]);
        if (e < m_curves.firstTokenAttention.size())
            for (int l = 0; l < m_curves.firstTokenAttention[e].size(); ++l)
                cells[2 + 2 * layers + l] = charts::csvNumber(m_curves.firstTokenAttention[e][l]);
    }
    QString csv = header.join(QLatin1Char(',')) + QLatin1Char('\n');
    for (auto it = rows.cbegin(); it != rows.cend(); ++it)
        csv +=
            charts::csvNumber(it.key()) + QLatin1Char(',') + it->join(QLatin1Char(',')) + QLatin1Char('\n');
    return csv;
}

Provenance TrainingCharts::figureProvenance() const
{
    Provenance provenance;
    provenance.model = m_curves.name;
    provenance.input = QStringLiteral("metrics.jsonl");
    provenance.selection = QStringLiteral("all layers");
    return provenance;
}

QString TrainingCharts::figureName() const
{
    return m_curves.name.isEmpty() ? QStringLiteral("training") : QStringLiteral("training-") + m_curves.name;
}

} // namespace outlierlens
