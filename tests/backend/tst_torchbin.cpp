#include <QtTest>

class Tsttorchbin : public QObject
{
    Q_OBJECT
};

QTEST_APPLESS_MAIN(Tsttorchbin)
#include "tst_torchbin.moc"
