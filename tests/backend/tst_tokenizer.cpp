#include <QtTest>

class Tsttokenizer : public QObject
{
    Q_OBJECT
};

QTEST_APPLESS_MAIN(Tsttokenizer)
#include "tst_tokenizer.moc"
