#include "figure_style.h"

#include <QLabel>

namespace outlierlens {
namespace {

QFont figureFont(int pixelSize, bool bold)
{
    // DejaVu Sans ships with every Debian desktop; the style hint picks a sans fallback elsewhere.
    QFont font(QStringLiteral("DejaVu Sans"));
    font.setStyleHint(QFont::SansSerif);
    font.setPixelSize(pixelSize);
    font.setBold(bold);
    return font;
}

} // namespace

namespace FigureStyle {
QFont titleFont()
{
    return figureFont(16, true);
}
QFont captionFont()
{
    return figureFont(13, true);
}
QFont labelFont()
{
    return figureFont(11, false);
}
QFont smallFont()
{
    return figureFont(10, false);
}
QColor text()
{
    return QColor(0x20, 0x20, 0x20);
}
QColor secondaryText()
{
    return QColor(0x5f, 0x5f, 0x5f);
}
QColor background()
{
    return Qt::white;
}
QColor highlight()
{
    return QColor(0xff, 0x7f, 0x0e);
}
QColor gridLine()
{
    return QColor(0xb0, 0xb0, 0xb0);
}
} // namespace FigureStyle

QString csvField(const QString& text)
{
    if (!text.contains(QLatin1Char(',')) && !text.contains(QLatin1Char('"')) &&
        !text.contains(QLatin1Char('\n')) && !text.contains(QLatin1Char('\r')))
        return text;
    QString quoted = text;
    quoted.replace(QLatin1String("\""), QLatin1String("\"\""));
    return QLatin1Char('"') + quoted + QLatin1Char('"');
}

QString csvNumber(double value)
{
    return QString::asprintf("%.9g", value);
}

QLabel* makeViewTitle(QWidget* parent)
{
    auto* label = new QLabel(parent);
    QFont font = label->font();
    font.setBold(true);
    font.setPointSizeF(font.pointSizeF() * 1.2);
    label->setFont(font);
    return label;
}

} // namespace outlierlens
