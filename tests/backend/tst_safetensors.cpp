#include <QtTest>

class Tstsafetensors : public QObject
{
    Q_OBJECT
};

QTEST_APPLESS_MAIN(Tstsafetensors)
#include "tst_safetensors.moc"
