#include <QtTest>

class Tstmnli : public QObject
{
    Q_OBJECT
};

QTEST_APPLESS_MAIN(Tstmnli)
#include "tst_mnli.moc"
